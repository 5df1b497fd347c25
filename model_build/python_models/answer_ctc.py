"""Speech-recognition answers from CTC logits: greedy decoding to text as Hugging Face's
``pipeline("automatic-speech-recognition")`` does it for a CTC model (Wav2Vec2ForCTC, HubertForCTC, ...), in
numpy and the standard library only.

Followed: transformers 5.23.0, rewritten here; nothing of transformers is imported, so it runs inside a Triton
Python-backend model.

* ``transformers/pipelines/automatic_speech_recognition.py``: ``AutomaticSpeechRecognitionPipeline._forward``
  takes ``logits.argmax(dim=-1)`` for ``self.type == "ctc"``; ``postprocess`` decodes those ids with
  ``self.tokenizer.decode(items, skip_special_tokens=skip_special_tokens)`` where
  ``skip_special_tokens = self.type != "ctc"``, i.e. False for CTC.
* ``transformers/models/wav2vec2/tokenization_wav2vec2.py``, ``Wav2Vec2CTCTokenizer``: ``__init__`` (defaults
  ``<s>``, ``</s>``, ``<unk>``, ``<pad>``, ``|``, ``replace_word_delimiter_char=" "``, ``do_lower_case=False``,
  ``target_lang``), ``convert_ids_to_tokens`` (vocabulary first, then added tokens, else the unk token),
  ``_decode`` (with ``skip_special_tokens`` every special token but the word delimiter is dropped, before
  grouping), ``convert_tokens_to_string`` (group equal consecutive tokens, drop the pad token -- the CTC blank --,
  word delimiter -> ``replace_word_delimiter_char``, join, ``strip()``, ``lower()`` under ``do_lower_case``),
  the ``word_delimiter_token`` property (``str()`` of the setting).
* ``transformers/tokenization_utils_base.py``: ``PreTrainedTokenizerBase.__init__`` (the named special tokens,
  ``extra_special_tokens``/``additional_special_tokens``, and every other ``*_token`` string argument -- the word
  delimiter among them -- as special; ``clean_up_tokenization_spaces`` defaults to False), ``all_special_tokens``,
  ``clean_up_tokenization``, and ``_from_pretrained`` (``special_tokens_map.json`` and ``added_tokens.json`` are
  read only when tokenizer_config.json has no ``added_tokens_decoder``; the map's entries override the config's).

* ``transformers/models/parakeet/tokenization_parakeet.py`` ``ParakeetTokenizer._decode`` and
  ``transformers/models/lasr/tokenization_lasr.py`` ``LasrTokenizer._decode`` (tokenizers-backed: the vocabulary
  is tokenizer.json's): group equal consecutive ids, drop the pad id (the CTC blank), then the tokenizers
  library's ``decode``: each id's piece (an added token before the model's vocabulary; an unknown id gives
  nothing), the Metaspace decoder (the replacement character "▁" becomes a space, and in the first piece it is
  dropped), joined. LasrTokenizer sets that decoder itself (``__init__``); a ParakeetTokenizer's comes from
  tokenizer.json, and another decoder is refused.

``params["skip_special_tokens"]`` (default False, the pipeline's choice) selects the other decode,
``batch_decode(ids, skip_special_tokens=True)``. It is followed as it is, and it is not what a client wants:
the blank is a special token, so it is dropped before grouping and a letter doubled across a blank
("L <pad> L") comes out once ("HELLO" -> "HELO"). With False, special tokens the model emits other than the
blank (``<s>``, ``</s>``, ``<unk>``) stay in the text, as the pipeline leaves them.

Where this differs from the tokenizer, and why:

* Frames past a row's real length are dropped first (``lengths``: a frame count per row, or a frame-level
  attention mask [rows, frames]). The pipeline decodes one unpadded input; rows padded to a batch's length
  would otherwise have their padding frames decoded too.
* A ``word_delimiter_token`` other than "|" in tokenizer_config.json is honoured, as the tokenizer built with it
  (``Wav2Vec2CTCTokenizer(vocab_file, word_delimiter_token=...)``) decodes. transformers 5.23 loses it on
  loading: ``PreTrainedTokenizerBase._from_pretrained`` moves every ``*_token`` key that is not a standard
  attribute into ``model_specific_special_tokens``, so ``Wav2Vec2CTCTokenizer.__init__`` gets its default "|".
  The loaded tokenizer, and so the pipeline, keep the configured delimiter as a literal token in the text (and
  drop it as a special token under skip_special_tokens=True) while replacing "|" if the vocabulary has it.
* An unk token of ``None`` gives "" for ids outside the vocabulary (``"".join`` fails on it in transformers).
* A nested multilingual vocabulary (MMS) needs ``target_lang`` in tokenizer_config.json; without it
  ``load_params`` refuses the folder (the tokenizer would build a decoder keyed by dicts and fail).
"""
from __future__ import annotations

import json
import os
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Flags = npt.NDArray[np.bool_]

# Wav2Vec2CTCTokenizer.__init__'s defaults for what tokenizer_config.json does not say.
_DEFAULTS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
             "word_delimiter_token": "|"}
# The tokenizers-backed CTC tokenizers of transformers 5.23.0 (parakeet_ctc, lasr_ctc), and the decoder
# LasrTokenizer.__init__ sets whatever tokenizer.json says.
PIECE_TOKENIZERS = ("ParakeetTokenizer", "LasrTokenizer")
_METASPACE = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"}
# PreTrainedTokenizerBase.SPECIAL_TOKENS_ATTRIBUTES
_NAMED = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


class _Table(NamedTuple):
    """Per token id of the logits: what decoding needs, as arrays indexed by id."""

    shown: list[str]  # the token's text, the word delimiter already replaced
    group: Ints  # ids whose token strings are equal share a number: grouping compares strings, not ids
    blank: Flags  # the pad token, dropped after grouping
    skipped: Flags  # dropped before grouping under skip_special_tokens


# --- build time: the checkpoint folder -> params -----------------------------------------------------------

def load_params(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """What ``answer`` needs from a checkpoint's tokenizer files, JSON-serialisable (``answer_params``)."""
    config = _read_json(folder, "tokenizer_config.json") or {}
    if config.get("tokenizer_class") in PIECE_TOKENIZERS:
        return _piece_params(folder, config)
    if "added_tokens_decoder" not in config:  # the legacy files, read as _from_pretrained reads them
        config = _merge_special_tokens_map(config, _read_json(folder, "special_tokens_map.json") or {})
    vocab = _read_json(folder, "vocab.json")
    if not isinstance(vocab, dict):
        raise ValueError(f"{folder}: vocab.json is missing or not a JSON object{_other_tokenizer(config)}; "
                         "a CTC tokenizer needs it")
    target_lang = config.get("target_lang")
    if target_lang is not None:
        vocab = vocab[target_lang]
    elif any(isinstance(v, dict) for v in vocab.values()):
        raise ValueError(f"{folder}: vocab.json is nested by language (one vocabulary per language) and "
                         "tokenizer_config.json names no target_lang; set target_lang there")
    id_to_token = {int(i): str(t) for t, i in vocab.items()}
    for i, token in _added_tokens(folder, config).items():
        id_to_token.setdefault(i, token)  # convert_ids_to_tokens looks in the vocabulary first
    named = {key: _content(config[key]) if key in config else _DEFAULTS.get(key) for key in _NAMED}
    delimiter = config.get("word_delimiter_token", _DEFAULTS["word_delimiter_token"])
    return {
        "id_to_token": {str(i): t for i, t in sorted(id_to_token.items())},
        "unk_token": named["unk_token"],
        "pad_token": named["pad_token"],
        # The word_delimiter_token property returns str() of the setting: None becomes "None".
        "word_delimiter_token": str(_content(delimiter)),
        "replace_word_delimiter_char": config.get("replace_word_delimiter_char", " "),
        "do_lower_case": bool(config.get("do_lower_case", False)),
        "clean_up_tokenization_spaces": bool(config.get("clean_up_tokenization_spaces", False)),
        "special_tokens": _special_tokens(config, named, delimiter),
        "skip_special_tokens": False,
    }


def _other_tokenizer(config: dict[str, Any]) -> str:
    """Where tokenizer_config.json names a tokenizer class this decoding does not follow, that it reads a
    Wav2Vec2CTCTokenizer's vocab.json or a ParakeetTokenizer's / LasrTokenizer's tokenizer.json: said in the
    refusal, as the clause to add to it ("" where none is named)."""
    named = config.get("tokenizer_class")
    if not named or named == "Wav2Vec2CTCTokenizer":
        return ""
    return (f" (tokenizer_config.json names tokenizer_class {named}; the CTC answer step decodes with a "
            f"Wav2Vec2CTCTokenizer's vocab.json or the tokenizer.json of {' or '.join(PIECE_TOKENIZERS)} only)")


def _piece_params(folder: str | os.PathLike[str], config: dict[str, Any]) -> dict[str, Any]:
    """A ParakeetTokenizer's or LasrTokenizer's pieces from tokenizer.json (see the module docstring)."""
    named = config["tokenizer_class"]
    spec = _read_json(folder, "tokenizer.json")
    if not isinstance(spec, dict) or not isinstance(spec.get("model"), dict):
        raise ValueError(f"{folder}: tokenizer.json is missing or has no model; {named} keeps its vocabulary there "
                         "(save the checkpoint's tokenizer with save_pretrained)")
    decoder = _METASPACE if named == "LasrTokenizer" else spec.get("decoder") or {}
    if decoder.get("type") != "Metaspace":
        raise ValueError(f"{folder}: tokenizer.json's decoder is {decoder.get('type') or 'none'}; the CTC answer "
                         f"step decodes {named} pieces with the Metaspace decoder only")
    vocab = spec["model"].get("vocab") or []
    pieces = ({i: str(entry[0]) for i, entry in enumerate(vocab)} if isinstance(vocab, list)  # Unigram
              else {int(i): str(piece) for piece, i in vocab.items()})  # BPE, WordPiece: piece -> id
    added = {int(token["id"]): token for token in spec.get("added_tokens", [])}
    pieces.update({i: str(token["content"]) for i, token in added.items()})  # looked up before the model's
    pad = _content(config.get("pad_token"))
    return {
        "id_to_token": {str(i): piece for i, piece in sorted(pieces.items())},
        "pad_token": pad,
        "metaspace": {"replacement": str(decoder.get("replacement", "▁")),
                      "first": str(decoder.get("prepend_scheme", "always")) != "never"},
        "special_tokens": [str(t["content"]) for t in added.values() if t.get("special")],
        "skip_special_tokens": False,
    }


def _read_json(folder: str | os.PathLike[str], name: str) -> Any:
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _content(value: Any) -> str | None:
    """A token as saved: a string, or an AddedToken dict ({"content": ..., "__type": "AddedToken"})."""
    if isinstance(value, dict):
        return str(value["content"])
    return None if value is None else str(value)


def _merge_special_tokens_map(config: dict[str, Any], tokens_map: dict[str, Any]) -> dict[str, Any]:
    merged = dict(config)
    for key, value in tokens_map.items():
        if key == "extra_special_tokens" and isinstance(value, list):
            existing = list(merged.get("extra_special_tokens") or [])
            merged[key] = existing + [t for t in value if t not in existing]
        else:
            merged[key] = value
    return merged


def _added_tokens(folder: str | os.PathLike[str], config: dict[str, Any]) -> dict[int, str]:
    """Tokens added beyond vocab.json: the config's added_tokens_decoder, or the legacy added_tokens.json."""
    if "added_tokens_decoder" in config:
        return {int(i): str(_content(t)) for i, t in config["added_tokens_decoder"].items()}
    legacy = _read_json(folder, "added_tokens.json") or {}
    return {int(i): str(t) for t, i in legacy.items()}


def _special_tokens(config: dict[str, Any], named: dict[str, str | None], delimiter: Any) -> list[str]:
    """``all_special_tokens`` of the loaded tokenizer: named ones, extra ones, and other ``*_token`` strings."""
    found = [t for t in named.values() if t is not None]
    others = {key: value for key, value in config.items()
              if key.endswith("_token") and key not in _NAMED and isinstance(value, (str, dict))}
    if isinstance(delimiter, (str, dict)):  # Wav2Vec2CTCTokenizer passes it on to the base class in any case
        others["word_delimiter_token"] = delimiter
    found += [t for t in map(_content, others.values()) if t is not None]
    extra = config.get("extra_special_tokens")
    if extra is None:
        extra = config.get("additional_special_tokens")
    if isinstance(extra, dict):  # named model-specific tokens
        extra = list(extra.values())
    found += [t for t in map(_content, extra or []) if t is not None]
    return list(dict.fromkeys(found))


# --- serving time: logits -> text --------------------------------------------------------------------------

def answer(logits: npt.NDArray[Any], lengths: npt.NDArray[Any] | None, params: dict[str, Any]) -> list[str]:
    """One transcription per row of ``logits`` [rows, frames, vocab] (see the module docstring).

    ``lengths``: None (every frame counts), a frame count per row ([rows] or [rows, 1]), or a frame-level
    attention mask [rows, frames].
    """
    values = np.asarray(logits)
    if values.ndim != 3:
        raise ValueError(f"logits must be [rows, frames, vocab], got shape {values.shape}")
    rows, frames, vocab = values.shape
    counts = _frame_counts(lengths, rows, frames)
    table = _table(params, vocab)
    skip = bool(params.get("skip_special_tokens", False))
    # argmax takes the first of equal maxima, as torch.argmax does.
    ids = values.argmax(axis=-1).astype(np.int64)
    return [_text(ids[row, :counts[row]], table, params, skip) for row in range(rows)]


def _frame_counts(lengths: npt.NDArray[Any] | None, rows: int, frames: int) -> Ints:
    if lengths is None:
        return np.full(rows, frames, dtype=np.int64)
    given = np.asarray(lengths)
    if given.ndim == 2 and given.shape == (rows, frames):
        # A frame-level attention mask, right-padded. With frames == 1 it reads the same as counts of 0 or 1.
        counts: Ints = np.asarray(np.count_nonzero(given, axis=1), dtype=np.int64)
    elif given.size == rows:
        counts = np.asarray(given.reshape(rows), dtype=np.int64)
    else:
        raise ValueError(f"lengths must be [rows] frame counts or a [rows, frames] mask for {rows} rows of "
                         f"{frames} frames, got shape {given.shape}")
    if (counts < 0).any() or (counts > frames).any():
        raise ValueError(f"frame counts must lie in [0, {frames}], got {counts.tolist()}")
    return counts


def _table(params: dict[str, Any], vocab: int) -> _Table:
    if "metaspace" in params:
        return _piece_table(params, vocab)
    id_to_token = params["id_to_token"]
    unk = params.get("unk_token")
    delimiter = params["word_delimiter_token"]
    tokens = [str(id_to_token.get(str(i), "" if unk is None else unk)) for i in range(vocab)]
    first: dict[str, int] = {}
    group = np.array([first.setdefault(t, i) for i, t in enumerate(tokens)], dtype=np.int64)
    special = set(params.get("special_tokens", []))
    return _Table(
        shown=[params["replace_word_delimiter_char"] if t == delimiter else t for t in tokens],
        group=group,
        blank=np.array([t == params.get("pad_token") for t in tokens], dtype=bool),
        skipped=np.array([t in special and t != delimiter for t in tokens], dtype=bool),
    )


def _piece_table(params: dict[str, Any], vocab: int) -> _Table:
    """Pieces as they are (the Metaspace decoder needs to know the first); grouped by id; an id without a piece
    is dropped with the blank after grouping, as tokenizers' decode skips it."""
    pieces = [params["id_to_token"].get(str(i)) for i in range(vocab)]
    special = set(params.get("special_tokens", []))
    return _Table(
        shown=[p or "" for p in pieces],
        group=np.arange(vocab, dtype=np.int64),
        blank=np.array([p is None or p == params.get("pad_token") for p in pieces], dtype=bool),
        skipped=np.array([p in special for p in pieces], dtype=bool),
    )


def _metaspace(pieces: list[str], rule: dict[str, Any]) -> str:
    """tokenizers' Metaspace decoder: the replacement character becomes a space, and in the first piece
    (prepend_scheme other than "never") it is dropped."""
    mark = rule["replacement"]
    return "".join(p.replace(mark, "" if n == 0 and rule["first"] else " ") for n, p in enumerate(pieces))


def _text(ids: Ints, table: _Table, params: dict[str, Any], skip_special_tokens: bool) -> str:
    if skip_special_tokens:
        ids = ids[~table.skipped[ids]]
    groups = table.group[ids]
    first_of_run = np.ones(len(ids), dtype=bool)
    first_of_run[1:] = groups[1:] != groups[:-1]
    kept = ids[first_of_run]
    kept = kept[~table.blank[kept]]
    if "metaspace" in params:
        return _metaspace([table.shown[i] for i in kept], params["metaspace"])
    text = "".join(table.shown[i] for i in kept).strip()
    if params.get("do_lower_case"):
        text = text.lower()
    if params.get("clean_up_tokenization_spaces"):
        text = _clean_up(text)
    return text


def _clean_up(text: str) -> str:
    """PreTrainedTokenizerBase.clean_up_tokenization, in its order."""
    for before, after in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                          (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(before, after)
    return text
