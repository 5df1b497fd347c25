"""The steps of an image ``task:`` ensemble (deployment_spec/tasks.py) that are not the answer step: the
preprocessing step (Python backend) and the model step (``pixel_values`` in)."""
from __future__ import annotations

import pathlib

import torch

from deployment_spec.manifest import TensorSpec
from deployment_spec.model import ModelSpec
from deployment_spec.tasks import IMAGE
from model_build.recipes import checkpoint_image, checkpoint_text, model_facts
from model_build.recipes.contract import ExportableModel, PythonModel

TEMPLATES = pathlib.Path(__file__).resolve().parent.parent / "python_models"
# What hf_image_preprocess.py imports beyond numpy, at the releases the build runs (requirements.lock), so the
# image processor verified at build time is the one that serves; transformers' PIL backend needs no torch.
PREPROCESS_REQUIREMENTS = ("transformers==5.23.0", "pillow==13.0.0", "numpy==1.26.4")
# What Pillow decodes for the step: the formats cameras, browsers and phones send.
FORMATS = ("JPEG", "PNG", "WEBP")


def preprocess(model: ModelSpec, root: pathlib.Path) -> PythonModel:
    checkpoint_image.require_task(model)
    task = model.task
    assert task is not None  # require_task
    folder = checkpoint_text.checkpoint(model, root)
    shape = fixed_shape(model, folder)
    name = checkpoint_image.processor_class(folder)
    files = {"model.py": TEMPLATES / "hf_image_preprocess.py",
             "preprocessor_config.json": folder / "preprocessor_config.json"}
    if (folder / "config.json").is_file():  # AutoImageProcessor falls back on the model type where the config has none
        files["config.json"] = folder / "config.json"
    return PythonModel(
        files=files, inputs=(TensorSpec(IMAGE, "TYPE_STRING", (1,)),),
        outputs=(TensorSpec("pixel_values", "TYPE_FP32", shape),),
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
            f"(shape {list(shape)}, -1 where it follows the image); an image-classification model step batches "
            "one size; fix: save a processor that resizes or crops to one size (preprocessor_config.json: size "
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


def exportable(model: ModelSpec, root: pathlib.Path) -> ExportableModel:
    """The model step: AutoModelForImageClassification of the checkpoint, at the processor's pixel size."""
    import transformers

    from model_build.recipes.text_tasks import refuse_untrained_head

    checkpoint_image.require_task(model)
    task = model.task
    assert task is not None  # require_task
    folder = checkpoint_text.checkpoint(model, root)
    net, loading = transformers.AutoModelForImageClassification.from_pretrained(
        folder, local_files_only=True, output_loading_info=True)
    refuse_untrained_head(model, folder, task.kind, loading.get("missing_keys") or [])
    shape = fixed_shape(model, folder)

    def sample(batch: int, seed: int) -> dict[str, torch.Tensor]:
        gen = torch.Generator().manual_seed(seed)
        return {"pixel_values": torch.randn(batch, *shape, generator=gen)}

    note = f"weights from {folder} ({net.config.model_type}, AutoModelForImageClassification), pixel_values {list(shape)}"
    return ExportableModel(PixelModel(net.eval()), sample(2, 0), ("pixel_values",), ("logits",),
                           {"pixel_values": {0: "batch"}, "logits": {0: "batch"}}, sample, note)
