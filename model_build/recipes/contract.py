"""What a recipe returns (the contract between recipes and the build); imports no torch.

Its own module so that the recipe modules and the package that dispatches to them import it
without importing each other.
"""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Any, Callable, Mapping, Optional

from deployment_spec.builds.manifest import TensorSpec
from deployment_spec.sections.model import ModelSpec
from deployment_spec.sections.requirements import NO_DEPS
from model_build.errors import BuildError

# The Python-backend model files the recipes ship (model.py templates and their helpers).
TEMPLATES = pathlib.Path(__file__).resolve().parent.parent / "python_models"
# What a model.py that runs transformers imports (T5's, a generating task's), at the releases the build itself runs
# (requirements.lock), so the weights and tokenizer it saves load in the same transformers; wheels exist for
# CPython 3.10-3.13.
TRANSFORMERS_REQUIREMENTS = ("torch==2.13.0", "transformers==5.23.0", "tokenizers==0.23.3", "numpy==1.26.4")
# What a preprocessing step that runs transformers' processors and feature extractors (numpy code, no model)
# imports: transformers without the packages it declares (NO_DEPS), and the ones `import transformers` loads
# itself (huggingface_hub and its HTTP client for transformers.utils.hub, tqdm, regex, packaging, filelock, PyYAML,
# and safetensors for transformers/dependency_versions_check.py), at requirements.lock's releases. Left out: torch,
# tokenizers, typer, rich, pydantic, hf-xet, fsspec and anyio, which serve models, tokenizers, its command line and
# Hub downloads; they were 16 of the image step's 32 packages (benchmarks/task_env_size.md). The served steps and
# the environment that ships for the image's Python prove the list (tests/local_endpoint/test_raw_image_tasks.py,
# test_raw_audio_tasks.py).
TRANSFORMERS_WITHOUT_MODELS = (
    NO_DEPS, "transformers==5.23.0", "numpy==1.26.4", "huggingface_hub==2.4.0", "httpx2==2.16.2", "httpcore2==2.16.2",
    "h11==0.16.0", "idna==3.20", "truststore==0.10.5", "typing_extensions==4.16.0", "tqdm==4.70.1",
    "regex==2026.11.15", "packaging==26.3", "filelock==4.2.11", "PyYAML==6.0.3", "safetensors==0.8.0")


@dataclasses.dataclass
class ExportableModel:
    """What a recipe hands to the exporter.

    Attributes:
        module: a torch.nn.Module in eval mode whose ``forward`` takes the inputs as keyword
            arguments named like ``input_names`` and returns one tensor or a tuple of tensors
            (in ``output_names`` order).
        example_inputs: input name -> example tensor (batch first), used to trace/export.
        input_names / output_names: the tensor names written to the graph and config.pbtxt.
        dynamic_axes: tensor name -> {axis: symbolic name}; axis 0 is the batch axis.
        sample_inputs: optional ``f(batch_size, seed) -> inputs`` for the parity check with a batch
            size other than the example's (proves the dynamic axes work). Defaults to the examples.
        note: one line printed during the build, e.g. that weights were initialised randomly.
        mask_input: the attention-mask input (1 = token, 0 = padding), if any; the serving check then
            pads rows and proves the mask is honoured. Defaults to an input named ``attention_mask``.
        agreement_inputs: optional real inputs (input name -> tensor, batch first), e.g. tokenized
            sentences, on which ``precision: int8`` is measured against fp32 and gated
            (``models.<name>.int8``). Without them the int8 gate runs on the parity cases, whose
            random token ids say less about a trained model. They are a parity case too.
        agreement_from: what ``agreement_inputs`` are, for the build log and the manifest.
        end_id: the token id the model's tokenizer ends every row with (a classifier may pool there, as
            BART's does at its end-of-sequence token); the serving cases then end their padded rows with it.
        short_length: the short length the serving cases try along axis 1 (default: 24 positions); audio
            models, whose convolutions need hundreds of samples, give their own.
    """

    module: Any
    example_inputs: Mapping[str, Any]
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    dynamic_axes: Mapping[str, Mapping[int, str]] = dataclasses.field(default_factory=dict)
    sample_inputs: Optional[Callable[[int, int], Mapping[str, Any]]] = None
    note: str = ""
    mask_input: Optional[str] = None
    agreement_inputs: Optional[Mapping[str, Any]] = None
    agreement_from: str = "the recipe's real inputs"
    end_id: Optional[int] = None
    short_length: Optional[int] = None

    def problems(self) -> list[str]:
        out = []
        if not self.input_names or not self.output_names:
            out.append("input_names and output_names must not be empty")
        if set(self.example_inputs) != set(self.input_names):
            out.append(f"example_inputs has {sorted(self.example_inputs)}, input_names {list(self.input_names)}")
        unknown = set(self.dynamic_axes) - set(self.input_names) - set(self.output_names)
        if unknown:
            out.append(f"dynamic_axes names {sorted(unknown)} are neither inputs nor outputs")
        if self.mask_input is not None and self.mask_input not in self.input_names:
            out.append(f"mask_input {self.mask_input!r} is not one of input_names {list(self.input_names)}")
        if self.agreement_inputs is not None and set(self.agreement_inputs) != set(self.input_names):
            out.append(f"agreement_inputs has {sorted(self.agreement_inputs)}, input_names {list(self.input_names)}")
        return out


@dataclasses.dataclass
class PythonModel:
    """A Python-backend model: files for the version directory and the tensors of its config.

    ``files`` maps a path relative to the version directory to bytes or a file/dir to copy.
    """

    files: Mapping[str, Any]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    parameters: Mapping[str, str] = dataclasses.field(default_factory=dict)
    note: str = ""
    # What model.py imports beyond numpy and the standard library, pinned: the build installs them
    # into an execution environment unless the spec says otherwise (python.requirements, execution_env).
    requirements: tuple[str, ...] = ()


def weights_dir(model: ModelSpec, root: pathlib.Path) -> Optional[pathlib.Path]:
    if not model.weights:
        return None
    path = (root / model.weights).resolve()
    if not path.is_dir() and model.task_entry:  # the user wrote one task: entry; its steps share the checkpoint
        raise BuildError(f"models.{model.task_entry}.weights: {path} is not a directory; give the checkpoint's "
                         "directory (config.json, the weights and tokenizer.json, as save_pretrained writes them)")
    if not path.is_dir():
        raise BuildError(f"models.{model.name}.weights: {path} is not a directory; give a local directory with "
                         "the model's config.json and weights (and tokenizer files), or remove weights to "
                         "initialise randomly")
    return path
