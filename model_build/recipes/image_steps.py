"""The steps of an image ``task:`` ensemble (deployment_spec/sections/tasks.py) that are not the answer step: the
preprocessing step (Python backend) and the model step (``pixel_values`` in)."""
from __future__ import annotations

import pathlib

import torch

from deployment_spec.builds.manifest import TensorSpec
from deployment_spec.sections.model import ModelSpec
from deployment_spec.sections.tasks import IMAGE, TaskKind
from model_build.recipes import checkpoint_image, checkpoint_text, model_facts
from model_build.recipes.contract import TEMPLATES, TRANSFORMERS_WITHOUT_MODELS, ExportableModel, PythonModel

# What hf_image_preprocess.py imports, at the releases the build runs (requirements.lock), so the image processor
# verified at build time is the one that serves; transformers' PIL backend needs no torch.
PREPROCESS_REQUIREMENTS = (*TRANSFORMERS_WITHOUT_MODELS, "pillow==13.0.0")
# What Pillow decodes for the step: the formats cameras, browsers and phones send.
FORMATS = ("JPEG", "PNG", "WEBP")


def preprocess(model: ModelSpec, root: pathlib.Path) -> PythonModel:
    checkpoint_image.require_task(model)
    task = model.task
    assert task is not None  # require_task
    folder = checkpoint_text.checkpoint(model, root)
    detector = task.kind is TaskKind.OBJECT_DETECTION
    # A detector's processor may keep the aspect ratio: its pixels follow each image (one image per request).
    shape = checkpoint_image.pixel_shape(folder) if detector else fixed_shape(model, folder)
    name = checkpoint_image.processor_class(folder)
    files = {"model.py": TEMPLATES / "hf_image_preprocess.py", "step_requests.py": TEMPLATES / "step_requests.py",
             "preprocessor_config.json": folder / "preprocessor_config.json"}
    if (folder / "config.json").is_file():  # AutoImageProcessor falls back on the model type where the config has none
        files["config.json"] = folder / "config.json"
    sizes = (TensorSpec("image_size", "TYPE_INT64", (2,)),) if detector else ()
    return PythonModel(
        files=files, inputs=(TensorSpec(IMAGE, "TYPE_STRING", (1,)),),
        outputs=(TensorSpec("pixel_values", "TYPE_FP32", shape), *sizes),
        parameters={"processor_class": name, "max_image_bytes": str(task.max_image_bytes),
                    "max_image_pixels": str(task.max_image_pixels), "formats": ",".join(FORMATS)},
        note=f"image processor {name} from {folder}/preprocessor_config.json, pixel_values {list(shape)}",
        requirements=PREPROCESS_REQUIREMENTS)


def fixed_shape(model: ModelSpec, folder: pathlib.Path) -> tuple[int, ...]:
    """The processor's [C, H, W]; refused where it follows each image's size (a batch needs one shape)."""
    from model_build.errors import BuildError

    shape = checkpoint_image.pixel_shape(folder)
    if -1 in shape:
        raise BuildError(
            f"models.{model.task_entry or model.name}.weights: the image processor of {folder} "
            f"({checkpoint_image.processor_class(folder)}) makes pixel_values of each image's own size "
            f"(shape {list(shape)}, -1 where it follows the image); an {model.task.kind.value if model.task else 'image'} "
            "model step batches one size; fix: save a processor that resizes or crops to one size (preprocessor_config.json: size "
            '{"height": H, "width": W}, or do_center_crop with crop_size)')
    return shape


class PixelModel(torch.nn.Module):
    """``pixel_values`` passed by name (transformers 5 rejects positional export calls); the logits out."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = model_facts.logits(self.model(pixel_values=pixel_values))
        return logits


class DetectorModel(torch.nn.Module):
    """``pixel_values`` by name; every query's class logits and box (cx, cy, w, h relative to the image) out. No
    pixel_mask: the rows of a request have one size (the preprocessing step refuses others), so the mask would be
    all ones, which is what the model assumes without one."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pixel_values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        result = self.model(pixel_values=pixel_values)
        return result.logits, result.pred_boxes


class EmbedderModel(torch.nn.Module):
    """``pixel_values`` by name; the image's embedding out: ``get_image_features`` where the model has it (CLIP,
    SigLIP: the projected embedding that matches its text embeddings), else the pooled output (DINOv2, ViT);
    L2-normalised inside the graph where the spec asks (task.normalize)."""

    def __init__(self, model: torch.nn.Module, normalize: bool) -> None:
        super().__init__()
        self.model = model
        self.normalize = normalize

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        vector = image_embedding(self.model, pixel_values)
        return torch.nn.functional.normalize(vector, dim=-1) if self.normalize else vector


def image_embedding(model: torch.nn.Module, pixel_values: torch.Tensor) -> torch.Tensor:
    """The embedding as the model's users take it: get_image_features (its pooled output in transformers 5), else
    the pooled output of the forward pass; [batch, dim] (a convolutional network's pooled output is
    [batch, channels, 1, 1]: ResNet, RegNet, BiT)."""
    made = model.get_image_features(pixel_values=pixel_values) if hasattr(model, "get_image_features") else \
        model(pixel_values=pixel_values)
    vector = made if isinstance(made, torch.Tensor) else made.pooler_output
    if vector is None:
        raise ValueError(f"{type(model).__name__} gives no pooled output (pooler_output is None)")
    # One vector per image: normalize (dim -1) over a trailing 1 x 1 would turn every value into its sign.
    return vector.flatten(1)


def exportable(model: ModelSpec, root: pathlib.Path) -> ExportableModel:
    """The model step: AutoModelForImageClassification (AutoModelForObjectDetection) of the checkpoint, at the
    processor's pixel size (a detector: any size, exported at the processor's size for a 480x640 image)."""
    import transformers

    from model_build.recipes.text_tasks import refuse_untrained_head

    checkpoint_image.require_task(model)
    task = model.task
    assert task is not None  # require_task
    folder = checkpoint_text.checkpoint(model, root)
    detector = task.kind is TaskKind.OBJECT_DETECTION
    embedder = task.kind is TaskKind.IMAGE_EMBEDDING
    auto = ("AutoModelForObjectDetection" if detector else "AutoModel" if embedder else
            "AutoModelForImageClassification")
    net, loading = getattr(transformers, auto).from_pretrained(folder, local_files_only=True, output_loading_info=True)
    if not embedder:  # a bare encoder has no head to be missing
        refuse_untrained_head(model, folder, task.kind, loading.get("missing_keys") or [])
    shape = checkpoint_image.pixel_shape(folder) if detector else fixed_shape(model, folder)
    example = checkpoint_image.probe_shape(folder) if -1 in shape else shape

    def sample(batch: int, seed: int) -> dict[str, torch.Tensor]:
        gen = torch.Generator().manual_seed(seed)
        return {"pixel_values": torch.randn(batch, *example, generator=gen)}

    note = f"weights from {folder} ({net.config.model_type}, {auto}), pixel_values {list(shape)}"
    pixel_axes = {0: "batch", **{i + 1: f"pixels_{i}" for i, size in enumerate(shape) if size == -1}}
    if embedder:
        module = EmbedderModel(net.eval(), task.normalize)
        try:
            with torch.no_grad():
                module(**sample(1, 0))
        except (ValueError, TypeError, AttributeError) as exc:
            from model_build.errors import BuildError
            raise BuildError(f"models.{model.task_entry or model.name}.weights: {folder} ({net.config.model_type}) "
                             f"gives no image embedding: {exc}; an image-embedding task takes a vision model with "
                             "get_image_features (CLIP, SigLIP) or a pooled output (DINOv2, ViT)") from None
        return ExportableModel(module, sample(2, 0), ("pixel_values",), ("image_embedding",),
                               {"pixel_values": pixel_axes, "image_embedding": {0: "batch"}}, sample,
                               note + (", L2-normalised" if task.normalize else ""))
    if detector:
        checkpoint_image.detection_params(model, folder, task.threshold)  # refuses what the answer step cannot
        return ExportableModel(DetectorModel(net.eval()), sample(2, 0), ("pixel_values",), ("logits", "pred_boxes"),
                               {"pixel_values": pixel_axes, "logits": {0: "batch"}, "pred_boxes": {0: "batch"}},
                               sample, note)
    return ExportableModel(PixelModel(net.eval()), sample(2, 0), ("pixel_values",), ("logits",),
                           {"pixel_values": pixel_axes, "logits": {0: "batch"}}, sample, note)
