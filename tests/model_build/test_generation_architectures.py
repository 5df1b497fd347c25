"""Architectures benchmarks/hf_generation_coverage.md shows decoding token-identically to transformers' generate stay
so: the benchmark's own row check (a tiny checkpoint from the architecture's config with a tokenizer of its
family trained offline, then the build's recipe and its verification against generate, in-process) on a few
families the table covers. Together about 15 s on two cores."""
from __future__ import annotations

import pathlib

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from benchmarks import hf_generation_coverage as coverage  # noqa: E402

# One per family of the table: byte-level BPE (GPT-2, Llama, Qwen2), an encoder family saved as a causal LM
# (BERT: is_decoder set, WordPiece), encoder-decoders with Unigram (T5) and byte-level BPE (MVP).
PASSING = (("text-generation", "gpt2"), ("text-generation", "llama"), ("text-generation", "qwen2"),
           ("text-generation", "bert"), ("text2text-generation", "t5"), ("text2text-generation", "mvp"))


@pytest.mark.parametrize(("kind", "model_type"), PASSING)
def test_the_architecture_decodes_as_generate(kind: str, model_type: str, tmp_path: pathlib.Path) -> None:
    row = next(r for r in coverage.architectures() if (r["kind"], r["model_type"]) == (kind, model_type))
    folder = tmp_path / coverage.entry_name(row)
    coverage.make_checkpoint(row, folder)
    coverage.verify_row(row, folder)
    assert (row["outcome"], row["reason"]) == (coverage.IDENTICAL, "")
    assert row["verified"]["alone"] == row["verified"]["engine_batch"] == "token-identical"
