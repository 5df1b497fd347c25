"""Real English sentences: the text on which a trained text model's int8 graph is measured.

Written for this project (no data set, no licence to track). Mixed topics and lengths, with
paraphrase pairs (a sentence and a rewording next to it), so a sentence embedding's nearest
neighbour is meaningful. Order matters: results quote "these 24 sentences".
"""
from __future__ import annotations

from typing import Any, Optional

SENTENCES = (
    "The train to the airport leaves every twenty minutes from platform four.",
    "Trains for the airport depart from platform four three times an hour.",
    "She forgot her umbrella and got soaked on the walk home.",
    "Without an umbrella, she was drenched by the time she reached her house.",
    "The quarterly report shows revenue grew by eight percent.",
    "Sales rose eight percent over the last three months, according to the report.",
    "Add the flour slowly and stir until the batter is smooth.",
    "Mix in the flour a little at a time until there are no lumps.",
    "The patient was prescribed antibiotics for a bacterial infection.",
    "A doctor gave him antibiotics to treat the infection.",
    "Our team lost the final match after extra time.",
    "The referee cancelled the goal because of an offside position.",
    "Please restart the server after installing the security update.",
    "The database backup failed because the disk was full.",
    "A cold front will bring heavy rain and strong winds tomorrow.",
    "Expect storms and gusty wind when the weather changes tomorrow.",
    "The museum's new exhibition features paintings from the seventeenth century.",
    "He plays the violin in a small orchestra on weekends.",
    "Interest rates were left unchanged by the central bank.",
    "The hiking trail climbs steeply through a pine forest to the lake.",
    "I really did not enjoy that movie; the plot made no sense.",
    "What a wonderful film, I would happily watch it again.",
    "The cat slept on the warm windowsill all afternoon.",
    "Solar panels convert sunlight directly into electricity.",
)


def tokenized(tokenizer: Any, max_length: int, id_dtype: Any) -> dict[str, Any]:
    """SENTENCES through ``tokenizer``: padded to the longest, cut at ``max_length`` tokens."""
    batch = tokenizer(list(SENTENCES), padding="longest", truncation=True, max_length=max_length,
                      return_tensors="pt")
    return {"input_ids": batch["input_ids"].to(id_dtype), "attention_mask": batch["attention_mask"].to(id_dtype)}


# A checkpoint folder has a tokenizer if it has one of these (Hugging Face's fast and slow tokenizer files).
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model")


def from_checkpoint(weights: Any, max_length: int, id_dtype: Any, vocab_size: int) -> Optional[dict[str, Any]]:
    """SENTENCES tokenized by the checkpoint's own tokenizer, or None when the folder has none.

    The files are looked for first: transformers 5 gives a folder without them a tokenizer that
    maps every word to one id, which would make "real text" a row of unknown tokens.
    """
    import pathlib

    from transformers import AutoTokenizer

    if not any((pathlib.Path(weights) / name).is_file() for name in TOKENIZER_FILES):
        return None
    try:
        tokenizer = AutoTokenizer.from_pretrained(weights, local_files_only=True)
    except (OSError, ValueError):  # unreadable tokenizer files: the int8 gate falls back to the parity cases
        return None
    inputs = tokenized(tokenizer, max_length, id_dtype)
    # A tokenizer of another vocabulary than the model's would index past its embedding table.
    return inputs if int(inputs["input_ids"].max()) < vocab_size else None
