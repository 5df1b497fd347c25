"""How far the candidate's answers are from the incumbent's on the same requests, per output name.

Numeric outputs: the share of requests with the same top label (argmax of every row's last axis, where that axis
has more than one value), the largest absolute difference of any value, and the mean cosine similarity of the rows
(the output vectors, e.g. embeddings). BYTES outputs (text answers): the share of equal answers, nothing else.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from deployment_spec.parsing.errors import UserError

from tritonsm.comparing.records import Record


@dataclasses.dataclass
class OutputAgreement:
    name: str
    kind: str = ""  # "FP32 [1, 5]" or "BYTES [1]": the incumbent's datatype and shape
    compared: int = 0  # pairs where both answers hold the output with the same shape
    differs: int = 0  # pairs where one answer lacks the output, or its shape or kind differs
    equal: int = 0  # identical values
    top_compared: int = 0  # numeric, last axis > 1
    same_top: int = 0
    max_abs_diff: Optional[float] = None
    cosine_sum: float = 0.0
    cosine_rows: int = 0

    def summary(self) -> dict[str, Any]:
        return {"kind": self.kind, "compared": self.compared, "shape_or_presence_differs": self.differs,
                "equal_share": _share(self.equal, self.compared),
                "same_top_label_share": _share(self.same_top, self.top_compared),
                "max_abs_diff": self.max_abs_diff,
                "mean_cosine": self.cosine_sum / self.cosine_rows if self.cosine_rows else None}


@dataclasses.dataclass(frozen=True)
class Agreement:
    outputs: dict[str, OutputAgreement]
    compared: int  # pairs with an answer on both sides
    with_error: int  # pairs where either side failed
    without_answer: int  # pairs where either capture holds no answer (capture mode Input)


def compare_answers(pairs: list[tuple[Record, Record]]) -> Agreement:
    outputs: dict[str, OutputAgreement] = {}
    compared = with_error = without_answer = 0
    for first, second in pairs:
        if first.failure() is not None or second.failure() is not None:
            with_error += 1
            continue
        if first.output is None or second.output is None:
            without_answer += 1
            continue
        compared += 1
        a, b = decode(first), decode(second)
        for name in [*a, *(n for n in b if n not in a)]:  # the answer's own order
            entry = outputs.setdefault(name, OutputAgreement(name))
            _compare(entry, a.get(name), b.get(name))
    return Agreement(outputs, compared, with_error, without_answer)


def decode(record: Record) -> dict[str, Any]:
    """The answer's outputs by name (numpy arrays; BYTES outputs hold bytes), JSON or binary+json."""
    from local_endpoint.client.payload import decode_response
    from local_endpoint.errors import InvokeError

    assert record.output is not None
    try:
        response = decode_response(record.output, record.output_type)
    except (InvokeError, ValueError) as error:
        raise UserError(f"{record.where}: the captured answer ({record.output_type or 'no content type'}) is not "
                        f"a KServe v2 inference response: {error}; tritonsm compare reads Triton's JSON and "
                        "binary+json answers") from None
    return {output.name: (output.datatype, output.array) for output in response.outputs}


def _compare(entry: OutputAgreement, first: Any, second: Any) -> None:
    import numpy as np

    if first is None or second is None:
        entry.differs += 1
        return
    (kind, a), (other_kind, b) = first, second
    entry.kind = entry.kind or f"{kind} {list(a.shape)}"
    text = kind == "BYTES"
    if a.shape != b.shape or text != (other_kind == "BYTES"):
        entry.differs += 1
        return
    entry.compared += 1
    entry.equal += bool(np.array_equal(a, b))
    if text or a.size == 0:
        return
    a, b = a.astype(np.float64), b.astype(np.float64)
    diff = float(np.max(np.abs(a - b)))
    entry.max_abs_diff = diff if entry.max_abs_diff is None else max(entry.max_abs_diff, diff)
    rows_a, rows_b = a.reshape(-1, a.shape[-1] if a.ndim else 1), b.reshape(-1, b.shape[-1] if b.ndim else 1)
    if rows_a.shape[1] > 1:
        entry.top_compared += 1
        entry.same_top += bool(np.array_equal(rows_a.argmax(axis=1), rows_b.argmax(axis=1)))
    for x, y in zip(rows_a, rows_b):
        entry.cosine_sum += _cosine(x, y)
        entry.cosine_rows += 1


def _cosine(x: Any, y: Any) -> float:
    import numpy as np

    norms = float(np.linalg.norm(x)) * float(np.linalg.norm(y))
    if norms == 0:  # a zero vector: alike only to another zero vector
        return 1.0 if not np.any(x) and not np.any(y) else 0.0
    return float(np.dot(x, y)) / norms


def _share(part: int, whole: int) -> Optional[float]:
    return part / whole if whole else None
