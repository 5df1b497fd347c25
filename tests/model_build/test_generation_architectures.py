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
# mBART: its default generation_config forces the end token last (forced_eos_token_id 2); SwitchTransformers: a
# mixture-of-experts encoder whose output class the decoder reads (router_logits); EncoderDecoderModel: fills the cache
# it is given but returns none; GIT: decoded alone (its cached mask misreads pads).
PASSING = (("text-generation", "gpt2"), ("text-generation", "llama"), ("text-generation", "qwen2"),
           ("text-generation", "bert"), ("text2text-generation", "t5"), ("text2text-generation", "mvp"),
           ("text2text-generation", "mbart"), ("text2text-generation", "switch_transformers"),
           ("text2text-generation", "encoder-decoder"), ("text-generation", "git"), ("speech seq2seq", "moonshine"))
# Architectures with no key/value cache, refused by the recipe with the cause.
CACHELESS = (("mamba", "a recurrent state"), ("openai-gpt", "no cache between steps"))


def _checked(kind: str, model_type: str, tmp_path: pathlib.Path) -> tuple[dict, pathlib.Path]:
    """The benchmark's row of ``kind`` / ``model_type``, its tiny checkpoint made and run through the build's check."""
    row = next(r for r in coverage.architectures() if (r["kind"], r["model_type"]) == (kind, model_type))
    folder = tmp_path / coverage.entry_name(row)
    coverage.make_checkpoint(row, folder)
    coverage.verify_row(row, folder)
    return row, folder


@pytest.mark.parametrize(("kind", "model_type"), PASSING)
def test_the_architecture_decodes_as_generate(kind: str, model_type: str, tmp_path: pathlib.Path) -> None:
    row, _ = _checked(kind, model_type, tmp_path)
    assert (row["outcome"], row["reason"]) == (coverage.IDENTICAL, "")
    assert row["verified"]["alone"] == row["verified"]["engine_batch"] == "token-identical"


@pytest.mark.parametrize(("model_type", "keeps"), CACHELESS)
def test_an_architecture_without_a_key_value_cache_is_refused(model_type: str, keeps: str,
                                                              tmp_path: pathlib.Path) -> None:
    row, _ = _checked("text-generation", model_type, tmp_path)
    assert row["outcome"] == coverage.REFUSED
    assert f"whose forward takes no key/value cache (past_key_values; it keeps {keeps}" in row["reason"]
    assert "fix: give a checkpoint of a transformer architecture with a key/value cache" in row["reason"]


def test_an_architecture_that_needs_the_whole_sequence_each_step_is_refused(tmp_path: pathlib.Path) -> None:
    row, _ = _checked("text-generation", "cpmant", tmp_path)
    assert row["outcome"] == coverage.REFUSED
    assert "whose forward takes the whole sequence at every step" in row["reason"]


def test_a_speech_model_the_engine_does_not_decode_is_refused_by_the_loader(tmp_path: pathlib.Path) -> None:
    row, folder = _checked("speech seq2seq", "granite_speech", tmp_path)
    assert row["outcome"] == coverage.REFUSED
    assert row["reason"] == (
        f"models.asr_granite_speech.backend: got 'python' with the 'granite_speech' checkpoint in {folder} (an audio "
        "language model whose feature extractor needs torchaudio, which has no release for the torch the serving "
        "environment pins (2.13.0; torchaudio's newest is 2.11.1)); allowed: onnxruntime, tensorrt or pytorch for a "
        "CTC checkpoint; python for a speech "
        "encoder-decoder (Whisper, Speech2Text, SpeechT5, Moonshine, Canary, Seamless M4T...), an audio language "
        "model with a transcription request (Qwen3-ASR, VibeVoice-ASR, Voxtral) or a streaming speech model (Kyutai "
        "STT, Voxtral Realtime); fix: give a speech encoder-decoder, an audio language model with a transcription "
        "request, a streaming speech model, or a CTC checkpoint")
