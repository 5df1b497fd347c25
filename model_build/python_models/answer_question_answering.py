"""Extractive question-answering answers from raw start/end logits: the post-processing of Hugging Face's
``pipeline("question-answering")``, in numpy and the standard library only.

Followed: transformers 5.23.0 no longer has that pipeline ("question-answering" is in ``REMOVED_TASKS`` of
``transformers/pipelines/__init__.py``). The last release with it, 4.57.6, was read instead:
``transformers/pipelines/question_answering.py`` (``preprocess``'s p_mask and CLS handling,
``select_starts_ends``, ``decode_spans``, ``postprocess``, ``get_indices``, ``get_answer``). 5.23.0 still ships
``select_starts_ends`` and ``decode_spans`` in ``transformers/pipelines/document_question_answering.py``, the
same but for one fix followed here: when the score matrix has no more cells than the candidates asked for, it
sorts them all instead of failing in ``argpartition``. Everything is rewritten here; nothing of transformers is
imported, so it runs inside a Triton Python-backend model.

``answer`` takes one window per (question, context) pair, encoded question first (right padding) with
``truncation="only_second"``; ``answer_windows`` takes all the windows of one context, as the pipeline's
tokenizer call with ``stride=doc_stride, return_overflowing_tokens=True`` cut it (overlapping windows, each with the
whole question): its postprocess draws candidates from each window in turn into one list (an answer found in two
windows adds its scores), keeps the smallest null score of all windows, and sorts once. ``offsets`` are
``Encoding.offsets`` (character offsets into the question for question tokens, into the whole context for context
tokens, also in a later window), ``sequence_ids`` ``Encoding.sequence_ids`` (-1 special/padding, 0 question, 1
context).

Optional keyword arguments:

* ``word_ids`` (``Encoding.word_ids``, word index within its own sequence, -1 for special/padding): needed for
  ``align_to_words`` (the default). The pipeline widens an answer to whole words with ``Encoding.token_to_word``
  and ``word_to_chars``; here a word's characters run from the first offset of its first token to the last
  offset of its last token in the context. Without ``word_ids`` answers keep to the token offsets.
* ``attention_mask``: lets padded rows be cut back to their real length. The pipeline scores an unpadded
  window; a padded one gives the same probabilities, but when fewer non-zero spans exist than candidates are
  drawn, numpy's choice among the zero-score spans can depend on the matrix size.

Where this differs from the pipeline, and why:

* Each row gives a list, also for one answer (the pipeline returns a bare dict when it has one answer).
* The CLS token, which the pipeline keeps selectable, is taken to be token 0 when that is a special token
  (the pipeline looks the ``cls_token_id`` up in ``input_ids``, which are not given here).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float32]
Flags = npt.NDArray[np.bool_]
Answer = dict[str, Any]

_MASKED_LOGIT = -10000.0  # what the pipeline writes over the logits of tokens that cannot be in an answer
_NO_NULL_SCORE = 1000000.0  # the pipeline's starting "minimum null score": large, so any real one is smaller
_CONTEXT = 1


class Window(NamedTuple):
    """One window of a context, cut to its real tokens: 1-D arrays of one length."""

    start_logits: npt.NDArray[Any]
    end_logits: npt.NDArray[Any]
    offsets: npt.NDArray[Any]  # [tokens, 2]
    sequence_ids: npt.NDArray[Any]
    word_ids: npt.NDArray[Any] | None


def window(start_logits: npt.NDArray[Any], end_logits: npt.NDArray[Any], offsets: npt.NDArray[Any],
           sequence_ids: npt.NDArray[Any], word_ids: npt.NDArray[Any] | None = None,
           attention_mask: npt.NDArray[Any] | None = None) -> Window:
    """One padded row of a batch as a Window, cut back to its attention mask's length (right padding)."""
    n = len(sequence_ids) if attention_mask is None else int(np.asarray(attention_mask).sum())
    return Window(np.asarray(start_logits[:n]), np.asarray(end_logits[:n]), np.asarray(offsets[:n]),
                  np.asarray(sequence_ids[:n]), None if word_ids is None else np.asarray(word_ids[:n]))


class _Span(NamedTuple):
    start: int  # token index of the first answer token
    end: int  # token index of the last answer token
    score: float


def answer(questions: list[str], contexts: list[str], start_logits: npt.NDArray[Any], end_logits: npt.NDArray[Any],
           offsets: npt.NDArray[Any], sequence_ids: npt.NDArray[Any], params: dict[str, Any],
           word_ids: npt.NDArray[Any] | None = None,
           attention_mask: npt.NDArray[Any] | None = None) -> list[list[Answer]]:
    """Per (question, context) row of one window each, the pipeline's answers, best first (see the module docstring).

    params: ``top_k`` (1), ``max_answer_len`` (15), ``handle_impossible_answer`` (False), ``align_to_words``
    (True); the defaults are the pipeline's. ``questions`` are not read: the question only steers the logits.
    """
    if len(questions) != len(contexts):
        raise ValueError("one question per context")
    return [answer_windows(context, [window(
        start_logits[row], end_logits[row], offsets[row], sequence_ids[row],
        None if word_ids is None else word_ids[row], None if attention_mask is None else attention_mask[row])],
        params) for row, context in enumerate(contexts)]


def answer_windows(context: str, windows: list[Window], params: dict[str, Any]) -> list[Answer]:
    """The pipeline's answers for one context from all its windows, best first (``answer``'s params)."""
    top_k = int(params.get("top_k", 1))
    max_answer_len = int(params.get("max_answer_len", 15))
    impossible = bool(params.get("handle_impossible_answer", False))
    align = bool(params.get("align_to_words", True))
    if top_k < 1 or max_answer_len < 1:
        raise ValueError("top_k and max_answer_len must be at least 1")
    # Some candidates may be merged or dropped once aligned to words, so the pipeline draws extra ones.
    draw = top_k * 2 + 10 if align else top_k
    null_score = _NO_NULL_SCORE
    answers: list[Answer] = []
    by_text: dict[str, Answer] = {}
    for part in windows:
        allowed = _answerable(part.sequence_ids)
        start_p, end_p, part_null = _probabilities(part.start_logits, part.end_logits, allowed)
        null_score = min(null_score, part_null)
        spans = _best_spans(start_p, end_p, allowed, draw, max_answer_len)
        _add_answers(context, spans, part, align, answers, by_text)
    if impossible:
        answers.append({"score": null_score, "start": 0, "end": 0, "answer": ""})
    answers.sort(key=lambda a: a["score"], reverse=True)  # stable, as the pipeline's sorted()
    return answers[:top_k]


def _answerable(seq_ids: npt.NDArray[Any]) -> Flags:
    """Tokens that may start or end an answer: the context, and the CLS token (some models point at it for
    "no answer")."""
    allowed: Flags = seq_ids == _CONTEXT
    if len(seq_ids) and seq_ids[0] < 0:
        allowed[0] = True
    return allowed


def _probabilities(start: npt.NDArray[Any], end: npt.NDArray[Any], allowed: Flags) -> tuple[Floats, Floats, float]:
    """Softmax over the answerable tokens; the null score (CLS start x CLS end) is read before CLS is zeroed,
    so that CLS itself never wins a span."""
    start_p = _masked_softmax(start, allowed)
    end_p = _masked_softmax(end, allowed)
    null_score = min(_NO_NULL_SCORE, float(start_p[0] * end_p[0]))
    start_p[0] = end_p[0] = 0.0
    return start_p, end_p, null_score


def _masked_softmax(logits: npt.NDArray[Any], allowed: Flags) -> Floats:
    masked = np.where(allowed, np.asarray(logits, dtype=np.float32), np.float32(_MASKED_LOGIT))
    shifted = np.exp(masked - masked.max())
    return np.asarray(shifted / shifted.sum(), dtype=np.float32)


def _best_spans(start_p: Floats, end_p: Floats, allowed: Flags, draw: int,
                max_answer_len: int) -> list[_Span]:
    """The `draw` best (start, end) token pairs by P(start) * P(end), with start <= end < start +
    max_answer_len, then those whose both ends may be in an answer."""
    # Cells below the diagonal (end before start) or beyond the length band are zeroed, not removed.
    scores = np.tril(np.triu(np.outer(start_p, end_p)), max_answer_len - 1)
    flat = scores.ravel()
    chosen = _top_indices(flat, draw)
    starts, ends = np.unravel_index(chosen, scores.shape)
    return [_Span(int(s), int(e), float(scores[s, e])) for s, e in zip(starts, ends) if allowed[s] and allowed[e]]


def _top_indices(flat: Floats, k: int) -> npt.NDArray[np.intp]:
    """Indices of the k largest values, largest first. The same numpy calls as the pipeline, so that ties (the
    many zero cells) resolve the same way."""
    if k == 1:
        return np.array([np.argmax(flat)])
    if len(flat) <= k:
        return np.argsort(-flat)
    part = np.argpartition(-flat, k)[:k]
    return part[np.argsort(-flat[part])]


def _add_answers(context: str, spans: list[_Span], part: Window, align: bool, answers: list[Answer],
                 by_text: dict[str, Answer]) -> None:
    """Spans to character answers, appended to ``answers``; a span giving the text of an answer already there (any
    case, from any window) adds its score to it."""
    for span in spans:
        start, end = _char_span(span, part.offsets, part.sequence_ids, part.word_ids, align)
        text = context[start:end]
        same = by_text.get(text.lower())
        if same is not None:
            same["score"] += span.score
            continue
        entry = {"score": span.score, "start": start, "end": end, "answer": text}
        by_text[text.lower()] = entry
        answers.append(entry)


def _char_span(span: _Span, offsets: npt.NDArray[Any], seq_ids: npt.NDArray[Any], words: npt.NDArray[Any] | None,
               align: bool) -> tuple[int, int]:
    """Character span of a token span; with align, widened to the words that hold its first and last token.
    When either end is no word (CLS), both ends keep to token offsets, as the pipeline's fallback does."""
    if align and words is not None and words[span.start] >= 0 and words[span.end] >= 0:
        first = _word_tokens(words, seq_ids, int(words[span.start]))
        last = _word_tokens(words, seq_ids, int(words[span.end]))
        return int(offsets[first[0]][0]), int(offsets[last[-1]][1])
    return int(offsets[span.start][0]), int(offsets[span.end][1])


def _word_tokens(words: npt.NDArray[Any], seq_ids: npt.NDArray[Any], word: int) -> npt.NDArray[np.intp]:
    """Token indices of one context word (word ids count from 0 in each sequence, so the context's only)."""
    return np.flatnonzero((words == word) & (seq_ids == _CONTEXT))
