"""Whisper's decoder prompt for a short-form clip, and a request's own ``language`` and ``task`` (issue #59).

transformers 5.23.0 builds the prompt in ``WhisperGenerationMixin`` (models/whisper/generation_whisper.py):
``_set_language_and_task`` takes generate's per-call ``language`` and ``task`` over generation_config.json's, and
``_retrieve_init_tokens`` writes <|startoftranscript|>; the language (the one set, the leading ``forced_decoder_ids``
entries, or detected from the clip where the checkpoint has ``lang_to_id`` and none is set); the task (set, else
<|transcribe|> when a language is); <|notimestamps|>. A request here sends the same two as ``parameters.language``
("fr", "french" or "<|fr|>", as generate takes them) and ``parameters.task`` (transcribe or translate), bounded by the
spec's ``task.generation.languages``; what generate would refuse is a 400 naming the parameter.

Ships beside generation_engine.py in a speech model's directory; pure Python (transformers' language table).
"""
from __future__ import annotations

import os
import sys
from typing import Any, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # its siblings in the Triton model directory
from generation_engine import DETECT  # noqa: E402
from step_requests import RequestError  # noqa: E402

# transformers' TASK_IDS (models/whisper/tokenization_whisper.py).
TASKS = ("transcribe", "translate")


def _language_table() -> dict[str, str]:
    """Language names to codes as generate reads them (english -> en)."""
    from transformers.models.whisper.tokenization_whisper import TO_LANGUAGE_CODE

    return dict(TO_LANGUAGE_CODE)


def language_token(language: str, lang_to_id: dict[str, int]) -> Optional[str]:
    """The <|code|> token ``language`` names, as generate's ``language_to_id`` resolves it (a token of lang_to_id, a
    name or a code, any case); None where it names no language the checkpoint has."""
    language = language.lower()
    if language in lang_to_id:
        return language
    names = _language_table()
    code = names.get(language, language if language in names.values() else None)
    token = f"<|{code}|>" if code is not None else None
    return token if token in lang_to_id else None


def code_of(token: str) -> str:
    return token[2:-2]


def build(generation: Any, config: Any, language: Optional[str] = None, task: Optional[str] = None) -> list[int]:
    """The prompt's token ids (DETECT where the clip's language is to be detected); ``language`` and ``task`` are
    generate's per-call arguments (a request's), over generation_config.json's. A checkpoint whose own settings
    generate would refuse raises ValueError."""
    task = task if task is not None else getattr(generation, "task", None)
    language = language if language is not None else getattr(generation, "language", None)
    lang_to_id: dict[str, int] = getattr(generation, "lang_to_id", None) or {}
    task_to_id: dict[str, int] = getattr(generation, "task_to_id", None) or {}
    prompt: list[Optional[int]] = [generation.decoder_start_token_id]
    if task is None and language is None:  # generate ignores forced_decoder_ids once either is set
        forced = getattr(generation, "forced_decoder_ids", None) or getattr(config, "forced_decoder_ids", None) or []
        forced = [tuple(pair) for pair in forced]
        position = 1
        while forced and forced[0][0] == position:
            prompt.append(forced.pop(0)[1])
            position += 1
        if forced:
            raise ValueError(f"forced_decoder_ids {forced} do not follow Whisper's prompt pattern")
    undefined = len(prompt) <= 1 or prompt[1] is None
    chosen: Optional[int] = None
    if language is not None:
        token = language_token(str(language), lang_to_id)
        if token is None:
            raise ValueError(f"generation_config.json language {language!r} is not in its lang_to_id")
        chosen = lang_to_id[token]
    elif lang_to_id and undefined:
        chosen = DETECT
    if chosen is not None and len(prompt) > 1:
        prompt[1] = chosen
    elif chosen is not None:
        prompt.append(chosen)
    if task is not None:
        if task not in task_to_id:
            raise ValueError(f"generation_config.json task {task!r} is not in its task_to_id")
        prompt.append(task_to_id[task])  # generate appends, then replaces every task token with it
        prompt = [task_to_id[task] if t in task_to_id.values() else t for t in prompt]
    elif language is not None and task_to_id and not any(t in task_to_id.values() for t in prompt):
        prompt.append(task_to_id["transcribe"])
    no_timestamps = getattr(generation, "no_timestamps_token_id", None)
    if no_timestamps is not None and prompt[-1] != no_timestamps:
        prompt.append(no_timestamps)
    return [int(t) for t in prompt if t is not None]


class WhisperPrompts:
    """The checkpoint's own prompt, and each request's with its language and task checked first."""

    def __init__(self, generation: Any, config: Any, allowed: Optional[tuple[str, ...]] = None) -> None:
        self.generation, self.config = generation, config
        self.lang_to_id: dict[str, int] = dict(getattr(generation, "lang_to_id", None) or {})
        self.task_to_id: dict[str, int] = dict(getattr(generation, "task_to_id", None) or {})
        # generate refuses both arguments when is_multilingual is false, and a language without lang_to_id.
        self.multilingual = bool(getattr(generation, "is_multilingual", True)) and bool(self.lang_to_id)
        self.allowed = allowed  # the spec's task.generation.languages (codes); None: every one of lang_to_id
        self.default = build(generation, config)

    def codes(self) -> list[str]:
        known = sorted(code_of(token) for token in self.lang_to_id)
        return known if self.allowed is None else [code for code in known if code in self.allowed]

    def for_request(self, language: Optional[str], task: Optional[str]) -> list[int]:
        if language is None and task is None:
            return list(self.default)
        name = "language" if language is not None else "task"
        if not self.multilingual:
            raise RequestError(f"parameters.{name}: this Whisper is English-only (its generation_config.json has "
                               "no lang_to_id or is_multilingual false), so a request chooses neither language nor "
                               f"task; remove {name}")
        if language is not None:
            self._check_language(language)
        if task is not None and (task not in TASKS or task not in self.task_to_id):
            raise RequestError(f"parameters.task: {task!r} is not a task of this Whisper; send one of "
                               f"{', '.join(t for t in TASKS if t in self.task_to_id)}")
        return build(self.generation, self.config, language, task)

    def _check_language(self, language: str) -> None:
        shown = ", ".join(self.codes())
        token = language_token(language, self.lang_to_id)
        if token is None:
            raise RequestError(f"parameters.language: {language!r} is not a language of this Whisper (its "
                               f"generation_config.json lang_to_id); send one of its codes: {shown}, or the "
                               "language's English name (french)")
        if self.allowed is not None and code_of(token) not in self.allowed:
            raise RequestError(f"parameters.language: {language!r} is not allowed on this endpoint (the spec's "
                               f"task.generation.languages: {', '.join(self.allowed) or 'none'}); "
                               + (f"send one of {shown}" if shown else "remove language"))
