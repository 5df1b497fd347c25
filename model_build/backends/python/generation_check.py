"""A generating task verified at build time: the files that ship (generation_engine.py and the checkpoint) decode the
same tokens as transformers' own ``generate``, greedy, on the same prompts.

Each prompt alone must be token-identical; then all of them together in the engine's running batch: a difference
there is reported with the first position where it differs and the reference's logit margin at that position (top-1
minus top-2). A margin under ``NEAR_TIE`` is a near-tie (float sums in another order pick the other token) and is
recorded, not hidden; a larger one fails the build. For a decoder-only model, transformers' own ``generate`` on a
left-padded batch is compared with its answers alone too, and every difference is reported and recorded with its
position and margin: some architectures (absolute positions not taken from the attention mask: RoFormer, BigBird,
TrOCR's decoder) answer otherwise in transformers' own padded batch, which says nothing against the served
decoding (the engine gives each row its own positions), so it does not fail the build.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import pathlib
import sys
import threading
import types
from typing import Any, Mapping, Optional

from deployment_spec.builds.manifest import Verification
from deployment_spec.sections import requirements
from deployment_spec.sections.model import ModelSpec
from deployment_spec.sections.tasks import TaskKind
from model_build.errors import BuildError
from model_build.hashing import tool_versions

PROMPTS = ("The quick brown fox", "Once upon a time, in a land far away,", "Hello", "1, 2, 3, 4, 5,",
           "Translate to German: the house is small.", "Summarize: the meeting moved to Tuesday because of rain.")
NEW_TOKENS = 16
# A Whisper request's ``prompt`` the build checks (generate's prompt_ids: the text that came before the clip).
SPEECH_PROMPT = "Anna and Bob"
NEAR_TIE = 1e-3  # logits apart by less than this may swap under another summation order (fp32)
WAIT_S = 600
# What a request decodes with unless it asks otherwise (generation_engine.parse_request): greedy, one hypothesis, no
# repetition penalty. The reference is generate with the checkpoint's generation_config but these; a checkpoint that
# sets others (beam search: bart-large-cnn's num_beams 4; a chat model's repetition_penalty) has them noted, not used.
SERVED_DEFAULTS = {"do_sample": False, "num_beams": 1, "repetition_penalty": 1.0}


def verify(model: ModelSpec, files: Mapping[str, Any], log: Any) -> Verification:
    """``files``: the model's version directory as the recipe made it (model.py, generation_engine.py,
    step_requests.py, checkpoint/), read here as they ship."""
    import torch
    import transformers

    assert model.task is not None  # only generating tasks come here
    engine_module = _shipped_engine(pathlib.Path(files["generation_engine.py"]), pathlib.Path(files["step_requests.py"]))
    kind = model.task.kind.value
    limits = engine_module.Limits.from_parameters(model.task.generation.model_parameters(kind, model.max_batch_size))
    if model.task.kind is TaskKind.SPEECH_RECOGNITION:
        return _verify_speech(model, files, engine_module, limits)
    try:
        engine = engine_module.Engine.from_checkpoint(str(files["checkpoint"]), kind, limits)
    except ValueError as exc:  # a generation_config the engine cannot decode as generate does: told, not a traceback
        raise BuildError(f"models.{model.task_entry or model.name}: {exc}") from None
    notes = _not_applied(engine.model.generation_config)
    for note in notes:
        log(f"  {model.name}: {note}")
    try:
        prompts = [engine.encode(text=p)[:limits.max_prompt_tokens] for p in PROMPTS]
        greedy = engine_module.parse_request({"max_new_tokens": NEW_TOKENS}, limits)
        with torch.no_grad():
            references = [_reference(model, engine, ids) for ids in prompts]
        for i, ids in enumerate(prompts):  # alone: must be identical
            got = _run(engine, [ids], greedy)[0]
            difference = _first_difference(got, references[i])
            if difference is not None:
                raise BuildError(_failed(model, i, "alone", difference))
        together = _compare_all(model, _run(engine, prompts, greedy), references, "the engine's running batch")
        batched = {}
        if model.task.kind is TaskKind.TEXT_GENERATION:
            with torch.no_grad():
                batched = _differences(_left_padded(engine, prompts), references, "transformers' generate on a "
                                       "left-padded batch")
    finally:
        engine.close()
    near_ties = list(together.values())
    for tie in near_ties:
        log(f"  {model.name}: near-tie, not a defect: {tie}")
    for difference in batched.values():
        log(f"  {model.name}: transformers' own left-padded batch differs (the served decoding does not): "
            f"{difference}")
    return Verification(ran=True, runtime="transformers", version=transformers.__version__, device="cpu",
                        cases=len(prompts), details={
                            "reference": "transformers generate, greedy, each prompt alone, with the "
                                         "checkpoint's generation_config" + (" except as noted" if notes else ""),
                            "not_applied": notes,
                            "new_tokens": NEW_TOKENS, "prompts": len(prompts),
                            "alone": "token-identical", "engine_batch": "token-identical" if not together else
                            f"{len(together)} near-ties", "left_padded_generate": (
                                "not applicable (encoder-decoder)" if model.task.kind is not TaskKind.TEXT_GENERATION
                                else "token-identical" if not batched else
                                f"{len(batched)} prompts differ in transformers' own padded batch"),
                            "near_ties": near_ties, "left_padded_differences": list(batched.values())})


def served_by(verification: Verification, env_lines: list[str], triton_version: str) -> Verification:
    """The check ran this machine's transformers and torch; it is the serving runtime's check (what synthesis asks
    of every model) when the execution environment that ships pins the same two releases. Else it records why not,
    which `cdk synth` then shows. (A task entry takes no python.execution_env: its environment is always built from
    pinned lines.)"""
    versions = tool_versions()
    here = {name: versions[name].split("+", 1)[0] for name in ("transformers", "torch")}
    checked = " and ".join(f"{name} {version}" for name, version in here.items())
    pinned = requirements.pins(env_lines)
    if all(pinned.get(name) == version for name, version in here.items()):
        return dataclasses.replace(verification, triton_version=triton_version, details={
            **verification.details, "serving_packages": f"{checked}, as the execution environment pins them"})
    shipped = " and ".join(f"{name} {pinned.get(name, '(not pinned)')}" for name in here)
    return dataclasses.replace(verification, triton_version=None, why=(
        f"its decoding was checked with {checked} on the build machine, but its execution environment pins {shipped}"))


def _not_applied(generation: Any) -> list[str]:
    """The checkpoint's generation_config settings that the served decoding does not use, in words."""
    notes = []
    beams = getattr(generation, "num_beams", None) or 1
    if beams > 1:
        notes.append(f"generation_config.json sets num_beams {beams} (beam search); the engine decodes greedily "
                     "(num_beams 1), and so does the reference generate it is verified against; length_penalty and "
                     "early_stopping apply to beam search only")
    penalty = getattr(generation, "repetition_penalty", None)
    if penalty is not None and penalty != 1.0:
        notes.append(f"generation_config.json sets repetition_penalty {penalty}; a request applies its own "
                     "parameters.repetition_penalty (1 unless sent), and the reference generate uses 1")
    return notes


def _shipped_engine(engine_file: pathlib.Path, requests_file: pathlib.Path) -> types.ModuleType:
    """generation_engine.py as Triton imports it: beside its step_requests.py, under its own name."""
    sys.modules.setdefault("step_requests", _load("step_requests", requests_file))
    return _load("shipped_generation_engine", engine_file)


def _load(name: str, path: pathlib.Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def _reference(model: ModelSpec, engine: Any, ids: list[int]) -> tuple[list[int], list[Any]]:
    """transformers' greedy tokens for one prompt alone, with the scores of each step."""
    import torch

    inputs = torch.tensor([ids])
    try:
        out = engine.model.generate(input_ids=inputs, attention_mask=torch.ones_like(inputs),
                                    max_new_tokens=NEW_TOKENS, output_scores=True, return_dict_in_generate=True,
                                    pad_token_id=_pad_id(engine), **SERVED_DEFAULTS)
    except Exception as exc:  # noqa: BLE001 - the reference's own failure, told as the build's message
        raise BuildError(f"models.{model.task_entry or model.name}: transformers' own generate fails on this checkpoint "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}), so the decoding "
                         "cannot be verified against it; fix: give a checkpoint transformers generates with") from None
    start = 1 if engine.seq2seq else len(ids)  # an encoder-decoder's sequences start with the decoder's start token
    return [int(t) for t in out.sequences[0][start:]], [s[0] for s in out.scores]


def _pad_id(engine: Any) -> int:
    pad = engine.tokenizer.pad_token_id
    return pad if pad is not None else min(engine.eos) if engine.eos else 0


def _run(engine: Any, prompts: list[list[int]], settings: Any) -> list[list[int]]:
    """Submits every prompt at once (they decode together) and waits for each one's tokens."""
    tokens: list[list[int]] = [[] for _ in prompts]
    finished = [threading.Event() for _ in prompts]
    errors: list[str] = []
    for i, ids in enumerate(prompts):
        def done(reason: Optional[str], usage: dict, i: int = i) -> None:
            if reason is None:
                errors.append(str(usage.get("error")))
            finished[i].set()
        engine.submit(ids, settings, lambda _text: None, done, lambda: False, on_token=tokens[i].append)
    for event in finished:
        if not event.wait(WAIT_S):
            raise BuildError(f"the generation engine did not finish a prompt within {WAIT_S} s")
    if errors:
        raise BuildError(f"the generation engine failed on a verification prompt: {errors[0]}")
    return tokens


def _left_padded(engine: Any, prompts: list[list[int]]) -> list[list[int]]:
    """``generate`` on all prompts as one left-padded batch (how decoder-only models batch in transformers)."""
    import torch

    width, pad = max(len(p) for p in prompts), _pad_id(engine)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    out = engine.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, pad_token_id=pad,
                                **SERVED_DEFAULTS)
    rows = [[int(t) for t in row[width:]] for row in out]
    return [_until_end(row, engine.eos) for row in rows]


def _until_end(row: list[int], eos: frozenset[int]) -> list[int]:
    for i, token in enumerate(row):
        if token in eos:
            return row[:i + 1]
    return row


def _first_difference(got: list[int], reference: tuple[list[int], list[Any]]) -> Optional[tuple[int, int, int, float]]:
    """(position, got token, reference token, reference margin) where the two first differ, else None."""
    want, scores = reference
    for position in range(max(len(got), len(want))):
        mine = got[position] if position < len(got) else -1
        theirs = want[position] if position < len(want) else -1
        if mine != theirs:
            margin = _margin(scores[position]) if position < len(scores) else float("inf")
            return position, mine, theirs, margin
    return None


def _margin(logits: Any) -> float:
    top = logits.float().topk(2).values
    return float(top[0] - top[1])


def _compare_all(model: ModelSpec, runs: list[list[int]], references: list[tuple[list[int], list[Any]]],
                 where: str) -> dict[int, str]:
    """Near-ties by prompt; a real difference fails the build."""
    for i, got in enumerate(runs):
        difference = _first_difference(got, references[i])
        if difference is not None and difference[3] >= NEAR_TIE:
            raise BuildError(_failed(model, i, where, difference))
    return _differences(runs, references, where)


def _differences(runs: list[list[int]], references: list[tuple[list[int], list[Any]]], where: str) -> dict[int, str]:
    """Each prompt whose run differs from its reference alone, in words: where, which tokens, the margin there."""
    found = {}
    for i, got in enumerate(runs):
        difference = _first_difference(got, references[i])
        if difference is not None:
            position, mine, theirs, margin = difference
            found[i] = (f"prompt {i} in {where}: token {position} is {mine}, alone {theirs}; the reference's top "
                        f"two logits there are {margin:.2e} apart")
    return found


def _failed(model: ModelSpec, prompt: int, where: str, difference: tuple[int, int, int, float]) -> str:
    position, mine, theirs, margin = difference
    return (f"models.{model.task_entry or model.name}: verification prompt {prompt} ({PROMPTS[prompt]!r}), {where}: "
            f"new token {position} is {mine} where transformers' generate picks {theirs} (its top two logits "
            f"{margin:.3g} apart, not a near-tie); the served decoding differs from transformers' for this "
            "architecture: report it with the checkpoint's config.json")


CLIPS = ("440 Hz tone", "white noise", "chirp")  # what _clips makes, in its order


def _clips(rate: int) -> list[Any]:
    """Synthetic clips (no recordings ship with the build), as audio_check.py makes them: a 440 Hz tone, white noise
    and a chirp; different enough that a model ignoring its encoder would be seen answering them alike."""
    import numpy as np

    t = np.arange(rate) / rate
    return [(0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32),
            np.random.default_rng(0).normal(0, 0.1, rate * 3 // 2).astype(np.float32),
            (0.3 * np.sin(2 * np.pi * (200 + 900 * t) * t)).astype(np.float32)]


def _verify_speech(model: ModelSpec, files: Mapping[str, Any], engine_module: types.ModuleType,
                   limits: Any) -> Verification:
    """A speech encoder-decoder: each clip's tokens from the shipped engine, alone and all at once, against
    ``generate(<its encoder's input>, do_sample=False, max_new_tokens=N)``, token-identical (new tokens, up to EOS);
    a multilingual Whisper also with a request's language and task."""
    import torch
    import transformers

    folder = str(files["checkpoint"])
    engine = engine_module.Engine.from_checkpoint(folder, model.task.kind.value if model.task else "", limits)
    if engine.audio_llm:
        return _verify_audio_llm(model, files, engine, engine_module, limits)
    extractor = transformers.AutoFeatureExtractor.from_pretrained(folder)
    rate = int(extractor.sampling_rate)
    name = engine.speech_input  # input_features (Whisper, Speech2Text...) or input_values (SpeechT5, Moonshine...)
    features = [extractor(clip, sampling_rate=rate, return_tensors="pt")[name] for clip in _clips(rate)]
    try:
        positions = getattr(engine.model.config, "max_target_positions", None)
        room = int(positions) - len(engine.speech_prompt) if isinstance(positions, int) else NEW_TOKENS
        new_tokens = min(NEW_TOKENS, room)
        greedy = engine_module.parse_request({"max_new_tokens": new_tokens}, limits)
        with torch.no_grad():
            references = [_until_end(_new(engine, engine.model.generate(**{name: f}, do_sample=False,
                                                                        max_new_tokens=new_tokens)[0]), engine.eos)
                          for f in features]
        alone = [_run_speech(engine, [f], greedy)[0] for f in features]
        together = _run_speech(engine, features, greedy)
        asked = _asked_prompt(engine)  # a request's language and task, where the checkpoint takes them
        labels = [f"clip {i}" for i in range(len(features))]
        if asked:
            settings = engine_module.parse_request({"max_new_tokens": new_tokens, **asked}, limits, speech=True)
            with torch.no_grad():
                references.append(_until_end(_new(engine, engine.model.generate(
                    features[0], do_sample=False, max_new_tokens=new_tokens, **asked)[0]), engine.eos))
            alone.append(_run_speech(engine, [features[0]], settings)[0])
            together.append(alone[-1])
            labels.append(f"clip 0 asked {asked}")
        prompted = _prompted(engine, limits)  # a Whisper request's prompt text (generate's prompt_ids)
        if prompted:
            settings = engine_module.parse_request({"max_new_tokens": prompted[1], "prompt": SPEECH_PROMPT}, limits,
                                                   speech=True)
            with torch.no_grad():
                references.append(_until_end(_new(engine, engine.model.generate(
                    features[1], do_sample=False, max_new_tokens=prompted[1],
                    prompt_ids=torch.tensor(prompted[0]))[0]), engine.eos))
            alone.append(_run_speech(engine, [features[1]], settings)[0])
            together.append(alone[-1])
            labels.append(f"clip 1 with the prompt {SPEECH_PROMPT!r}")
    finally:
        engine.close()
    _compare_clips(model, labels, references, alone, together)
    return Verification(ran=True, runtime="transformers", version=transformers.__version__, device="cpu",
                        cases=len(references), details={
                            "reference": f"{type(engine.model).__name__}.generate({name}), greedy, each clip alone",
                            "clips": ", ".join(CLIPS),
                            "decoder_prompt": engine.speech_prompt, "new_tokens": new_tokens,
                            "request_language_and_task": asked or ("none (English-only)" if engine.whisper
                                                                    else "none (not a Whisper)"),
                            "request_prompt": ({"prompt": SPEECH_PROMPT, "prompt_ids": prompted[0]} if prompted
                                               else "none (not a Whisper, or a tokenizer without get_prompt_ids)"),
                            "alone": "token-identical", "engine_batch": "token-identical"})


def _verify_audio_llm(model: ModelSpec, files: Mapping[str, Any], engine: Any, engine_module: types.ModuleType,
                      limits: Any) -> Verification:
    """An audio language model: each clip's prompt and features from the shipped transcription_request.py, its
    tokens from the shipped engine (alone, and all at once: prefilled one by one, decoded together; a step-fed model's
    rows each in its own generate), against ``generate(**processor.apply_transcription_request(clip),
    do_sample=False)`` (a step-fed model: ``processor(audio=clip)``); where the processor takes them, a request's
    language (clip 0) and context prompt (clip 1) too."""
    import torch
    import transformers

    shipped = _load("shipped_transcription_request", pathlib.Path(files["transcription_request.py"]))
    try:
        requests = shipped.TranscriptionRequests(str(files["checkpoint"]), engine.model, limits.max_prompt_tokens)
        clips = _clips(requests.sampling_rate)
        cases: list[tuple[str, Any, dict[str, str]]] = [(f"clip {i}", clip, {}) for i, clip in enumerate(clips)]
        if "language" in requests.takes:
            cases.append(("clip 0 asked language en", clips[0], {"language": "en"}))
        if "prompt" in requests.takes:
            cases.append((f"clip 1 with the prompt {SPEECH_PROMPT!r}", clips[1], {"prompt": SPEECH_PROMPT}))
        made = [requests.inputs(clip, asked) for _label, clip, asked in cases]
        greedy = engine_module.parse_request({"max_new_tokens": NEW_TOKENS}, limits, speech=True)
        references = []
        fixed = shipped.PREFILL_EXTRA.get(requests.model_type, {})  # sample=False: no noise drawn (VibeVoice-ASR)
        with torch.no_grad():
            for (_label, clip, asked), (ids, _extras, _after) in zip(cases, made):
                inputs = requests.generate_inputs(clip, asked)
                out = engine.model.generate(**inputs, do_sample=False, max_new_tokens=NEW_TOKENS, **fixed)
                references.append(_until_end([int(t) for t in out[0, len(ids):]], engine.eos))
        alone = [_run_prompted(engine, [one], greedy)[0] for one in made]
        together = _run_prompted(engine, made, greedy)
    finally:
        engine.close()
    labels = [label for label, _clip, _asked in cases]
    _compare_clips(model, labels, references, alone, together)
    asked_said = {label: asked for label, _clip, asked in cases if asked}
    return Verification(ran=True, runtime="transformers", version=transformers.__version__, device="cpu",
                        cases=len(references), details={
                            "reference": f"{type(engine.model).__name__}.generate(**{requests.made_by}), greedy, "
                                         "each clip alone"
                                         + (f", with {fixed}" if fixed else ""),
                            "clips": ", ".join(CLIPS), "prompt_tokens": [len(ids) for ids, _e, _a in made],
                            "new_tokens": NEW_TOKENS,
                            "request_language_and_prompt": asked_said or "none (the processor takes neither)",
                            "alone": "token-identical", "engine_batch": "token-identical"})


def _compare_clips(model: ModelSpec, labels: list[str], references: list[list[int]], alone: list[list[int]],
                   together: list[list[int]]) -> None:
    for how, runs in (("alone", alone), ("all clips at once", together)):
        for i, (got, want) in enumerate(zip(runs, references)):
            if got != want:
                raise BuildError(f"models.{model.task_entry or model.name}: the served speech decoding of synthetic "
                                 f"{labels[i]} ({how}) differs from transformers' generate: {got} against {want}; "
                                 "this is a model_build bug, please report it")


def _new(engine: Any, ids: Any) -> list[int]:
    """generate's tokens after the decoder's start: Whisper's short-form generate returns only the new ones, the
    other encoder-decoders the start token first."""
    tokens = [int(t) for t in ids]
    return tokens if engine.whisper else tokens[len(engine.speech_prompt):]


def cases_said(model: ModelSpec) -> str:
    """What the verification decodes, for the build's progress line."""
    speech = model.task is not None and model.task.kind.value == "automatic-speech-recognition"
    return f"{len(CLIPS)} synthetic clips" if speech else f"{len(PROMPTS)} prompts"


def _asked_prompt(engine: Any) -> dict[str, str]:
    """What a request may ask of a multilingual Whisper: its first allowed language, and translation."""
    prompts = engine.prompts
    codes = prompts.codes() if prompts is not None and prompts.multilingual else []
    if not codes:
        return {}
    return {"language": codes[0], **({"task": "translate"} if "translate" in prompts.task_to_id else {})}


def _prompted(engine: Any, limits: Any) -> Optional[tuple[list[int], int]]:
    """A Whisper's prompt_ids for SPEECH_PROMPT and the new tokens that fit after them and the start tokens; None
    for another speech model (no request prompt)."""
    if not engine.takes_prompt_text:
        return None
    ids = [int(t) for t in engine.tokenizer.get_prompt_ids(SPEECH_PROMPT, return_tensors=None)]
    room = int(engine.model.config.max_target_positions) - len(ids) - len(engine.speech_prompt)
    return ids, max(1, min(NEW_TOKENS, room, limits.max_new_tokens))


def _run_speech(engine: Any, features: list[Any], settings: Any) -> list[list[int]]:
    """A speech encoder-decoder's clips through the engine, each with the request's decoder prompt."""
    prompt = engine.prompt_for(settings)
    return _run_prompted(engine, [(prompt, clip, None) for clip in features], settings)


def _run_prompted(engine: Any, made: list[tuple[list[int], Any, Optional[int]]], settings: Any) -> list[list[int]]:
    """Clips through the engine, all submitted at once: (prompt ids, features, answer_after) each (an audio language
    model's from transcription_request.py; an encoder-decoder's encoder input with its decoder prompt)."""
    tokens: list[list[int]] = [[] for _ in made]
    done = [threading.Event() for _ in made]
    for i, (ids, extras, after) in enumerate(made):
        engine.submit(ids, settings, lambda _text: None, lambda _reason, _usage, i=i: done[i].set(), lambda: False,
                      on_token=tokens[i].append, features=extras, answer_after=after)
    for event in done:
        event.wait(WAIT_S)
    return [_until_end(row, engine.eos) for row in tokens]
