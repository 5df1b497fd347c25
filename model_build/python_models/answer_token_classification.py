"""Token-classification answers from raw logits: the post-processing of Hugging Face's
``pipeline("token-classification", aggregation_strategy=...)``, in numpy and the standard library only.

Followed: ``transformers/pipelines/token_classification.py`` of transformers 5.23.0
(``TokenClassificationPipeline.postprocess``, ``gather_pre_entities``, ``aggregate``, ``aggregate_word(s)``,
``group_entities``, ``group_sub_entities``, ``get_tag``), rewritten here; nothing of transformers is imported,
so it runs inside a Triton Python-backend model.

Inputs are what the model and a fast tokenizer give for one window per text (no stride chunks): ``logits``
[batch, seq, labels], ``offsets`` [batch, seq, 2] (``Encoding.offsets``), ``word_ids`` [batch, seq]
(``Encoding.word_ids``, -1 for special and padding tokens).

Where this differs from the pipeline, and why:

* ``word`` is ``text[start:end]``. The pipeline decodes the tokens with the tokenizer
  (``convert_tokens_to_string``; with "none", the bare token string such as "##ing"), which for an uncased
  WordPiece model gives the lower-cased, accent-stripped form ("new york" for "New York"); without the
  tokenizer the original slice is the faithful choice. ``entity_group``/``entity``, ``start``, ``end`` and
  ``index`` are the pipeline's.
* ``score`` is a Python float (the pipeline leaves a numpy float32).
* The pipeline knows each token's string; here it is derived. Its subword test for a word-aware model
  (one whose ``tokenizer.model.continuing_subword_prefix`` is set, e.g. WordPiece's ``"##"``) is "the token
  string and the text under its offsets differ in length". The token string is rebuilt as the normalized text
  under the offsets, plus the prefix when the token continues the previous token's word (same word id). Give
  ``params["normalizer"]`` (the ``"normalizer"`` object of tokenizer.json) for texts whose normalization changes
  lengths (decomposed accents, zero-width characters); without it lengths are taken as unchanged, which is exact
  for most text. Give ``input_ids`` with ``params["unk_token_id"]`` so that unknown tokens are never subwords,
  as in the pipeline, also where the normalizer shortened their text (an [UNK] over "😀\u200b😀": the
  zero-width space is dropped).
* Tokenizers without a continuing-subword prefix (byte-level BPE, Unigram) use the pipeline's fallback:
  a token is a subword unless it starts the text or has a space just before or at its start. Set
  ``params["continuing_subword_prefix"]`` to ``None`` for them; it defaults to ``"##"``.
"""
from __future__ import annotations

import unicodedata
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float32]
Entity = dict[str, Any]

_WORD_STRATEGIES = ("first", "average", "max")
_STRATEGIES = ("none", "simple") + _WORD_STRATEGIES


class _Token(NamedTuple):
    position: int  # in the model's sequence (the pipeline's "index")
    start: int
    end: int
    scores: Floats  # softmax over the labels
    is_subword: bool


class _Scored(NamedTuple):
    """One token or one word with its chosen label: what the grouping step consumes."""

    label: str
    score: float
    start: int
    end: int
    position: int


def answer(texts: list[str], logits: npt.NDArray[Any], offsets: npt.NDArray[Any], word_ids: npt.NDArray[Any],
           params: dict[str, Any], input_ids: npt.NDArray[Any] | None = None) -> list[list[Entity]]:
    """Per text, the list the token-classification pipeline returns (see the module docstring).

    params: ``id2label`` ({int: str}), ``aggregation_strategy`` ("none", "simple", "first", "average", "max";
    default "none" as in the pipeline), ``ignore_labels`` (default ["O"]); optional ``continuing_subword_prefix``,
    ``normalizer``, ``unk_token_id`` (used with ``input_ids``).
    """
    id2label = {int(k): str(v) for k, v in params["id2label"].items()}
    strategy = str(params.get("aggregation_strategy", "none")).lower()
    if strategy not in _STRATEGIES:
        raise ValueError(f"aggregation_strategy {strategy!r} is not one of {_STRATEGIES}")
    ignore = list(params.get("ignore_labels", ["O"]))
    steps = _normalizer_steps(params.get("normalizer"))
    prefix = params.get("continuing_subword_prefix", "##")
    unk_id = params.get("unk_token_id")
    out = []
    for row, text in enumerate(texts):
        unknown = _unknown_mask(input_ids, row, unk_id, word_ids.shape[1])
        tokens = _gather(text, logits[row], offsets[row], word_ids[row], unknown, prefix, steps)
        out.append(_entities(text, tokens, strategy, id2label, ignore))
    return out


def _unknown_mask(input_ids: npt.NDArray[Any] | None, row: int, unk_id: Any, seq: int) -> npt.NDArray[np.bool_]:
    if input_ids is None or unk_id is None:
        return np.zeros(seq, dtype=bool)
    return np.asarray(np.asarray(input_ids[row]) == int(unk_id), dtype=bool)


def _softmax(logits: npt.NDArray[Any]) -> Floats:
    # Subtracting the row maximum keeps exp() finite; float32 as the pipeline computes it.
    values = np.asarray(logits, dtype=np.float32)
    shifted = np.exp(values - values.max(axis=-1, keepdims=True))
    return np.asarray(shifted / shifted.sum(axis=-1, keepdims=True), dtype=np.float32)


def _gather(text: str, logits: npt.NDArray[Any], offsets: npt.NDArray[Any], word_ids: npt.NDArray[Any],
            unknown: npt.NDArray[np.bool_], prefix: str | None, steps: list[dict[str, Any]]) -> list[_Token]:
    """The pipeline's pre-entities: every non-special token with its scores, span and subword flag."""
    scores = _softmax(logits)
    lengths = _normalized_prefix_sums(text, steps) if prefix else None
    tokens = []
    previous_word = -1
    for idx in range(len(word_ids)):
        word = int(word_ids[idx])
        if word < 0:  # special or padding token: the pipeline's special_tokens_mask
            continue
        start, end = int(offsets[idx][0]), int(offsets[idx][1])
        if unknown[idx]:
            subword = False  # the pipeline never glues an unknown token to its neighbour
        elif lengths is not None and prefix:
            continues = word == previous_word
            subword = _differs_in_length(lengths, start, end, len(prefix) if continues else 0)
        else:
            subword = _no_space_before(text, start)
        tokens.append(_Token(idx, start, end, scores[idx], subword))
        previous_word = word
    return tokens


def _differs_in_length(lengths: npt.NDArray[np.int64], start: int, end: int, prefix_len: int) -> bool:
    # Word-aware rule: a token string longer or shorter than its text is a continuation ("##ing" vs "ing").
    # Offsets are clipped to the text the way slicing text[start:end] clips them.
    start, end = (min(max(i, 0), len(lengths) - 1) for i in (start, end))
    end = max(start, end)
    token_len = int(lengths[end] - lengths[start]) + prefix_len
    return token_len != end - start


def _no_space_before(text: str, start: int) -> bool:
    # Fallback rule for tokenizers that do not mark continuations: glued to what precedes it.
    return start > 0 and " " not in text[start - 1:start + 1]


# --- the token string's length, from the normalizer of tokenizer.json --------------------------------------

def _normalizer_steps(normalizer: Any) -> list[dict[str, Any]]:
    """The normalizer as a flat list of steps; a Sequence is unrolled, nothing given is no step."""
    if not isinstance(normalizer, dict):
        return []
    if normalizer.get("type") == "Sequence":
        return [s for sub in normalizer.get("normalizers", []) for s in _normalizer_steps(sub)]
    return [normalizer]


def _normalized_prefix_sums(text: str, steps: list[dict[str, Any]]) -> npt.NDArray[np.int64]:
    """lengths[i] = length of the normalized text[:i]; normalizations here work char by char, so they add up."""
    cache: dict[str, int] = {}
    per_char = np.zeros(len(text) + 1, dtype=np.int64)
    for i, char in enumerate(text):
        if char not in cache:
            cache[char] = len(_normalize_char(char, steps))
        per_char[i + 1] = cache[char]
    return np.cumsum(per_char, dtype=np.int64)


def _normalize_char(char: str, steps: list[dict[str, Any]]) -> str:
    out = char
    for step in steps:
        out = _apply_step(out, step)
    return out


def _apply_step(chars: str, step: dict[str, Any]) -> str:
    kind = step.get("type")
    if kind == "BertNormalizer":
        return _bert_normalize(chars, step)
    if kind == "Lowercase":
        return chars.lower()
    if kind in ("NFD", "NFKD"):
        return unicodedata.normalize(kind, chars)
    if kind == "StripAccents":
        return _strip_marks(chars, ("Mn", "Mc", "Me"))  # every combining mark, unlike BertNormalizer
    # Other normalizers (NFC, Replace, Precompiled, ...) are taken as keeping lengths.
    return chars


def _bert_normalize(chars: str, step: dict[str, Any]) -> str:
    # tokenizers' BertNormalizer: clean text, (spaces around CJK: split off later, no token holds them),
    # strip accents (defaults to the lowercase setting), lowercase.
    if step.get("clean_text", True):
        chars = "".join(c for c in chars if not _removed_by_clean_text(c))
    lowercase = bool(step.get("lowercase", True))
    strip = step.get("strip_accents")
    if lowercase if strip is None else strip:
        chars = _strip_marks(unicodedata.normalize("NFD", chars), ("Mn",))
    return chars.lower() if lowercase else chars


def _removed_by_clean_text(char: str) -> bool:
    if char in "\t\n\r":
        return False  # control characters that BertNormalizer keeps (as spaces)
    return char in "\x00\ufffd" or unicodedata.category(char) in ("Cc", "Cf", "Cn", "Co", "Cs")


def _strip_marks(chars: str, categories: tuple[str, ...]) -> str:
    return "".join(c for c in chars if unicodedata.category(c) not in categories)


# --- labels per token or word, then entity groups -----------------------------------------------------------

def _entities(text: str, tokens: list[_Token], strategy: str, id2label: dict[int, str],
              ignore: list[str]) -> list[Entity]:
    if strategy in _WORD_STRATEGIES:
        scored = [_label_word(word, strategy, id2label) for word in _words(tokens)]
    else:
        scored = [_label_token(token, id2label) for token in tokens]
    if strategy == "none":
        return [_token_entity(text, s) for s in scored if s.label not in ignore]
    groups = [_group_entity(text, group) for group in _adjacent_groups(scored)]
    return [g for g in groups if g["entity_group"] not in ignore]


def _label_token(token: _Token, id2label: dict[int, str]) -> _Scored:
    best = int(token.scores.argmax())
    return _Scored(id2label[best], float(token.scores[best]), token.start, token.end, token.position)


def _words(tokens: list[_Token]) -> list[list[_Token]]:
    """Tokens split into words: a subword joins the word before it; the first token always opens one."""
    words: list[list[_Token]] = []
    for token in tokens:
        if words and token.is_subword:
            words[-1].append(token)
        else:
            words.append([token])
    return words


def _label_word(word: list[_Token], strategy: str, id2label: dict[int, str]) -> _Scored:
    if strategy == "first":
        scores = word[0].scores
    elif strategy == "max":
        # The token whose best score is highest; the earliest on a tie, as max() keeps the first.
        scores = word[int(np.argmax([t.scores.max() for t in word]))].scores
    else:  # average
        scores = np.nanmean(np.stack([t.scores for t in word]), axis=0)
    best = int(scores.argmax())
    return _Scored(id2label[best], float(scores[best]), word[0].start, word[-1].end, word[0].position)


def _tag(label: str) -> tuple[str, str]:
    """(B or I, tag): labels without a B-/I- prefix count as continuations of their own tag."""
    if label.startswith("B-") or label.startswith("I-"):
        return label[0], label[2:]
    return "I", label


def _adjacent_groups(scored: list[_Scored]) -> list[list[_Scored]]:
    """Runs of neighbours with the same tag; a B- label always opens a new run."""
    groups: list[list[_Scored]] = []
    for item in scored:
        bi, tag = _tag(item.label)
        if groups and bi != "B" and tag == _tag(groups[-1][-1].label)[1]:
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups


def _group_entity(text: str, group: list[_Scored]) -> Entity:
    start, end = group[0].start, group[-1].end
    return {
        # The group is named after its first member, minus everything up to the first "-".
        "entity_group": group[0].label.split("-", 1)[-1],
        "score": float(np.nanmean(np.array([s.score for s in group], dtype=np.float32))),
        "word": text[start:end],
        "start": start,
        "end": end,
    }


def _token_entity(text: str, item: _Scored) -> Entity:
    return {"entity": item.label, "score": item.score, "index": item.position, "word": text[item.start:item.end],
            "start": item.start, "end": item.end}
