"""Sequence-to-sequence speech recognition (issue #59): a Whisper checkpoint decoded by the generation engine
(model_build/python_models/generation_engine.py) from its clip's input_features, token-identical to
``WhisperForConditionalGeneration.generate(input_features, do_sample=False, max_new_tokens=N)`` on short-form audio.

A tiny random Whisper (benchmarks/tooling/generation_checkpoints.save_whisper: d_model 32, 2 layers, 80 mel bins,
the real 30 s window) made once per module; its generation_config.json is varied per test the ways real checkpoints
set the decoder prompt (language detected, language set, translate, English-only, forced_decoder_ids).
"""
from __future__ import annotations

import pathlib
import threading
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
np = pytest.importorskip("numpy")

from benchmarks.tooling.generation_checkpoints import save_whisper  # noqa: E402
from model_build.python_models import generation_engine as ge  # noqa: E402
from model_build.python_models import whisper_prompt  # noqa: E402

RATE = 16000
WAIT_S = 60
LIMITS = ge.Limits(max_new_tokens=100, default_max_new_tokens=16, max_prompt_tokens=64, max_concurrent=4)


def _clips() -> list[Any]:
    """A tone, noise, a chirp and silence: different clips that make the tiny model say different things."""
    rng = np.random.default_rng(0)
    t = np.arange(RATE) / RATE
    return [(0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), rng.normal(0, 0.1, RATE * 3 // 2).astype(np.float32),
            (0.3 * np.sin(2 * np.pi * (200 + 900 * t) * t)).astype(np.float32), np.zeros(RATE // 2, np.float32)]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return save_whisper(tmp_path_factory.mktemp("whisper"))


@pytest.fixture(scope="module")
def features(folder: pathlib.Path) -> list[Any]:
    extractor = transformers.AutoFeatureExtractor.from_pretrained(folder)
    return [extractor(clip, sampling_rate=RATE, return_tensors="pt").input_features for clip in _clips()]


def _engine(folder: pathlib.Path, **generation: Any) -> tuple[Any, Any]:
    model = transformers.AutoModelForSpeechSeq2Seq.from_pretrained(folder).eval()
    for key, value in generation.items():  # None: the key left out, as English-only checkpoints leave it
        if value is None:
            delattr(model.generation_config, key)
        else:
            setattr(model.generation_config, key, value)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    return ge.Engine(model, tokenizer, LIMITS, ge.SPEECH), model


def _transcribe(engine: Any, features: list[Any], max_new_tokens: int) -> list[list[int]]:
    """All clips submitted at once; each one's generated ids."""
    tokens: list[list[int]] = [[] for _ in features]
    done = [threading.Event() for _ in features]
    for i, clip in enumerate(features):
        engine.submit(engine.speech_prompt, ge.Settings(max_new_tokens=max_new_tokens), lambda _text: None,
                      lambda _reason, _usage, i=i: done[i].set(), lambda: False, on_token=tokens[i].append,
                      features=clip)
    assert all(event.wait(WAIT_S) for event in done)
    return tokens


def _generated(model: Any, clip: Any, max_new_tokens: int) -> list[int]:
    """generate's new tokens (short-form: it answers without the decoder prompt), pads after EOS dropped."""
    ids = [int(t) for t in model.generate(clip, do_sample=False, max_new_tokens=max_new_tokens)[0]]
    eos = model.generation_config.eos_token_id
    return ids[:ids.index(eos) + 1] if eos in ids else ids


PROMPTS = {
    "detected": {},
    "language": {"language": "fr"},
    "translate": {"language": "de", "task": "translate"},
    "english-only": {"lang_to_id": None, "task_to_id": None},
}


@pytest.mark.parametrize("case", sorted(PROMPTS))
def test_engine_transcribes_like_whisper_generate(folder: pathlib.Path, features: list[Any], case: str) -> None:
    generation = dict(PROMPTS[case])
    engine, model = _engine(folder, **generation)
    try:
        got = _transcribe(engine, features, max_new_tokens=12)
    finally:
        engine.close()
    assert got == [_generated(model, clip, 12) for clip in features]
    assert len({tuple(tokens) for tokens in got}) > 1  # the clips are told apart: the encoder's output is used


def test_speech_prompts_as_whisper_builds_them(folder: pathlib.Path) -> None:
    config = transformers.GenerationConfig.from_pretrained(folder)
    ids = config.lang_to_id | config.task_to_id
    start, no_timestamps = config.decoder_start_token_id, config.no_timestamps_token_id
    assert whisper_prompt.build(config, None) == [start, ge.DETECT, no_timestamps]
    assert whisper_prompt.build(config, None, task="translate") == [start, ge.DETECT, ids["translate"], no_timestamps]
    config.language = "fr"
    assert whisper_prompt.build(config, None) == [start, ids["<|fr|>"], ids["transcribe"], no_timestamps]
    assert whisper_prompt.build(config, None, "German") == [start, ids["<|de|>"], ids["transcribe"], no_timestamps]
    config.language, config.forced_decoder_ids = None, [[1, ids["<|de|>"]], [2, ids["translate"]]]
    assert whisper_prompt.build(config, None) == [start, ids["<|de|>"], ids["translate"], no_timestamps]
    # generate ignores forced_decoder_ids once a language or task is given
    assert whisper_prompt.build(config, None, "en") == [start, ids["<|en|>"], ids["transcribe"], no_timestamps]
    config.language = "xx"
    with pytest.raises(ValueError, match="language 'xx' is not in its lang_to_id"):
        whisper_prompt.build(config, None)


def _decode_asked(engine: Any, features: list[Any], asked: list[dict[str, Any]]) -> list[list[int]]:
    """Each request's parameters (None: left out) with 10 new tokens, submitted all at once, clip i % len(features);
    each one's generated ids. Closes the engine."""
    tokens: list[list[int]] = [[] for _ in asked]
    done = [threading.Event() for _ in asked]
    try:
        for i, parameters in enumerate(asked):
            given = {name: value for name, value in parameters.items() if value is not None}
            settings = ge.parse_request({"max_new_tokens": 10, **given}, LIMITS, speech=True)
            engine.submit(engine.prompt_for(settings), settings, lambda _t: None,
                          lambda _r, _u, i=i: done[i].set(), lambda: False, on_token=tokens[i].append,
                          features=features[i % len(features)])
        assert all(event.wait(WAIT_S) for event in done)
    finally:
        engine.close()
    return tokens


# A request's language and task, as the pipeline's generate_kwargs send them: each equal to generate's with the same
# arguments, all submitted at once (prompts of 3 and 4 tokens decode side by side).
ASKED = [("fr", None), ("French", "translate"), ("<|de|>", "transcribe"), (None, "translate"), (None, None),
         ("en", None)]


def test_a_requests_language_and_task_decode_as_generate_with_them(folder: pathlib.Path, features: list[Any]) -> None:
    engine, model = _engine(folder)
    tokens = _decode_asked(engine, features, [{"language": language, "task": task} for language, task in ASKED])
    for i, (language, task) in enumerate(ASKED):
        ids = model.generate(features[i % len(features)], do_sample=False, max_new_tokens=10, language=language,
                             task=task)[0].tolist()
        eos = model.generation_config.eos_token_id
        assert tokens[i] == (ids[:ids.index(eos) + 1] if eos in ids else ids), (language, task)
    assert len({tuple(row) for row in tokens}) >= 4  # the prompts are told apart


# A request's prompt, as pipeline users pass generate_kwargs={"prompt_ids": processor.get_prompt_ids(text)}: with
# language and task too, beside requests without one, all submitted at once.
PROMPTED = [("Anna and Bob met", None, None), ("ice cream", "fr", None), ("  spaced out  ", "de", "translate"),
            ("x", None, None), (None, None, None),
            ("a longer prompt of several words to read first", None, "translate")]


def test_a_requests_prompt_decodes_as_generate_with_its_prompt_ids(folder: pathlib.Path, features: list[Any]) -> None:
    engine, model = _engine(folder)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    tokens = _decode_asked(engine, features, [{"prompt": text, "language": language, "task": task}
                                              for text, language, task in PROMPTED])
    eos = model.generation_config.eos_token_id
    for i, (text, language, task) in enumerate(PROMPTED):
        prompt_ids = torch.tensor(tokenizer.get_prompt_ids(text, return_tensors="np")) if text else None
        ids = model.generate(features[i % len(features)], do_sample=False, max_new_tokens=10, language=language,
                             task=task, prompt_ids=prompt_ids)[0].tolist()
        assert tokens[i] == (ids[:ids.index(eos) + 1] if eos in ids else ids), (text, language, task)
    assert tokens[0] != tokens[4] or tokens[3] != tokens[4]  # twin: a prompt changes what the model says


def test_a_prompt_the_model_cannot_take_is_refused(folder: pathlib.Path) -> None:
    engine, _model = _engine(folder)
    tight = ge.Limits(max_new_tokens=100, default_max_new_tokens=16, max_prompt_tokens=5, max_concurrent=4)
    try:
        def refusal(parameters: dict[str, Any], limits: Any = LIMITS) -> str:
            with pytest.raises(ge.RequestError) as refused:
                engine.limits = limits
                engine.prompt_for(ge.parse_request(parameters, limits, speech=True))
            return str(refused.value)

        assert refusal({"prompt": "say <|en|> now"}) == (
            "parameters.prompt: the text holds <|en|>, one of this Whisper's special tokens, which a prompt may not "
            "contain; remove it")
        def count(text: str) -> int:  # <|startofprev|> and the text's tokens, as generate's prompt_ids
            return len(engine.tokenizer.get_prompt_ids(text, return_tensors=None))

        assert refusal({"prompt": "one two"}, tight) == (
            f"parameters.prompt: {count('one two')} tokens is above this endpoint's bound 5 (the spec's "
            "task.generation.max_prompt_tokens); send a shorter prompt")
        positions = engine.model.config.max_target_positions
        long = "Anna " * positions
        roomy = ge.Limits(max_new_tokens=100, default_max_new_tokens=16, max_prompt_tokens=1000, max_concurrent=4)
        assert refusal({"prompt": long}, roomy) == (
            f"parameters.prompt: its {count(long)} tokens and the 3 start tokens leave no room to generate in this "
            f"model's {positions} decoder positions (max_target_positions); send a prompt of at most "
            f"{positions - 4} tokens")
        assert refusal({"prompt": "   "}) == (
            "parameters.prompt: \"   \" is not a non-empty string; send the text that comes before the clip, e.g. "
            "the names it mentions")
        engine.limits = LIMITS
        settings = ge.parse_request({"prompt": "hello", "max_new_tokens": 100}, LIMITS, speech=True)
        prompt = engine.prompt_for(settings)
        with pytest.raises(ge.RequestError):  # prompt + max_new_tokens past the positions: generate's ValueError
            engine.submit(prompt + [prompt[0]] * (positions - 100 - len(prompt) + 1), settings, lambda _t: None,
                          lambda _r, _u: None, lambda: False, features=torch.zeros(1, 80, 3000))
    finally:
        engine.close()


def _refusal(folder: pathlib.Path, parameters: dict[str, Any], **generation: Any) -> str:
    config = transformers.GenerationConfig.from_pretrained(folder)
    for key, value in generation.items():
        setattr(config, key, value)
    languages = parameters.pop("allowed", None)
    prompts = whisper_prompt.WhisperPrompts(config, None, languages)
    with pytest.raises(ge.RequestError) as refused:
        settings = ge.parse_request(parameters, LIMITS, speech=True)
        prompts.for_request(settings.language, settings.task)
    return str(refused.value)


def test_a_language_or_task_the_checkpoint_or_the_spec_does_not_allow_is_refused(folder: pathlib.Path) -> None:
    assert _refusal(folder, {"language": "klingon"}) == (
        "parameters.language: 'klingon' is not a language of this Whisper (its generation_config.json lang_to_id); "
        "send one of its codes: de, en, fr, or the language's English name (french)")
    assert _refusal(folder, {"language": "es"}) == (
        "parameters.language: 'es' is not a language of this Whisper (its generation_config.json lang_to_id); send "
        "one of its codes: de, en, fr, or the language's English name (french)")
    assert _refusal(folder, {"language": "german", "allowed": ("en", "fr")}) == (
        "parameters.language: 'german' is not allowed on this endpoint (the spec's task.generation.languages: en, "
        "fr); send one of en, fr")
    assert _refusal(folder, {"language": "fr", "allowed": ()}) == (
        "parameters.language: 'fr' is not allowed on this endpoint (the spec's task.generation.languages: none); "
        "remove language")
    assert _refusal(folder, {"task": "summarize"}) == (
        "parameters.task: 'summarize' is not a task of this Whisper; send one of transcribe, translate")
    assert _refusal(folder, {"task": "translate"}, is_multilingual=False) == (
        "parameters.task: this Whisper is English-only (its generation_config.json has no lang_to_id or "
        "is_multilingual false), so a request chooses neither language nor task; remove task")
    assert _refusal(folder, {"language": 5}) == (
        'parameters.language: 5 is not a non-empty string; send a language code or name, e.g. "fr" or "french"')


def test_a_text_model_takes_no_language() -> None:
    with pytest.raises(ge.RequestError) as refused:
        ge.parse_request({"language": "fr"}, LIMITS)
    assert str(refused.value) == (
        "parameters.language is not a parameter of this endpoint; known: do_sample, max_new_tokens, "
        "repetition_penalty, seed, stop, stream, temperature, top_k, top_p; remove it or correct its name")


def test_the_specs_languages_reach_the_engine_through_config_parameters() -> None:
    from deployment_spec.sections.generation import Generation

    parameters = Generation(languages=("en", "fr")).model_parameters(ge.SPEECH, 4)
    assert parameters["languages"] == "en,fr"
    assert ge.Limits.from_parameters(parameters).languages == ("en", "fr")
    assert ge.Limits.from_parameters(Generation(languages=()).model_parameters(ge.SPEECH, 4)).languages == ()
    assert "languages" not in Generation().model_parameters(ge.SPEECH, 4)


def test_language_is_detected_per_clip(folder: pathlib.Path, features: list[Any]) -> None:
    """Multilingual and no language set: each clip's prompt carries the language generate detects for it."""
    engine, model = _engine(folder)
    try:
        detected = model.detect_language(input_features=torch.cat(features)).tolist()
        languages = []
        original = engine._speech_encoder

        def spy(group: Any) -> Any:
            out = original(group)
            languages.extend(int(prompt[1]) for prompt in out[2])
            return out

        engine._speech_encoder = spy
        _transcribe(engine, features, max_new_tokens=2)
    finally:
        engine.close()
    assert sorted(languages) == sorted(detected)


def test_max_new_tokens_past_the_decoders_positions_is_refused(folder: pathlib.Path, features: list[Any]) -> None:
    """generate raises when prompt + max_new_tokens exceed max_target_positions (64 here); the engine refuses the
    request (a 400 in Triton) and decodes the largest that fits as generate does, to the bound (no EOS)."""
    engine, model = _engine(folder, suppress_tokens=list(range(300, 311)))
    try:
        with pytest.raises(ge.RequestError) as refused:
            _transcribe(engine, features[:1], max_new_tokens=62)
        assert str(refused.value) == ("max_new_tokens: 62 and the 3-token decoder prompt exceed this model's 64 "
                                      "decoder positions (max_target_positions); send max_new_tokens of at most 61")
        got = _transcribe(engine, features[:1], max_new_tokens=61)
    finally:
        engine.close()
    assert got == [_generated(model, features[0], 61)] and len(got[0]) == 61


def test_a_speech_engine_wants_features(folder: pathlib.Path) -> None:
    engine, _ = _engine(folder)
    try:
        wants = ("a speech encoder-decoder takes its encoder input with each request, an audio language model its "
                 "prefill arguments (a dict), a text model none")
        with pytest.raises(ValueError) as none:
            engine.submit(engine.speech_prompt, ge.Settings(max_new_tokens=2), lambda _t: None,
                          lambda _r, _u: None, lambda: False)
        with pytest.raises(ValueError) as a_dict:  # an audio language model's prefill arguments
            engine.submit(engine.speech_prompt, ge.Settings(max_new_tokens=2), lambda _t: None,
                          lambda _r, _u: None, lambda: False, features={})
        assert str(none.value) == str(a_dict.value) == wants
    finally:
        engine.close()


def test_the_build_ships_and_checks_a_whisper(folder: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """The recipe ships the engine, audio_decode.py and the checkpoint, ``audio`` as the one input, max_audio_seconds
    as a parameter; the build's check decodes its synthetic clips token-identical to generate, alone and together."""
    from deployment_spec.spec import parse_spec
    from model_build.backends.python import generation_check
    from model_build.recipes import load_python

    raw = {"project": "Check", "triton_version": "25.09", "signing": {"unsigned_reason": "a test"},
           "models": {"asr": {"backend": "python", "weights": str(folder), "max_batch_size": 4,
                              "task": {"kind": "automatic-speech-recognition", "max_audio_seconds": 20}}},
           "endpoints": {"speech": {"kind": "single-model", "models": ["asr"], "instance_type": "ml.g5.xlarge"}},
           "environments": {"dev": {"region": "us-east-1"}}}
    spec = parse_spec(raw, tmp_path / "spec.yaml")
    model = spec.models["asr"]
    made = load_python(model, spec.root, False)
    assert [t.name for t in made.inputs] == ["audio"] and [t.name for t in made.outputs] == ["text_output"]
    assert made.parameters["max_audio_seconds"] == "20" and made.parameters["kind"] == ge.SPEECH
    assert {"audio_decode.py", "generation_engine.py", "whisper_prompt.py", "model.py", "checkpoint"} <= set(made.files)
    assert "soundfile==0.14.0" in made.requirements
    verification = generation_check.verify(model, made.files, lambda _line: None)
    assert (verification.cases, verification.details["alone"], verification.details["engine_batch"]) == (
        5, "token-identical", "token-identical")
    assert verification.details["request_language_and_task"] == {"language": "de", "task": "translate"}
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    assert verification.details["request_prompt"] == {
        "prompt": "Anna and Bob", "prompt_ids": tokenizer.get_prompt_ids("Anna and Bob", return_tensors=None)}
