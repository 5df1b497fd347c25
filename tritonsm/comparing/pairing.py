"""The same request as each variant saw it: pairs of an incumbent's and a candidate's record.

The local server writes a shadow's copy with its production record's ``eventId``. Whether SageMaker's shadow
records share it is not documented (developer guide, "Shadow tests", "Capture data from real-time endpoint"), so
records left over are paired by a byte-identical request whose ``inferenceTime`` is nearest, within a tolerance.
Weighted A/B variants each serve their own requests: only a repeated request pairs there.
"""
from __future__ import annotations

import dataclasses

from tritonsm.comparing.records import Record


@dataclasses.dataclass(frozen=True)
class Pairing:
    pairs: list[tuple[Record, Record]]  # (incumbent's, candidate's)
    by_event_id: int
    by_input: int
    unpaired_incumbent: int
    unpaired_candidate: int


def pair(incumbent: list[Record], candidate: list[Record], tolerance_s: float) -> Pairing:
    by_id: dict[str, int] = {}
    for index, record in enumerate(candidate):
        by_id.setdefault(record.event_id, index)
    taken: set[int] = set()
    pairs: list[tuple[Record, Record]] = []
    left: list[Record] = []
    for record in incumbent:
        match = by_id.get(record.event_id)
        if match is None or match in taken:
            left.append(record)
        else:
            taken.add(match)
            pairs.append((record, candidate[match]))
    by_event_id = len(pairs)
    pairs += _by_input(left, [(i, r) for i, r in enumerate(candidate) if i not in taken], tolerance_s, taken)
    return Pairing(pairs, by_event_id, len(pairs) - by_event_id, len(incumbent) - len(pairs),
                   len(candidate) - len(pairs))


def _by_input(incumbent: list[Record], candidate: list[tuple[int, Record]], tolerance_s: float,
              taken: set[int]) -> list[tuple[Record, Record]]:
    """Same request bytes, nearest time first (greedy over every close pair, so each record pairs at most once)."""
    groups: dict[bytes, list[tuple[int, Record]]] = {}
    for index, record in candidate:
        if record.input is not None:
            groups.setdefault(record.input, []).append((index, record))
    close = []
    for position, record in enumerate(incumbent):
        for index, other in groups.get(record.input, []) if record.input is not None else []:
            gap = abs((other.time - record.time).total_seconds())
            if gap <= tolerance_s:
                close.append((gap, position, index))
    records = dict(candidate)
    used: set[int] = set()
    found = []
    for _, position, index in sorted(close):
        if position not in used and index not in taken:
            used.add(position)
            taken.add(index)
            found.append((position, incumbent[position], records[index]))
    return [(a, b) for _, a, b in sorted(found, key=lambda f: f[0])]
