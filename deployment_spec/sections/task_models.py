"""Expands each ``task:`` entry of ``models:`` into its steps and its ensemble (deployment_spec/sections/tasks.py)."""
from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Mapping, Optional

from deployment_spec.sections import task_dali, tasks
from deployment_spec.sections.dali import DaliPipeline
from deployment_spec.parsing.errors import Problem
from deployment_spec.sections.model import Backend, DynamicBatching, EnsembleSettings, EnsembleStep, ModelSpec, Source

MAX_NAME = 63  # model.NAME_PATTERN


def expand(models: Mapping[str, ModelSpec], declared: set[str], root: Optional[pathlib.Path] = None
           ) -> tuple[dict[str, ModelSpec], list[Problem]]:
    """The models with every task entry replaced by its ensemble (same name) and its steps after it. ``root``: the
    spec's folder, where weights are (``task.preprocess: dali`` reads the checkpoint's processor when the spec
    loads, so a pipeline DALI cannot express is refused before any build)."""
    out: dict[str, ModelSpec] = {}
    problems: list[Problem] = []
    for name, model in models.items():
        if model.task is None:
            out[name] = model
            continue
        found = tasks.name_problems(name, model.task, declared, MAX_NAME)
        if model.task.kind is tasks.TaskKind.SPEECH_RECOGNITION and model.weights and not found:
            found = speech_problems(model, (root or pathlib.Path(".")) / model.weights, f"models.{name}")
        pipeline = None
        if model.task.dali_preprocess() and model.weights and not found:
            pipeline, found = task_dali.derive((root or pathlib.Path(".")) / model.weights, model.weights,
                                               f"models.{name}.task.preprocess")
        problems += found
        if not found:
            out.update(_expanded(model, pipeline))
    return out, problems


def _expanded(model: ModelSpec, pipeline: Optional[DaliPipeline] = None) -> dict[str, ModelSpec]:
    task = model.task
    assert task is not None  # only task entries come here
    if task.generates():  # one model under the entry's name: the checkpoint decoded in the Python backend
        return {model.name: dataclasses.replace(model, source=Source(recipe=task.model_recipe()),
                                                task_entry=model.name)}
    names = tasks.step_names(model.name, task)
    # The Python steps take what is queued without waiting for more: the model step's own delay is where batches
    # are worth forming; a delay on each step would add up (three times the delay for a lone request).
    batching = DynamicBatching(max_queue_delay_us=0) if model.dynamic_batching else None
    python_step = ModelSpec(backend=Backend.PYTHON, weights=model.weights, max_batch_size=model.max_batch_size,
                            sequence_length=model.sequence_length, dynamic_batching=batching,
                            task=task, task_entry=model.name)
    steps = [dataclasses.replace(python_step, source=Source(recipe=tasks.first_recipe(task.kind)), name=names[0]),
             dataclasses.replace(model, source=Source(recipe=tasks.MODEL_RECIPE[task.kind]), name=names[1],
                                 task_entry=model.name)]
    if pipeline is not None:  # task.preprocess: dali: a dali model makes pixel_values (by_name.py renames its tensors)
        steps[0] = ModelSpec(backend=Backend.DALI, dali=pipeline, max_batch_size=model.max_batch_size,
                             dynamic_batching=batching, task=task, task_entry=model.name, name=names[0])
    if tasks.has_answer_step(task.kind):
        steps.append(dataclasses.replace(python_step, source=Source(recipe=tasks.ANSWER_RECIPE), name=names[2]))
    ensemble = ModelSpec(backend=Backend.ENSEMBLE, max_batch_size=model.max_batch_size, task=task, name=model.name,
                         task_entry=model.name,
                         ensemble=EnsembleSettings(steps=tuple(EnsembleStep(model=s.name) for s in steps),
                                                   outputs=tasks.OUTPUTS[task.kind], by_name=True))
    return {model.name: ensemble, **{s.name: s for s in steps}}


def window_model_step(model: ModelSpec) -> str:
    """The model step's name where ``model`` is a question-answering answer step: it runs that step on each
    context's windows after the first (model_build/python_models/hf_answer.py); else ""."""
    task = model.task
    if model.source is None or model.source.recipe != tasks.ANSWER_RECIPE or task is None or \
            task.kind is not tasks.TaskKind.QUESTION_ANSWERING:
        return ""
    return tasks.step_names(model.task_entry, task)[1]


# transformers 5.23.0's MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES (models/auto/modeling_auto.py): the model types
# AutoModelForSpeechSeq2Seq loads, written out because the spec loads with the standard library only
# (tests/spec/test_generation_whisper_specs.py compares). The engine decodes the encoder-decoders among them (the
# encoder reads the clip's features, the decoder writes text from its start token; Whisper: from its prompt of language
# and task), the audio language models whose processor writes a transcription request and whose decoding steps
# read only the text, and the streaming models, stepped through their own generate (model_build/python_models/
# transcription_request.py AUDIO_LLM_TYPES, step_fed.py).
SPEECH_SEQ2SEQ_TYPES = frozenset({
    "canary", "cohere_asr", "dia", "fun_asr_nano", "granite_speech", "granite_speech_plus", "kyutai_speech_to_text",
    "moonshine", "moonshine_streaming", "pop2piano", "qwen3_asr", "seamless_m4t", "seamless_m4t_v2",
    "speech-encoder-decoder", "speech_to_text", "speecht5", "vibevoice", "vibevoice_asr", "voxtral",
    "voxtral_realtime", "whisper"})
GENERATED_SPEECH_TYPES = frozenset({
    "canary", "cohere_asr", "moonshine", "moonshine_streaming", "seamless_m4t", "seamless_m4t_v2",
    "speech-encoder-decoder", "speech_to_text", "speecht5", "whisper", "qwen3_asr", "vibevoice_asr", "voxtral",
    "kyutai_speech_to_text", "voxtral_realtime"})
# Why the engine does not decode the others (transformers 5.23.0's classes, processors and feature extractors).
_TORCHAUDIO = ("an audio language model whose feature extractor needs torchaudio, which has no release for the torch "
               "the serving environment pins (2.13.0; torchaudio's newest is 2.11.1)")
NOT_DECODED_SPEECH = {
    "dia": "speech synthesis: it writes audio codes from text, not text from audio",
    "vibevoice": "speech synthesis: it writes audio from text, not text from audio",
    "pop2piano": "music transcription: it writes MIDI event tokens, not text",
    "fun_asr_nano": _TORCHAUDIO, "granite_speech": _TORCHAUDIO, "granite_speech_plus": _TORCHAUDIO}
SPEECH_ENGINE = ("a speech encoder-decoder (Whisper, Speech2Text, SpeechT5, Moonshine, Canary, Seamless M4T...), an "
                 "audio language model with a transcription request (Qwen3-ASR, VibeVoice-ASR, Voxtral) or a streaming "
                 "speech model (Kyutai STT, Voxtral Realtime)")
CTC_BACKENDS = "onnxruntime, tensorrt or pytorch"
_GIVE_DECODED = ("give a speech encoder-decoder, an audio language model with a transcription request, a streaming "
                 "speech model, or a CTC checkpoint")


def speech_problems(model: ModelSpec, weights: pathlib.Path, path: str) -> list[Problem]:
    """automatic-speech-recognition: the backend the user chose must suit the checkpoint in ``weights`` (python: a
    Whisper, decoded token by token; the others: a CTC model in an ensemble), and a Whisper's clips must fit its one
    window (long-form decoding is not served). A folder without a readable config.json is left to the build, which
    names what is missing."""
    assert model.task is not None
    try:
        config = json.loads((weights / "config.json").read_text())
        model_type = str(config.get("model_type")) if isinstance(config, dict) else None
    except (OSError, ValueError):
        return []
    if model_type is None:
        return []
    got = f"{model.backend.value!r} with the {model_type!r} checkpoint in {model.weights}"
    if model.task.speech_seq2seq and model_type not in GENERATED_SPEECH_TYPES:
        what = NOT_DECODED_SPEECH.get(model_type, "a CTC model, served as an ensemble")
        return [Problem(f"{path}.backend", f"{got} ({what})", f"{CTC_BACKENDS} for a CTC checkpoint; python for "
                        f"{SPEECH_ENGINE}", "set backend: onnxruntime for a CTC checkpoint, or give a speech "
                        "encoder-decoder checkpoint" if model_type not in NOT_DECODED_SPEECH
                        else _GIVE_DECODED)]
    if not model.task.speech_seq2seq and model_type in SPEECH_SEQ2SEQ_TYPES:
        return [Problem(f"{path}.backend", f"{got} (a sequence-to-sequence model: it generates text token by "
                        "token, which no exported graph step does)", f"python for {SPEECH_ENGINE} (our "
                        f"generation engine); {CTC_BACKENDS} for a CTC checkpoint", "set backend: python"
                        if model_type in GENERATED_SPEECH_TYPES else _GIVE_DECODED)]
    if not model.task.speech_seq2seq:
        return []
    if model_type != "whisper":
        languages = model.task.generation.languages
        return [] if languages is None else [Problem(
            f"{path}.task.generation.languages", f"{', '.join(languages) or '[]'} with the {model_type!r} "
            f"checkpoint in {model.weights}", "only with a Whisper checkpoint (the speech model whose decoder prompt "
            "names a language)", "remove languages")]
    return _window_problems(model.task.max_audio_seconds, weights, model.weights or "", path) + \
        _language_problems(model.task.generation.languages, weights, model.weights or "", path)


def _language_problems(languages: Optional[tuple[str, ...]], weights: pathlib.Path, label: str,
                       path: str) -> list[Problem]:
    """``task.generation.languages`` must name languages the Whisper has (its generation_config.json lang_to_id,
    tokens like <|fr|>); an English-only one takes none (generate refuses a language there)."""
    if not languages:
        return []
    try:
        generation = json.loads((weights / "generation_config.json").read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(generation, dict):
        return []
    lang_to_id = generation.get("lang_to_id") or {}
    multilingual = bool(generation.get("is_multilingual", True))
    where = f"{path}.task.generation.languages"
    if not lang_to_id or not multilingual:
        return [Problem(where, f"{', '.join(languages)} with the Whisper checkpoint in {label}", "none: it is "
                        "English-only (its generation_config.json has no lang_to_id or is_multilingual false)",
                        "remove languages")]
    codes = sorted(str(token)[2:-2] for token in lang_to_id)
    return [Problem(where, f"{code!r} with the Whisper checkpoint in {label}", f"a code of its generation_config.json "
                    f"lang_to_id: {', '.join(codes)}", f"remove {code!r} or correct it")
            for code in languages if code not in codes]


def _window_problems(seconds: int, weights: pathlib.Path, label: str, path: str) -> list[Problem]:
    """A Whisper hears one window of its feature extractor's chunk_length seconds (30 for openai/whisper-*);
    generate decodes longer clips window by window with timestamps (long-form), which the engine does not."""
    try:
        extractor = json.loads((weights / "preprocessor_config.json").read_text())
        window = int(extractor.get("chunk_length", 30)) if isinstance(extractor, dict) else 30
    except (OSError, ValueError, TypeError):
        return []
    if seconds <= window:
        return []
    return [Problem(f"{path}.task.max_audio_seconds", f"{seconds} with the Whisper checkpoint in {label}",
                    f"at most {window} (its feature extractor's chunk_length: the model hears one {window} s "
                    "window; long-form transcription is not served)",
                    f"set max_audio_seconds: {window} or less, and split longer recordings before sending")]
