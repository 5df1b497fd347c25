"""The steps of an audio ``task:`` ensemble (deployment_spec/sections/tasks.py) that are not the answer step: the
preprocessing step (Python backend: decoding and the checkpoint's feature extractor) and the model step
(AutoModelForAudioClassification's or AutoModelForCTC's logits). Imports transformers (build only)."""
from __future__ import annotations

import functools
import json
import pathlib
from typing import Any

import numpy as np
import torch

from deployment_spec.builds.manifest import TensorSpec
from deployment_spec.sections.model import ModelSpec
from deployment_spec.sections.tasks import AUDIO, TaskKind
from model_build.errors import BuildError, first_line
from model_build.python_models.audio_stand_ins import STAND_INS
from model_build.recipes import checkpoint_text
from model_build.recipes.contract import TEMPLATES, TRANSFORMERS_WITHOUT_MODELS, ExportableModel, PythonModel

# What hf_audio_preprocess.py imports, at the releases the build runs (requirements.lock): the feature extractors
# are numpy code in transformers or numpy stand-ins (python_models/audio_stand_ins.py), so no torch ships;
# soundfile decodes every format libsndfile reads (its wheel carries libsndfile 1.2.2, so the image needs no system
# package) through cffi's ABI mode (no pycparser at run time).
PREPROCESS_REQUIREMENTS = (*TRANSFORMERS_WITHOUT_MODELS, "soundfile==0.14.0", "cffi==2.1.1")
HEADS = {TaskKind.AUDIO_CLASSIFICATION: "AutoModelForAudioClassification",
         TaskKind.SPEECH_RECOGNITION: "AutoModelForCTC"}
FEATURES = ("input_values", "input_features")  # raw samples (wav2vec2 family) or a spectrogram (AST, Whisper)


@functools.lru_cache(maxsize=8)
def feature_extractor(folder: pathlib.Path) -> Any:
    from transformers import AutoFeatureExtractor

    if not (folder / "preprocessor_config.json").is_file():
        raise BuildError(f"{folder}: no preprocessor_config.json; an audio task computes features as the "
                         "checkpoint's own feature extractor does; save it there (AutoFeatureExtractor."
                         "from_pretrained(<the checkpoint>).save_pretrained(folder))")
    try:
        return AutoFeatureExtractor.from_pretrained(folder, local_files_only=True)
    except (OSError, ValueError, TypeError, KeyError, ImportError) as exc:
        raise BuildError(f"{folder}: transformers cannot load a feature extractor from it "
                         f"({first_line(exc)}); save "
                         "the checkpoint's feature extractor there (feature_extractor.save_pretrained)") from None


def feature_name(folder: pathlib.Path) -> str:
    names = list(getattr(feature_extractor(folder), "model_input_names", []))
    found = [n for n in FEATURES if n in names]
    if not found:
        raise BuildError(f"{folder}: its feature extractor ({type(feature_extractor(folder)).__name__}) makes "
                         f"{', '.join(names) or 'nothing'}, not input_values or input_features; an audio task needs "
                         "one of them")
    return found[0]


def sampling_rate(folder: pathlib.Path) -> int:
    return int(feature_extractor(folder).sampling_rate)


def feature_shape(folder: pathlib.Path) -> tuple[int, ...]:
    """The feature tensor's shape per row; -1 where it follows the clip's length (raw samples, a spectrogram's
    frames)."""
    return tuple(a if a == b else -1 for a, b in zip(example_shape(folder), _row_shape(folder, 0.5)))


def example_shape(folder: pathlib.Path) -> tuple[int, ...]:
    """The feature tensor's shape per row for one second of audio, the model step's example: for a spectrogram
    whose frames follow the clip's length (SeamlessM4TFeatureExtractor: 49 frames of 160 at 16 kHz), its frames,
    not a frame per sample (16000 frames made wav2vec2-bert's relative position tensors, frames x frames x
    head size, take 23 GB in the ONNX export)."""
    return _row_shape(folder, 1.0)


def _row_shape(folder: pathlib.Path, seconds: float) -> tuple[int, ...]:
    rate = sampling_rate(folder)
    wave = np.zeros(int(rate * seconds), dtype=np.float32)
    made = feature_extractor(folder)([wave], sampling_rate=rate, return_tensors="np")[feature_name(folder)]
    return tuple(np.asarray(made).shape[1:])


def refuse_torch_only(model: ModelSpec, folder: pathlib.Path) -> None:
    """The step's environment has transformers without torch: a feature extractor transformers marks as needing
    torch (``@requires(backends=("torch",))``) cannot start there, unless a numpy stand-in computes its features
    (python_models/audio_stand_ins.py: AST, Parakeet, LASR)."""
    found = type(feature_extractor(folder))
    needs = tuple(vars(found).get("__backends", ()))
    if "torch" in needs and found.__name__ not in STAND_INS:
        raise BuildError(
            f"models.{model.task_entry or model.name}.weights: its feature extractor {found.__name__} needs torch "
            f"(transformers {_transformers_version()} marks it so), and the preprocessing step's execution "
            "environment has transformers and numpy only; allowed: feature extractors that run on numpy "
            "(Wav2Vec2FeatureExtractor, WhisperFeatureExtractor, SeamlessM4TFeatureExtractor...) and those with a "
            f"numpy stand-in here ({', '.join(sorted(STAND_INS))}); fix: use a checkpoint with one of them, or "
            "serve the model with a recipe of your own (source: {recipe: module:function}) that takes the features "
            "your application computes")


def _transformers_version() -> str:
    import transformers

    return str(transformers.__version__)


def preprocess(model: ModelSpec, root: pathlib.Path) -> PythonModel:
    task = checkpoint_text.task_of(model)
    folder = checkpoint_text.checkpoint(model, root)
    refuse_torch_only(model, folder)
    name = feature_name(folder)
    shape = feature_shape(folder)
    files = {"model.py": TEMPLATES / "hf_audio_preprocess.py", "audio_decode.py": TEMPLATES / "audio_decode.py",
             "audio_features.py": TEMPLATES / "audio_features.py",
             "audio_stand_ins.py": TEMPLATES / "audio_stand_ins.py",
             "step_requests.py": TEMPLATES / "step_requests.py",
             "preprocessor_config.json": folder / "preprocessor_config.json"}
    if (folder / "config.json").is_file():  # AutoFeatureExtractor falls back on the model type where it names none
        files["config.json"] = folder / "config.json"
    extractor = type(feature_extractor(folder)).__name__
    how = f"its numpy stand-in (audio_stand_ins.py {STAND_INS[extractor].__name__})" if extractor in STAND_INS else ""
    return PythonModel(
        files=files, inputs=(TensorSpec(AUDIO, "TYPE_STRING", (1,)),),
        outputs=(TensorSpec(name, "TYPE_FP32", shape),),
        parameters={"sampling_rate": str(sampling_rate(folder)), "max_audio_seconds": str(task.max_audio_seconds),
                    "feature_class": extractor, "output": name},
        note=f"feature extractor {extractor}{' as ' + how if how else ''} from {folder}/preprocessor_config.json: "
             f"{name} {list(shape)} at {sampling_rate(folder)} Hz",
        requirements=PREPROCESS_REQUIREMENTS)


def classification_params(folder: pathlib.Path, top_k: int) -> dict[str, Any]:
    """AudioClassificationPipeline.postprocess's rule (transformers 5.23.0 pipelines/audio_classification.py):
    none for regression, sigmoid for multi-label, else softmax (also for one label, unlike images)."""
    config = json.loads((folder / "config.json").read_text())
    names = checkpoint_text.labels(folder)
    problem = config.get("problem_type")
    function = "none" if problem == "regression" else "sigmoid" if problem == "multi_label_classification" else "softmax"
    return {"id2label": names, "top_k": top_k, "function": function}


def masked_end_frames(model: ModelSpec, folder: pathlib.Path) -> int:
    """How many frames at the end of an unpadded clip the attention_mask the task's pipeline hands the model marks
    as padding, where that count is the same for every clip length: 1 for Parakeet's extractor (its last STFT
    frame), else 0. The pipeline asks for the mask for CTC (transformers 5.23.0
    pipelines/automatic_speech_recognition.py: ``return_attention_mask=True``) and passes what the extractor gives
    by default for classification (pipelines/audio_classification.py). The model step makes a fixed count's mask
    itself from the features' length (the step sends the features only). A mask that is all ones needs nothing; one
    whose count changes with the length (SeamlessM4TFeatureExtractor pads to an even frame count and masks the
    pad) is not made either: the features go alone and the build's check against the pipeline judges the answers,
    as for every model."""
    task = checkpoint_text.task_of(model)
    extractor, rate, name = feature_extractor(folder), sampling_rate(folder), feature_name(folder)
    ask = {"return_attention_mask": True} if task.kind is TaskKind.SPEECH_RECOGNITION else {}
    found = set()
    for seconds in (0.25, 0.5, 1.0, 1.5):
        made = extractor([np.zeros(int(rate * seconds), dtype=np.float32)], sampling_rate=rate, return_tensors="np",
                         **ask)
        if "attention_mask" not in made:
            return 0
        mask, frames = np.asarray(made["attention_mask"])[0].astype(bool), np.asarray(made[name]).shape[1]
        valid = int(mask.sum())
        if len(mask) != frames or not mask[:valid].all():
            return 0  # not ones then zeros over the features' frames: nothing the graph could make from a length
        found.add(frames - valid)
    return found.pop() if len(found) == 1 else 0


class _Logits(torch.nn.Module):
    """The model with its features passed by name (transformers 5 rejects positional export calls); logits out.
    With ``masked_end_frames``, also the attention_mask the pipeline would pass for one unpadded clip: ones, then
    that many zeros, made here from the features' length (every row of a request has one length)."""

    def __init__(self, model: torch.nn.Module, masked_end_frames: int = 0) -> None:
        super().__init__()
        self.model = model
        self.masked_end_frames = masked_end_frames

    def logits(self, name: str, features: torch.Tensor) -> torch.Tensor:
        given = {name: features}
        if self.masked_end_frames:
            frames = features.shape[1]
            valid = torch.arange(frames, device=features.device) < frames - self.masked_end_frames
            given["attention_mask"] = valid.unsqueeze(0).expand(features.shape[0], -1).to(torch.long)
        logits: torch.Tensor = self.model(**given).logits
        return logits


class SamplesModel(_Logits):
    """``input_values`` (raw samples, or AST's spectrogram, which transformers names so) in."""

    def forward(self, input_values: torch.Tensor) -> torch.Tensor:
        return self.logits("input_values", input_values)


class SpectrogramModel(_Logits):
    """``input_features`` (a spectrogram: Whisper, Parakeet, LASR) in."""

    def forward(self, input_features: torch.Tensor) -> torch.Tensor:
        return self.logits("input_features", input_features)


def exportable(model: ModelSpec, root: pathlib.Path) -> ExportableModel:
    import transformers

    from model_build.recipes.text_tasks import refuse_untrained_head

    task = checkpoint_text.task_of(model)
    folder = checkpoint_text.checkpoint(model, root)
    auto = HEADS[task.kind]
    net, loading = getattr(transformers, auto).from_pretrained(folder, local_files_only=True, output_loading_info=True)
    refuse_untrained_head(model, folder, task.kind, loading.get("missing_keys") or [])
    name = feature_name(folder)
    shape = feature_shape(folder)
    rate = sampling_rate(folder)
    # One second of audio is the example; the serving cases also try a quarter of it.
    per_row = example_shape(folder)

    def sample(batch: int, seed: int) -> dict[str, torch.Tensor]:
        gen = torch.Generator().manual_seed(seed)
        return {name: 0.1 * torch.randn(batch, *per_row, generator=gen)}

    masked = masked_end_frames(model, folder)
    module = (SamplesModel if name == "input_values" else SpectrogramModel)(net.eval(), masked)
    ctc = task.kind is TaskKind.SPEECH_RECOGNITION
    axes = {name: {0: "batch", **({1: "samples"} if shape[0] == -1 else {})},
            "logits": {0: "batch", 1: "frames"} if ctc else {0: "batch"}}
    note = f"weights from {folder} ({net.config.model_type}, {auto}), {name} {list(shape)} at {rate} Hz" + (
        f"; the attention_mask the pipeline passes (the last {masked} frame(s) masked) is made in the graph"
        if masked else "")
    return ExportableModel(module, sample(2, 0), (name,), ("logits",), axes, sample, note,
                           short_length=per_row[0] // 4 if shape[0] == -1 else None)
