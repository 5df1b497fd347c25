"""The ``models:`` section: what each Triton model is and how it is built and served."""
from __future__ import annotations

import dataclasses
import enum
import re
from typing import Mapping, Optional

from deployment_spec.parsing.errors import Problem, describe
from deployment_spec.parsing.parse import meta
from deployment_spec.sections import generation, recipes, requirements, tasks, tensors
from deployment_spec.sections.tasks import Task
from deployment_spec.sections.dali import DaliPipeline

# A Triton model directory name that is also a safe S3 key segment and tarball stem.
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}"
NAME_HELP = "1-63 letters, digits, '-' or '_', starting with a letter or digit"
USER_RECIPE = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


class Backend(str, enum.Enum):
    TENSORRT = "tensorrt"
    ONNXRUNTIME = "onnxruntime"
    PYTORCH = "pytorch"
    PYTHON = "python"
    ENSEMBLE = "ensemble"
    DALI = "dali"


class Precision(str, enum.Enum):
    FP32 = "fp32"
    FP16 = "fp16"
    INT8 = "int8"


class InstanceKind(str, enum.Enum):
    AUTO = "auto"
    GPU = "gpu"
    CPU = "cpu"


class GraphLevel(str, enum.Enum):
    ALL = "all"
    EXTENDED = "extended"
    BASIC = "basic"
    DISABLED = "disabled"


class ConvAlgoSearch(str, enum.Enum):
    EXHAUSTIVE = "exhaustive"
    HEURISTIC = "heuristic"
    DEFAULT = "default"


class ExecutionMode(str, enum.Enum):
    SEQUENTIAL = "sequential"
    PARALLEL = "parallel"


class ArenaExtendStrategy(str, enum.Enum):
    NEXT_POWER_OF_TWO = "next_power_of_two"
    SAME_AS_REQUESTED = "same_as_requested"


class HardwareCompatibility(str, enum.Enum):
    NONE = "none"
    AMPERE_PLUS = "ampere_plus"
    SAME_COMPUTE_CAPABILITY = "same_compute_capability"

    # TensorRT developer guide, "Hardware Compatibility": an ampere_plus plan is built on an Ampere or newer
    # GPU and loads on any of them; any other plan loads only on the compute capability it was built on.
    def builds_on(self, cc: str) -> bool:
        return self is not HardwareCompatibility.AMPERE_PLUS or _capability(cc) >= (8, 0)

    def plan_runs(self, built_cc: str, target_cc: str) -> bool:
        if self is HardwareCompatibility.AMPERE_PLUS:
            return _capability(target_cc) >= (8, 0)
        return built_cc == target_cc


def _capability(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


# The backends a task's model step may have (the steps around it are Python-backend models).
TASK_BACKENDS = (Backend.ONNXRUNTIME, Backend.TENSORRT, Backend.PYTORCH)


@dataclasses.dataclass(frozen=True)
class Source:
    """Where the model comes from: exactly one of the four keys."""

    recipe: Optional[str] = dataclasses.field(default=None, metadata=meta(
        help="a built-in recipe name or 'package.module:function'"))
    onnx: Optional[str] = None
    torchscript: Optional[str] = None
    python_dir: Optional[str] = None

    def kind(self) -> str:
        return next(k for k in ("recipe", "onnx", "torchscript", "python_dir") if getattr(self, k) is not None)

    def problems(self, path: str) -> list[Problem]:
        given = [k for k in ("recipe", "onnx", "torchscript", "python_dir") if getattr(self, k) is not None]
        empty = [k for k in given if not getattr(self, k).strip()]
        if empty:
            return [Problem(f"{path}.{empty[0]}", "an empty string", "a recipe name or a path",
                            f"give {empty[0]} a value or remove the key")]
        if len(given) != 1:
            return [Problem(path, f"{len(given)} sources ({', '.join(given) or 'none'})",
                            "exactly one of recipe, onnx, torchscript, python_dir",
                            "keep one source key")]
        if self.recipe is not None and self.recipe not in recipes.BUILTIN and not USER_RECIPE.fullmatch(self.recipe):
            return [Problem(f"{path}.recipe", describe(self.recipe),
                            f"a built-in recipe ({', '.join(recipes.BUILTIN)}) or 'package.module:function'",
                            "use a built-in name or point at your own function as module:function")]
        return []


@dataclasses.dataclass(frozen=True)
class DynamicBatching:
    preferred_batch_sizes: tuple[int, ...] = dataclasses.field(default=(), metadata=meta(minimum=1))
    max_queue_delay_us: int = dataclasses.field(default=100, metadata=meta(minimum=0, maximum=10_000_000))


@dataclasses.dataclass(frozen=True)
class InstanceGroup:
    kind: InstanceKind = InstanceKind.AUTO
    count: int = dataclasses.field(default=1, metadata=meta(minimum=1, maximum=64))


@dataclasses.dataclass(frozen=True)
class OrtTensorRTAccelerator:
    """ONNX Runtime's TensorRT execution provider: the engine is built on the endpoint's GPU at load."""

    precision: Precision = Precision.FP16
    max_workspace_mib: int = dataclasses.field(default=1024, metadata=meta(minimum=1))
    engine_cache: bool = True


@dataclasses.dataclass(frozen=True)
class OnnxRuntimeSettings:
    """ONNX Runtime backend parameters (onnxruntime_backend README.md, per release branch); unset keys keep the backend's default."""

    graph_optimization_level: GraphLevel = GraphLevel.ALL
    cudnn_conv_algo_search: Optional[ConvAlgoSearch] = None
    execution_mode: Optional[ExecutionMode] = None
    arena_extend_strategy: Optional[ArenaExtendStrategy] = None
    enable_mem_pattern: Optional[bool] = None
    enable_mem_arena: Optional[bool] = None
    intra_op_threads: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=0, maximum=256))
    inter_op_threads: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=0, maximum=256))
    tensorrt_accelerator: Optional[OrtTensorRTAccelerator] = None
    optimize_at_build: bool = True


@dataclasses.dataclass(frozen=True)
class TensorRTSettings:
    """trtexec build settings (TensorRT's trtexec documentation and the nvcr.io/nvidia/tensorrt release notes)."""

    workspace_mib: int = dataclasses.field(default=4096, metadata=meta(minimum=1))
    builder_optimization_level: int = dataclasses.field(default=3, metadata=meta(minimum=0, maximum=5))
    opt_batch_size: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=1))
    hardware_compatibility: HardwareCompatibility = HardwareCompatibility.NONE
    version_compatible: bool = False
    timing_cache: bool = True


@dataclasses.dataclass(frozen=True)
class PythonSettings:
    """Where the Python backend's packages come from: the image's own Python (nothing set), an
    environment the build makes from pinned wheels (``requirements`` / ``requirements_file``), or
    an archive the user brings (``execution_env``)."""

    requirements: tuple[str, ...] = dataclasses.field(default=(), metadata=meta(
        help="pinned requirement lines (name==version) the build installs into an execution environment"))
    requirements_file: Optional[str] = dataclasses.field(default=None, metadata=meta(
        help="a requirements file next to the spec, one name==version per line"))
    execution_env: Optional[str] = dataclasses.field(default=None, metadata=meta(
        help="path to a conda-pack .tar.gz shipped in the model directory as EXECUTION_ENV_PATH"))
    recipe_requirements: bool = dataclasses.field(default=True, metadata=meta(
        help="false: no environment for a built-in recipe's packages; model.py then runs on the image's own "
             "Python, which must have them (a derived image)"))

    def problems(self, path: str) -> list[Problem]:
        given = [k for k in ("requirements", "requirements_file", "execution_env") if getattr(self, k)]
        out = []
        if len(given) > 1:
            out.append(Problem(path, f"{' and '.join(given)} together",
                               "one of requirements, requirements_file or execution_env",
                               "keep the one the environment should come from"))
        for index, line in enumerate(self.requirements):
            if not requirements.is_pinned(line):
                out.append(Problem(f"{path}.requirements[{index}]", describe(line), requirements.PIN_HELP,
                                   "pin one release, e.g. 'transformers==4.46.3' (pip index versions NAME lists them)"))
        return out


@dataclasses.dataclass(frozen=True)
class EnsembleStep:
    model: str
    input_map: Mapping[str, str] = dataclasses.field(default_factory=dict)
    output_map: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class EnsembleSettings:
    steps: tuple[EnsembleStep, ...] = dataclasses.field(default=(), metadata=meta(help="a list of steps"))
    outputs: tuple[str, ...] = ()
    # A task's ensemble (deployment_spec/sections/task_models.py): each step input takes the tensor of its own name,
    # wired when the steps are built and their tensors known.
    by_name: bool = dataclasses.field(default=False, metadata=meta(yaml=False))


@dataclasses.dataclass(frozen=True)
class Tolerance:
    atol: float = dataclasses.field(default=1e-3, metadata=meta(minimum=0))
    rtol: float = dataclasses.field(default=1e-3, metadata=meta(minimum=0))


@dataclasses.dataclass(frozen=True)
class Int8Gate:
    """When the build may ship the int8 graph (``precision: int8``, onnxruntime backend).

    The build quantizes the fp32 graph that verified, runs both in the serving runtime on the
    recipe's real inputs (``ExportableModel.agreement_inputs``, else the parity cases) and ships
    int8 only if every bound holds; otherwise it ships fp32 and records why
    (model_build/backends/onnxruntime/verification.py defines the measures).
    """

    # 0.98: per-channel int8 of the trained all-MiniLM-L6-v2 keeps >= 0.989 on real sentences, one
    # scale per matrix only 0.85 (benchmarks/int8_agreement.md); the bound tells those two apart.
    min_cosine_similarity: float = dataclasses.field(default=0.98, metadata=meta(minimum=0, maximum=1))
    min_top1_agreement: float = dataclasses.field(default=0.0, metadata=meta(minimum=0, maximum=1))


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One Triton model; its key in ``models:`` is its Triton name."""

    backend: Backend = dataclasses.field(metadata=meta(help="tensorrt, onnxruntime, pytorch, python, ensemble or dali"))
    source: Optional[Source] = None
    weights: Optional[str] = dataclasses.field(default=None, metadata=meta(
        help="a local directory with the model's weights (and tokenizer); random init from config if absent"))
    max_batch_size: int = dataclasses.field(default=8, metadata=meta(minimum=0, maximum=4096))
    sequence_length: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=1, maximum=8192))
    dynamic_batching: Optional[DynamicBatching] = None
    instance_groups: tuple[InstanceGroup, ...] = ()
    precision: Precision = Precision.FP32
    onnxruntime: Optional[OnnxRuntimeSettings] = None
    tensorrt: Optional[TensorRTSettings] = None
    python: Optional[PythonSettings] = None
    ensemble: Optional[EnsembleSettings] = None
    dali: Optional[DaliPipeline] = None
    copies: int = dataclasses.field(default=1, metadata=meta(minimum=1, maximum=100))
    warmup: bool = False
    tolerance: Tolerance = Tolerance()
    int8: Optional[Int8Gate] = None
    inputs: tuple[tensors.Tensor, ...] = dataclasses.field(default=(), metadata=meta(
        help="the model's input tensors (name, data_type, dims); for a torchscript source"))
    outputs: tuple[tensors.Tensor, ...] = ()
    samples: Optional[str] = dataclasses.field(default=None, metadata=meta(
        help="an .npz file of real inputs (arrays named like the inputs, batch first)"))
    task: Optional[Task] = dataclasses.field(default=None, metadata=meta(
        help="serve the weights checkpoint for raw text, images or audio: {kind: text-classification | "
             "token-classification | sentence-embedding | question-answering | image-classification | "
             "object-detection | image-embedding | audio-classification | automatic-speech-recognition | "
             "text-generation | text2text-generation}"))
    name: str = dataclasses.field(default="", metadata=meta(yaml=False))
    # The ``task:`` entry a generated step or ensemble comes from (deployment_spec/sections/task_models.py): messages about
    # its fields name the entry the user wrote. Empty for every other model.
    task_entry: str = dataclasses.field(default="", metadata=meta(yaml=False))

    def __post_init__(self) -> None:
        # Speech recognition with backend python generates (tasks.GENERATION_KINDS' comment): the task says so to
        # every rule that asks Task.generates(). Only the entry the user wrote: a CTC ensemble's Python steps carry its
        # task too (task_entry set) and stay steps. Frozen: set as dataclasses' own __init__ sets fields.
        if self.task is not None and self.task.kind is tasks.TaskKind.SPEECH_RECOGNITION and not self.task.speech_seq2seq \
                and self.backend is Backend.PYTHON and not self.task_entry:
            object.__setattr__(self, "task", dataclasses.replace(self.task, speech_seq2seq=True))

    def problems(self, path: str) -> list[Problem]:
        if self.task is not None:
            return self._task_problems(path)
        out: list[Problem] = []
        b = self.backend
        if b is Backend.ENSEMBLE:
            if self.source is not None:
                out.append(Problem(f"{path}.source", "a source", "no source for an ensemble (its steps are models)",
                                   "remove source"))
            if self.ensemble is None or not self.ensemble.steps:
                out.append(Problem(f"{path}.ensemble.steps", "no steps", "a list of at least one step",
                                   "add ensemble: {steps: [{model: <name>, input_map: ..., output_map: ...}]}"))
            for key in ("dynamic_batching", "instance_groups"):
                if getattr(self, key):
                    out.append(Problem(f"{path}.{key}", "a value", "nothing: Triton rejects it on ensembles",
                                       f"remove {key} here and set it on the step models"))
            return out
        if self.dali is not None and b is not Backend.DALI:
            out.append(Problem(f"{path}.dali", f"dali settings with backend {b.value}", "only with backend: dali",
                               "remove dali or set backend: dali"))
        if b is Backend.DALI:
            return out + self._dali_problems(path)
        if self.source is None:
            out.append(Problem(f"{path}.source", "nothing (the key is missing)",
                               "recipe, onnx, torchscript or python_dir", "add a source"))
        else:
            out += self._source_fits_backend(path)
            out += tensors.declaration_problems(path, self.source.kind(), b.value, self.inputs, self.outputs,
                                                self.max_batch_size)
            out += self._own_model_problems(path)
        if self.ensemble is not None:
            out.append(Problem(f"{path}.ensemble", "ensemble settings", "only with backend: ensemble",
                               "remove ensemble or set backend: ensemble"))
        if self.python is not None:
            out += self.python.problems(f"{path}.python")
        for key, wanted in (("onnxruntime", Backend.ONNXRUNTIME), ("tensorrt", Backend.TENSORRT),
                            ("python", Backend.PYTHON)):
            if getattr(self, key) is not None and b is not wanted:
                out.append(Problem(f"{path}.{key}", f"{key} settings with backend {b.value}",
                                   f"only with backend: {wanted.value}", f"remove {key} or change the backend"))
        db = self.dynamic_batching
        if db is not None:
            if self.max_batch_size == 0:
                out.append(Problem(f"{path}.dynamic_batching", "dynamic batching with max_batch_size 0",
                                   "max_batch_size >= 1", "raise max_batch_size or remove dynamic_batching"))
            too_big = [s for s in db.preferred_batch_sizes if s > self.max_batch_size]
            if too_big and self.max_batch_size:
                out.append(Problem(f"{path}.dynamic_batching.preferred_batch_sizes", str(list(too_big)),
                                   f"sizes <= max_batch_size ({self.max_batch_size})",
                                   "lower them or raise max_batch_size"))
        if self.precision is Precision.FP16 and b is not Backend.TENSORRT:
            ort_trt = self.onnxruntime and self.onnxruntime.tensorrt_accelerator
            if not ort_trt:
                out.append(Problem(f"{path}.precision", "'fp16'",
                                   "fp16 with backend tensorrt (or onnxruntime.tensorrt_accelerator.precision)",
                                   "use fp32, or set backend: tensorrt"))
        if self.precision is Precision.INT8 and b not in (Backend.ONNXRUNTIME, Backend.TENSORRT):
            out.append(Problem(f"{path}.precision", "'int8'", "int8 with backend onnxruntime or tensorrt",
                               "use fp32 for this backend"))
        if self.int8 is not None and (self.precision is not Precision.INT8 or b is not Backend.ONNXRUNTIME):
            out.append(Problem(f"{path}.int8",
                               f"int8 settings with precision {self.precision.value}, backend {b.value}",
                               "only with precision: int8 and backend: onnxruntime (the build's dynamic "
                               "quantization is what they gate)",
                               "remove int8, or set precision: int8 with backend: onnxruntime"))
        if self.tensorrt and self.tensorrt.opt_batch_size and self.tensorrt.opt_batch_size > max(self.max_batch_size, 1):
            out.append(Problem(f"{path}.tensorrt.opt_batch_size", str(self.tensorrt.opt_batch_size),
                               f"1..max_batch_size ({self.max_batch_size})", "lower opt_batch_size"))
        if b is Backend.TENSORRT and self.max_batch_size == 0:
            out.append(Problem(f"{path}.max_batch_size", "0", "1 or more for tensorrt (shape profiles need a batch axis)",
                               "set max_batch_size to the largest batch you serve"))
        return out

    def _task_problems(self, path: str) -> list[Problem]:
        """An entry with ``task`` is a checkpoint the loader expands into steps (deployment_spec/sections/task_models.py)."""
        out = []
        if self.task is not None and self.task.generates():
            out += generation.entry_problems(self, path)
        elif self.backend not in TASK_BACKENDS:
            out.append(Problem(f"{path}.backend", describe(self.backend.value),
                               f"{', '.join(b.value for b in TASK_BACKENDS)} with task (the model step's backend)",
                               "set backend: onnxruntime"))
        if not self.weights:
            processor = ("preprocessor_config.json" if self.task is not None and (
                self.task.takes_image() or self.task.takes_audio()) else "tokenizer.json")
            out.append(Problem(f"{path}.weights", "nothing", "the checkpoint directory with task (config.json, "
                               f"weights and {processor}, as save_pretrained writes them)",
                               "add weights: <directory>, relative to the spec's folder"))
        for key in ("source", "ensemble", "python", "dali", "samples"):
            if getattr(self, key) is not None:
                out.append(Problem(f"{path}.{key}", f"{key} with task", "nothing: the task makes the steps from "
                                   "the weights checkpoint", f"remove {key}"))
        for key in ("inputs", "outputs"):
            if getattr(self, key):
                out.append(Problem(f"{path}.{key}", f"{key} with task", "nothing: the task decides the tensors",
                                   f"remove {key}"))
        if self.copies != 1:
            out.append(Problem(f"{path}.copies", str(self.copies), "1 with task", "remove copies"))
        if self.max_batch_size == 0:
            out.append(Problem(f"{path}.max_batch_size", "0", "1 or more with task (the steps batch rows; a "
                               "generating task decodes this many sequences together)",
                               "set max_batch_size to the largest batch you serve"))
        if self.task is not None:
            out += self.task.entry_problems(f"{path}.task")
            if not out:  # the model step's own settings (precision, onnxruntime, tensorrt...) as for any model
                step = dataclasses.replace(self, task=None, source=Source(recipe=self.task.model_recipe()))
                out += step.problems(path)
        return out

    def _dali_problems(self, path: str) -> list[Problem]:
        """A DALI model is its ``dali:`` pipeline; nothing is exported, converted or quantized."""
        out = []
        if self.dali is None:
            out.append(Problem(f"{path}.dali", "nothing (the key is missing)", "the preprocessing pipeline",
                               "add dali: {resize: {shorter: 256}, crop: [224, 224], mean: [...], std: [...]}"))
        if self.source is not None:
            out.append(Problem(f"{path}.source", "a source", "no source for backend dali (the dali: section is "
                               "the pipeline)", "remove source"))
        for key in ("onnxruntime", "tensorrt", "python", "ensemble", "int8", "inputs", "outputs", "samples"):
            if getattr(self, key) not in (None, ()):
                out.append(Problem(f"{path}.{key}", f"{key} settings with backend dali", "not with backend: dali",
                                   f"remove {key}"))
        if self.precision is not Precision.FP32:
            out.append(Problem(f"{path}.precision", describe(self.precision.value), "fp32 for backend dali "
                               "(the output type is dali.dtype)", "remove precision and set dali.dtype"))
        if self.max_batch_size == 0:
            out.append(Problem(f"{path}.max_batch_size", "0", "1 or more for backend dali (DALI runs batches)",
                               "set max_batch_size to the largest batch you serve"))
        return out

    def _own_model_problems(self, path: str) -> list[Problem]:
        out = []
        recipe = self.source.recipe if self.source else None
        if recipe is not None and recipe in recipes.NEEDS_WEIGHTS and not self.weights:
            out.append(Problem(f"{path}.weights", "nothing", f"a checkpoint directory for recipe {recipe} "
                               "(config.json and the weights, as save_pretrained writes them)",
                               "add weights: <directory>, relative to the spec's folder"))
        if self.samples is not None:
            if not self.samples.endswith(".npz"):
                out.append(Problem(f"{path}.samples", describe(self.samples), "an .npz file (numpy.savez)",
                                   "save the inputs with numpy.savez('samples.npz', <input name>=array, ...)"))
            if self.max_batch_size == 0 or self.backend is Backend.PYTHON:
                out.append(Problem(f"{path}.samples", f"samples with backend {self.backend.value}, max_batch_size "
                                   f"{self.max_batch_size}", "samples for an onnxruntime, pytorch or tensorrt model "
                                   "with max_batch_size >= 1 (rows along the batch axis)", "remove samples"))
        return out

    def _source_fits_backend(self, path: str) -> list[Problem]:
        src, b = self.source, self.backend
        if src is None:  # only ensembles have none; the caller checks that first
            return []
        kind = src.kind()
        fits = {
            "onnx": (Backend.ONNXRUNTIME, Backend.TENSORRT),
            "torchscript": (Backend.PYTORCH,),
            "python_dir": (Backend.PYTHON,),
        }
        if kind == "recipe" and src.recipe is not None and src.recipe in recipes.BUILTIN:
            allowed = recipes.BUILTIN[src.recipe]
            if b.value not in allowed:
                return [Problem(f"{path}.backend", describe(b.value),
                                f"{' or '.join(allowed)} for recipe {src.recipe}",
                                f"set backend to {allowed[0]}")]
            return []
        if kind == "recipe":
            ok = b in (Backend.ONNXRUNTIME, Backend.TENSORRT, Backend.PYTORCH)
            if not ok:
                return [Problem(f"{path}.backend", describe(b.value), "onnxruntime, tensorrt or pytorch for a user recipe",
                                "use a python_dir source for Python-backend models")]
            return []
        if b not in fits[kind]:
            return [Problem(f"{path}.backend", describe(b.value),
                            f"{' or '.join(x.value for x in fits[kind])} for a {kind} source",
                            "change the backend or the source")]
        return []

    def local_files(self) -> list[tuple[str, str]]:
        """(field under models.<name>, path relative to the spec) of every file or folder the build reads:
        the source's file, then ``weights``, ``samples`` and the Python settings' files."""
        src = self.source
        fields = [(f"source.{key}", getattr(src, key, None) if src else None)
                  for key in ("onnx", "torchscript", "python_dir")]
        fields += [("weights", self.weights), ("samples", self.samples),
                   ("python.execution_env", self.python.execution_env if self.python else None),
                   ("python.requirements_file", self.python.requirements_file if self.python else None)]
        return [(field, value) for field, value in fields if value]

    def triton_names(self) -> list[str]:
        """The Triton model names this entry produces: itself, or its renamed copies on an MME."""
        if self.copies == 1:
            return [self.name]
        return [f"{self.name}-{i}" for i in range(self.copies)]
