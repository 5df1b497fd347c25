"""An audio language model's transcription request (model_build/python_models/transcription_request.py): what a
request may set is what the checkpoint's processor takes, each refusal names the parameter and the fix, and the
engine streams only the transcript (Qwen3-ASR's "language <NAME>" header before <asr_text> held back and dropped,
sent after all where the model never writes the marker, as the processor's own parse keeps it)."""
from __future__ import annotations

import pathlib
import threading
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from benchmarks.tooling import audio_llm_checkpoints  # noqa: E402
from model_build.python_models import generation_engine as ge  # noqa: E402
from model_build.python_models.transcription_request import TranscriptionRequests  # noqa: E402


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, Any]:
    import transformers

    folder = audio_llm_checkpoints.save(tmp_path_factory.mktemp("qwen3") / "ckpt", "qwen3_asr")
    model = transformers.AutoModelForSpeechSeq2Seq.from_pretrained(folder).eval()
    return folder, model


def test_what_a_request_may_set_is_what_the_processor_takes(qwen3: tuple[pathlib.Path, Any],
                                                             tmp_path: pathlib.Path) -> None:
    import transformers

    requests = TranscriptionRequests(str(qwen3[0]), qwen3[1], 1024)
    assert (requests.takes, requests.sampling_rate) == (("language", "prompt"), 16000)
    assert requests.asked(language="en", prompt="Anna") == {"language": "en", "prompt": "Anna"}
    with pytest.raises(ge.RequestError) as task:
        requests.asked(task="translate")
    assert str(task.value) == ("parameters.task: this qwen3_asr checkpoint takes no task per request (its processor's "
                               "transcription request takes language and prompt); remove task")
    with pytest.raises(ge.RequestError) as unknown:
        requests.inputs(np.zeros(16000, dtype=np.float32), {"language": "xx"})
    from transformers.models.qwen3_asr.processing_qwen3_asr import LANGUAGE_CODE_TO_NAME

    assert str(unknown.value) == (f'parameters.language: "xx" is not a language this qwen3_asr checkpoint '
                                  f"transcribes; send one of {', '.join(sorted(LANGUAGE_CODE_TO_NAME))} (a code or "
                                  "its name)")
    folder = audio_llm_checkpoints.save(tmp_path / "vibevoice", "vibevoice_asr")
    vibevoice = TranscriptionRequests(str(folder), transformers.AutoModelForSpeechSeq2Seq.from_pretrained(folder),
                                      1024)
    assert (vibevoice.takes, vibevoice.sampling_rate) == (("prompt",), 24000)
    with pytest.raises(ge.RequestError) as language:
        vibevoice.asked(language="en")
    assert str(language.value) == ("parameters.language: this vibevoice_asr checkpoint takes no language per request "
                                   "(its processor's transcription request takes prompt); remove language")
    ids, extras, after = vibevoice.inputs(np.zeros(24000, dtype=np.float32), {})
    assert extras["sample"] is False and after is None and {"input_values", "padding_mask"} <= set(extras)


def test_voxtral_takes_a_language_code_and_its_request_is_written_by_mistral_common(tmp_path: pathlib.Path) -> None:
    import transformers

    folder = audio_llm_checkpoints.save(tmp_path / "voxtral", "voxtral")
    voxtral = TranscriptionRequests(str(folder), transformers.AutoModelForSpeechSeq2Seq.from_pretrained(folder), 1024)
    assert (voxtral.takes, voxtral.sampling_rate) == (("language",), 16000)
    clip = np.zeros(16000, dtype=np.float32)
    ids, extras, _after = voxtral.inputs(clip, {"language": "en"})
    # <s>[INST][BEGIN_AUDIO], one [AUDIO] per 80 ms of the clip padded to 30 s, [/INST], lang:en, [TRANSCRIBE]
    assert ids[:3] == [1, 3, 25] and ids[3:378] == [24] * 375 and ids[378] == 4 and ids[-1] == 34
    assert voxtral.processor.tokenizer.decode(ids[379:-1]) == "lang:en"
    assert list(extras) == ["input_features"]
    with pytest.raises(ge.RequestError) as unknown:
        voxtral.inputs(clip, {"language": "english"})
    assert str(unknown.value) == ('parameters.language: "english" is not a language this voxtral checkpoint '
                                  "transcribes; send a two-letter ISO 639-1 code, e.g. en")
    with pytest.raises(ge.RequestError) as prompt:
        voxtral.asked(prompt="Anna and Bob")
    assert str(prompt.value) == ("parameters.prompt: this voxtral checkpoint takes no prompt per request (its "
                                 "processor's transcription request takes language); remove prompt")


def test_the_answer_starts_after_the_marker_where_the_prompt_does_not_hold_it(qwen3: tuple[pathlib.Path, Any]) -> None:
    requests = TranscriptionRequests(str(qwen3[0]), qwen3[1], 1024)
    marker = requests.processor.tokenizer.convert_tokens_to_ids("<asr_text>")
    clip = np.zeros(16000, dtype=np.float32)
    assert requests.inputs(clip, {})[2] == marker
    forced_ids, _extras, forced_after = requests.inputs(clip, {"language": "en"})
    assert forced_after is None and marker in forced_ids  # "language English<asr_text>" ends the prompt


@pytest.mark.parametrize("with_marker,sent", [(True, " the cat"), (False, "language English the cat")])
def test_the_header_before_the_marker_is_held_back(qwen3: tuple[pathlib.Path, Any], with_marker: bool,
                                                   sent: str) -> None:
    tokenizer = TranscriptionRequests(str(qwen3[0]), qwen3[1], 1024).processor.tokenizer
    marker = tokenizer.convert_tokens_to_ids("<asr_text>")
    tokens = tokenizer("language English")["input_ids"] + ([marker] if with_marker else []) + \
        tokenizer(" the cat")["input_ids"]
    texts: list[str] = []
    done = threading.Event()
    request = ge._Request([1], ge.Settings(max_new_tokens=len(tokens)), texts.append, lambda _r, _u: done.set(),
                          lambda: False, None, features={}, answer_after=marker)
    row = ge._Sequence(request, tokenizer, len(tokenizer), qwen3[1].device, [1])
    header = len(tokenizer("language English")["input_ids"]) + (1 if with_marker else 0)
    sent_by_then = []
    for token in tokens:
        reason = row.accept(token, frozenset())
        sent_by_then.append("".join(texts))
    assert reason == ge.FINISH_LENGTH and "".join(texts) == sent
    # nothing is sent until the marker has come (or, without one, until the sequence ends)
    assert sent_by_then[:header] == [""] * header
    if not with_marker:
        assert sent_by_then[-2] == ""  # held to the end: sent at the finish


def test_a_context_prompt_is_bounded_like_a_whispers(qwen3: tuple[pathlib.Path, Any]) -> None:
    """The processor puts the request's prompt in the prompt the model prefills: the spec's max_prompt_tokens bounds
    it (an unbounded one is unbounded work for the server), counted before the clip is decoded."""
    requests = TranscriptionRequests(str(qwen3[0]), qwen3[1], 64)
    tokens = len(requests.processor.tokenizer("the cat", add_special_tokens=False)["input_ids"])
    assert tokens <= 64 and requests.asked(prompt="the cat") == {"prompt": "the cat"}
    long = "harbour pier boats " * 10
    count = len(requests.processor.tokenizer(long, add_special_tokens=False)["input_ids"])
    with pytest.raises(ge.RequestError) as over:
        requests.asked(prompt=long)
    assert count > 64 and str(over.value) == (
        f"parameters.prompt: {count} tokens is above this endpoint's bound 64 (the spec's "
        "task.generation.max_prompt_tokens); send a shorter prompt")
    with pytest.raises(ge.RequestError) as huge:  # refused from its length alone, before any tokenizing
        requests.asked(prompt="x" * 4097)
    assert str(huge.value) == ("parameters.prompt: 4097 characters, more than 64 tokens can hold, is above this "
                               "endpoint's bound 64 (the spec's task.generation.max_prompt_tokens); send a shorter "
                               "prompt")
