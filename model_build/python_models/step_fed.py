"""Decoding a model whose every step reads inputs of its own, for ``generation_engine.py`` (shipped beside it with
such checkpoints).

A streaming speech model reads the clip as it decodes: Kyutai's speech-to-text model feeds each decoding step the
audio codes of the next 80 ms frame, which its ``prepare_inputs_for_generation`` encodes from the clip window by window
with a codec cache of its own (transformers 5.23.0 models/kyutai_speech_to_text/modeling_kyutai_speech_to_text.py);
Voxtral Realtime feeds each step its own slice of the audio encoder's output, with the encoder's cache carried from
step to step (models/voxtral_realtime/modeling_voxtral_realtime.py).
What a step needs lives in generate's loop, so the engine does not rebuild it: it runs the model's own ``generate`` in
a thread of its own, one request each, and takes every step's logits from it through a logits processor, which waits
for the engine's choice and makes that token the only one generate can pick. The engine decides every token (the
request's sampling, stop strings, length, a client gone); generate does the model's stepping. Such rows decode alone:
their per-step inputs are not batched with others'.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Optional

import torch
from transformers import LogitsProcessor, LogitsProcessorList

# The model types decoded this way (their prepare_inputs_for_generation reads the audio at every step).
STEP_FED_TYPES = frozenset({"kyutai_speech_to_text", "voxtral_realtime"})
_STOP = -1  # the engine's answer when the row has ended: generate's thread stops


class _Stopped(Exception):
    """Raised inside generate when the engine ends the row; ends the thread quietly."""


class _Handoff(LogitsProcessor):
    """Last of generate's logits processors: hands the step's scores (after the checkpoint's own processors) to the
    engine and leaves only the engine's token choosable."""

    def __init__(self, stepper: "GenerateStepper") -> None:
        self._stepper = stepper

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        token = self._stepper._exchange(scores[0].detach().clone())
        if token == _STOP:
            raise _Stopped
        forced = torch.full_like(scores, float("-inf"))
        forced[:, token] = 0.0
        return forced  # type: ignore[return-value]


class GenerateStepper:
    """One request's ``model.generate(**inputs)`` run a step at a time: ``first()`` gives the first step's logits,
    ``step(token)`` sends the chosen token and gives the next logits; None once generate has ended by itself (the
    clip's last frame). ``close()`` ends it wherever it is."""

    def __init__(self, model: Any, inputs: dict[str, Any], max_new_tokens: int) -> None:
        self._scores: "queue.Queue[Any]" = queue.Queue(maxsize=1)
        self._chosen: "queue.Queue[int]" = queue.Queue(maxsize=1)
        self._thread = threading.Thread(target=self._generate, args=(model, inputs, max_new_tokens),
                                        name="generate-stepper", daemon=True)
        self._thread.start()

    def first(self) -> Optional[torch.Tensor]:
        return self._next()

    def step(self, token: int) -> Optional[torch.Tensor]:
        self._chosen.put(int(token))
        return self._next()

    def close(self) -> None:
        """End generate's thread (waiting for the engine's choice, or already ended)."""
        if self._thread.is_alive():
            try:
                self._chosen.put_nowait(_STOP)
            except queue.Full:  # pragma: no cover - a choice not taken yet: the thread takes it, then this
                pass
            self._thread.join(timeout=30)

    def _next(self) -> Optional[torch.Tensor]:
        item = self._scores.get()
        if isinstance(item, BaseException):
            raise item
        return item  # type: ignore[no-any-return]

    def _exchange(self, scores: torch.Tensor) -> int:
        self._scores.put(scores)
        return self._chosen.get()

    def _generate(self, model: Any, inputs: dict[str, Any], max_new_tokens: int) -> None:
        try:
            with torch.inference_mode():
                # The request's own repetition penalty is the engine's to apply (1 unless sent), as for other models.
                model.generate(**inputs, do_sample=False, max_new_tokens=max_new_tokens, repetition_penalty=1.0,
                               logits_processor=LogitsProcessorList([_Handoff(self)]))
            self._scores.put(None)
        except _Stopped:
            return
        except Exception as exc:  # noqa: BLE001 - the engine raises it where it waits for this step
            self._scores.put(exc)
