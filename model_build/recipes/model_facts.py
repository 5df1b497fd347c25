"""Facts a recipe reads from the transformers model itself, not from a config field only some configs have.

Configs name the same fact differently (BERT's ``hidden_size`` is DistilBERT's ``dim`` and GPT-2's
``n_embd``; CLIP's image size lives in its ``vision_config``), so each fact comes from the model where
the model states it (its embedding table, its forward signature, its output) and from the config's
documented field, searched in the sub-configs too, with a fallback otherwise.
"""
from __future__ import annotations

import inspect
from typing import Any, Optional

SUB_CONFIGS = ("vision_config", "backbone_config", "encoder_config")  # where composite configs keep the facts


def vocabulary_size(net: Any) -> int:
    """Rows of the input embedding table (what token ids may index), else the config's ``vocab_size``."""
    try:
        return int(net.get_input_embeddings().num_embeddings)
    except (AttributeError, NotImplementedError, TypeError):  # hashed or character embeddings: no single table
        return int(config_field(net.config, "vocab_size", 256))


def end_id(net: Any, vocabulary: int) -> Optional[int]:
    """The id the model's tokenizer ends a row with: the config's ``eos_token_id`` (the first, where it lists
    several), else its ``sep_token_id``; None when neither is an id of the vocabulary."""
    for name in ("eos_token_id", "sep_token_id"):
        value = config_field(net.config, name, None)
        value = value[0] if isinstance(value, (list, tuple)) and value else value
        if isinstance(value, int) and 0 <= value < vocabulary:
            return value
    return None


def takes(net: Any, argument: str) -> bool:
    """Whether the model's forward() has a parameter named ``argument``."""
    return argument in inspect.signature(net.forward).parameters


def logits(output: Any) -> Any:
    """The classifier's scores: the output's ``logits``, else its first element."""
    found = getattr(output, "logits", None)
    return found if found is not None else output[0]


def config_field(config: Any, name: str, default: Any) -> Any:
    """``config.<name>``, else the first sub-config's that has it, else ``default``."""
    for holder in (config, *(getattr(config, sub, None) for sub in SUB_CONFIGS)):
        value = getattr(holder, name, None) if holder is not None else None
        if value is not None:
            return value
    return default


def image_size(config: Any, default: int) -> tuple[int, int]:
    """(height, width) the model was configured for: an int, a [height, width] pair, or ``default``."""
    size = config_field(config, "image_size", default)
    if isinstance(size, int):
        return size, size
    if isinstance(size, dict):  # {"height": h, "width": w} as image processors write it
        return int(size.get("height", default)), int(size.get("width", default))
    height, width = list(size)[:2]
    return int(height), int(width)
