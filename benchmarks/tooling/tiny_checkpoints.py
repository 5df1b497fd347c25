"""Tiny random checkpoints of any transformers architecture, made offline from its own config class.

The architecture's default config (``AutoConfig.for_model``) is made again with its documented size
fields shrunk (layers, widths, heads, vocabulary, image size), so every field the config derives
from them (``layer_types``, ``head_dim`` ...) stays consistent; the model class the Auto mapping
names is instantiated from it with random weights (seed 0) and saved with ``save_pretrained``.
Nothing is downloaded. Used by benchmarks/hf_coverage.py, benchmarks/hf_task_coverage.py (``save_with_tokenizer``:
any text head, with a tokenizer of its own) and the architecture tests.
"""
from __future__ import annotations

import inspect
import pathlib
from typing import Any, Optional, Sequence

LAYERS = 2
WIDTH = 32          # hidden width: 2 heads of 16
HEADS = 2
HEAD_DIM = WIDTH // HEADS
FFN = 64
VOCABULARY = 1024
IMAGE = 64          # pixels: divisible by the patch sizes (4, 8, 14 are padded; 16, 32 divide)
NUM_LABELS = 3
SEED = 0

# field -> tiny value, for the size fields configs document (the same fact under each family's name)
SCALARS = {
    **dict.fromkeys(("num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers", "decoder_layers",
                     "num_encoder_layers", "num_decoder_layers"), LAYERS),
    **dict.fromkeys(("hidden_size", "d_model", "n_embd", "dim", "embed_dim", "embedding_size", "d_embed",
                     "word_embed_proj_dim", "projection_dim"), WIDTH),
    **dict.fromkeys(("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
                     "decoder_attention_heads", "num_key_value_heads"), HEADS),
    **dict.fromkeys(("head_dim", "d_head", "d_kv", "attention_head_size"), HEAD_DIM),
    **dict.fromkeys(("intermediate_size", "d_ff", "d_inner", "n_inner", "ffn_dim", "encoder_ffn_dim",
                     "decoder_ffn_dim", "hidden_dim"), FFN),
    "vocab_size": VOCABULARY,
    "image_size": IMAGE,
    "window_size": 2,   # Swin's attention windows: 2 x 2 patches tile every stage's grid (16, 8, 4, 2 patches)
    # A detector's object queries; RT-DETR picks them among the encoder's tokens (84 at 64 x 64 pixels, not 300).
    "num_queries": 10,
}
# list fields, one entry per stage: tiny values keep the number of stages
LISTS = {
    "depths": lambda i, v: 1, "num_heads": lambda i, v: 1, "num_attention_heads": lambda i, v: 1,
    "hidden_sizes": lambda i, v: 8 * (i + 1), "embed_dim": lambda i, v: 8 * (i + 1),
    "embed_dims": lambda i, v: 8 * (i + 1), "neck_hidden_sizes": lambda i, v: 8 * (i + 1),
}
TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "sep_token_id", "cls_token_id", "unk_token_id",
             "mask_token_id", "decoder_start_token_id")


class NotInstantiable(Exception):
    """The architecture does not instantiate offline from its config; the message says why."""


# Where the tiny widths break an architecture's own rules (a group norm of 32 groups over 8 channels), only
# these shrink: depth, vocabulary and image size; the widths stay the config's.
GENTLE = ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers", "decoder_layers",
          "num_encoder_layers", "num_decoder_layers", "depths", "vocab_size", "image_size")
MAX_PARAMETERS = 60_000_000  # beyond this a checkpoint costs the run more than it tells (and may not fit)


def shrunk_config(model_type: str, gentle: bool = False) -> Any:
    """The architecture's config with its size fields made tiny (``gentle``: only those of GENTLE),
    ``num_labels`` 3 and a pad token; a timm backbone (timm is absent) swapped for transformers' own."""
    from transformers import AutoConfig

    chosen = _without_timm(model_type)
    try:
        default = AutoConfig.for_model(model_type, **chosen)
    except Exception as exc:  # configs raise what they like; the caller reports it
        raise NotInstantiable(f"{model_type}: its config does not construct: {_first(exc)}") from None
    sizes = _shrunk_sizes(default, gentle)
    # A classifier batches rows of different lengths only with a pad token (decoders have none by default).
    if getattr(default, "pad_token_id", None) is None:
        sizes["pad_token_id"] = 0
    try:
        return AutoConfig.for_model(model_type, **sizes, num_labels=NUM_LABELS)
    except Exception as exc:
        raise NotInstantiable(f"{model_type}: its config refuses the tiny sizes {sizes}: {_first(exc)}") from None


def _without_timm(model_type: str) -> dict[str, Any]:
    """Where the default config's backbone is timm's ResNet-50 and timm is absent (DETR and kin: transformers
    5.23.0 models/detr/configuration_detr.py ``__post_init__``), transformers' own ResNet (the model type their
    ``sub_configs_defaults`` name) giving the same stages: timm's ``out_indices`` 1-4 are ResNet's layer1-4,
    transformers' stage1-4 (Deformable DETR's 2, 3, 4: three feature levels, not the one of stage4 alone)."""
    import importlib.util

    from transformers import AutoConfig

    try:
        backbone = getattr(AutoConfig.for_model(model_type), "backbone_config", None)
    except Exception:  # shrunk_config says why the config does not construct
        return {}
    if getattr(backbone, "model_type", None) != "timm_backbone" or importlib.util.find_spec("timm") is not None:
        return {}
    return {"backbone_config": {"model_type": "resnet", "out_indices": list(getattr(backbone, "out_indices", []))}}


def _shrunk_sizes(config: Any, gentle: bool) -> dict[str, Any]:
    """The size fields of ``config`` to change, sub-configs (``text_config``, ``vision_config`` ...) as dicts."""
    from transformers import PretrainedConfig

    sizes: dict[str, Any] = {}
    # The config's documented fields are its constructor's parameters; others are derived from them (Swin's
    # hidden_size from embed_dim and the stages) and must not be set.
    documented = set(inspect.signature(type(config).__init__).parameters) - {"self", "kwargs"} or set(vars(config))
    for name, value in vars(config).items():
        if name not in documented:
            continue
        if isinstance(value, PretrainedConfig):  # given as a dict, the sub-config derives the rest again
            sizes[name] = _sub_config(name, value, gentle)
            continue
        if name in SCALARS and isinstance(value, int) and not isinstance(value, bool) and value > SCALARS[name]:
            sizes[name] = SCALARS[name]
        elif name in LISTS and isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
            sizes[name] = [min(v, LISTS[name](i, v)) for i, v in enumerate(value)]
    if gentle:
        sizes = {name: value for name, value in sizes.items() if name in GENTLE or isinstance(value, dict)}
    for name in TOKEN_IDS:  # ids past the shrunk vocabulary would index outside the embedding table
        value = getattr(config, name, None)
        if isinstance(value, int) and value >= VOCABULARY:
            sizes[name] = TOKEN_IDS.index(name) + 1
    return sizes


def _sub_config(name: str, config: Any, gentle: bool) -> dict[str, Any]:
    """A sub-config as the dict its parent is made again from: its model type (a ``backbone_config`` dict is
    made by it) and its shrunk sizes. A backbone also keeps what its parent chose where it differs from the
    backbone class's defaults (LW-DETR's ViT of width 192, the stages ``out_features`` names) and shrinks only its
    stages' depths and its image size: its widths are the parent's input widths (RT-DETR's
    ``encoder_in_channels``) and its layers are the stages ``out_features`` names (LW-DETR's ViT: stage9), fields
    of the parent this module does not know."""
    from transformers import PretrainedConfig

    if name != "backbone_config":
        return {"model_type": config.model_type, **_shrunk_sizes(config, gentle)}
    config_class: Any = type(config)
    try:
        defaults = vars(config_class())
    except Exception:  # a backbone without defaults of its own: only the sizes
        defaults = dict(vars(config))
    # The stages are _out_features / _out_indices, constructor parameters of some backbones (RTDetrResNetConfig)
    # only (ResNetConfig's are set through out_features, out_indices: the names the dict gives).
    documented = set(inspect.signature(config_class.__init__).parameters) | {"_out_features", "_out_indices"}
    chosen = {key.lstrip("_"): value for key, value in vars(config).items()
              if key in documented and key in defaults and defaults[key] != value
              and not isinstance(value, PretrainedConfig)}
    sizes = {key: value for key, value in _shrunk_sizes(config, True).items() if key in ("depths", "image_size")}
    return {"model_type": config.model_type, **chosen, **sizes}


def save(model_type: str, class_name: str, folder: pathlib.Path) -> str:
    """Saves a tiny random ``class_name`` checkpoint into ``folder``; returns its parameter count (and
    whether only the gentle sizes made one) as text."""
    try:
        return _save(model_type, class_name, folder, gentle=False)
    except NotInstantiable as tiny:
        try:
            return _save(model_type, class_name, folder, gentle=True) + " (depth, vocabulary and image size shrunk)"
        except NotInstantiable:
            raise tiny from None


def _save(model_type: str, class_name: str, folder: pathlib.Path, gentle: bool) -> str:
    config = shrunk_config(model_type, gentle)
    net, count = _instantiate(model_type, class_name, config, gentle)
    text = class_name.endswith("SequenceClassification")
    _runs(net, model_type, class_name, _inputs(net, text=text))
    net.save_pretrained(folder)
    if text:
        _save_samples(net, folder.parent / f"{folder.name}.npz")
    return f"{count:,} parameters"


def _instantiate(model_type: str, class_name: str, config: Any, gentle: bool) -> tuple[Any, int]:
    """``class_name`` made from ``config`` with random weights (seed 0), and its parameter count."""
    import torch
    import transformers

    model_class = getattr(transformers, class_name, None)
    if model_class is None:
        raise NotInstantiable(f"{model_type}: transformers has no class {class_name}")
    try:
        with torch.device("meta"):  # shapes only: a config's default widths may need gigabytes
            count = sum(p.numel() for p in model_class(config).parameters())
        if count > MAX_PARAMETERS:
            raise NotInstantiable(f"{model_type}: {count:,} parameters at the {'gentle' if gentle else 'tiny'} "
                                  "sizes (the config keeps its widths where this module does not know the field)")
        torch.manual_seed(SEED)
        return model_class(config).eval(), count
    except NotInstantiable:
        raise
    except Exception as exc:
        raise NotInstantiable(f"{model_type}: {class_name}(config) fails: {_first(exc)}") from None


def _runs(net: Any, model_type: str, class_name: str, inputs: dict[str, Any]) -> None:
    """The shrunk sizes must make a model that runs, else a refusal would be this module's fault."""
    import torch

    try:
        with torch.no_grad():
            net(**inputs)
    except Exception as exc:
        raise NotInstantiable(f"{model_type}: eager {class_name} at the tiny sizes fails: {_first(exc)}") from None


def _save_samples(net: Any, path: pathlib.Path) -> None:
    """Two rows as the model's tokenizer would give them (ending with its end token, unpadded), for the spec's
    ``samples``: `tritonsm smoke` sends the first, where it would otherwise send ids no tokenizer makes."""
    import numpy as np

    from model_build.recipes import model_facts

    ids = _inputs(net, text=True)["input_ids"].numpy()
    arrays = {"input_ids": ids}
    if model_facts.takes(net, "attention_mask"):
        arrays["attention_mask"] = np.ones_like(ids)
    np.savez(path, **arrays)


def _inputs(net: Any, text: bool) -> dict[str, Any]:
    import torch

    from model_build.recipes import model_facts

    if text:
        vocabulary = model_facts.vocabulary_size(net)
        ids = torch.randint(5, vocabulary, (2, 16))
        end = model_facts.end_id(net, vocabulary)
        if end is not None:  # as the tokenizer ends a row (BART's classifier pools there)
            ids[:, -1] = end
        return {"input_ids": ids}
    height, width = model_facts.image_size(net.config, IMAGE)
    channels = int(model_facts.config_field(net.config, "num_channels", 3))
    return {"pixel_values": torch.randn(2, channels, height, width)}


def _first(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else '(no message)'}"


def save_with_tokenizer(model_type: str, class_name: str, folder: pathlib.Path, tokenizer: Any,
                        labels: Optional[Sequence[str]] = None) -> str:
    """As ``save``, for a text checkpoint of any head (or the bare model) served from raw text: the config's
    ``vocab_size`` is ``tokenizer``'s size, its pad, bos, eos, sep and cls ids the tokenizer's where the config
    (or a sub-config) has such fields, its labels ``labels`` (else those of ``shrunk_config``); ``tokenizer``
    is saved beside the weights. Returns the parameter count as text."""
    try:
        return _save_with_tokenizer(model_type, class_name, folder, tokenizer, labels, gentle=False)
    except NotInstantiable as tiny:
        try:
            return _save_with_tokenizer(model_type, class_name, folder, tokenizer, labels,
                                        gentle=True) + " (depth, vocabulary and image size shrunk)"
        except NotInstantiable:
            raise tiny from None


def _save_with_tokenizer(model_type: str, class_name: str, folder: pathlib.Path, tokenizer: Any,
                         labels: Optional[Sequence[str]], gentle: bool) -> str:
    from transformers import PretrainedConfig

    config = shrunk_config(model_type, gentle)
    for one in [config] + [v for v in vars(config).values() if isinstance(v, PretrainedConfig)]:
        _fit_tokenizer(one, tokenizer)
    # An encoder-decoder's saved config names the decoder's start token (T5's is its pad id, 0); the tiny one
    # from the class defaults may not, and its heads fail without it.
    if getattr(config, "is_encoder_decoder", False) and getattr(config, "decoder_start_token_id", None) is None:
        config.decoder_start_token_id = config.pad_token_id if isinstance(config.pad_token_id, int) else 0
    if labels:
        config.id2label = dict(enumerate(labels))
        config.label2id = {label: index for index, label in enumerate(labels)}
    net, count = _instantiate(model_type, class_name, config, gentle)
    inputs = _inputs(net, text=True)
    if "decoder_input_ids" in inspect.signature(net.forward).parameters:  # a bare encoder-decoder (T5Model)
        inputs["decoder_input_ids"] = inputs["input_ids"]
    _runs(net, model_type, class_name, inputs)
    try:
        net.save_pretrained(folder)
    except Exception as exc:  # the config's own validation at save time (T5Gemma2: one vocabulary for both sides)
        raise NotInstantiable(f"{model_type}: save_pretrained refuses the config with the tokenizer's "
                              f"vocabulary: {_first(exc)}") from None
    tokenizer.save_pretrained(folder)
    return f"{count:,} parameters"


def _fit_tokenizer(config: Any, tokenizer: Any) -> None:
    """The vocabulary and special-token ids of ``config`` made ``tokenizer``'s, where the config has the field
    (where the config names a bos / eos and the tokenizer has none, its cls / sep: they begin and end its rows)."""
    fields = vars(config)
    size = len(tokenizer)
    if "vocab_size" in fields:
        config.vocab_size = size
    ids = {"pad_token_id": tokenizer.pad_token_id, "sep_token_id": tokenizer.sep_token_id,
           "cls_token_id": tokenizer.cls_token_id, "bos_token_id": tokenizer.bos_token_id,
           "eos_token_id": tokenizer.eos_token_id, "unk_token_id": tokenizer.unk_token_id,
           "mask_token_id": tokenizer.mask_token_id}
    for name, stand_in in (("bos_token_id", tokenizer.cls_token_id), ("eos_token_id", tokenizer.sep_token_id)):
        if ids[name] is None and fields.get(name) is not None:
            ids[name] = stand_in
    for name in TOKEN_IDS:
        if name not in fields:
            continue
        value = ids.get(name)
        if value is not None:
            setattr(config, name, value)
        elif isinstance(fields[name], int) and fields[name] >= size:  # decoder_start_token_id and the like
            setattr(config, name, tokenizer.pad_token_id or 0)
    # The tokenizer's pairs carry type id 1: the table must have a row for it.
    if "token_type_ids" in tokenizer.model_input_names and isinstance(fields.get("type_vocab_size"), int) \
            and fields["type_vocab_size"] < 2:
        config.type_vocab_size = 2
