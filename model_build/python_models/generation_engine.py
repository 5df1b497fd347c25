"""Text generation with continuous batching, for the decoupled Triton Python-backend model ``hf_generate.py``.

Prompts in, text streamed out: a background scheduler thread holds one running batch; between decoding steps it
prefills the requests submitted meanwhile (those waiting together in one forward pass, left-padded like
``generate``'s batches, so each first token is still what ``model.generate`` gives for its prompt alone) and lets
them JOIN the batch, and finished requests LEAVE it. The batch's key/value caches are kept aligned on the left:

* causal LMs: a joining row's cache is left-padded to the batch's length (or the batch's to the row's), the
  attention mask marks pads with 0, and position ids come from the mask's cumulative sum, as ``generate`` builds
  them for left-padded batches; transformers' masks are index based (cache length), so pads are simply never seen.
* encoder-decoders: the encoder runs once per request; encoder outputs and cross-attention caches are right-padded
  to the batch's longest prompt with an encoder mask, and the decoder caches are left-padded like a causal LM's.
  T5's relative position bias depends only on distances, so left pads do not move it; BART-like learned decoder
  positions are computed from the cache length, so a hook on the decoder's position embedding gives each row its
  own position.
* speech recognition (Whisper, ``automatic-speech-recognition``): an encoder-decoder whose encoder takes the clip's
  log-mel ``input_features`` (one fixed 30 s window, so encoder rows never need padding) instead of ids; the
  decoder starts from Whisper's prompt (<|startoftranscript|>, language, task, <|notimestamps|>) as
  ``WhisperForConditionalGeneration.generate`` builds it for short-form audio (whisper_prompt.py, shipped beside this
  file with speech models), the language detected from the clip where neither the request nor the checkpoint sets
  one.
* audio language models (Qwen3-ASR, VibeVoice-ASR; speech models whose config is not an encoder-decoder): one
  decoder reading the clip inside a text prompt that the checkpoint's processor writes (transcription_request.py,
  shipped beside this file with them). Each prompt is prefilled alone with its audio features, which the model
  merges into the prompt's audio positions; from then on the row is a causal LM's and joins the shared batch.

Where a checkpoint's cache or positions cannot be aligned this way (sliding-window layers that already dropped
tokens, linear-attention or other hybrid caches, sinusoidal decoder positions...), the request is decoded in a batch
of its own, beside the shared one: correct, only slower.

Only the scheduler thread runs the model: on CPU, OpenMP gives every thread that runs a parallel region a pool of
workers for that thread's life, and libgomp, once it counts more pooled threads than CPUs, puts them to sleep between
regions (~400 futex wake-ups per GPT-2 prefill, +60 ms on a quiet 2-core machine). The serving thread only tokenizes
and submits; a caller that runs torch on another long-lived thread beside the engine slows both.

Pure Python + torch + transformers; it ships beside ``model.py`` in the Triton model directory and imports its
sibling ``step_requests.py`` from there (no import from the build's repository).
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import logging
import os
import queue
import random
import sys
import threading
import time
from typing import Any, Callable, Optional, Sequence, Union

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # step_requests.py ships beside this file
from step_requests import RequestError  # noqa: E402

LOG = logging.getLogger(__name__)

SPEECH = "automatic-speech-recognition"
KINDS = ("text-generation", "text2text-generation", SPEECH)
# Stands for the language token in a speech prompt until the clip's encoder output shows the language (as generate's
# detect_language: the decoder's first step from <|startoftranscript|>, argmax over the checkpoint's language ids).
DETECT = -1
# A token is rarely longer than this many characters: the prompt is cut off (refused) before tokenizing beyond it,
# so an oversize body costs a length check, not a tokenization.
CHARS_PER_TOKEN_CAP = 64
FINISH_STOP, FINISH_LENGTH, FINISH_CANCELLED = "stop", "length", "cancelled"
# Causal LMs whose padding mask is misread once a cached batch has pads, so each request decodes in a batch of its
# own (correct, only slower): GIT widens a cached step's mask by its image tokens even when no image was given
# (transformers 5.23.0 GitModel.forward), which shifts the pads.
ALONE = frozenset({"git"})
# Inside Triton is_cancelled is an IPC round trip to the server: a row asks it after this many of its steps, or
# sooner once this much time has passed (slow steps: one round trip is small beside them), so a cancelled request
# generates at most CANCEL_POLL_STEPS tokens more.
CANCEL_POLL_STEPS = 8
CANCEL_POLL_S = 0.05

OnText = Callable[[str], None]
OnDone = Callable[[Optional[str], dict[str, Any]], None]
IsCancelled = Callable[[], bool]
OnToken = Callable[[int], None]
# A speech request's audio: a speech encoder-decoder's encoder input [1, ...], or an audio language model's prefill
# arguments besides its prompt ids (input_features and their mask...: transcription_request.py).
Features = Union[torch.Tensor, dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class Limits:
    """The spec's bounds for one endpoint (``task.generation``); config.pbtxt parameters of the same names."""

    max_new_tokens: int = 256
    default_max_new_tokens: int = 64
    max_temperature: float = 2.0
    max_top_k: int = 100
    max_repetition_penalty: float = 2.0
    max_stop_strings: int = 4
    max_prompt_tokens: int = 1024
    max_concurrent: int = 8
    languages: Optional[tuple[str, ...]] = None  # speech: the codes a request may ask for; None: the checkpoint's

    @classmethod
    def from_parameters(cls, parameters: dict[str, str]) -> "Limits":
        """The bounds from config.pbtxt's string parameters; a bound not set there keeps its default."""
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            if field.name == "languages" and field.name in parameters:  # comma-separated codes ("" for none)
                values["languages"] = tuple(code for code in parameters["languages"].split(",") if code)
            elif field.name in parameters:
                kind = float if field.type in ("float", float) else int
                try:
                    values[field.name] = kind(parameters[field.name])
                except ValueError:
                    raise ValueError(f"config.pbtxt parameter {field.name}: {parameters[field.name]!r} is not "
                                     f"{'a number' if kind is float else 'an integer'}") from None
        limits = cls(**values)
        if not 1 <= limits.default_max_new_tokens <= limits.max_new_tokens:
            raise ValueError(f"config.pbtxt parameter default_max_new_tokens: {limits.default_max_new_tokens} is "
                             f"not from 1 to max_new_tokens ({limits.max_new_tokens})")
        if limits.max_concurrent < 1 or limits.max_prompt_tokens < 1:
            raise ValueError("config.pbtxt parameters max_concurrent and max_prompt_tokens must be at least 1")
        return limits


@dataclasses.dataclass(frozen=True)
class Settings:
    """One request's decoding settings, validated."""

    max_new_tokens: int
    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    repetition_penalty: float = 1.0
    stop: tuple[str, ...] = ()
    seed: Optional[int] = None
    stream: bool = True
    language: Optional[str] = None  # speech: generate's per-call language and task (whisper_prompt.py)
    task: Optional[str] = None
    prompt: Optional[str] = None  # Whisper: text that conditions the decoder (generate's prompt_ids)

    @property
    def greedy(self) -> bool:
        return not self.do_sample or self.temperature == 0


# ---------------------------------------------------------------------------------------------------------------
# Request parameters


SAMPLING_ONLY = ("temperature", "top_p", "top_k", "seed")
KNOWN_PARAMETERS = ("do_sample", "max_new_tokens", "repetition_penalty", "seed", "stop", "stream", "temperature",
                    "top_k", "top_p")
SPEECH_PARAMETERS = ("language", "prompt", "task")
SEED_BOUND = 2 ** 63


def _shown(value: Any) -> str:
    """A request value as the client wrote it (JSON)."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _bound_error(name: str, value: Any, bound: Any, spec_name: str) -> RequestError:
    return RequestError(f"parameters.{name}: {_shown(value)} is above this endpoint's bound {bound} (the spec's "
                        f"task.generation.{spec_name}); send at most {bound}")


def _integer(name: str, value: Any, allowed: str) -> int:
    # bool is an int subclass in Python: true/false are not numbers here.
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"parameters.{name}: {_shown(value)} is not an integer; send {allowed}")
    return value


def _number(name: str, value: Any, allowed: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RequestError(f"parameters.{name}: {_shown(value)} is not a number; send {allowed}")
    return float(value)


def _boolean(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise RequestError(f"parameters.{name}: {_shown(value)} is not a boolean; send true or false")
    return value


def _word(name: str, value: Any, allowed: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RequestError(f"parameters.{name}: {_shown(value)} is not a non-empty string; send {allowed}")
    return value.strip()


def _max_new_tokens(value: Any, limits: Limits) -> int:
    allowed = f"an integer from 1 to {limits.max_new_tokens}"
    count = _integer("max_new_tokens", value, allowed)
    if count < 1:
        raise RequestError(f"parameters.max_new_tokens: {count} is below 1; send {allowed}")
    if count > limits.max_new_tokens:
        raise _bound_error("max_new_tokens", value, limits.max_new_tokens, "max_new_tokens")
    return count


def _temperature(value: Any, limits: Limits) -> float:
    allowed = f"a number from 0 (greedy) to {limits.max_temperature}"
    temperature = _number("temperature", value, allowed)
    if temperature < 0:
        raise RequestError(f"parameters.temperature: {_shown(value)} is below 0; send {allowed}")
    if temperature > limits.max_temperature:
        raise _bound_error("temperature", value, limits.max_temperature, "max_temperature")
    return temperature


def _top_p(value: Any) -> float:
    allowed = "a number above 0 and at most 1 (1 keeps every token)"
    top_p = _number("top_p", value, allowed)
    if not 0 < top_p <= 1:
        raise RequestError(f"parameters.top_p: {_shown(value)} is outside (0, 1]; send {allowed}")
    return top_p


def _top_k(value: Any, limits: Limits) -> int:
    allowed = f"an integer from 0 (no top-k) to {limits.max_top_k}"
    top_k = _integer("top_k", value, allowed)
    if top_k < 0:
        raise RequestError(f"parameters.top_k: {top_k} is below 0; send {allowed}")
    if top_k > limits.max_top_k:
        raise _bound_error("top_k", value, limits.max_top_k, "max_top_k")
    return top_k


def _repetition_penalty(value: Any, limits: Limits) -> float:
    allowed = f"a number above 0 and at most {limits.max_repetition_penalty} (1 means no penalty)"
    penalty = _number("repetition_penalty", value, allowed)
    if penalty <= 0:
        raise RequestError(f"parameters.repetition_penalty: {_shown(value)} is not above 0; send {allowed}")
    if penalty > limits.max_repetition_penalty:
        raise _bound_error("repetition_penalty", value, limits.max_repetition_penalty, "max_repetition_penalty")
    return penalty


def _seed(value: Any) -> int:
    allowed = f"an integer from 0 to {SEED_BOUND - 1}"
    seed = _integer("seed", value, allowed)
    if not 0 <= seed < SEED_BOUND:
        raise RequestError(f"parameters.seed: {seed} is outside 0 to {SEED_BOUND - 1}; send {allowed}")
    return seed


def _stop(value: Any, limits: Limits) -> tuple[str, ...]:
    """A string, a list of strings, or a string holding a JSON array of strings (Triton's generate route passes
    only scalar parameters, so a client sends a list as its JSON text)."""
    allowed = (f'a string or a list of at most {limits.max_stop_strings} non-empty strings, e.g. "stop": ["\\n\\n"] '
               'or "stop": "[\\"\\\\n\\\\n\\"]"')
    items: Any = value
    if isinstance(value, str) and value.startswith("["):
        try:
            items = json.loads(value)
        except ValueError:
            items = value  # a stop string that merely starts with '['
    if isinstance(items, str):
        items = [items]
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise RequestError(f"parameters.stop: {_shown(value)} is not a string or a list of strings; send {allowed}")
    if any(item == "" for item in items):
        raise RequestError(f"parameters.stop: {_shown(value)} holds an empty string; send {allowed}")
    if len(items) > limits.max_stop_strings:
        raise RequestError(f"parameters.stop: {len(items)} stop strings are above this endpoint's bound "
                           f"{limits.max_stop_strings} (the spec's task.generation.max_stop_strings); send at most "
                           f"{limits.max_stop_strings}")
    return tuple(dict.fromkeys(items))


def parse_request(parameters: dict[str, Any], limits: Limits, speech: bool = False) -> Settings:
    """Settings from a request's parameters (Triton's generate route: the JSON object ``parameters``).

    Greedy unless ``do_sample`` is true; temperature, top_p, top_k and seed apply to sampling only, so sending one
    of them without ``do_sample: true`` is refused rather than silently ignored. A speech model also takes
    ``language`` and ``task`` (checked against the checkpoint by whisper_prompt.py)."""
    if not isinstance(parameters, dict):
        raise RequestError(f"parameters: {_shown(parameters)} is not a JSON object; send e.g. "
                           '"parameters": {"max_new_tokens": 32}')
    known = KNOWN_PARAMETERS + (SPEECH_PARAMETERS if speech else ())
    unknown = sorted(set(parameters) - set(known))
    if unknown:
        raise RequestError(f"parameters.{unknown[0]} is not a parameter of this endpoint; known: "
                           f"{', '.join(sorted(known))}; remove it or correct its name")
    do_sample = _boolean("do_sample", parameters.get("do_sample", False))
    if not do_sample:
        given = [name for name in SAMPLING_ONLY if name in parameters]
        if given:
            raise RequestError(f"parameters.{given[0]} applies only to sampling, and this request decodes greedily "
                               f"(do_sample is false or absent); send \"do_sample\": true with it, or remove it")
    settings = Settings(
        max_new_tokens=_max_new_tokens(parameters.get("max_new_tokens", limits.default_max_new_tokens), limits),
        do_sample=do_sample,
        temperature=_temperature(parameters["temperature"], limits) if "temperature" in parameters else 1.0,
        top_p=_top_p(parameters["top_p"]) if "top_p" in parameters else 1.0,
        top_k=_top_k(parameters["top_k"], limits) if "top_k" in parameters else 0,
        repetition_penalty=(_repetition_penalty(parameters["repetition_penalty"], limits)
                            if "repetition_penalty" in parameters else 1.0),
        stop=_stop(parameters["stop"], limits) if "stop" in parameters else (),
        seed=_seed(parameters["seed"]) if "seed" in parameters else None,
        stream=_boolean("stream", parameters.get("stream", True)),
        language=_word("language", parameters["language"], 'a language code or name, e.g. "fr" or "french"')
        if "language" in parameters else None,
        task=_word("task", parameters["task"], '"transcribe" or "translate"') if "task" in parameters else None,
        prompt=_word("prompt", parameters["prompt"], "the text that comes before the clip, e.g. the names it "
                     "mentions") if "prompt" in parameters else None,
    )
    return settings


# ---------------------------------------------------------------------------------------------------------------
# Text out


class _Detokenizer:
    """Incremental decoding: text for new tokens once it no longer ends in half a UTF-8 character.

    Decodes a short window (the tokens of the last emitted piece plus the new ones) twice, without and with the new
    tokens, and emits the difference: a byte-level token that ends inside a character decodes to U+FFFD until its
    other bytes arrive, and a SentencePiece word start keeps its space because the window starts before it."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self._ids: list[int] = []
        self._prefix = 0  # window start
        self._read = 0  # tokens before this one have been emitted

    def _decode(self, ids: Sequence[int]) -> str:
        return str(self._tokenizer.decode(ids, skip_special_tokens=True))

    def add(self, token: int) -> str:
        self._ids.append(token)
        before = self._decode(self._ids[self._prefix:self._read])
        after = self._decode(self._ids[self._prefix:])
        if len(after) > len(before) and not after.endswith("\ufffd"):
            self._prefix, self._read = self._read, len(self._ids)
            return after[len(before):]
        return ""

    def flush(self) -> str:
        """Whatever is held back, replacement characters included (the sequence has ended)."""
        before = self._decode(self._ids[self._prefix:self._read])
        after = self._decode(self._ids[self._prefix:])
        self._prefix = self._read = len(self._ids)
        return after[len(before):]


class _StopText:
    """Text to send, cut at the first stop string (not included), holding back a tail that may start one."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self._stops = stops
        self._longest = max((len(stop) for stop in stops), default=0)
        self._text = ""
        self._sent = 0

    def push(self, delta: str) -> tuple[str, bool]:
        """(text to send now, whether a stop string ended the sequence)."""
        self._text += delta
        # A match can only start in unsent text: a started match is always held back (see _held).
        found = [at for at in (self._text.find(stop, self._sent) for stop in self._stops) if at >= 0]
        if found:
            end = min(found)
            out = self._text[self._sent:end]
            self._text, self._sent = self._text[:end], end
            return out, True
        end = max(self._sent, len(self._text) - self._held())
        out, self._sent = self._text[self._sent:end], end
        return out, False

    def _held(self) -> int:
        """Length of the longest tail of the text that is the start of a stop string."""
        for size in range(min(self._longest - 1, len(self._text)), 0, -1):
            tail = self._text[-size:]
            if any(stop.startswith(tail) for stop in self._stops):
                return size
        return 0

    def rest(self) -> str:
        out, self._sent = self._text[self._sent:], len(self._text)
        return out


# ---------------------------------------------------------------------------------------------------------------
# Sequences and batches


@dataclasses.dataclass
class _Request:
    prompt_ids: list[int]
    settings: Settings
    on_text: OnText
    on_done: OnDone
    is_cancelled: IsCancelled
    on_token: Optional[OnToken]
    features: Optional[Features] = None
    answer_after: Optional[int] = None  # the transcript begins after this token (transcription_request.py)


class _Sequence:
    """One request being decoded: its tokens, text state, sampling state and callbacks."""

    def __init__(self, request: _Request, tokenizer: Any, vocab_size: int, device: torch.device,
                 context: list[int]) -> None:
        self.request = request
        self.settings = request.settings
        self.generated: list[int] = []
        # What generate's input_ids hold for this row: the prompt and the generated tokens for a causal LM, the
        # decoder's start token (Whisper: its prompt) and the generated tokens for an encoder-decoder; the logits
        # processors that look back (n-gram bans, lengths, the repetition penalty) read it.
        self.context = list(context)
        self.encoder_ngrams: dict[tuple[int, ...], list[int]] = {}
        self.done = False
        self._detokenizer = _Detokenizer(tokenizer)
        self._stop = _StopText(request.settings.stop)
        # Text before the answer_after token is the model's header (Qwen3-ASR's "language <NAME>"): held back, and
        # dropped once the token comes; sent after all where it never does (as the processor's parse keeps it).
        self._holding = request.answer_after
        self._held: list[str] = []
        self.generator: Optional[torch.Generator] = None
        if not self.settings.greedy:
            # Own generator per sequence: a seeded request samples the same tokens whatever else runs beside it.
            self.generator = torch.Generator(device=device)
            self.generator.manual_seed(self.settings.seed if self.settings.seed is not None
                                       else random.randrange(SEED_BOUND))
        self._polled_at = time.perf_counter()
        self._steps_unpolled = 0
        self.seen: Optional[torch.Tensor] = None
        if self.settings.repetition_penalty != 1.0:
            # transformers penalises every token of input_ids: prompt + generated for a causal LM, the decoder's
            # tokens (from its start token) for an encoder-decoder.
            self.seen = torch.zeros(vocab_size, dtype=torch.bool, device=device)
            known = [t for t in context if t != DETECT]  # a speech prompt's language is seen once detected
            self.seen[torch.tensor(known, dtype=torch.long, device=device)] = True

    def usage(self) -> dict[str, Any]:
        return {"prompt_tokens": len(self.request.prompt_ids), "completion_tokens": len(self.generated)}

    def cancelled(self, now: float) -> bool:
        """Whether the client cancelled, asked only when a poll is due (see CANCEL_POLL_STEPS)."""
        self._steps_unpolled += 1
        if self._steps_unpolled < CANCEL_POLL_STEPS and now - self._polled_at < CANCEL_POLL_S:
            return False
        return self.poll_cancelled(now)

    def poll_cancelled(self, now: float) -> bool:
        """Whether the client cancelled: asked now."""
        self._steps_unpolled, self._polled_at = 0, now
        try:
            return bool(self.request.is_cancelled())
        except Exception:  # noqa: BLE001 - a sender that cannot answer has lost its client
            return True

    def accept(self, token: int, eos: frozenset[int]) -> Optional[str]:
        """Take a generated token, send its text; the finish reason if it ended the sequence."""
        self.generated.append(token)
        self.context.append(token)
        if self.seen is not None:
            self.seen[token] = True
        if self.request.on_token is not None:
            self.request.on_token(token)
        if token in eos:
            self._send_rest()
            return FINISH_STOP
        if self._holding is not None:
            if token == self._holding:
                self._holding = None
                self._held = []
                self._detokenizer.flush()
            else:
                self._held.append(self._detokenizer.add(token))
        else:
            out, stopped = self._stop.push(self._detokenizer.add(token))
            self._send(out)
            if stopped:
                return FINISH_STOP
        if len(self.generated) >= self.settings.max_new_tokens:
            self._send_rest()
            return FINISH_LENGTH
        return None

    def end_text(self) -> None:
        """Send the text held back (by the detokenizer, a stop string's start, a header): the model has ended."""
        self._send_rest()

    def _send(self, text: str) -> None:
        if text:
            self.request.on_text(text)

    def _send_rest(self) -> None:
        out, stopped = self._stop.push("".join(self._held) + self._detokenizer.flush())
        self._held = []
        self._send(out if stopped else out + self._stop.rest())

    def finish(self, reason: Optional[str], error: Optional[str] = None) -> None:
        """Call on_done once; a failing callback is logged (the scheduler serves the others on)."""
        if self.done:
            return
        self.done = True
        usage = self.usage()
        if error is not None:
            usage["error"] = error
        try:
            self.request.on_done(reason, usage)
        except Exception:  # noqa: BLE001 - a client's callback must not stop the scheduler
            LOG.exception("on_done of a generation request failed")


@dataclasses.dataclass
class _Batch:
    """Rows decoded together. ``mask`` is the self-attention (decoder) mask over the cache's columns, 0 on pads;
    ``encoder``/``encoder_mask`` are the padded encoder outputs of an encoder-decoder."""

    rows: list[_Sequence]
    cache: Any
    mask: torch.Tensor
    next_tokens: torch.Tensor
    shared: bool
    encoder: Optional[torch.Tensor] = None
    encoder_mask: Optional[torch.Tensor] = None


@dataclasses.dataclass
class Timings:
    """Where the scheduler's time goes (seconds and counts since start), for benchmarks and logs."""

    prefill_s: float = 0.0
    prefills: int = 0  # forward passes
    prefill_rows: int = 0  # prompts those passes prefilled
    forward_s: float = 0.0
    steps: int = 0
    rows_decoded: int = 0
    choose_s: float = 0.0
    emit_s: float = 0.0
    batch_s: float = 0.0
    loop_s: float = 0.0
    widest: int = 0  # the most rows one step of the shared batch decoded together


def _pad(tensor: torch.Tensor, dim: int, size: int, left: bool) -> torch.Tensor:
    """``tensor`` zero-padded along ``dim`` to ``size``."""
    missing = size - tensor.shape[dim]
    if missing == 0:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = missing
    zeros = tensor.new_zeros(shape)
    return torch.cat([zeros, tensor] if left else [tensor, zeros], dim=dim)


def _join(tensors: list[torch.Tensor], dim: int, left: bool) -> torch.Tensor:
    """Rows of different lengths along ``dim`` padded to the longest, stacked on the batch dimension."""
    size = max(tensor.shape[dim] for tensor in tensors)
    return torch.cat([_pad(tensor, dim, size, left) for tensor in tensors], dim=0)


def _plain_layers(cache: Any) -> Optional[list[tuple[torch.Tensor, torch.Tensor]]]:
    """(keys, values) per layer when ``cache`` is a DynamicCache of full-length layers; None otherwise.

    A sliding-window layer that still holds every token is as good as a plain one: the model's sliding mask is index
    based, so left pads keep the window right; once it has dropped tokens its columns no longer line up."""
    from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer

    if type(cache) is not DynamicCache:
        return None
    layers = []
    every: list[Any] = list(cache.layers)
    for layer in every:
        if type(layer) not in (DynamicLayer, DynamicSlidingWindowLayer) or not layer.is_initialized:
            return None
        sliding = type(layer) is DynamicSlidingWindowLayer
        if sliding and layer.cumulative_length > layer.keys.shape[-2]:
            return None
        layers.append((layer.keys, layer.values))
    return layers


def _zero_pads(layers: list[tuple[torch.Tensor, torch.Tensor]],
               mask: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Keys and values of pad columns set to 0, as a joining row's pads are: a pad's query attended to nothing, so
    its keys and values may be NaN, and a masked NaN value still turns the weighted sum into NaN."""
    if bool(mask.all()):
        return layers
    pads = mask[:, None, :, None] == 0
    return [(keys.masked_fill(pads, 0), values.masked_fill(pads, 0)) for keys, values in layers]


def _dynamic(layers: list[tuple[torch.Tensor, torch.Tensor]]) -> Any:
    from transformers.cache_utils import DynamicCache

    return DynamicCache(layers)


class Engine:
    """Continuous-batching generation on one model; requests run through ``submit``, callbacks on its thread."""

    def __init__(self, model: Any, tokenizer: Any, limits: Limits, kind: str, device: str = "cpu",
                 eos_token_ids: Optional[Sequence[int]] = None, decoder_start_token_id: Optional[int] = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.limits = limits
        self.speech = kind == SPEECH
        # A speech model that is no encoder-decoder reads the clip inside its prompt (transcription_request.py).
        self.audio_llm = self.speech and not getattr(model.config, "is_encoder_decoder", False)
        self.seq2seq = kind == "text2text-generation" or self.speech and not self.audio_llm
        # A streaming speech model reads audio at every step: decoded by its own generate, a step at a time
        # (step_fed.py, shipped beside this file with speech models).
        self.step_fed: Any = None
        if self.audio_llm:
            import step_fed

            self.step_fed = step_fed if getattr(model.config, "model_type", None) in step_fed.STEP_FED_TYPES \
                else None
        self.device = torch.device(device)
        generation = getattr(model, "generation_config", None)
        if eos_token_ids is None:
            # A step-fed model ends where its generate ends (Kyutai's generation_config names no end: its clip's
            # last frame ends it), not at a token its tokenizer calls the end.
            eos_token_ids = _ids(getattr(generation, "eos_token_id", None)) or \
                ([] if self.step_fed else _ids(tokenizer.eos_token_id))
        self.eos = frozenset(eos_token_ids)
        if self.seq2seq and decoder_start_token_id is None:
            decoder_start_token_id = _decoder_start(generation, model.config)
        self.decoder_start = int(decoder_start_token_id or 0)  # not used by a causal LM
        unsupported = unsupported_settings(generation)
        if unsupported:
            raise ValueError(unsupported[0])
        self.constraints = Constraints.of(generation, self.eos)
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        # generate applies these for every model whose generation_config.json sets them (Whisper's do): tokens never
        # chosen, and tokens not chosen first (SuppressTokens[AtBegin]LogitsProcessor).
        # Ids beyond the logits are ignored, as generate's isin over the vocabulary ignores them (a Whisper config's
        # 50256 on a smaller vocabulary).
        self._suppress = [t for t in _ids(getattr(generation, "suppress_tokens", None)) if t < self.vocab_size]
        self._begin_suppress = [t for t in _ids(getattr(generation, "begin_suppress_tokens", None))
                                if t < self.vocab_size]
        # SuppressTokensAtBeginLogitsProcessor's begin index: one token later where a forced BOS takes the first
        # position of a one-token decoder input.
        self._begin_after_bos = self.constraints.forced_bos is not None
        # Speech: Whisper builds its own decoder prompt (whisper_prompt.py, shipped beside this file with speech
        # models only); the other encoder-decoders start from the decoder start token, as generate does.
        # WhisperForCausalLM (Whisper's decoder alone, a text-generation checkpoint) reads text: not a speech prompt.
        self.whisper = self.speech and getattr(model.config, "model_type", None) == "whisper"
        self.speech_input = str(getattr(model.get_encoder(), "main_input_name", "input_features")) \
            if self.speech and self.seq2seq else ""
        self.prompts: Any = None
        if self.whisper:
            from whisper_prompt import WhisperPrompts

            self.prompts = WhisperPrompts(generation, model.config, limits.languages)
        self.speech_prompt: list[int] = self.prompts.default if self.whisper else \
            [self.decoder_start] if self.speech and self.seq2seq else []
        self._languages = sorted(self.prompts.lang_to_id.values()) if self.prompts is not None else []
        self._forward_parameters = set(inspect.signature(model.forward).parameters)
        self._positions: Optional[torch.Tensor] = None
        self._hook: Any = None
        from transformers.modeling_outputs import BaseModelOutput

        self._encoder_output_class: type = BaseModelOutput  # until the encoder first runs (see _encode)
        self._give_cache = False  # prefill with an empty cache given (see _prefill_seq2seq)
        self._decoder_positions = self._decoder_position_mode()
        # Prompts are prefilled together only where their rows can share a batch afterwards (see _groupable).
        self._alone_only = getattr(model.config, "model_type", None) in ALONE
        # Speech encoders other than Whisper's take clips of any length: each clip is encoded and decoded in a
        # batch of its own, with no encoder mask (none is padded), as generate decodes one clip.
        self._own_clip = self.speech and not self.whisper
        self._group_prefill = (self._decoder_positions is not None and not self._own_clip) if self.seq2seq else \
            "position_ids" in self._forward_parameters and not self._alone_only and not self.audio_llm
        window = getattr(model.config, "sliding_window", None)
        self._group_bound = window if isinstance(window, int) and window > 0 else sys.maxsize
        self.timings = Timings()
        self._waiting: "queue.Queue[_Request]" = queue.Queue()
        self._wake = threading.Event()
        self._closed = False
        self._shared: Optional[_Batch] = None
        self._alone: list[_Batch] = []
        self._thread = threading.Thread(target=self._run, name="generation-scheduler", daemon=True)
        self._thread.start()

    @classmethod
    def from_checkpoint(cls, folder: str, kind: str, limits: Limits, device: str = "cpu") -> "Engine":
        """The checkpoint's model, its own fast tokenizer (and chat template), and generation_config.json."""
        import transformers

        if kind not in KINDS:
            raise ValueError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, use_fast=True)
        auto = {"text2text-generation": transformers.AutoModelForSeq2SeqLM,
                SPEECH: transformers.AutoModelForSpeechSeq2Seq}.get(kind, transformers.AutoModelForCausalLM)
        # from_pretrained reads generation_config.json too (eos ids, pad id, decoder_start_token_id).
        model: Any = auto.from_pretrained(folder)
        return cls(model.to(device), tokenizer, limits, kind, device=device)

    # --- prompts

    def encode(self, text: Optional[str] = None, messages: Optional[list[Any]] = None) -> list[int]:
        """Token ids of a prompt, or of chat ``messages`` through the checkpoint's chat template."""
        if (text is None) == (messages is None):
            raise RequestError("send the prompt as text_input (or inputs) or a chat as messages; one of them, "
                               "not both and not neither")
        if messages is not None:
            text = self._chat_text(messages)
            special = False  # the template writes its own special tokens
        else:
            special = True
        assert text is not None
        bound = self.limits.max_prompt_tokens
        if len(text) > bound * CHARS_PER_TOKEN_CAP:
            raise RequestError(f"the prompt is {len(text)} characters, more than {bound} tokens can hold on this "
                               f"endpoint (its bound: max_prompt_tokens {bound}, the spec's "
                               f"task.generation.max_prompt_tokens); send a shorter prompt")
        ids = list(self.tokenizer(text, add_special_tokens=special)["input_ids"])
        if not ids:
            raise RequestError("the prompt is empty (no tokens); send some text")
        if len(ids) > bound:
            raise RequestError(f"the prompt is {len(ids)} tokens, above this endpoint's bound {bound} (the spec's "
                               f"task.generation.max_prompt_tokens); send at most {bound} tokens")
        return ids

    def _chat_text(self, messages: Any) -> str:
        if not getattr(self.tokenizer, "chat_template", None):
            raise RequestError("messages: this checkpoint has no chat template (tokenizer_config.json "
                               "chat_template or chat_template.jinja); send the prompt as text_input instead")
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and set(m) == {"role", "content"} and isinstance(m["role"], str)
                and isinstance(m["content"], str) for m in messages):
            raise RequestError(f"messages: {_shown(messages)[:200]} is not a non-empty list of "
                               '{"role": ..., "content": ...} objects with string values; send e.g. '
                               '[{"role": "user", "content": "Hello"}]')
        return str(self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))

    def prompt_for(self, settings: Settings) -> list[int]:
        """A speech request's decoder prompt, with its own language, task and prompt text (a RequestError where
        refused)."""
        if not self.speech or self.audio_llm:
            raise ValueError("only a speech encoder-decoder has a decoder prompt per request")
        if self.prompts is None:
            asked = next((name for name in SPEECH_PARAMETERS if getattr(settings, name) is not None), None)
            if asked is not None:
                raise RequestError(f"parameters.{asked}: this {self.model.config.model_type} checkpoint takes no "
                                   f"{asked} per request (only a Whisper does); remove {asked}")
            return list(self.speech_prompt)
        start: list[int] = self.prompts.for_request(settings.language, settings.task)
        if settings.prompt is None:
            return start
        return self._previous_text(settings.prompt, len(start)) + start

    @property
    def takes_prompt_text(self) -> bool:
        """Whether a request may send ``prompt``: a Whisper whose tokenizer makes generate's prompt_ids."""
        return self.prompts is not None and hasattr(self.tokenizer, "get_prompt_ids")

    def _previous_text(self, text: str, start_tokens: int) -> list[int]:
        """A Whisper request's ``prompt`` as generate's ``prompt_ids``: the tokenizer's own ``get_prompt_ids``
        (<|startofprev|>, then " " + the text stripped), put before the start tokens as transformers 5.23.0's
        ``_prepare_decoder_input_ids`` puts them; bounded by the spec's max_prompt_tokens and the decoder's
        positions (generate raises a ValueError where they overflow)."""
        if not self.takes_prompt_text:
            raise RequestError(f"parameters.prompt: this checkpoint's tokenizer ({type(self.tokenizer).__name__}) "
                               "has no get_prompt_ids, which a WhisperTokenizer has; remove prompt")
        try:
            ids = [int(t) for t in self.tokenizer.get_prompt_ids(text, return_tensors=None)]
        except ValueError as exc:  # "Encountered text in the prompt corresponding to disallowed special token"
            token = str(exc).rstrip(".").rsplit(": ", 1)[-1]
            raise RequestError(f"parameters.prompt: the text holds {token}, one of this Whisper's special tokens, "
                               "which a prompt may not contain; remove it") from None
        bound = self.limits.max_prompt_tokens
        if len(ids) > bound:
            raise RequestError(f"parameters.prompt: {len(ids)} tokens is above this endpoint's bound {bound} (the "
                               f"spec's task.generation.max_prompt_tokens); send a shorter prompt")
        positions = int(getattr(self.model.config, "max_target_positions", sys.maxsize))
        room = positions - start_tokens - 1
        if len(ids) > room:
            raise RequestError(f"parameters.prompt: its {len(ids)} tokens and the {start_tokens} start tokens leave "
                               f"no room to generate in this model's {positions} decoder positions "
                               f"(max_target_positions); send a prompt of at most {room} tokens")
        return ids

    # --- requests

    def submit(self, prompt_ids: list[int], settings: Settings, on_text: OnText, on_done: OnDone,
               is_cancelled: IsCancelled, on_token: Optional[OnToken] = None,
               features: Optional[Features] = None, answer_after: Optional[int] = None) -> None:
        """Queue a request; its text arrives through ``on_text`` (on the scheduler thread), then ``on_done`` once
        with the finish reason ("stop", "length", "cancelled"; None on an error, named by usage["error"]) and usage
        {prompt_tokens, completion_tokens}. ``on_token`` sees each generated id (tests). Speech: ``features`` are
        the clip's input_features and ``prompt_ids`` the decoder's prompt (``prompt_for``); an audio language model:
        ``prompt_ids``, ``features`` and ``answer_after`` from transcription_request.py."""
        if self._closed:
            raise RuntimeError("the generation engine is closed")
        if not prompt_ids:
            raise RequestError("the prompt is empty (no tokens); send some text")
        if self.speech != (features is not None) or self.audio_llm != isinstance(features, dict):
            raise ValueError("a speech encoder-decoder takes its encoder input with each request, an audio language "
                             "model its prefill arguments (a dict), a text model none")
        positions = getattr(self.model.config, "max_target_positions", None) if self.speech else None
        room = int(positions) - len(prompt_ids) if isinstance(positions, int) else sys.maxsize
        if settings.max_new_tokens > room:  # Whisper's generate raises a ValueError for the same
            raise RequestError(f"max_new_tokens: {settings.max_new_tokens} and the {len(prompt_ids)}-token decoder "
                               f"prompt exceed this model's {positions} decoder positions (max_target_positions); "
                               f"send max_new_tokens of at most {room}")
        self._waiting.put(_Request(list(prompt_ids), settings, on_text, on_done, is_cancelled, on_token, features,
                                   answer_after))
        self._wake.set()

    def close(self) -> None:
        """Stop the scheduler; requests still running or waiting end as cancelled."""
        self._closed = True
        self._wake.set()
        self._thread.join(timeout=60)
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    # --- the scheduler

    def _run(self) -> None:
        with torch.inference_mode():
            while not self._closed:
                if not self._rows() and self._waiting.empty():
                    self._wake.wait(timeout=0.5)
                    self._wake.clear()
                    continue
                started = time.perf_counter()
                try:
                    self._admit()
                    self._drop_cancelled()
                    for batch in self._batches():
                        self._step(batch)
                except Exception as exc:  # noqa: BLE001 - bookkeeping failed: end what runs, keep the thread
                    LOG.exception("the generation scheduler failed")
                    self._fail_all(f"generation failed: {type(exc).__name__}: {exc}")
                self.timings.loop_s += time.perf_counter() - started
        self._end_all()

    def _fail_all(self, error: str) -> None:
        for batch in self._batches():
            for row in batch.rows:
                row.finish(None, error=error)
            self._release(batch)
        self._shared, self._alone = None, []

    def _batches(self) -> list[_Batch]:
        return ([self._shared] if self._shared is not None else []) + list(self._alone)

    def _rows(self) -> int:
        return sum(len(batch.rows) for batch in self._batches())

    def _admit(self) -> None:
        """Prefill the requests waiting while the running batch has room; they join it before the next step."""
        sequences: list[_Sequence] = []
        while self._rows() + len(sequences) < self.limits.max_concurrent:
            try:
                request = self._waiting.get_nowait()
            except queue.Empty:
                break
            sequence = self._sequence(request)
            if sequence is not None:
                sequences.append(sequence)
        for group in self._groups(sequences):
            self._start(group)

    def _sequence(self, request: _Request) -> Optional[_Sequence]:
        """The request's decoding state; None when it failed or was cancelled while waiting (answered already)."""
        try:
            context = request.prompt_ids if self.speech or not self.seq2seq else [self.decoder_start]
            sequence = _Sequence(request, self.tokenizer, self.vocab_size, self.device, context)
            if self.constraints.encoder_ngram and not self.speech:
                # generate's encoder_input_ids: the prompt's ids (a causal LM's too); n-grams taken once per request.
                sequence.encoder_ngrams = _ngrams(request.prompt_ids, self.constraints.encoder_ngram)
        except Exception as exc:  # noqa: BLE001 - e.g. a generator the device refuses: this request's failure
            LOG.exception("starting a generation request failed")
            _safe_done(request, None, {"prompt_tokens": len(request.prompt_ids), "completion_tokens": 0,
                                       "error": f"generation failed: {type(exc).__name__}: {exc}"})
            return None
        if sequence.poll_cancelled(time.perf_counter()):  # asked before a prefill it would waste
            sequence.finish(FINISH_CANCELLED)
            return None
        return sequence

    def _groupable(self, sequence: _Sequence) -> bool:
        # A sliding window counts left pads as tokens: a padded prompt longer than the window would drop real
        # ones, so such prompts are prefilled alone.
        return self._group_prefill and len(sequence.request.prompt_ids) <= self._group_bound

    def _groups(self, sequences: list[_Sequence]) -> list[list[_Sequence]]:
        """Sequences to prefill in one forward pass each: the groupable ones longest first, a group closed where
        padding to its longest prompt would more than double its tokens; the others alone."""
        groups = [[sequence] for sequence in sequences if not self._groupable(sequence)]
        group: list[_Sequence] = []
        tokens = 0
        for sequence in sorted(filter(self._groupable, sequences), key=lambda row: -len(row.request.prompt_ids)):
            length = len(sequence.request.prompt_ids)
            # Speech prompts are not padded: a group holds prompts of one length (a language set or detected).
            if group and ((len(group) + 1) * len(group[0].request.prompt_ids) > 2 * (tokens + length)
                          or self.speech and length != len(group[0].request.prompt_ids)):
                groups.append(group)
                group, tokens = [], 0
            group.append(sequence)
            tokens += length
        return groups + ([group] if group else [])

    def _start(self, group: list[_Sequence]) -> None:
        """Prefill ``group`` in one forward pass, send each row's first token, and let the unfinished rows join."""
        try:
            started = time.perf_counter()
            batch, logits = self._prefill(group)
            self.timings.prefill_s += time.perf_counter() - started
            self.timings.prefills += 1
            self.timings.prefill_rows += len(group)
            if len(group) > 1 and not batch.shared:
                # This checkpoint's cache cannot be aligned (a kind _plain_layers does not know): rows prefilled
                # together would have to decode together, padded, unlike generate alone. Never group again.
                self._group_prefill = False
                for sequence in group:
                    self._start([sequence])
                return
            self._take(batch, logits)
        except Exception as exc:  # noqa: BLE001 - a prefill's failure is answered to its own requests alone
            LOG.exception("prefill of a generation request failed")
            for sequence in group:
                sequence.finish(None, error=f"generation failed: {type(exc).__name__}: {exc}")
            return
        self._leave(batch)  # max_new_tokens 1, or EOS / a stop string at once: those rows never join
        if batch.rows:
            self._place(batch)

    def _place(self, batch: _Batch) -> None:
        started = time.perf_counter()
        if not batch.shared:
            self._alone.append(batch)
        elif self._shared is None:
            self._shared = batch
        else:
            self._shared = self._merge(self._shared, batch)
        self.timings.batch_s += time.perf_counter() - started

    def _drop_cancelled(self) -> None:
        now = time.perf_counter()
        for batch in self._batches():
            for row in batch.rows:
                if row.cancelled(now):
                    row.finish(FINISH_CANCELLED)
            self._leave(batch)

    def _step(self, batch: _Batch) -> None:
        try:
            started = time.perf_counter()
            logits = self._decode(batch)
            self.timings.forward_s += time.perf_counter() - started
            if logits is None:  # the model's own end (Kyutai: the clip's last frame), as generate ends
                for row in batch.rows:
                    row.end_text()
                    row.finish(FINISH_STOP)
                self._remove(batch)
                return
            self.timings.steps += 1
            self.timings.rows_decoded += len(batch.rows)
            if batch.shared:
                self.timings.widest = max(self.timings.widest, len(batch.rows))
            self._take(batch, logits)
        except Exception as exc:  # noqa: BLE001 - end this batch's requests, keep serving
            LOG.exception("a generation step failed")
            for row in batch.rows:
                row.finish(None, error=f"generation failed: {type(exc).__name__}: {exc}")
            self._remove(batch)  # its cache may be half updated: never decode it again
            return
        self._leave(batch)

    def _take(self, batch: _Batch, logits: torch.Tensor) -> None:
        """Choose each row's next token, send its text, and mark the rows that finished."""
        started = time.perf_counter()
        tokens = self._choose(logits, batch.rows)
        batch.next_tokens = torch.tensor(tokens, dtype=torch.long, device=self.device)
        chosen = time.perf_counter()
        self.timings.choose_s += chosen - started
        for row, token in zip(batch.rows, tokens):
            try:
                reason = row.accept(token, self.eos)
            except Exception as exc:  # noqa: BLE001 - a failing on_text ends its own request only
                LOG.exception("sending generated text failed")
                row.finish(None, error=f"sending the text failed: {type(exc).__name__}: {exc}")
                continue
            if reason is not None:
                row.finish(reason)
        self.timings.emit_s += time.perf_counter() - chosen

    def _end_all(self) -> None:
        for batch in self._batches():
            for row in batch.rows:
                row.finish(FINISH_CANCELLED)
            self._release(batch)
        self._shared, self._alone = None, []
        while not self._waiting.empty():
            request = self._waiting.get_nowait()
            _safe_done(request, FINISH_CANCELLED, {"prompt_tokens": len(request.prompt_ids), "completion_tokens": 0})

    # --- model calls

    def _padded(self, group: list[_Sequence], left: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """The group's prompts padded to the longest (left for a causal LM, as generate pads a batch; right for an
        encoder) and their mask, 0 on pads. A single prompt has no pads: it runs exactly as generate runs it."""
        prompts = [sequence.request.prompt_ids for sequence in group]
        longest = max(len(prompt) for prompt in prompts)
        ids = torch.zeros(len(prompts), longest, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, prompt in enumerate(prompts):
            columns = slice(longest - len(prompt), longest) if left else slice(0, len(prompt))
            ids[row, columns] = torch.tensor(prompt, dtype=torch.long)
            mask[row, columns] = 1
        return ids.to(self.device), mask.to(self.device)

    def _prefill(self, group: list[_Sequence]) -> tuple[_Batch, torch.Tensor]:
        """The group's prompts through the model in one forward pass: a batch of their rows and their logits."""
        if self.seq2seq:
            return self._prefill_seq2seq(group)
        if self.step_fed:
            return self._prefill_step_fed(group[0])
        ids, mask = self._padded(group, left=True)
        kwargs: dict[str, Any] = dict(input_ids=ids, attention_mask=mask, use_cache=True)
        if "position_ids" in self._forward_parameters:
            # generate's positions for a left-padded batch: the mask's cumulative sum - 1 (pads: any, masked)
            kwargs["position_ids"] = (mask.cumsum(dim=1) - 1).clamp(min=0)
        if "logits_to_keep" in self._forward_parameters:
            kwargs["logits_to_keep"] = 1  # generate asks for the last position only
        audio = group[0].request.features
        if isinstance(audio, dict):  # an audio language model's prompt: prefilled alone (_group_prefill is off)
            kwargs.update({name: value.to(self.device, dtype=self.model.dtype) if torch.is_floating_point(value)
                           else value.to(self.device) for name, value in audio.items()
                           if isinstance(value, torch.Tensor)})
            kwargs.update({name: value for name, value in audio.items() if not isinstance(value, torch.Tensor)})
        out = self.model(**kwargs)
        layers = _plain_layers(out.past_key_values) if "position_ids" in self._forward_parameters else None
        cache = _dynamic(_zero_pads(layers, mask)) if layers is not None else out.past_key_values
        batch = _Batch(list(group), cache, mask, ids[:, -1], shared=layers is not None and not self._alone_only)
        return batch, out.logits[:, -1, :]

    def _prefill_step_fed(self, row: _Sequence) -> tuple[_Batch, torch.Tensor]:
        """A step-fed row: its generate started in a thread of its own (step_fed.py), its first step's logits."""
        features = row.request.features
        assert isinstance(features, dict)
        inputs = {name: value.to(self.device) if isinstance(value, torch.Tensor) else value
                  for name, value in features.items()}
        stepper = self.step_fed.GenerateStepper(self.model, inputs, row.settings.max_new_tokens)
        logits = stepper.first()
        if logits is None:
            stepper.close()
            raise RuntimeError("the model's generate ended before its first token")
        ids = torch.tensor(row.request.prompt_ids[-1:], dtype=torch.long, device=self.device)
        batch = _Batch([row], stepper, torch.ones(1, 1, dtype=torch.long, device=self.device), ids, shared=False)
        return batch, logits[None]

    def _prefill_seq2seq(self, group: list[_Sequence]) -> tuple[_Batch, torch.Tensor]:
        if self.speech:
            encoder, encoder_mask, start = self._speech_encoder(group)
        else:
            ids, encoder_mask = self._padded(group, left=False)
            encoder = self._encode(input_ids=ids, attention_mask=encoder_mask)
            start = torch.full((len(group), 1), self.decoder_start, dtype=torch.long, device=self.device)
        decoder_mask = torch.ones_like(start)
        self._positions = torch.arange(start.shape[1], device=self.device).expand_as(start)
        try:
            given = self._encoder_decoder_cache([], []) if self._give_cache else None
            out = self._seq2seq_forward(encoder, encoder_mask, start, decoder_mask, given)
            if out.past_key_values is None and given is None:
                # EncoderDecoderModel fills the cache it is given (generate gives one) but returns none of its own:
                # from now on each prefill gets an empty one, as generate's _prepare_cache_for_generation makes it.
                self._give_cache = True
                given = self._encoder_decoder_cache([], [])
                out = self._seq2seq_forward(encoder, encoder_mask, start, decoder_mask, given)
        finally:
            self._positions = None
        cache = out.past_key_values if out.past_key_values is not None else given
        shared = self._decoder_positions is not None and not self._own_clip
        self_layers = _plain_layers(getattr(cache, "self_attention_cache", None))
        cross_layers = _plain_layers(getattr(cache, "cross_attention_cache", None))
        if shared and self_layers is not None and cross_layers is not None:
            cache = self._encoder_decoder_cache(self_layers, cross_layers)
        else:
            shared = False
        batch = _Batch(list(group), cache, decoder_mask, start[:, 0], shared=shared, encoder=encoder,
                       encoder_mask=encoder_mask)
        return batch, out.logits[:, -1, :]

    def _speech_encoder(self, group: list[_Sequence]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The clips' encoder outputs, their mask (all ones: every clip fills the fixed window) and the decoder's
        prompts, the language detected where the prompt leaves it open."""
        features = torch.cat([row.request.features for row in group
                              if isinstance(row.request.features, torch.Tensor)])
        features = features.to(self.device, dtype=self.model.dtype)
        encoder = self._encode(**{self.speech_input: features})
        encoder_mask = torch.ones(encoder.shape[:2], dtype=torch.long, device=self.device)
        prompts = [list(row.request.prompt_ids) for row in group]
        if any(DETECT in prompt for prompt in prompts):
            first = torch.full((len(group), 1), self.decoder_start, dtype=torch.long, device=self.device)
            logits = self.model(encoder_outputs=self._encoder_outputs(encoder), decoder_input_ids=first,
                                use_cache=False).logits[:, -1]
            languages = torch.tensor(self._languages, dtype=torch.long, device=self.device)
            detected = languages[logits[:, languages].argmax(dim=-1)].tolist()
            for row, prompt, language in zip(group, prompts, detected):
                prompt[prompt.index(DETECT)] = int(language)
                row.context[row.context.index(DETECT)] = int(language)
                if row.seen is not None:
                    row.seen[int(language)] = True
        return encoder, encoder_mask, torch.tensor(prompts, dtype=torch.long, device=self.device)

    def _encode(self, **inputs: Any) -> torch.Tensor:
        """The encoder's last hidden state; the class of its output is kept for ``_encoder_outputs``."""
        out = self.model.get_encoder()(**inputs, return_dict=True)
        self._encoder_output_class = type(out)
        hidden: torch.Tensor = out.last_hidden_state
        return hidden

    def _encoder_outputs(self, encoder: torch.Tensor) -> Any:
        """The batch's (padded) encoder states in the encoder's own output class: mixture-of-experts models
        (SwitchTransformers, NLLB-MoE) read ``encoder_outputs.router_logits``, which BaseModelOutput lacks."""
        return self._encoder_output_class(last_hidden_state=encoder)

    def _seq2seq_forward(self, encoder: torch.Tensor, encoder_mask: torch.Tensor, tokens: torch.Tensor,
                         decoder_mask: torch.Tensor, cache: Any) -> Any:
        # A speech model's attention_mask is over its input frames, which it subsamples itself (Speech2Text,
        # SpeechT5): the encoder's mask would be read as frames. One clip alone needs none.
        return self.model(encoder_outputs=self._encoder_outputs(encoder),
                          attention_mask=None if self._own_clip else encoder_mask,
                          decoder_input_ids=tokens, decoder_attention_mask=decoder_mask, past_key_values=cache,
                          use_cache=True)

    @staticmethod
    def _encoder_decoder_cache(self_layers: list[tuple[torch.Tensor, torch.Tensor]],
                               cross_layers: list[tuple[torch.Tensor, torch.Tensor]]) -> Any:
        from transformers.cache_utils import EncoderDecoderCache

        return EncoderDecoderCache(_dynamic(self_layers), _dynamic(cross_layers))

    def _decode(self, batch: _Batch) -> Optional[torch.Tensor]:
        """One token for every row: the batch's pending tokens through the model; logits [rows, vocabulary]. None
        where a step-fed model's generate has ended by itself."""
        if self.step_fed:
            logits = batch.cache.step(int(batch.next_tokens[0]))
            return None if logits is None else logits[None]
        tokens = batch.next_tokens[:, None]
        batch.mask = torch.cat([batch.mask, torch.ones_like(tokens)], dim=1)
        positions = batch.mask.sum(dim=1, keepdim=True) - 1  # as generate's cumsum - 1 at the last column
        if self.seq2seq:
            assert batch.encoder is not None and batch.encoder_mask is not None
            self._positions = positions
            try:
                out = self._seq2seq_forward(batch.encoder, batch.encoder_mask, tokens, batch.mask, batch.cache)
            finally:
                self._positions = None
        else:
            kwargs: dict[str, Any] = dict(input_ids=tokens, attention_mask=batch.mask, past_key_values=batch.cache,
                                          use_cache=True)
            if "position_ids" in self._forward_parameters:
                kwargs["position_ids"] = positions
            out = self.model(**kwargs)
        if out.past_key_values is not None:  # else the model updated the given cache in place (see _give_cache)
            batch.cache = out.past_key_values
        logits: torch.Tensor = out.logits[:, -1, :]
        return logits

    def _decoder_position_mode(self) -> Optional[str]:
        """How an encoder-decoder's decoder rows can have positions of their own in a left-padded batch:
        "relative" (T5: distances only), "hook" (BART-like learned embedding, replaced per row), None (no way:
        decode alone)."""
        if not self.seq2seq:
            return None
        decoder = self.model.get_decoder()
        embed = getattr(decoder, "embed_positions", None)
        if embed is None:
            return "relative" if hasattr(self.model.config, "relative_attention_num_buckets") else None
        if isinstance(embed, torch.nn.Embedding) and isinstance(getattr(embed, "offset", None), int):
            self._hook = embed.register_forward_hook(self._row_positions)
            return "hook"
        return None

    def _row_positions(self, module: torch.nn.Module, _inputs: Any, output: torch.Tensor) -> Optional[torch.Tensor]:
        # BART computes decoder positions from the cache length, the same for every row; each row's own position
        # (its decoder mask's count - 1) gives the embedding ``generate`` would use for it alone.
        if self._positions is None or threading.current_thread() is not self._thread:
            return None  # not this engine's decoding step (a test's generate on the same model, say)
        assert isinstance(module, torch.nn.Embedding)
        offset = int(getattr(module, "offset"))
        return torch.nn.functional.embedding(self._positions + offset, module.weight).to(output.dtype)

    # --- joining and leaving

    def _merge(self, batch: _Batch, joining: _Batch) -> _Batch:
        """``joining`` (one prefilled row) added to ``batch``: self-attention caches and masks left-padded to the
        longer, encoder outputs and cross-attention caches right-padded."""
        encoder: Optional[torch.Tensor]
        encoder_mask: Optional[torch.Tensor]
        if self.seq2seq:
            caches = [batch.cache.self_attention_cache, joining.cache.self_attention_cache]
            crosses = [batch.cache.cross_attention_cache, joining.cache.cross_attention_cache]
            self_layers = self._joined_layers(caches, left=True)
            cross_layers = self._joined_layers(crosses, left=False)
            cache = self._encoder_decoder_cache(self_layers, cross_layers)
            assert batch.encoder is not None and joining.encoder is not None
            assert batch.encoder_mask is not None and joining.encoder_mask is not None
            encoder = _join([batch.encoder, joining.encoder], dim=1, left=False)
            encoder_mask = _join([batch.encoder_mask, joining.encoder_mask], dim=1, left=False)
        else:
            cache = _dynamic(self._joined_layers([batch.cache, joining.cache], left=True))
            encoder, encoder_mask = None, None
        mask = _join([batch.mask, joining.mask], dim=1, left=True)
        return _Batch(batch.rows + joining.rows, cache, mask, torch.cat([batch.next_tokens, joining.next_tokens]),
                      shared=True, encoder=encoder, encoder_mask=encoder_mask)

    @staticmethod
    def _joined_layers(caches: list[Any], left: bool) -> list[tuple[torch.Tensor, torch.Tensor]]:
        layers = [cache.layers for cache in caches]
        return [(_join([layer.keys for layer in per_layer], dim=2, left=left),
                 _join([layer.values for layer in per_layer], dim=2, left=left))
                for per_layer in zip(*layers)]

    def _leave(self, batch: _Batch) -> None:
        """Finished rows out of the batch: their cache rows dropped, then pad columns no row needs any more."""
        keep = [i for i, row in enumerate(batch.rows) if not row.done]
        if keep and len(keep) == len(batch.rows):
            return
        started = time.perf_counter()
        if not keep:
            self._remove(batch)
        else:
            index = torch.tensor(keep, dtype=torch.long, device=self.device)
            batch.rows = [batch.rows[i] for i in keep]
            batch.cache.batch_select_indices(index)
            batch.mask = batch.mask[index]
            batch.next_tokens = batch.next_tokens[index]
            if batch.encoder is not None and batch.encoder_mask is not None:
                batch.encoder, batch.encoder_mask = batch.encoder[index], batch.encoder_mask[index]
            if batch.shared:
                self._trim(batch)
        self.timings.batch_s += time.perf_counter() - started

    def _remove(self, batch: _Batch) -> None:
        self._release(batch)
        if batch is self._shared:
            self._shared = None
        else:
            self._alone = [other for other in self._alone if other is not batch]

    def _trim(self, batch: _Batch) -> None:
        """Drop the leading decoder columns and the trailing encoder columns that are pads in every row."""
        used = batch.mask.any(dim=0).nonzero()
        first = int(used[0]) if used.numel() else 0
        if first:
            batch.mask = batch.mask[:, first:]
            self_cache = batch.cache.self_attention_cache if self.seq2seq else batch.cache
            batch.cache = self._replace_self_cache(batch.cache, [
                (layer.keys[:, :, first:], layer.values[:, :, first:]) for layer in self_cache.layers])
        if batch.encoder_mask is not None and batch.encoder is not None:
            used = batch.encoder_mask.any(dim=0).nonzero()
            last = int(used[-1]) + 1 if used.numel() else batch.encoder_mask.shape[1]
            if last < batch.encoder_mask.shape[1]:
                batch.encoder, batch.encoder_mask = batch.encoder[:, :last], batch.encoder_mask[:, :last]
                cross = [(layer.keys[:, :, :last], layer.values[:, :, :last])
                         for layer in batch.cache.cross_attention_cache.layers]
                batch.cache = self._encoder_decoder_cache(
                    [(layer.keys, layer.values) for layer in batch.cache.self_attention_cache.layers], cross)

    def _release(self, batch: _Batch) -> None:
        """A step-fed batch's generate thread ends with it."""
        if self.step_fed:
            batch.cache.close()

    def _replace_self_cache(self, cache: Any, layers: list[tuple[torch.Tensor, torch.Tensor]]) -> Any:
        if not self.seq2seq:
            return _dynamic(layers)
        cross = [(layer.keys, layer.values) for layer in cache.cross_attention_cache.layers]
        return self._encoder_decoder_cache(layers, cross)

    # --- choosing tokens

    def _choose(self, logits: torch.Tensor, rows: list[_Sequence]) -> list[int]:
        """Next token per row: argmax for greedy rows, sampling with each row's own generator otherwise; the
        repetition penalty first, as transformers' RepetitionPenaltyLogitsProcessor."""
        logits = logits.float()  # generate chooses from float32 logits
        if self.step_fed:  # generate applied the checkpoint's processors already
            return [self._choose_row(logits[0], rows[0])]
        if self.constraints.active:
            self.constraints.apply(logits, rows)
        if self._suppress:
            logits[:, self._suppress] = float("-inf")
        if self._begin_suppress:
            first = [i for i, row in enumerate(rows) if len(row.generated) == self._begin_at(row)]
            if first:
                logits[torch.tensor(first)[:, None], torch.tensor(self._begin_suppress)[None, :]] = float("-inf")
        if all(row.settings.greedy and row.seen is None for row in rows):
            return [int(token) for token in logits.argmax(dim=-1).tolist()]
        return [self._choose_row(logits[i], row) for i, row in enumerate(rows)]

    def _begin_at(self, row: _Sequence) -> int:
        """How many tokens a row has generated when begin_suppress_tokens apply to its next one."""
        decoder_input = len(row.context) - len(row.generated)
        return 1 if self._begin_after_bos and decoder_input == 1 else 0

    @staticmethod
    def _choose_row(scores: torch.Tensor, row: _Sequence) -> int:
        settings = row.settings
        if row.seen is not None:
            penalty = settings.repetition_penalty
            penalised = torch.where(scores < 0, scores * penalty, scores / penalty)
            scores = torch.where(row.seen, penalised, scores)
        if settings.greedy:
            return int(scores.argmax())
        scores = scores / settings.temperature
        if settings.top_k:
            scores = _top_k_filtered(scores, settings.top_k)
        if settings.top_p < 1.0:
            scores = _top_p_filtered(scores, settings.top_p)
        probabilities = torch.softmax(scores, dim=-1)
        return int(torch.multinomial(probabilities, 1, generator=row.generator))


# Settings of generation_config.json with which transformers' generate changes greedy decoding in a way this engine does
# not reproduce (GenerationMixin._get_logits_processor), with the processor that applies each; a checkpoint setting one
# is refused rather than served with other tokens than generate picks.
UNSUPPORTED = {"guidance_scale": "UnbatchedClassifierFreeGuidanceLogitsProcessor",
               "sequence_bias": "SequenceBiasLogitsProcessor",
               "encoder_repetition_penalty": "EncoderRepetitionPenaltyLogitsProcessor",
               "bad_words_ids": "NoBadWordsLogitsProcessor",
               "exponential_decay_length_penalty": "ExponentialDecayLengthPenalty",
               "watermarking_config": "WatermarkLogitsProcessor"}
NEUTRAL = {"guidance_scale": 1.0, "encoder_repetition_penalty": 1.0}  # values with which the processor does nothing


def unsupported_settings(generation: Any) -> list[str]:
    """Why the engine cannot decode as generate does with this generation_config, one sentence per setting."""
    found = []
    for name, processor in UNSUPPORTED.items():
        value = getattr(generation, name, None)
        if value is not None and value != NEUTRAL.get(name):
            found.append(f"generation_config.json sets {name} {value!r}, which transformers' generate applies to "
                         f"greedy decoding ({processor}) and this engine does not; fix: remove {name} from the "
                         "checkpoint's generation_config.json")
    return found


@dataclasses.dataclass(frozen=True)
class Constraints:
    """The logits processors generate builds from generation_config.json for greedy decoding and sampling alike
    (transformers 5.23.0 ``GenerationMixin._get_logits_processor``), applied in its order: NoRepeatNGram,
    EncoderNoRepeatNGram, MinLength, MinNewTokensLength, ForcedBOSToken, ForcedEOSToken. Each reads a row's
    ``context`` (generate's input_ids) as generate does for one prompt alone; 0 / None / () is off."""

    no_repeat_ngram: int = 0
    encoder_ngram: int = 0
    min_length: int = 0  # of the whole input_ids (a causal LM's prompt included)
    min_new_tokens: int = 0
    forced_bos: Optional[int] = None
    forced_eos: tuple[int, ...] = ()
    eos: tuple[int, ...] = ()

    @classmethod
    def of(cls, generation: Any, eos: frozenset[int]) -> "Constraints":
        def size(name: str) -> int:
            return int(getattr(generation, name, None) or 0)

        bos = getattr(generation, "forced_bos_token_id", None)
        return cls(no_repeat_ngram=size("no_repeat_ngram_size"), encoder_ngram=size("encoder_no_repeat_ngram_size"),
                   min_length=size("min_length"), min_new_tokens=size("min_new_tokens"),
                   forced_bos=None if bos is None else int(bos),
                   forced_eos=tuple(_ids(getattr(generation, "forced_eos_token_id", None))), eos=tuple(sorted(eos)))

    @property
    def active(self) -> bool:
        return bool(self.no_repeat_ngram or self.encoder_ngram or self.min_length or self.min_new_tokens
                    or self.forced_bos is not None or self.forced_eos)

    def apply(self, logits: torch.Tensor, rows: list[_Sequence]) -> None:
        """``logits`` [rows, vocabulary] changed in place as generate's processors change each row's scores."""
        for i, row in enumerate(rows):
            scores, length = logits[i], len(row.context)  # generate's cur_len: input_ids.shape[-1]
            banned: list[int] = []
            if self.no_repeat_ngram:
                banned += _repeated_ngram_ends(row.context, self.no_repeat_ngram)
            if self.encoder_ngram and length + 1 >= self.encoder_ngram:
                banned += row.encoder_ngrams.get(tuple(row.context[length + 1 - self.encoder_ngram:]), [])
            if self.eos and (length < self.min_length or len(row.generated) < self.min_new_tokens):
                banned += self.eos
            if banned:
                scores[banned] = float("-inf")
            if self.forced_bos is not None and length == 1:
                scores.fill_(float("-inf"))
                scores[self.forced_bos] = 0
            # generate's max_length is the decoder input + max_new_tokens: its last position is this row's last token
            if self.forced_eos and len(row.generated) == row.settings.max_new_tokens - 1:
                scores.fill_(float("-inf"))
                scores[list(self.forced_eos)] = 0


def _repeated_ngram_ends(tokens: list[int], size: int) -> list[int]:
    """NoRepeatNGramLogitsProcessor's bans: the last token of every n-gram in ``tokens`` that starts with their last
    ``size`` - 1 tokens (the next token would repeat it)."""
    if len(tokens) < size:
        return []
    tail = tokens[len(tokens) - size + 1:]
    return [tokens[i + size - 1] for i in range(len(tokens) - size + 1) if tokens[i:i + size - 1] == tail]


def _ngrams(tokens: list[int], size: int) -> dict[tuple[int, ...], list[int]]:
    """transformers' ``_get_ngrams`` for one row: each (size - 1)-token prefix and the tokens that followed it."""
    found: dict[tuple[int, ...], list[int]] = {}
    for start in range(len(tokens) - size + 1):
        found.setdefault(tuple(tokens[start:start + size - 1]), []).append(tokens[start + size - 1])
    return found


def _decoder_start(generation: Any, config: Any) -> int:
    """An encoder-decoder's first decoder token, as generate's ``_prepare_special_tokens`` takes it: generation_config's
    decoder_start_token_id, else its bos_token_id; a model without a generation_config, its (decoder's) config's."""
    sources = [generation] if generation is not None else []
    sources += [config, config.get_text_config(decoder=True)]
    for source in sources:
        for name in ("decoder_start_token_id", "bos_token_id"):
            value = getattr(source, name, None)
            if value is not None:
                return int(value)
    raise ValueError("this encoder-decoder's generation_config.json and config.json set neither decoder_start_token_id "
                     "nor bos_token_id, so the decoder has no first token (transformers' generate refuses it too); "
                     "fix: set decoder_start_token_id in the checkpoint's generation_config.json")


def _top_k_filtered(scores: torch.Tensor, top_k: int) -> torch.Tensor:
    """Scores below the k-th highest set to -inf (ties at the k-th kept)."""
    kth = torch.topk(scores, min(top_k, scores.shape[-1])).values[-1]
    return scores.masked_fill(scores < kth, float("-inf"))


def _top_p_filtered(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """Nucleus: the smallest set of most likely tokens whose probability reaches ``top_p``; the likeliest always."""
    ordered, order = torch.sort(scores, descending=False)
    cumulative = ordered.softmax(dim=-1).cumsum(dim=-1)
    drop = cumulative <= 1 - top_p
    drop[-1] = False
    return scores.masked_fill(drop.scatter(0, order, drop), float("-inf"))


def _safe_done(request: _Request, reason: Optional[str], usage: dict[str, Any]) -> None:
    try:
        request.on_done(reason, usage)
    except Exception:  # noqa: BLE001 - a client's callback must not stop the scheduler
        LOG.exception("on_done of a generation request failed")


def _ids(value: Any) -> list[int]:
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)]
