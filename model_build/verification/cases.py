"""The inputs every artifact is verified on, and the checks beyond "same as eager PyTorch".

Batch sizes 1, each preferred size and ``max_batch_size`` (a lost dynamic axis or a batch-size
dependent kernel shows up there); for models with an attention mask, the full sequence length
and a short one, rows padded to different lengths, and two checks that need no reference:

* masked tokens changed: replacing only the token ids where the mask is 0 must not change the
  outputs (a graph that ignores the mask fails here);
* padded vs unpadded: a padded row must give what the same row gives alone, unpadded.

Inputs with a sequence axis but no mask get the full and a short length too; real inputs (the
recipe's ``agreement_inputs``, or the spec's ``samples``) are one more case, up to ``max_batch_size`` rows.

Imports torch (the build process only).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

from deployment_spec.sections.model import ModelSpec
from model_build.recipes import ExportableModel

SEED = 1234
SHORT_LENGTH = 24
MAX_UNPADDED_ROWS = 2
PADDED_ROWS = 3  # one row at each length _row_lengths gives: half, full, an eighth
SEGMENT_INPUTS = ("token_type_ids",)  # transformers' name for the segment (first or second text) of each token


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    inputs: Mapping[str, Any]          # name -> torch tensor
    lengths: tuple[int, ...] = ()      # valid tokens per row (mask models)


@dataclasses.dataclass(frozen=True)
class Invariance:
    """Two cases whose outputs must agree in the runtime itself (rows ``rows`` of ``base``)."""

    what: str                 # "masked tokens changed" | "padded vs unpadded"
    base: str
    other: str
    rows: tuple[int, ...]     # rows of ``base``; ``other`` holds them in this order
    lengths: tuple[int, ...]  # valid tokens of each of those rows (outputs with a sequence axis are cut there)


@dataclasses.dataclass(frozen=True)
class Plan:
    cases: tuple[Case, ...]
    invariances: tuple[Invariance, ...]
    mask_input: Optional[str]
    seq_outputs: frozenset[str] = frozenset()   # outputs with a sequence axis (dynamic axis 1)


def mask_input(made: ExportableModel) -> Optional[str]:
    """The attention-mask input: the recipe's declaration, else Hugging Face's ``attention_mask`` name."""
    if made.mask_input:
        return made.mask_input
    return "attention_mask" if "attention_mask" in made.input_names else None


def batch_sizes(model: ModelSpec) -> list[int]:
    if model.max_batch_size <= 0:
        return []
    preferred = model.dynamic_batching.preferred_batch_sizes if model.dynamic_batching else ()
    return sorted({1, *preferred, model.max_batch_size})


def plan(made: ExportableModel, model: ModelSpec, full_length_tokens: Optional[int] = None) -> Plan:
    """The cases and invariances above. With ``full_length_tokens`` (the TorchScript check, where
    eager PyTorch and the trace run the same kernels and only what tracing froze can differ), a
    batch whose rows x full length exceed it runs at the short length only, and a batch of
    ``PADDED_ROWS`` padded rows runs at the full length instead: every batch size and both lengths
    are still tried, each axis on its own, and the mask checks run at both lengths."""
    mask = mask_input(made)
    seq_inputs = [n for n in made.input_names if 1 in made.dynamic_axes.get(n, {})]
    seq_outputs = frozenset(n for n in made.output_names if 1 in made.dynamic_axes.get(n, {}))
    sizes = batch_sizes(model)
    cases: list[Case] = []
    if not sizes:  # max_batch_size 0: the exported shapes are the only ones the config allows
        cases.append(Case("example", dict(made.example_inputs)))
        return Plan(tuple(cases), (), mask, seq_outputs)
    full = 0
    for batch in sizes:
        base = _sample(made, batch)
        if mask is None:
            cases += _unmasked(base, batch, seq_inputs, made.short_length or SHORT_LENGTH)
            continue
        full = int(base[mask].shape[1])
        short = [min(made.short_length or SHORT_LENGTH, full // 2)] if mask in seq_inputs and full >= 8 else []
        long = [full] if not short or full_length_tokens is None or batch == 1 or batch * full <= full_length_tokens \
            else []
        cases += [_padded(base, batch, length, mask, seq_inputs, made.end_id) for length in long + short]
    if full_length_tokens is not None and mask is not None and not any(
            len(c.lengths) > 1 and max(c.lengths) == full for c in cases):
        cases.append(_padded(_sample(made, PADDED_ROWS), PADDED_ROWS, full, mask, seq_inputs, made.end_id))
    cases += _real(made, max(sizes), full_length_tokens)
    invariances: list[Invariance] = []
    if mask is not None:
        with_rows = [c for c in cases if c.lengths]
        widest = max(with_rows, key=lambda c: (len(c.lengths), max(c.lengths)))
        longest = max(with_rows, key=lambda c: (max(c.lengths), len(c.lengths)))
        for anchor in [widest] + ([longest] if longest is not widest else []):
            invariances += _mask_checks(anchor, mask, seq_inputs, cases, made.end_id)
    return Plan(tuple(cases), tuple(invariances), mask, seq_outputs)


def _unmasked(base: Mapping[str, Any], batch: int, seq_inputs: list[str], short: int) -> list[Case]:
    """A batch without a mask; with a sequence axis, at the full and a short length."""
    full = int(base[seq_inputs[0]].shape[1]) if seq_inputs else 0
    if full < 8:
        return [Case(f"batch {batch}", dict(base))]
    return [Case(f"batch {batch} x {length} positions", {k: (v[:, :length] if k in seq_inputs else v)
                                                         for k, v in base.items()})
            for length in (full, min(short, full // 2))]


def _real(made: ExportableModel, rows: int, tokens: Optional[int]) -> list[Case]:
    """The real inputs (the recipe's, or the spec's samples), up to ``rows`` of them (and, with a token
    budget, as many rows as fit it), as a case of their own."""
    if made.agreement_inputs is None:
        return []
    first = next(iter(made.agreement_inputs.values()))
    if tokens is not None and first.ndim > 1:
        rows = max(1, min(rows, tokens // max(1, int(first.shape[1]))))
    real = {k: v[:rows] for k, v in made.agreement_inputs.items()}
    return [Case(f"{made.agreement_from} (first {len(next(iter(real.values())))} rows)", real)]


def _padded(base: Mapping[str, Any], batch: int, length: int, mask: str, seq_inputs: list[str],
            end_id: Optional[int] = None) -> Case:
    """``base`` cut to ``length`` tokens, its rows padded to different lengths (the mask says which); with
    ``end_id``, each row's last token is that id, as the model's tokenizer ends every row."""
    inputs = {k: (v[:, :length] if k in seq_inputs else v) for k, v in base.items()}
    rows = _row_lengths(batch, length)
    inputs[mask] = _mask(rows, length, inputs[mask].dtype)
    if end_id is not None:
        # Only token ids end with the end token; a segment id of that value would index past the type table.
        for name in (n for n in _token_inputs(inputs, mask, seq_inputs) if n not in SEGMENT_INPUTS):
            inputs[name] = inputs[name].clone()
            for row, valid in enumerate(rows):
                ids = inputs[name][row]
                ids[ids == end_id] = ids[0]  # where the sample ended it: one end per row, as tokenized
                ids[valid - 1] = end_id
    return Case(f"batch {batch} x {length} tokens", inputs, rows)


def _token_inputs(inputs: Mapping[str, Any], mask: str, seq_inputs: list[str]) -> list[str]:
    """The integer inputs along the sequence besides the mask: token ids (and their kin)."""
    return [name for name, value in inputs.items()
            if name != mask and name in seq_inputs and not value.is_floating_point()]


def _mask_checks(widest: Case, mask: str, seq_inputs: list[str], cases: list[Case],
                 end_id: Optional[int] = None) -> list[Invariance]:
    """Appends to ``cases`` the masked-tokens-changed copy of ``widest`` and some of its padded rows alone."""
    cases.append(_masked_changed(widest, mask, seq_inputs, end_id))
    out = [Invariance("masked tokens changed", widest.name, cases[-1].name, tuple(range(len(widest.lengths))),
                      widest.lengths)]
    if mask in seq_inputs:
        full = max(widest.lengths)
        padded = [r for r, n in enumerate(widest.lengths) if n < full][:MAX_UNPADDED_ROWS]
        for row in padded:
            n = widest.lengths[row]
            alone = {k: (v[row:row + 1, :n] if k in seq_inputs else v[row:row + 1]) for k, v in widest.inputs.items()}
            cases.append(Case(f"row {row} of {widest.name} alone, {n} tokens", alone, (n,)))
            out.append(Invariance("padded vs unpadded", widest.name, cases[-1].name, (row,), (n,)))
    return out


def _sample(made: ExportableModel, batch: int) -> dict[str, Any]:
    if made.sample_inputs is not None:
        return dict(made.sample_inputs(batch, SEED))
    example = dict(made.example_inputs)
    have = int(next(iter(example.values())).shape[0])
    # Without a sampler, repeat the example's rows up to the wanted batch.
    return {k: v.repeat_interleave(-(-batch // have), dim=0)[:batch] for k, v in example.items()}


def _row_lengths(batch: int, length: int) -> tuple[int, ...]:
    """Rows padded to different lengths: half, full, an eighth, ... (a single row is padded too)."""
    pattern = (max(1, length // 2), length, max(1, length // 8))
    return tuple(pattern[r % len(pattern)] for r in range(batch))


def _mask(rows: tuple[int, ...], length: int, dtype) -> Any:
    import torch

    positions = torch.arange(length).unsqueeze(0)
    return (positions < torch.tensor(rows).unsqueeze(1)).to(dtype)


def _masked_changed(case: Case, mask: str, seq_inputs: list[str], end_id: Optional[int] = None) -> Case:
    """The same batch with every token id under a 0 of the mask replaced by another id of the same row
    (never ``end_id``: a row keeps its one end token, which some classifiers require)."""
    import torch

    hidden = case.inputs[mask] == 0
    changed = dict(case.inputs)
    for name in _token_inputs(case.inputs, mask, seq_inputs):
        value = case.inputs[name]
        # Rolling along the sequence keeps every value a valid id of this vocabulary.
        rolled = torch.roll(value, shifts=1, dims=1)
        keep = ~hidden if end_id is None else ~hidden | (rolled == end_id)
        changed[name] = torch.where(keep, value, rolled)
    return Case(f"{case.name}, masked tokens changed", changed, case.lengths)
