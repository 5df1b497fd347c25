"""The generation engine of issue #59 (model_build/python_models/generation_engine.py): prompts in, text streamed out.

Tiny random checkpoints (GPT-2, Llama, T5, BART; 2 layers, hidden 32, a byte-level BPE tokenizer of 300 tokens
trained here offline) made once per session. Greedy output must be token-identical to ``model.generate`` run on
each prompt alone, also when requests join and leave a running batch; request parameters are refused with exact
messages.
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import shutil
import sys
import threading
import time
import types
from typing import Any, Optional

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from benchmarks.tooling import generation_checkpoints  # noqa: E402
from model_build.python_models import generation_engine as ge  # noqa: E402

FAMILIES = ("gpt2", "llama", "qwen2", "mistral", "t5", "bart")
SEQ2SEQ = generation_checkpoints.SEQ2SEQ
PROMPTS = (
    "the weather in tokyo",
    "a fine film truly moving and the actors were great, i love it so much",
    "hello",
    "who met macron where is the café what is the weather how many dogs at the event in paris on monday",
    "crème brûlée à la carte",
)
CHAT_TEMPLATE = generation_checkpoints.CHAT_TEMPLATE
LIMITS = ge.Limits(max_new_tokens=40, default_max_new_tokens=12, max_temperature=2.0, max_top_k=50,
                   max_repetition_penalty=2.0, max_stop_strings=3, max_prompt_tokens=64, max_concurrent=4)
WAIT_S = 60


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folders = {}
    for family in FAMILIES:
        folder = generation_checkpoints.save(tmp_path_factory.mktemp(family), family,
                                             CHAT_TEMPLATE if family == "llama" else None)
        folders[family] = str(folder)
    return folders


@pytest.fixture(scope="session")
def engines(checkpoints: dict[str, str]) -> Any:
    built = {family: ge.Engine.from_checkpoint(folder, "text2text-generation" if family in SEQ2SEQ
                                               else "text-generation", LIMITS)
             for family, folder in checkpoints.items()}
    yield built
    for engine in built.values():
        engine.close()


@dataclasses.dataclass
class Stream:
    """What one request's callbacks received."""

    chunks: list[str] = dataclasses.field(default_factory=list)
    tokens: list[int] = dataclasses.field(default_factory=list)
    reason: Optional[str] = None
    usage: dict = dataclasses.field(default_factory=dict)
    done: threading.Event = dataclasses.field(default_factory=threading.Event)
    cancel: threading.Event = dataclasses.field(default_factory=threading.Event)

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    def on_done(self, reason: Optional[str], usage: dict) -> None:
        self.reason, self.usage = reason, usage
        self.done.set()

    def wait(self) -> "Stream":
        assert self.done.wait(WAIT_S), "the request did not finish"
        return self


def _submit(engine: Any, ids: list[int], settings: Any, stream: Optional[Stream] = None,
            after_token: Any = None) -> Stream:
    stream = stream or Stream()

    def on_token(token: int) -> None:
        stream.tokens.append(token)
        if after_token is not None:
            after_token(len(stream.tokens))

    engine.submit(ids, settings, stream.chunks.append, stream.on_done, stream.cancel.is_set, on_token=on_token)
    return stream


def _greedy(new: int, **extra: Any) -> Any:
    return ge.parse_request({"max_new_tokens": new, **extra}, LIMITS)


def _reference(engine: Any, ids: list[int], new: int, **extra: Any) -> tuple[list[int], list[Any]]:
    """``generate`` on the prompt alone: new token ids and the logits of each step."""
    with torch.inference_mode():
        out = engine.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                    do_sample=False, max_new_tokens=new, pad_token_id=1, output_logits=True,
                                    return_dict_in_generate=True, **extra)
    sequence = out.sequences[0].tolist()
    generated = sequence[1:] if engine.seq2seq else sequence[len(ids):]
    return generated, [step[0] for step in out.logits]


def _same_tokens(got: list[int], want: list[int], logits: list[Any], label: str) -> None:
    """Token-identical, or a report of where it first differs and by how much the reference's choice won."""
    if got == want:
        return
    at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    margin = "n/a"
    if at < len(logits):
        top = torch.topk(logits[at].float(), 2).values
        margin = f"{float(top[0] - top[1]):.3g}"
    pytest.fail(f"{label}: first difference at new token {at} (engine {got[at:at + 3]}, generate "
                f"{want[at:at + 3]}); the reference's top-2 logit margin there: {margin}")


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_alone_is_generate(engines: dict[str, Any], family: str) -> None:
    engine = engines[family]
    for prompt in PROMPTS[:3]:
        ids = engine.encode(text=prompt)
        want, logits = _reference(engine, ids, 20)
        stream = _submit(engine, ids, _greedy(20)).wait()
        _same_tokens(stream.tokens, want, logits, f"{family} {prompt!r}")
        assert stream.text == engine.tokenizer.decode(stream.tokens, skip_special_tokens=True)
        assert stream.usage == {"prompt_tokens": len(ids), "completion_tokens": len(want)}
        assert stream.reason == ("stop" if want[-1] == 2 else "length")


@pytest.mark.parametrize("family", FAMILIES)
def test_requests_joining_a_running_batch_get_their_alone_answer(engines: dict[str, Any], family: str) -> None:
    """Five prompts of 1 to 30 tokens: the first decodes alone, two join after its 3rd token, two more after its
    6th; with max_concurrent 4 the fifth waits in the queue until a row leaves. Each answer equals generate's for
    its prompt alone, and the shared batch did decode several rows together."""
    engine = engines[family]
    ids = [engine.encode(text=prompt) for prompt in PROMPTS]
    lengths = (24, 10, 18, 7, 14)
    references = [_reference(engine, prompt, new) for prompt, new in zip(ids, lengths)]
    streams = [Stream() for _ in ids]
    widest_before = engine.timings.widest
    engine.timings.widest = 0

    def join(count: int) -> None:
        if count == 3:
            for i in (1, 2):
                _submit(engine, ids[i], _greedy(lengths[i]), streams[i])
        if count == 6:
            for i in (3, 4):
                _submit(engine, ids[i], _greedy(lengths[i]), streams[i])

    _submit(engine, ids[0], _greedy(lengths[0]), streams[0], after_token=join)
    for i, stream in enumerate(streams):
        stream.wait()
        want, logits = references[i]
        _same_tokens(stream.tokens, want, logits, f"{family} request {i} ({len(ids[i])} prompt tokens)")
        assert stream.text == engine.tokenizer.decode(stream.tokens, skip_special_tokens=True)
    # Mistral: the prompts longer than its window decode alone, the others together.
    wanted = sum(len(prompt) <= 16 for prompt in ids) if family == "mistral" else LIMITS.max_concurrent
    assert wanted >= 2
    assert engine.timings.widest == wanted, "the requests were not decoded together"
    engine.timings.widest = max(widest_before, engine.timings.widest)


@pytest.mark.parametrize("family", FAMILIES)
def test_prompts_waiting_together_are_prefilled_in_one_forward_pass(engines: dict[str, Any], family: str) -> None:
    """Three prompts of 4, 11 and 13 tokens submitted while the scheduler is busy (the first request's callback
    holds it) are prefilled together, padded, in one forward pass; each answer is still generate's alone."""
    engine = engines[family]
    prompts = [engine.encode(text=text) for text in ("the weather in tokyo", "hello", "the actors were great")]
    assert len({len(prompt) for prompt in prompts}) == 3
    references = [_reference(engine, prompt, 16) for prompt in prompts]
    holding, submitted = threading.Event(), threading.Event()

    def hold(count: int) -> None:
        if count == 1:
            holding.set()
            submitted.wait(WAIT_S)

    before = dataclasses.replace(engine.timings)
    blocker = _submit(engine, engine.encode(text=PROMPTS[4]), _greedy(4), after_token=hold)
    assert holding.wait(WAIT_S)
    streams = [_submit(engine, prompt, _greedy(16)) for prompt in prompts]
    submitted.set()
    blocker.wait()
    for prompt, stream, (want, logits) in zip(prompts, streams, references):
        _same_tokens(stream.wait().tokens, want, logits, f"{family}: {len(prompt)} prompt tokens, prefilled together")
    assert (engine.timings.prefills - before.prefills, engine.timings.prefill_rows - before.prefill_rows) == (2, 4)


@pytest.mark.parametrize("family", ["gpt2", "bart"])
def test_seeded_sampling_is_reproducible_alone_and_in_a_batch(engines: dict[str, Any], family: str) -> None:
    """Sampling draws from each request's own generator: the same seed gives the same tokens whether the request
    runs alone or joins others (sampled tokens wander, so a misplaced cache or position would show)."""
    engine = engines[family]
    ids = engine.encode(text=PROMPTS[1])
    settings = ge.parse_request({"max_new_tokens": 30, "do_sample": True, "seed": 7, "temperature": 1.5,
                                 "top_k": 40, "top_p": 0.95}, LIMITS)
    alone = _submit(engine, ids, settings).wait()
    assert len(set(alone.tokens)) > 10
    others = [_submit(engine, engine.encode(text=prompt), _greedy(30)) for prompt in PROMPTS[2:]]
    late = Stream()
    first = _submit(engine, engine.encode(text=PROMPTS[0]), _greedy(20),
                    after_token=lambda n: n == 4 and _submit(engine, ids, settings, late))
    for stream in (*others, first, late):
        stream.wait()
    assert late.tokens == alone.tokens
    other_seed = _submit(engine, ids, dataclasses.replace(settings, seed=8)).wait()
    assert other_seed.tokens != alone.tokens


@pytest.mark.parametrize("family", ["gpt2", "t5"])
def test_repetition_penalty_is_generate(engines: dict[str, Any], family: str) -> None:
    engine = engines[family]
    ids = engine.encode(text=PROMPTS[0])
    want, logits = _reference(engine, ids, 20, repetition_penalty=1.8)
    stream = _submit(engine, ids, _greedy(20, repetition_penalty=1.8)).wait()
    _same_tokens(stream.tokens, want, logits, f"{family} with repetition_penalty 1.8")


def test_max_new_tokens_ends_with_length(engines: dict[str, Any]) -> None:
    engine = engines["llama"]
    ids = engine.encode(text=PROMPTS[1])
    stream = _submit(engine, ids, _greedy(5)).wait()
    assert (stream.reason, stream.usage) == ("length", {"prompt_tokens": len(ids), "completion_tokens": 5})
    one = _submit(engine, ids, _greedy(1)).wait()
    assert (one.reason, one.tokens) == ("length", stream.tokens[:1])
    default = _submit(engine, ids, ge.parse_request({}, LIMITS)).wait()
    assert default.usage["completion_tokens"] == LIMITS.default_max_new_tokens


@pytest.mark.parametrize("family", ["gpt2", "t5"])
def test_a_stop_string_ends_the_text_before_it(engines: dict[str, Any], family: str) -> None:
    engine = engines[family]
    ids = engine.encode(text=PROMPTS[3])
    full = _submit(engine, ids, _greedy(30)).wait().text
    stop = next(full[i:i + 3] for i in range(4, len(full) - 3) if full[i:i + 3].strip() == full[i:i + 3])
    for sent in (stop, [stop, "never seen"], '["never", "%s"]' % stop):
        stream = _submit(engine, ids, _greedy(30, stop=sent)).wait()
        assert (stream.text, stream.reason) == (full[:full.find(stop)], "stop"), sent
    assert _submit(engine, ids, _greedy(30, stop="not in it")).wait().text == full


def test_stop_text_holds_back_a_possible_start() -> None:
    stops = ge._StopText(("abc", "zz"))
    assert stops.push("xa") == ("x", False)  # "a" may start "abc"
    assert stops.push("b") == ("", False)
    assert stops.push("d") == ("abd", False)
    assert stops.push("z") == ("", False)
    assert stops.push("zq") == ("", True)  # "zz": the text ends before it
    assert stops.rest() == ""


def test_detokenizer_never_emits_half_a_character(engines: dict[str, Any]) -> None:
    tokenizer = engines["gpt2"].tokenizer
    text = "crème brûlée 😍 東京は雨です"
    ids = tokenizer(text)["input_ids"]
    detokenizer = ge._Detokenizer(tokenizer)
    pieces = [detokenizer.add(token) for token in ids]
    assert all("\ufffd" not in piece for piece in pieces)
    assert "".join(pieces) + detokenizer.flush() == text


def test_a_cancelled_request_stops_and_the_others_go_on(engines: dict[str, Any]) -> None:
    """is_cancelled is asked every few steps (an IPC round trip inside Triton): a request cancelled after its 3rd
    token stops within CANCEL_POLL_STEPS more, and a request that runs on asks far less often than once a step."""
    engine = engines["gpt2"]
    ids = engine.encode(text=PROMPTS[1])
    want, logits = _reference(engine, ids, 30)
    cancelled = Stream()
    _submit(engine, engine.encode(text=PROMPTS[0]), _greedy(40), cancelled,
            after_token=lambda n: n == 3 and cancelled.cancel.set())
    asked = []
    started = time.perf_counter()
    kept = Stream()
    engine.submit(ids, _greedy(30), kept.chunks.append, kept.on_done, lambda: asked.append(1) or False,
                  on_token=kept.tokens.append)
    cancelled.wait()
    assert cancelled.reason == "cancelled"
    assert 3 <= cancelled.usage["completion_tokens"] <= 3 + ge.CANCEL_POLL_STEPS
    _same_tokens(kept.wait().tokens, want, logits, "the request beside a cancelled one")
    # once before its prefill, then after every CANCEL_POLL_STEPS steps or CANCEL_POLL_S, whichever comes first
    assert len(asked) <= 2 + len(want) // ge.CANCEL_POLL_STEPS + (time.perf_counter() - started) / ge.CANCEL_POLL_S
    before = Stream()
    before.cancel.set()
    assert _submit(engine, ids, _greedy(5), before).wait().reason == "cancelled"
    assert before.tokens == []


def test_a_failing_step_ends_its_requests_with_an_error_and_the_engine_goes_on(
        engines: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    engine = engines["llama"]
    ids = engine.encode(text=PROMPTS[0])
    real = engine._decode
    calls = {"n": 0}

    def failing_once(batch: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("planted")
        return real(batch)

    monkeypatch.setattr(engine, "_decode", failing_once)
    failed = _submit(engine, ids, _greedy(10)).wait()
    assert (failed.reason, failed.usage) == (None, {"prompt_tokens": len(ids), "completion_tokens": 2,
                                                    "error": "generation failed: RuntimeError: planted"})
    monkeypatch.setattr(engine, "_decode", real)
    want, logits = _reference(engine, ids, 10)
    _same_tokens(_submit(engine, ids, _greedy(10)).wait().tokens, want, logits, "after a failed step")
    broken = Stream()

    def refuse(_text: str) -> None:
        raise BrokenPipeError("client gone")

    engine.submit(ids, _greedy(10), refuse, broken.on_done, lambda: False)
    assert broken.wait().usage["error"] == "sending the text failed: BrokenPipeError: client gone"


def test_chat_messages_go_through_the_chat_template(engines: dict[str, Any]) -> None:
    engine = engines["llama"]
    messages = [{"role": "user", "content": "how many dogs"}]
    want = engine.tokenizer("<s>user: how many dogs\n<s>assistant:", add_special_tokens=False)["input_ids"]
    assert engine.encode(messages=messages) == want
    with pytest.raises(ge.RequestError) as error:
        engines["gpt2"].encode(messages=messages)
    assert str(error.value) == ("messages: this checkpoint has no chat template (tokenizer_config.json "
                                "chat_template or chat_template.jinja); send the prompt as text_input instead")
    with pytest.raises(ge.RequestError) as error:
        engine.encode(messages=[{"role": "user"}])
    assert str(error.value) == ('messages: [{"role": "user"}] is not a non-empty list of {"role": ..., "content": '
                                '...} objects with string values; send e.g. [{"role": "user", "content": "Hello"}]')


def test_prompt_bounds(engines: dict[str, Any]) -> None:
    engine = engines["gpt2"]
    long = " ".join(["the weather"] * 40)
    count = len(engine.tokenizer(long)["input_ids"])
    with pytest.raises(ge.RequestError) as error:
        engine.encode(text=long)
    assert str(error.value) == (f"the prompt is {count} tokens, above this endpoint's bound 64 (the spec's "
                                "task.generation.max_prompt_tokens); send at most 64 tokens")
    with pytest.raises(ge.RequestError) as error:
        engine.encode(text="x" * 5000)
    assert str(error.value) == ("the prompt is 5000 characters, more than 64 tokens can hold on this endpoint "
                                "(its bound: max_prompt_tokens 64, the spec's task.generation.max_prompt_tokens); "
                                "send a shorter prompt")
    for text, messages in (("", None), (None, None), ("a", [])):
        with pytest.raises(ge.RequestError):
            engine.encode(text=text, messages=messages)


KNOWN = "do_sample, max_new_tokens, repetition_penalty, seed, stop, stream, temperature, top_k, top_p"
REFUSED = [
    ({"max_new_tokens": 41}, "parameters.max_new_tokens: 41 is above this endpoint's bound 40 (the spec's "
     "task.generation.max_new_tokens); send at most 40"),
    ({"max_new_tokens": 0}, "parameters.max_new_tokens: 0 is below 1; send an integer from 1 to 40"),
    ({"max_new_tokens": "5"}, 'parameters.max_new_tokens: "5" is not an integer; send an integer from 1 to 40'),
    ({"max_new_tokens": 5.0}, "parameters.max_new_tokens: 5.0 is not an integer; send an integer from 1 to 40"),
    ({"max_new_tokens": True}, "parameters.max_new_tokens: true is not an integer; send an integer from 1 to 40"),
    ({"do_sample": True, "temperature": 5.0}, "parameters.temperature: 5.0 is above this endpoint's bound 2.0 "
     "(the spec's task.generation.max_temperature); send at most 2.0"),
    ({"do_sample": True, "temperature": -0.5}, "parameters.temperature: -0.5 is below 0; send a number from 0 "
     "(greedy) to 2.0"),
    ({"do_sample": True, "temperature": False}, "parameters.temperature: false is not a number; send a number "
     "from 0 (greedy) to 2.0"),
    ({"do_sample": True, "top_p": 0}, "parameters.top_p: 0 is outside (0, 1]; send a number above 0 and at most 1 "
     "(1 keeps every token)"),
    ({"do_sample": True, "top_p": 1.5}, "parameters.top_p: 1.5 is outside (0, 1]; send a number above 0 and at "
     "most 1 (1 keeps every token)"),
    ({"do_sample": True, "top_k": 51}, "parameters.top_k: 51 is above this endpoint's bound 50 (the spec's "
     "task.generation.max_top_k); send at most 50"),
    ({"do_sample": True, "top_k": -1}, "parameters.top_k: -1 is below 0; send an integer from 0 (no top-k) to 50"),
    ({"do_sample": True, "top_k": 2.5}, "parameters.top_k: 2.5 is not an integer; send an integer from 0 (no "
     "top-k) to 50"),
    ({"repetition_penalty": 3}, "parameters.repetition_penalty: 3 is above this endpoint's bound 2.0 (the spec's "
     "task.generation.max_repetition_penalty); send at most 2.0"),
    ({"repetition_penalty": 0}, "parameters.repetition_penalty: 0 is not above 0; send a number above 0 and at "
     "most 2.0 (1 means no penalty)"),
    ({"stop": ["a", "b", "c", "d"]}, "parameters.stop: 4 stop strings are above this endpoint's bound 3 (the "
     "spec's task.generation.max_stop_strings); send at most 3"),
    ({"stop": ""}, 'parameters.stop: "" holds an empty string; send a string or a list of at most 3 non-empty '
     'strings, e.g. "stop": ["\\n\\n"] or "stop": "[\\"\\\\n\\\\n\\"]"'),
    ({"stop": 5}, 'parameters.stop: 5 is not a string or a list of strings; send a string or a list of at most 3 '
     'non-empty strings, e.g. "stop": ["\\n\\n"] or "stop": "[\\"\\\\n\\\\n\\"]"'),
    ({"stop": '["a", 1]'}, 'parameters.stop: "[\\"a\\", 1]" is not a string or a list of strings; send a string '
     'or a list of at most 3 non-empty strings, e.g. "stop": ["\\n\\n"] or "stop": "[\\"\\\\n\\\\n\\"]"'),
    ({"do_sample": True, "seed": -1}, f"parameters.seed: -1 is outside 0 to {2 ** 63 - 1}; send an integer from "
     f"0 to {2 ** 63 - 1}"),
    ({"do_sample": True, "seed": "7"}, f'parameters.seed: "7" is not an integer; send an integer from 0 to '
     f"{2 ** 63 - 1}"),
    ({"do_sample": "true"}, 'parameters.do_sample: "true" is not a boolean; send true or false'),
    ({"stream": 1}, "parameters.stream: 1 is not a boolean; send true or false"),
    ({"temperature": 0.7}, 'parameters.temperature applies only to sampling, and this request decodes greedily '
     '(do_sample is false or absent); send "do_sample": true with it, or remove it'),
    ({"max_tokens": 5}, f"parameters.max_tokens is not a parameter of this endpoint; known: {KNOWN}; remove it or "
     "correct its name"),
]


@pytest.mark.parametrize("parameters, message", REFUSED, ids=[str(case[0]) for case in REFUSED])
def test_request_errors(parameters: dict, message: str) -> None:
    with pytest.raises(ge.RequestError) as error:
        ge.parse_request(parameters, LIMITS)
    assert str(error.value) == message


def test_request_settings() -> None:
    assert ge.parse_request({}, LIMITS) == ge.Settings(max_new_tokens=12)
    settings = ge.parse_request({"do_sample": True, "temperature": 0, "stop": "\n", "stream": False,
                                 "max_new_tokens": 40, "seed": 3, "top_k": 5, "top_p": 0.5}, LIMITS)
    assert settings.greedy and settings.stop == ("\n",) and not settings.stream
    assert ge.parse_request({"stop": '["a", "b", "a"]'}, LIMITS).stop == ("a", "b")
    assert ge.parse_request({"stop": "[not json"}, LIMITS).stop == ("[not json",)


def test_limits_from_config_parameters() -> None:
    limits = ge.Limits.from_parameters({"max_new_tokens": "100", "default_max_new_tokens": "20",
                                        "max_temperature": "1.5", "max_concurrent": "16", "kind": "text-generation"})
    assert (limits.max_new_tokens, limits.default_max_new_tokens, limits.max_temperature, limits.max_concurrent) == (
        100, 20, 1.5, 16)
    with pytest.raises(ValueError, match="max_top_k: 'many' is not an integer"):
        ge.Limits.from_parameters({"max_top_k": "many"})
    with pytest.raises(ValueError, match="default_max_new_tokens: 300 is not from 1 to max_new_tokens"):
        ge.Limits.from_parameters({"default_max_new_tokens": "300"})


class _FakeUtils:
    """The parts of triton_python_backend_utils that hf_generate.py uses, recording what is sent."""

    TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1

    class TritonError:
        INVALID_ARG = 3

        def __init__(self, message: str, code: int = 0) -> None:
            self.message, self.code = message, code

    class Tensor:
        def __init__(self, name: str, array: Any) -> None:
            self.name, self.array = name, array

    class InferenceResponse:
        def __init__(self, output_tensors: list, error: Any = None) -> None:
            self.output_tensors, self.error = output_tensors, error

    class Logger:
        @staticmethod
        def log_warn(message: str) -> None:
            raise AssertionError(f"hf_generate warned: {message}")

    @staticmethod
    def using_decoupled_model_transaction_policy(config: dict) -> bool:
        return bool(config.get("model_transaction_policy", {}).get("decoupled"))

    @staticmethod
    def get_input_tensor_by_name(request: Any, name: str) -> Any:
        return request.inputs.get(name)


class _FakeRequest:
    def __init__(self, inputs: dict, parameters: dict) -> None:
        import numpy as np

        self.inputs = {name: types.SimpleNamespace(as_numpy=lambda v=v: np.array([v.encode()], dtype=object))
                       for name, v in inputs.items()}
        self._parameters = json.dumps(parameters)
        self.sent: list[tuple[Any, int]] = []
        self.final = threading.Event()

    def parameters(self) -> str:
        return self._parameters

    def get_response_sender(self) -> Any:
        def send(response: Any = None, flags: int = 0) -> None:
            self.sent.append((response, flags))
            if flags == 1:
                self.final.set()

        return types.SimpleNamespace(send=send, is_cancelled=lambda: False)

    def answers(self) -> list[Any]:
        """(text or error message, flags) per send."""
        assert self.final.wait(WAIT_S)
        out = []
        for response, flags in self.sent:
            if response is None:
                out.append((None, flags))
            elif response.error is not None:
                out.append(((response.error.message, response.error.code), flags))
            else:
                out.append((response.output_tensors[0].array[0].decode(), flags))
        return out


def test_the_triton_model_streams_answers_and_refuses_mistakes(checkpoints: dict[str, str], tmp_path: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", _FakeUtils)
    monkeypatch.syspath_prepend(str(ge.__file__).rsplit("/", 1)[0])
    sys.modules.pop("hf_generate", None)
    hf_generate = importlib.import_module("hf_generate")
    (tmp_path / "1").mkdir()
    shutil.copytree(checkpoints["llama"], tmp_path / "1" / "checkpoint")
    config = {"model_transaction_policy": {"decoupled": True},
              "parameters": {"kind": {"string_value": "text-generation"}, "max_new_tokens": {"string_value": "16"},
                             "default_max_new_tokens": {"string_value": "8"},
                             "max_prompt_tokens": {"string_value": "64"}}}
    model = hf_generate.TritonPythonModel()
    model.initialize({"model_config": json.dumps(config), "model_repository": str(tmp_path), "model_version": "1",
                      "model_name": "generate", "model_instance_kind": "CPU"})
    try:
        streamed = _FakeRequest({"text_input": PROMPTS[0]}, {"max_new_tokens": 8})
        whole = _FakeRequest({"text_input": PROMPTS[0]}, {"max_new_tokens": 8, "stream": False})
        chat = _FakeRequest({"text_input": "", "messages": '[{"role": "user", "content": "hi"}]'},
                            {"max_new_tokens": 3, "stream": False})
        wrong = _FakeRequest({"text_input": PROMPTS[0]}, {"max_new_tokens": 17})
        assert model.execute([streamed, whole, chat, wrong]) is None
        pieces = streamed.answers()
        assert all(flags == 0 for _, flags in pieces[:-1]) and pieces[-1] == (None, 1) and len(pieces) > 2
        text = "".join(piece for piece, _ in pieces[:-1])
        assert whole.answers() == [(text, 0), (None, 1)]
        assert chat.answers()[-1] == (None, 1) and len(chat.answers()) == 2
        assert wrong.answers() == [(("parameters.max_new_tokens: 17 is above this endpoint's bound 16 (the spec's "
                                     "task.generation.max_new_tokens); send at most 16", 3), 1)]
    finally:
        model.finalize()


def test_a_model_that_does_not_stream_returns_each_whole_answer_from_execute(
        checkpoints: dict[str, str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # task.stream: false (a multi-model endpoint's route takes no decoupled model): one response per request,
    # returned by execute, whatever the request's stream parameter says.
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", _FakeUtils)
    monkeypatch.syspath_prepend(str(ge.__file__).rsplit("/", 1)[0])
    sys.modules.pop("hf_generate", None)
    hf_generate = importlib.import_module("hf_generate")
    (tmp_path / "1").mkdir()
    shutil.copytree(checkpoints["gpt2"], tmp_path / "1" / "checkpoint")
    config = {"parameters": {"kind": {"string_value": "text-generation"}, "max_new_tokens": {"string_value": "16"},
                             "default_max_new_tokens": {"string_value": "8"}}}
    model = hf_generate.TritonPythonModel()
    model.initialize({"model_config": json.dumps(config), "model_repository": str(tmp_path), "model_version": "1",
                      "model_name": "generate", "model_instance_kind": "CPU"})
    try:
        requests = [_FakeRequest({"text_input": prompt}, {"max_new_tokens": 6}) for prompt in PROMPTS[:3]]
        wrong = _FakeRequest({"text_input": PROMPTS[0]}, {"top_p": 0})
        responses = model.execute([*requests, wrong])
        texts = [r.output_tensors[0].array[0].decode() for r in responses[:3]]
        alone = [model.execute([_FakeRequest({"text_input": p}, {"max_new_tokens": 6, "stream": True})])[0]
                 .output_tensors[0].array[0].decode() for p in PROMPTS[:3]]
        assert texts == alone and any(texts)
        assert (responses[3].error.message, responses[3].error.code) == (
            "parameters.top_p applies only to sampling, and this request decodes greedily (do_sample is false or "
            'absent); send "do_sample": true with it, or remove it', 3)
        assert not any(request.sent for request in requests)  # nothing went through a response sender
    finally:
        model.finalize()


# generation_config.json settings with which generate changes greedy decoding (its default logits processors); each
# case is checked with and without it, so a setting the tiny model's answers never meet would show. "eos" stands for
# a token the unconstrained answer picks at its 3rd step, made the end token so that min lengths have one to hold off;
# "first" for its first token.
PROCESSED = {
    "forced_eos (mBART's default)": {"forced_eos_token_id": 2},
    "forced_eos, a list": {"forced_eos_token_id": [7, 5]},
    "forced_bos": {"forced_bos_token_id": 9},
    "no_repeat_ngram_size": {"no_repeat_ngram_size": 2},
    "encoder_no_repeat_ngram_size": {"encoder_no_repeat_ngram_size": 1},
    "min_new_tokens": {"eos_token_id": "eos", "min_new_tokens": 6},
    "min_length": {"eos_token_id": "eos", "min_length": 7},
    "begin_suppress_tokens, one beyond the vocabulary": {"begin_suppress_tokens": ["first", 50256]},
    "bart-large-cnn's": {"no_repeat_ngram_size": 3, "min_length": 9, "forced_bos_token_id": 0,
                         "forced_eos_token_id": 2, "num_beams": 4, "length_penalty": 2.0, "eos_token_id": "eos"},
}


# Each setting on the family where it matters most (BART-likes ship them; a causal LM counts its prompt in min_length
# and sees a forced BOS only after a one-token prompt), within the module's time.
PROCESSED_ON = [("bart", case) for case in PROCESSED if case != "forced_eos (mBART's default)"] + [
    ("gpt2", case) for case in ("forced_eos (mBART's default)", "forced_bos", "no_repeat_ngram_size", "min_length",
                                "begin_suppress_tokens, one beyond the vocabulary")]


@pytest.mark.parametrize(("family", "case"), PROCESSED_ON, ids=[f"{family}: {case}" for family, case in PROCESSED_ON])
def test_generation_config_processors_are_generate(checkpoints: dict[str, str], tmp_path: Any, family: str,
                                                   case: str) -> None:
    """The engine applies the processors generate builds from the checkpoint's generation_config, alone and with
    rows of other lengths in its running batch; the reference is generate with num_beams 1 (the engine's greedy)."""
    folder = tmp_path / family
    shutil.copytree(checkpoints[family], folder)
    kind = "text2text-generation" if family in SEQ2SEQ else "text-generation"
    plain = ge.Engine.from_checkpoint(str(folder), kind, LIMITS)
    try:
        # a one-token prompt too: a causal LM's forced BOS applies where generate's input is one token long
        ids = [plain.encode(text=prompt) for prompt in PROMPTS[:3]] + [plain.encode(text=PROMPTS[0])[:1]]
        unconstrained = [_reference(plain, prompt, 12)[0] for prompt in ids]
    finally:
        plain.close()
    placed = {"eos": unconstrained[0][2], "first": unconstrained[0][0]}
    settings = {name: [placed.get(v, v) for v in value] if isinstance(value, list) else placed.get(value, value)
                for name, value in PROCESSED[case].items()}
    config = transformers.GenerationConfig.from_pretrained(str(folder))
    config.update(**settings)
    config.save_pretrained(str(folder))
    engine = ge.Engine.from_checkpoint(str(folder), kind, LIMITS)
    try:
        references = [_reference(engine, prompt, 12, num_beams=1) for prompt in ids]
        assert [want for want, _ in references] != unconstrained, "the setting changes nothing here: no test"
        for i, (prompt, (want, logits)) in enumerate(zip(ids, references)):
            _same_tokens(_submit(engine, prompt, _greedy(12)).wait().tokens, want, logits, f"{case}: prompt {i} alone")
        streams = [Stream() for _ in ids]
        _submit(engine, ids[0], _greedy(12), streams[0],
                after_token=lambda n: n == 2 and [_submit(engine, ids[i], _greedy(12), streams[i]) for i in (1, 2, 3)])
        for i, (stream, (want, logits)) in enumerate(zip(streams, references)):
            _same_tokens(stream.wait().tokens, want, logits, f"{case}: prompt {i} in the running batch")
    finally:
        engine.close()


@pytest.mark.parametrize(("setting", "value"), [("bad_words_ids", [[5]]), ("sequence_bias", [[[5], -2.0]]),
                                                ("exponential_decay_length_penalty", (4, 1.5)),
                                                ("encoder_repetition_penalty", 1.3)])
def test_a_generation_config_the_engine_cannot_follow_is_refused(engines: dict[str, Any], setting: str,
                                                                 value: Any) -> None:
    model, kept = engines["gpt2"].model, engines["gpt2"].model.generation_config
    model.generation_config = transformers.GenerationConfig(**{setting: value})
    try:
        with pytest.raises(ValueError, match=rf"generation_config.json sets {setting} .*transformers' generate "
                                             rf"applies to greedy decoding .* fix: remove {setting} from"):
            ge.Engine(model, engines["gpt2"].tokenizer, LIMITS, "text-generation")
    finally:
        model.generation_config = kept
    assert ge.unsupported_settings(transformers.GenerationConfig(encoder_repetition_penalty=1.0)) == []


def test_decoder_start_falls_back_as_generate_does() -> None:
    """generate's first decoder token: generation_config's decoder_start_token_id, else its bos_token_id; a config
    without either (an attribute some configs do not even have) is a clear ValueError."""
    config = transformers.PretrainedConfig()
    assert ge._decoder_start(transformers.GenerationConfig(decoder_start_token_id=0, bos_token_id=5), config) == 0
    assert ge._decoder_start(transformers.GenerationConfig(bos_token_id=5), config) == 5
    assert ge._decoder_start(None, transformers.PretrainedConfig(decoder_start_token_id=3)) == 3
    with pytest.raises(ValueError, match="set neither decoder_start_token_id nor bos_token_id"):
        ge._decoder_start(transformers.GenerationConfig(), config)


def test_whispers_decoder_alone_is_a_text_model_not_a_speech_prompt() -> None:
    """WhisperForCausalLM (transformers maps it for text-generation) decodes text prompts: the engine builds no
    Whisper speech prompt for it, which would need whisper_prompt.py, shipped with speech models only (a served
    text-generation entry of this checkpoint failed to load in Triton with ModuleNotFoundError)."""
    import transformers

    tok = generation_checkpoints.tokenizer()
    config = transformers.WhisperConfig(vocab_size=len(tok), d_model=32, decoder_layers=2, decoder_attention_heads=2,
                                        decoder_ffn_dim=64, encoder_layers=2, encoder_attention_heads=2,
                                        encoder_ffn_dim=64, max_target_positions=64, pad_token_id=1, bos_token_id=0,
                                        eos_token_id=2, decoder_start_token_id=0)
    engine = ge.Engine(transformers.WhisperForCausalLM(config), tok, ge.Limits(), "text-generation")
    try:
        assert (engine.whisper, engine.prompts, engine.speech, engine.audio_llm) == (False, None, False, False)
    finally:
        engine.close()
