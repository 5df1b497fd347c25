"""An audio language model's transcription request, for ``generation_engine.py`` and ``hf_generate.py`` (shipped
beside them with such checkpoints).

An audio language model (Qwen3-ASR, VibeVoice-ASR) is one decoder that reads the clip inside a text prompt: its
processor's ``apply_transcription_request`` (transformers 5.23.0) writes the checkpoint's chat template around an
audio item, expands the audio placeholder to one token per audio frame the encoder will make, and returns the
features that the model's forward merges into those positions. The engine prefills the prompt with those features
once and then decodes token by token from the key/value cache like any causal LM, which is exactly what
``generate(**inputs)`` does: transformers drops the audio inputs after the prefill
(generation/utils.py ``MULTIMODAL_INPUTS_TO_DROP_OUTSIDE_PREFILL``).
"""
from __future__ import annotations

import inspect
import json
import os
import sys
from typing import Any, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # its siblings ship beside this file
from generation_engine import CHARS_PER_TOKEN_CAP  # noqa: E402
from step_fed import STEP_FED_TYPES  # noqa: E402
from step_requests import RequestError  # noqa: E402

# The model types decoded this way: every one whose processor has apply_transcription_request and whose decoding
# steps need nothing but the text token; and the streaming ones whose generate reads the clip at every step
# (step_fed.py: Kyutai, Voxtral Realtime), whose processor's plain call makes generate's inputs from the clip.
AUDIO_LLM_TYPES = frozenset({"qwen3_asr", "vibevoice_asr", "voxtral"}) | STEP_FED_TYPES
# Prefill arguments beyond the processor's: VibeVoice-ASR draws noise into its acoustic latents unless sample=False
# (modeling_vibevoice_asr.py get_audio_features), so two runs of generate on one clip differ; the engine and the
# build's reference both pass it, which makes the decoding deterministic.
PREFILL_EXTRA: dict[str, dict[str, Any]] = {"vibevoice_asr": {"sample": False}}
# What a processor's apply_transcription_request needs beside the clip: Voxtral's (processing_voxtral.py) writes the
# clip into an audio file for mistral_common (format: one soundfile writes), names the model in its request (model_id:
# mistral_common's TranscriptionRequest carries it; the tokens do not depend on it) and checks the sampling rate.
REQUEST_EXTRA: dict[str, dict[str, Any]] = {"voxtral": {"format": "wav", "model_id": "checkpoint"}}
# What a request's language may be where the processor module lists no LANGUAGE_CODE_TO_NAME: Voxtral's request is
# mistral_common's TranscriptionRequest, whose language is an ISO 639-1 code (pydantic-extra-types).
LANGUAGES_TAKEN = {"voxtral": "a two-letter ISO 639-1 code, e.g. en"}
# The token after which the transcript begins: Qwen3-ASR writes "language <NAME><asr_text>" before it (its processor's
# decode(return_format="transcription_only") keeps what follows); a request that sets a language has it in the prompt.
ANSWER_AFTER = {"qwen3_asr": "<asr_text>"}


class TranscriptionRequests:
    """The checkpoint's processor, making each clip's prompt ids and prefill features."""

    def __init__(self, folder: str, model: Any, max_prompt_tokens: int) -> None:
        import transformers

        self.max_prompt_tokens = max_prompt_tokens
        self.processor: Any = transformers.AutoProcessor.from_pretrained(folder)
        self.model_type = model_type = str(model.config.model_type)
        self.sampling_rate = int(self.processor.feature_extractor.sampling_rate)
        self._step_fed = model_type in STEP_FED_TYPES
        # How generate's inputs are made, in the build's verification record.
        self.made_by = "processor(audio=clip)" if self._step_fed else "processor.apply_transcription_request(clip)"
        accepted = {} if self._step_fed else inspect.signature(self.processor.apply_transcription_request).parameters
        # What a request may set, as the processor names it: language (Qwen3-ASR), prompt (context, both).
        self.takes = tuple(name for name in ("language", "prompt") if name in accepted)
        self._forward = set(inspect.signature(model.forward).parameters)
        marker = ANSWER_AFTER.get(model_type)
        vocabulary = self.processor.tokenizer.get_vocab()
        self._answer_after: Optional[int] = vocabulary.get(marker) if marker is not None else None
        # A step-fed model's prompt where its processor writes none (Kyutai): the token generate starts from (its
        # generation_config's, else its config's).
        start = getattr(model.generation_config, "bos_token_id", None)
        self._start = int(start if start is not None else getattr(model.config, "bos_token_id", 0) or 0)

    def asked(self, language: Optional[str] = None, prompt: Optional[str] = None,
              task: Optional[str] = None) -> dict[str, str]:
        """A request's language, prompt and task as the processor takes them (a RequestError for one it does not);
        checked before the clip is decoded."""
        asked = {name: value for name, value in (("language", language), ("prompt", prompt), ("task", task))
                 if value is not None}
        for name in asked:
            if name not in self.takes:
                takes = "a streaming model, it reads the clip alone" if self._step_fed else \
                    f"its processor's transcription request takes {_listed(self.takes)}"
                raise RequestError(f"parameters.{name}: this {self.model_type} checkpoint takes no {name} per request "
                                   f"({takes}); remove {name}")
        if prompt is not None:
            self._bound(prompt)
        return asked

    def _bound(self, prompt: str) -> None:
        """The request's context prompt within the spec's max_prompt_tokens, as a Whisper's prompt is: the processor
        puts it in the prompt the model prefills, so an unbounded one would cost the server unbounded work."""
        bound = self.max_prompt_tokens
        over = (f"above this endpoint's bound {bound} (the spec's task.generation.max_prompt_tokens); send a shorter "
                "prompt")
        if len(prompt) > bound * CHARS_PER_TOKEN_CAP:  # refused before it is tokenized, as a text prompt is
            raise RequestError(f"parameters.prompt: {len(prompt)} characters, more than {bound} tokens can hold, is "
                               f"{over}")
        count = len(self.processor.tokenizer(prompt, add_special_tokens=False)["input_ids"])
        if count > bound:
            raise RequestError(f"parameters.prompt: {count} tokens is {over}")

    def inputs(self, samples: Any, asked: dict[str, str]) -> tuple[list[int], dict[str, Any], Optional[int]]:
        """One clip (mono float32 at ``sampling_rate``) as (prompt ids, the other prefill arguments, the token the
        transcript follows where the prompt does not already end the header with it)."""
        if self._step_fed:  # generate's own inputs, whole: it encodes the clip as it decodes (step_fed.py)
            batch = self.generate_inputs(samples, asked)
            ids = [int(t) for t in batch["input_ids"][0]] if "input_ids" in batch else [self._start]
            return ids, dict(batch), None
        try:
            batch = self.generate_inputs(samples, asked)
        except ValueError as exc:
            if "language" not in asked or "language" not in str(exc).lower():
                raise
            raise RequestError(f"parameters.language: {json.dumps(asked['language'])} is not a language this "
                               f"{self.model_type} checkpoint transcribes; send {self._languages()}") from None
        ids = [int(token) for token in batch["input_ids"][0]]
        extras = {name: value for name, value in batch.items()
                  if name in self._forward and name not in ("input_ids", "attention_mask")}
        extras.update(PREFILL_EXTRA.get(self.model_type, {}))
        after = self._answer_after if self._answer_after is not None and self._answer_after not in ids else None
        return ids, extras, after

    def generate_inputs(self, samples: Any, asked: dict[str, str]) -> Any:
        """What ``generate(**...)`` takes for one clip: the processor's transcription request, or a step-fed
        model's plain processor call (Kyutai: its feature extractor's input_values and padding_mask; Voxtral Realtime:
        its prompt of padding tokens and the clip's features)."""
        if self._step_fed:
            return self.processor(audio=samples, sampling_rate=self.sampling_rate, return_tensors="pt")
        extra = REQUEST_EXTRA.get(self.model_type)
        if extra is not None:
            return self.processor.apply_transcription_request(audio=samples, sampling_rate=self.sampling_rate,
                                                              **extra, **asked)
        return self.processor.apply_transcription_request(audio=samples, **asked)

    def _languages(self) -> str:
        """What a request's language may be, in words."""
        if self.model_type in LANGUAGES_TAKEN:
            return LANGUAGES_TAKEN[self.model_type]
        names = getattr(sys.modules.get(type(self.processor).__module__), "LANGUAGE_CODE_TO_NAME", None)
        listed = ", ".join(sorted(names)) if isinstance(names, dict) else "the languages its model card lists"
        return f"one of {listed} (a code or its name)"


def _listed(names: tuple[str, ...]) -> str:
    return " and ".join(names) if names else "neither"
