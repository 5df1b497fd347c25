"""A step-fed model (Kyutai's streaming speech-to-text: every step reads the next 80 ms of the clip) decoded by the
engine through its own generate (model_build/python_models/step_fed.py): the engine's choices are the tokens, so a
request's length, sampling seed and cancellation work as for any model, and generate's thread ends with its row
whichever way the row ends. Token identity with plain generate is checked by the build's verification
(tests/model_build/test_generation_speech_seq2seq.py)."""
from __future__ import annotations

import pathlib
import threading
import time
from typing import Any, Callable, Iterator, Optional

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from benchmarks.tooling import audio_llm_checkpoints  # noqa: E402
from model_build.python_models import generation_engine as ge  # noqa: E402
from model_build.python_models.transcription_request import TranscriptionRequests  # noqa: E402

CLIP = (0.3 * np.sin(np.arange(36000) / 24000 * 2 * np.pi * 440)).astype(np.float32)  # 1.5 s: 31 steps


Engine = tuple[Any, TranscriptionRequests]  # the running engine and the checkpoint's requests


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    folder = audio_llm_checkpoints.save(tmp_path_factory.mktemp("kyutai") / "ckpt", "kyutai_speech_to_text")
    running = ge.Engine.from_checkpoint(str(folder), ge.SPEECH, ge.Limits())
    try:
        yield running, TranscriptionRequests(str(folder), running.model, running.limits.max_prompt_tokens)
    finally:
        running.close()


def _steppers() -> int:
    """generate threads still running, once the scheduler has had time to release its ended rows (a row's on_done
    comes first, then the row leaves its batch and its thread is ended)."""
    deadline = time.monotonic() + 30
    while True:
        running = sum(thread.name == "generate-stepper" for thread in threading.enumerate())
        if running == 0 or time.monotonic() > deadline:
            return running
        time.sleep(0.05)


def _run(engine: Any, requests: TranscriptionRequests, parameters: dict[str, Any],
         cancelled: Callable[[list[int]], bool] = lambda _tokens: False,
         features: Any = None) -> tuple[list[int], Optional[str], dict[str, Any]]:
    ids, extras, after = requests.inputs(CLIP, {})
    tokens: list[int] = []
    done = threading.Event()
    ended: dict[str, Any] = {}
    def finished(reason: Optional[str], usage: dict[str, Any]) -> None:
        ended.update(reason=reason, usage=usage)
        done.set()

    engine.submit(ids, ge.parse_request(parameters, engine.limits, speech=True), lambda _text: None, finished,
                  lambda: cancelled(tokens), on_token=tokens.append, features=features or extras,
                  answer_after=after)
    assert done.wait(120)
    return tokens, ended["reason"], ended["usage"]


def test_a_row_ends_where_the_clip_ends_or_at_its_length_and_its_generate_thread_with_it(engine: Engine) -> None:
    running, requests = engine
    whole, reason, usage = _run(running, requests, {"max_new_tokens": 64})
    assert (reason, usage["completion_tokens"]) == (ge.FINISH_STOP, 31)  # Kyutai's generate stops at the last frame
    short, reason, _usage = _run(running, requests, {"max_new_tokens": 5})
    assert (short, reason) == (whole[:5], ge.FINISH_LENGTH)
    assert _steppers() == 0


def test_a_cancelled_row_stops_its_generate(engine: Engine) -> None:
    running, requests = engine
    tokens, reason, _usage = _run(running, requests, {"max_new_tokens": 64}, cancelled=lambda got: len(got) >= 3)
    assert reason == ge.FINISH_CANCELLED and 3 <= len(tokens) < 31
    assert _steppers() == 0


def test_a_seeded_sampled_request_repeats_and_differs_from_greedy(engine: Engine) -> None:
    running, requests = engine
    sampled = {"max_new_tokens": 64, "do_sample": True, "temperature": 1.5, "seed": 7}
    first, _reason, _usage = _run(running, requests, sampled)
    again, _reason, _usage = _run(running, requests, sampled)
    greedy, _reason, _usage = _run(running, requests, {"max_new_tokens": 64})
    assert first == again and first != greedy


def test_a_generate_that_fails_answers_its_own_request_and_the_engine_serves_on(engine: Engine) -> None:
    running, requests = engine
    _ids, extras, _after = requests.inputs(CLIP, {})
    broken = {**extras, "input_values": extras["input_values"][..., :10]}  # shorter than one frame
    tokens, reason, usage = _run(running, requests, {"max_new_tokens": 8}, features=broken)
    assert (tokens, reason) == ([], None) and usage["error"].startswith("generation failed: ")
    assert _run(running, requests, {"max_new_tokens": 8})[1] == ge.FINISH_LENGTH
    assert _steppers() == 0


def test_closing_the_engine_ends_a_running_row_and_its_thread(tmp_path: pathlib.Path) -> None:
    folder = audio_llm_checkpoints.save(tmp_path / "ckpt", "kyutai_speech_to_text")
    running = ge.Engine.from_checkpoint(str(folder), ge.SPEECH, ge.Limits())
    requests = TranscriptionRequests(str(folder), running.model, running.limits.max_prompt_tokens)
    ids, extras, after = requests.inputs(CLIP, {})
    tokens: list[int] = []
    started = threading.Event()
    ended: dict[str, Any] = {}

    def took(token: int) -> None:
        tokens.append(token)
        if len(tokens) == 2:
            started.set()

    running.submit(ids, ge.parse_request({"max_new_tokens": 64}, running.limits, speech=True), lambda _text: None,
                   lambda reason, _usage: ended.update(reason=reason), lambda: False, on_token=took, features=extras,
                   answer_after=after)
    assert started.wait(120)
    running.close()  # the scheduler stops after the step it is in: 29 of the clip's steps are left
    assert ended["reason"] == ge.FINISH_CANCELLED and len(tokens) < 31
    assert _steppers() == 0
