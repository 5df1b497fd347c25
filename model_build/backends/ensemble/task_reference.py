"""What a task's ensemble is verified on and against: raw inputs, and the answers of the library users trust.

The reference for each task is what its users already run: ``transformers.pipeline`` of the task (5.23)
or sentence-transformers' ``SentenceTransformer.encode``, on the same raw inputs, cut at the same
sequence length. transformers 5 removed the question-answering pipeline (``REMOVED_TASKS`` in
``transformers/pipelines/__init__.py``, 5.23.0): its reference is the checkpoint's own tokenizer and eager
model with the span rules of the last pipeline that had them (4.57.6; the answer step's
``answer_question_answering.py``, tested against that pipeline's recorded answers). Before any answer, the
tokenizer step's tokens are compared with transformers' own tokenizer call, which the answers alone may not
show (a tiny or robust model can answer alike on other tokens). ``compare`` returns the worst difference and
the problems, in words a build log can show.
"""
from __future__ import annotations

import dataclasses
import math
import pathlib
from typing import Any, Callable, Optional, Sequence

from deployment_spec.sections.tasks import TaskKind, Task

# Raw text a deployed model meets: accents, emoji, CJK, odd spacing, one character, and a text long
# enough to be cut at any sequence length the spec allows (8192 tokens).
TEXTS = (
    "A fine film, truly moving.",
    "Crème brûlée à la carte: naïve café, façade, Ångström.",
    "I love it 😍🔥 so much!!! 👍🏽",
    "東京は雨です。今日はとても寒いですね。北京欢迎你",
    "x",
    "Hello   WORLD\tspaced\nlines and UPPER case, numbers 3.14159 and 2,048.",
    "Angela Merkel met Emmanuel Macron in Paris on Monday. " * 3,
    " ".join(f"word{i % 97} and more" for i in range(3000)),
)
PAIRS = (
    ("Who met Macron?", "Angela Merkel met Emmanuel Macron in Paris on Monday."),
    ("Where is the café?", "The naïve café sits by the façade in Zürich, near the lake."),
    ("What is the weather?", "東京は雨です。 The weather in Tokyo is rainy and cold today 🌧️."),
    ("How many?", "There were 2,048 people and 3 dogs 🐕 at the event."),
)
# Question answering's overlapping windows (the pipeline's doc_stride): a short question (a tiny tokenizer may spell
# it out piece by piece, and every window holds it) over a context with an answer in every window.
LONG_QUESTION = "Who won?"
MOST_WINDOWS = 4


def long_context(seq: int) -> str:
    """Some 5 x ``seq`` tokens of English (about 20 a sentence): more than the check needs, which ``long_row`` cuts."""
    return " ".join(f"In year {1900 + i} the prize went to person {i} from city {i % 13}, who was born in Zürich."
                    for i in range(max(4, seq // 4)))


def long_row(seq: int, windows_of: Callable[[str, str], Optional[int]]) -> Optional[Row]:
    """The longest start of ``long_context`` that a tokenizer cuts into at most MOST_WINDOWS windows
    (``windows_of(question, context)``: how many, None where the tokenizer refuses the question); None where it
    refuses it (a question that leaves a window no room beyond the stride)."""
    words = long_context(seq).split(" ")
    step = max(4, len(words) // 64)
    found = None
    for n in range(step, len(words) + step, step):
        context = " ".join(words[:n])
        count = windows_of(LONG_QUESTION, context)
        if count is None or count > MOST_WINDOWS:
            break
        found = Row(LONG_QUESTION, context)
    return found
EMBEDDING_COSINE = 0.9999


@dataclasses.dataclass(frozen=True)
class Row:
    text: str
    pair: Optional[str] = None


def rows(task: Task, seq: int, windows_of: Optional[Callable[[str, str], Optional[int]]] = None) -> list[Row]:
    """The raw inputs a task is verified on; question answering's include ``long_row`` where ``windows_of`` is
    given and the tokenizer takes its question."""
    if task.kind is TaskKind.QUESTION_ANSWERING:
        long = long_row(seq, windows_of) if windows_of is not None else None
        return [Row(q, c) for q, c in PAIRS] + ([long] if long is not None else [])
    if task.takes_pair():
        return [Row(a, b) for a, b in PAIRS] + [Row(TEXTS[1], TEXTS[3]), Row(TEXTS[7], TEXTS[2])]
    return [Row(t) for t in TEXTS]


def reference(task: Task, folder: pathlib.Path, seq: int, inputs: Sequence[Row]) -> tuple[str, list[Any]]:
    """(what answered, its answer per row)."""
    import transformers

    if task.kind is TaskKind.SENTENCE_EMBEDDING:
        import sentence_transformers

        from model_build.recipes import checkpoint_text

        encoder = checkpoint_text.sentence_transformer(folder)
        encoder.max_seq_length = seq
        vectors = encoder.encode([r.text for r in inputs], batch_size=32, convert_to_numpy=True)
        return f"sentence-transformers {sentence_transformers.__version__} SentenceTransformer.encode", list(vectors)
    where = f"transformers {transformers.__version__} pipeline('{task.kind.value}')"
    pipe = transformers.pipeline(task.kind.value, model=str(folder), tokenizer=str(folder), device="cpu")
    if task.kind is TaskKind.TEXT_CLASSIFICATION:
        given = [{"text": r.text, "text_pair": r.pair} if r.pair is not None else r.text for r in inputs]
        return where, [list(a) for a in pipe(given, top_k=reference_top_k(task), truncation=True, max_length=seq)]
    if task.kind is TaskKind.TOKEN_CLASSIFICATION:
        pipe.tokenizer.model_max_length = seq  # the pipeline cuts at the tokenizer's limit
        return where, [list(pipe(r.text, aggregation_strategy=task.aggregation.value)) for r in inputs]
    raise AssertionError(f"no pipeline for {task.kind.value}")  # reference() sends question answering elsewhere


def token_call(task: Task, tokenizer: Any, row: Row, seq: int) -> dict[str, list[int]]:
    """What transformers' pipeline of the task passes to the tokenizer for one row (QA: the context is cut)."""
    truncation = "only_second" if task.kind is TaskKind.QUESTION_ANSWERING else True
    return dict(tokenizer(row.text, row.pair, truncation=truncation, max_length=seq))


def token_problems(task: Task, folder: pathlib.Path, seq: int, inputs: Sequence[Row],
                   tokens: dict[str, Any]) -> dict[int, str]:
    """Rows whose tokens (ids, and type ids where the model takes them) differ from transformers' own call."""
    from model_build.recipes import checkpoint_text

    tokenizer = checkpoint_text.tokenizer(folder)
    out = {}
    for index, row in enumerate(inputs):
        want = token_call(task, tokenizer, row, seq)
        real = tokens["attention_mask"][index] == 1
        for name in ("input_ids", "token_type_ids"):
            if name not in want:
                continue
            ours = [int(v) for v in tokens[name][index][real]]
            if ours != list(want[name]):
                at = next((i for i, (a, b) in enumerate(zip(ours, want[name])) if a != b), min(len(ours), len(want[name])))
                out[index] = (f"the tokenizer step's {name} differ from transformers' tokenizer at token {at} "
                              f"({len(ours)} tokens, transformers {len(want[name])})")
                break
    return out


def qa_reference(folder: pathlib.Path, seq: int, stride: int, inputs: Sequence[Row], spans: Any,
                 params: dict[str, Any]) -> tuple[str, list[Any]]:
    """Question answering without its pipeline: transformers' tokenizer cutting each context into the pipeline's
    overlapping windows (``stride`` > 0; else its first window only), the eager model on each window alone, and
    the span rules of 4.57.6 (``spans``: answer_question_answering)."""
    import numpy as np
    import torch
    import transformers

    from model_build.recipes import checkpoint_text

    tokenizer = checkpoint_text.tokenizer(folder)
    net = transformers.AutoModelForQuestionAnswering.from_pretrained(folder, local_files_only=True).eval()
    column = lambda values: np.array([-1 if v is None else v for v in values], dtype=np.int64)  # noqa: E731
    answers = []
    for row in inputs:
        encoded = tokenizer(row.text, row.pair, truncation="only_second", max_length=seq, stride=stride,
                            return_overflowing_tokens=stride > 0)
        windows = []
        for index, enc in enumerate(encoded.encodings):
            tensors = {k: torch.tensor([encoded[k][index]]) for k in ("input_ids", "attention_mask", "token_type_ids")
                       if k in encoded}
            with torch.no_grad():
                logits = net(**tensors)
            windows.append(spans.window(logits.start_logits[0].numpy(), logits.end_logits[0].numpy(),
                                        np.array(enc.offsets, dtype=np.int64), column(enc.sequence_ids),
                                        column(enc.word_ids)))
        answers.append(spans.answer_windows(row.pair, windows, params))
    return (f"transformers {transformers.__version__} tokenizer and eager model with pipeline('question-answering') "
            "4.57.6's span rules (transformers 5 has no such pipeline)"), answers


# More labels than any classifier has: the classification pipelines answer every label then (transformers 5.23.0's
# image- and audio-classification pipelines cut top_k to config.num_labels, text-classification slices its list).
EVERY_LABEL = 1 << 30


def reference_top_k(task: Task) -> int:
    """The labels to ask a classification pipeline for: all of them, so that equal scores at the last place shown
    (a saturated softmax gives several 0.0; a tiny random model may give every label the same score), listed in
    any order, are told from another answer: the label shown in the pipeline's stead is known with its score."""
    return EVERY_LABEL


def compare(task: Task, ours: Sequence[Any], theirs: Sequence[Any], atol: float,
            tokens: Optional[dict[int, str]] = None) -> tuple[float, list[str]]:
    """(worst difference: score error, or 1 - cosine for embeddings; problems, one per row that differs, its
    tokens' problem first). A classification reference may hold one label more than the task shows
    (``reference_top_k``)."""
    worst, problems = 0.0, []
    for index, (got, want) in enumerate(zip(ours, theirs)):
        row = _ROW[task.kind]
        # NaN compares false with everything: a NaN score or embedding would pass every test below unnoticed.
        if _non_finite(got):
            error, problem = 1.0, "it holds NaN or infinite values"
        elif row is _labels:
            error, problem = _labels(got, want[:task.top_k], atol, scores=want)
        else:
            error, problem = row(got, want, atol)
        worst = max(worst, error)
        problem = (tokens or {}).get(index) or problem
        if problem:
            problems.append(f"row {index}: {problem}")
    return worst, problems


def _non_finite(value: Any) -> bool:
    """Any float in an answer (a number, a list, a dict's values, an array) that is NaN or infinite."""
    if isinstance(value, dict):
        return any(_non_finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_non_finite(v) for v in value)
    if hasattr(value, "dtype") and getattr(value.dtype, "kind", "") == "f":
        import numpy as np

        return not bool(np.isfinite(value).all())
    return isinstance(value, float) and not math.isfinite(value)


def _embedding(got: Any, want: Any, atol: float) -> tuple[float, str]:
    dot = sum(float(a) * float(b) for a, b in zip(got, want))
    ours, theirs = (math.sqrt(sum(float(v) ** 2 for v in vector)) for vector in (got, want))
    if not ours or not theirs:  # a zero vector has no direction: two of them are the same answer, not cosine 0
        if not ours and not theirs:
            return 0.0, ""
        return 1.0, ("the embedding is all zeros, the reference's is not" if not ours else
                     "the reference's embedding is all zeros, this one is not")
    cosine = dot / (ours * theirs)
    problem = f"cosine {cosine:.6f} < {EMBEDDING_COSINE}" if cosine < EMBEDDING_COSINE else ""
    return 1.0 - cosine, problem


def _labels(got: Any, want: Any, atol: float, scores: Any = None) -> tuple[float, str]:
    """Same labels in the same order (a swap of two scores closer than atol is no difference, also with the label
    past the last one shown, from ``scores``), scores within atol."""
    by_label = {w["label"]: w["score"] for w in (scores if scores is not None else want)}
    error = max((abs(g["score"] - by_label.get(g["label"], -1.0)) for g in got), default=0.0)
    for position, (g, w) in enumerate(zip(got, want)):
        if g["label"] != w["label"] and abs(by_label.get(g["label"], -1.0) - w["score"]) > atol:
            return error, f"label {position + 1} is {g['label']!r}, the pipeline's {w['label']!r}"
    if len(got) != len(want):
        return error, f"{len(got)} labels, the pipeline {len(want)}"
    return error, f"score off by {error:.3g} (atol {atol:g})" if error > atol else ""


BOX_PIXELS = 1  # a box corner may move by one pixel: the pipeline truncates float32 corners to ints


def _detections(got: Any, want: Any, atol: float) -> tuple[float, str]:
    """The same detections in the same order: labels, scores within atol, box corners within BOX_PIXELS."""
    if len(got) != len(want):
        return 1.0, f"{len(got)} detections, the pipeline {len(want)}"
    error = max((abs(float(g["score"]) - float(w["score"])) for g, w in zip(got, want)), default=0.0)
    for index, (g, w) in enumerate(zip(got, want)):
        moved = max(abs(int(g["box"][k]) - int(w["box"][k])) for k in ("xmin", "ymin", "xmax", "ymax"))
        if g["label"] != w["label"] or moved > BOX_PIXELS:
            return error, f"detection {index} is {g['label']!r} at {g['box']}, the pipeline's {w['label']!r} at {w['box']}"
    return error, f"score off by {error:.3g} (atol {atol:g})" if error > atol else ""


def _same_text(got: Any, want: Any, atol: float) -> tuple[float, str]:
    """A transcript: the same text, character for character (1.0 counts one that differs)."""
    return (0.0, "") if got == want else (1.0, f"text {got!r}, the pipeline's {want!r}")


def _spans(key: str, fields: tuple[str, ...]):
    def check(got: Any, want: Any, atol: float) -> tuple[float, str]:
        if len(got) != len(want):
            return 1.0, f"{len(got)} {key}, the pipeline {len(want)}: {_brief(got, fields)} vs {_brief(want, fields)}"
        error = max((abs(float(g["score"]) - float(w["score"])) for g, w in zip(got, want)), default=0.0)
        for g, w in zip(got, want):
            if any(g.get(f) != w.get(f) for f in fields):
                return error, f"{_brief([g], fields)} where the pipeline has {_brief([w], fields)}"
        return error, f"score off by {error:.3g} (atol {atol:g})" if error > atol else ""
    return check


def _brief(items: Any, fields: tuple[str, ...]) -> str:
    return "[" + ", ".join("(" + ", ".join(repr(i.get(f)) for f in fields) + ")" for i in items) + "]"


def entity_label(entity: dict[str, Any]) -> str:
    return entity.get("entity_group", entity.get("entity", ""))


_ROW = {
    TaskKind.SENTENCE_EMBEDDING: _embedding,
    TaskKind.TEXT_CLASSIFICATION: _labels,
    TaskKind.IMAGE_CLASSIFICATION: _labels,
    TaskKind.AUDIO_CLASSIFICATION: _labels,
    TaskKind.OBJECT_DETECTION: _detections,
    TaskKind.IMAGE_EMBEDDING: _embedding,
    TaskKind.SPEECH_RECOGNITION: _same_text,
    TaskKind.TOKEN_CLASSIFICATION: _spans("entities", ("entity_group", "entity", "start", "end")),
    TaskKind.QUESTION_ANSWERING: _spans("answers", ("answer", "start", "end")),
}
