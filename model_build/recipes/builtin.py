"""Built-in exportable recipes: BERT, RoBERTa and ResNet-50 at their real sizes, plus tiny variants,
and any transformers checkpoint through the Auto classes (``hf-sequence-classification``,
``hf-image-classification``).

Weights come from the spec's ``weights`` directory (transformers ``from_pretrained`` through
AutoModelForSequenceClassification / AutoModelForImageClassification, offline: the checkpoint's
config.json names the architecture, so DistilBERT, DeBERTa, ViT or ConvNeXt load like BERT) or are
initialised from the named architecture's config with a fixed seed, so builds are reproducible
and need no hub access.
"""
from __future__ import annotations

import pathlib
from typing import Optional

import torch

from deployment_spec.sections.model import Backend, ModelSpec
from model_build.recipes import model_facts, sentences
from model_build.recipes.token_samples import id_type, token_samples
from model_build.recipes.contract import ExportableModel, weights_dir

DEFAULT_SEQUENCE = 128
NUM_LABELS = 2
TEXT = {
    # recipe: (family, architecture sizes of the published checkpoint)
    "bert-base": ("bert", dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                               intermediate_size=3072, max_position_embeddings=512)),
    "bert-large": ("bert", dict(vocab_size=30522, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                intermediate_size=4096, max_position_embeddings=512)),
    "roberta-base": ("roberta", dict(vocab_size=50265, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                     intermediate_size=3072, max_position_embeddings=514, type_vocab_size=1,
                                     pad_token_id=1)),
    "roberta-large": ("roberta", dict(vocab_size=50265, hidden_size=1024, num_hidden_layers=24,
                                      num_attention_heads=16, intermediate_size=4096, max_position_embeddings=514,
                                      type_vocab_size=1, pad_token_id=1)),
    "tiny-bert": ("bert", dict(vocab_size=1024, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=64, max_position_embeddings=512)),
    "tiny-roberta": ("roberta", dict(vocab_size=1024, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=514, type_vocab_size=1,
                                     pad_token_id=1)),
}
VISION = {
    "resnet50": dict(num_channels=3, embedding_size=64, hidden_sizes=[256, 512, 1024, 2048], depths=[3, 4, 6, 3],
                     layer_type="bottleneck", num_labels=1000),
    "tiny-resnet": dict(num_channels=3, embedding_size=8, hidden_sizes=[16, 32], depths=[1, 1],
                        layer_type="basic", num_labels=10),
}
IMAGE_SIZE = 224
# The checkpoint recipes (deployment_spec.sections.recipes.NEEDS_WEIGHTS): the task decides the wrapper.
AUTO = {"hf-sequence-classification": "text", "hf-image-classification": "vision"}
# The model steps of the other text tasks (model_build/recipes/text_tasks.py).
TASK_RECIPES = ("hf-token-classification", "hf-sentence-embedding", "hf-question-answering")


class TextClassifier(torch.nn.Module):
    """Named inputs passed as keywords: transformers 5 models reject positional export calls."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        # int32 ids (TensorRT engines) are widened here, inside the graph.
        named = {"input_ids": input_ids.long()}
        if attention_mask is not None:  # absent where the model's forward() takes no mask
            named["attention_mask"] = attention_mask.long()
        return model_facts.logits(self.model(**named))


class ImageClassifier(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return model_facts.logits(self.model(pixel_values=pixel_values))


def exportable(model: ModelSpec, root: pathlib.Path) -> ExportableModel:
    recipe = model.source.recipe
    if model.task is not None and model.task.takes_image():
        from model_build.recipes import image_steps
        return image_steps.exportable(model, root)
    if model.task is not None and model.task.takes_audio():
        from model_build.recipes import audio_steps
        return audio_steps.exportable(model, root)
    if model.task is not None or recipe in TASK_RECIPES:
        from model_build.recipes import text_tasks
        return text_tasks.exportable(model, root)
    if recipe in TEXT or AUTO.get(recipe) == "text":
        return _text(model, root)
    return _vision(model, root)


def _text(model: ModelSpec, root: pathlib.Path) -> ExportableModel:
    from transformers import AutoModelForSequenceClassification

    recipe = model.source.recipe
    weights = weights_dir(model, root)
    if weights is not None:
        net = AutoModelForSequenceClassification.from_pretrained(weights, local_files_only=True)
        note = f"weights from {weights} ({net.config.model_type})"
    else:
        family, sizes = TEXT[recipe]
        torch.manual_seed(0)
        net = AutoModelForSequenceClassification.from_config(_text_config(recipe))
        note = (f"no weights directory: {recipe} initialised with random weights from its architecture config "
                f"({sizes['num_hidden_layers']} layers, hidden {sizes['hidden_size']}, seed 0)")
    names = ("input_ids", "attention_mask") if model_facts.takes(net, "attention_mask") else ("input_ids",)
    seq = model.sequence_length or DEFAULT_SEQUENCE
    vocab = model_facts.vocabulary_size(net)
    sample, end = token_samples(net, names, seq, model.backend)
    axes = {**{name: {0: "batch", 1: "sequence"} for name in names}, "logits": {0: "batch"}}
    # A trained checkpoint with its tokenizer: the int8 gate measures on real sentences, not random ids.
    real = sentences.from_checkpoint(weights, seq, id_type(model), vocab) if weights is not None else None
    if real is not None:
        real = {name: real[name] for name in names}
    return ExportableModel(TextClassifier(net.eval()), sample(2, 0), names, ("logits",), axes, sample, note,
                           agreement_inputs=real, end_id=end)


def _text_config(recipe: str):
    from transformers import BertConfig, RobertaConfig

    family, sizes = TEXT[recipe]
    return (BertConfig if family == "bert" else RobertaConfig)(num_labels=NUM_LABELS, **sizes)


def parameter_count(recipe: str) -> int:
    """Parameters of the recipe's architecture without weights: built on the meta device (shapes only)."""
    from transformers import AutoModelForSequenceClassification, ResNetConfig, ResNetForImageClassification

    with torch.device("meta"):
        if recipe in TEXT:
            net = AutoModelForSequenceClassification.from_config(_text_config(recipe))
        else:
            net = ResNetForImageClassification(ResNetConfig(**VISION[recipe]))
    return sum(p.numel() for p in net.parameters())


def _vision(model: ModelSpec, root: pathlib.Path) -> ExportableModel:
    from transformers import AutoModelForImageClassification, ResNetConfig, ResNetForImageClassification

    recipe = model.source.recipe
    weights = weights_dir(model, root)
    if weights is not None:
        net = AutoModelForImageClassification.from_pretrained(weights, local_files_only=True)
        note = f"weights from {weights} ({net.config.model_type})"
    else:
        torch.manual_seed(0)
        net = ResNetForImageClassification(ResNetConfig(**VISION[recipe]))
        note = f"no weights directory: {recipe} initialised with random weights from its architecture config (seed 0)"
    # ViT's position embeddings fix the size; a convolutional net takes the size it was trained on.
    height, width = model_facts.image_size(net.config, IMAGE_SIZE)
    channels = int(model_facts.config_field(net.config, "num_channels", 3))

    def sample(batch: int, seed: int) -> dict[str, torch.Tensor]:
        gen = torch.Generator().manual_seed(seed)
        return {"pixel_values": torch.randn(batch, channels, height, width, generator=gen)}

    return ExportableModel(ImageClassifier(net.eval()), sample(2, 0), ("pixel_values",), ("logits",),
                           {"pixel_values": {0: "batch"}, "logits": {0: "batch"}}, sample, note)
