"""Speech encoder-decoders beside Whisper (issue #59): every model type transformers 5.23.0 maps for
AutoModelForSpeechSeq2Seq whose encoder reads a clip and whose decoder writes text from its start token, built by the
recipe and checked by the build's own verification: each synthetic clip's tokens from the shipped engine, alone and
all at once, token-identical to ``generate(<the encoder's input>, do_sample=False)``. The model types transformers
maps that the engine does not decode are refused when the spec loads, each with its cause."""
from __future__ import annotations

import pathlib

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from benchmarks.tooling import audio_llm_checkpoints, speech_checkpoints  # noqa: E402
from deployment_spec import SpecError  # noqa: E402
from deployment_spec.sections import task_models  # noqa: E402
from deployment_spec.spec import parse_spec  # noqa: E402
from model_build.backends.python import generation_check  # noqa: E402
from model_build.python_models import generation_engine as ge, transcription_request  # noqa: E402
from model_build.recipes import load_python  # noqa: E402


def _spec(weights: pathlib.Path, tmp_path: pathlib.Path, generation: dict | None = None):  # type: ignore[no-untyped-def]
    task = {"kind": "automatic-speech-recognition", **({"generation": generation} if generation else {})}
    raw = {"project": "Speech", "triton_version": "25.09", "signing": {"unsigned_reason": "a test"},
           "models": {"asr": {"backend": "python", "weights": str(weights), "max_batch_size": 4, "task": task}},
           "endpoints": {"speech": {"kind": "single-model", "models": ["asr"], "instance_type": "ml.g5.xlarge"}},
           "environments": {"dev": {"region": "us-east-1"}}}
    return parse_spec(raw, tmp_path / "spec.yaml")


@pytest.mark.parametrize("model_type", sorted(speech_checkpoints.MAKERS))
def test_the_build_decodes_each_speech_encoder_decoder_as_generate(model_type: str, tmp_path: pathlib.Path) -> None:
    folder = speech_checkpoints.save(tmp_path / model_type, model_type)
    model = _spec(folder, tmp_path).models["asr"]
    made = load_python(model, tmp_path, False)
    assert [t.name for t in made.inputs] == ["audio"] and made.parameters["kind"] == ge.SPEECH
    verification = generation_check.verify(model, made.files, lambda _line: None)
    assert (verification.cases, verification.details["alone"], verification.details["engine_batch"]) == (
        3, "token-identical", "token-identical")
    assert verification.details["request_language_and_task"] == "none (not a Whisper)"
    assert verification.details["request_prompt"] == "none (not a Whisper, or a tokenizer without get_prompt_ids)"
    assert generation_check.cases_said(model) == "3 synthetic clips"


def test_every_type_the_engine_decodes_has_a_tiny_checkpoint_here() -> None:
    assert set(speech_checkpoints.MAKERS) | set(audio_llm_checkpoints.MAKERS) | {"whisper"} == \
        task_models.GENERATED_SPEECH_TYPES
    assert set(audio_llm_checkpoints.MAKERS) == transcription_request.AUDIO_LLM_TYPES
    assert set(task_models.NOT_DECODED_SPEECH) | task_models.GENERATED_SPEECH_TYPES == \
        task_models.SPEECH_SEQ2SEQ_TYPES


def test_a_language_is_refused_by_a_model_that_takes_none(tmp_path: pathlib.Path) -> None:
    folder = speech_checkpoints.save(tmp_path / "s2t", "speech_to_text")
    engine = ge.Engine.from_checkpoint(str(folder), ge.SPEECH, ge.Limits())
    try:
        with pytest.raises(ge.RequestError) as refused:
            engine.prompt_for(ge.parse_request({"language": "fr"}, engine.limits, speech=True))
        with pytest.raises(ge.RequestError) as no_prompt:
            engine.prompt_for(ge.parse_request({"prompt": "Anna and Bob"}, engine.limits, speech=True))
    finally:
        engine.close()
    assert str(refused.value) == ("parameters.language: this speech_to_text checkpoint takes no language per "
                                  "request (only a Whisper does); remove language")
    assert str(no_prompt.value) == ("parameters.prompt: this speech_to_text checkpoint takes no prompt per request "
                                    "(only a Whisper does); remove prompt")
    with pytest.raises(SpecError) as caught:
        _spec(folder, tmp_path, {"languages": ["fr"]})
    assert [str(p) for p in caught.value.problems] == [
        f"models.asr.task.generation.languages: got fr with the 'speech_to_text' checkpoint in {folder}; allowed: "
        "only with a Whisper checkpoint (the speech model whose decoder prompt names a language); fix: remove "
        "languages"]


@pytest.mark.parametrize("model_type", sorted(audio_llm_checkpoints.MAKERS))
def test_the_build_decodes_each_audio_language_model_as_generate(model_type: str, tmp_path: pathlib.Path) -> None:
    folder = audio_llm_checkpoints.save(tmp_path / model_type, model_type)
    model = _spec(folder, tmp_path).models["asr"]
    made = load_python(model, tmp_path, False)
    assert [t.name for t in made.inputs] == ["audio"] and "transcription_request.py" in made.files
    verification = generation_check.verify(model, made.files, lambda _line: None)
    takes = {"qwen3_asr": {"clip 0 asked language en": {"language": "en"},
                           "clip 1 with the prompt 'Anna and Bob'": {"prompt": "Anna and Bob"}},
             "vibevoice_asr": {"clip 1 with the prompt 'Anna and Bob'": {"prompt": "Anna and Bob"}},
             "voxtral": {"clip 0 asked language en": {"language": "en"}},
             "kyutai_speech_to_text": {}, "voxtral_realtime": {}}[model_type]
    assert (verification.cases, verification.details["alone"], verification.details["engine_batch"]) == (
        3 + len(takes), "token-identical", "token-identical")
    assert verification.details["request_language_and_prompt"] == (takes or "none (the processor takes neither)")
    made_by = "processor(audio=clip)" if model_type in ("kyutai_speech_to_text", "voxtral_realtime") else \
        "processor.apply_transcription_request(clip)"
    assert verification.details["reference"].startswith(
        f"{ge_class(model_type)}.generate(**{made_by}), greedy, each clip alone")


def ge_class(model_type: str) -> str:
    from transformers.models.auto.modeling_auto import MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES

    return MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES[model_type]


@pytest.mark.parametrize("model_type,fix", [
    ("qwen3_asr", "set task.kind: automatic-speech-recognition (the endpoint then takes the clip as audio)"),
    ("voxtral", "set task.kind: automatic-speech-recognition (the endpoint then takes the clip as audio)"),
    ("qwen2_audio", "give an encoder-decoder text checkpoint (T5, BART, Marian, mBART, Pegasus...)")])
def test_an_audio_language_model_as_text2text_is_refused_with_the_kind_that_serves_it(
        model_type: str, fix: str, tmp_path: pathlib.Path) -> None:
    from model_build.errors import BuildError

    folder = tmp_path / model_type
    folder.mkdir()
    (folder / "config.json").write_text(f'{{"model_type": "{model_type}"}}')
    raw = {"project": "Text", "triton_version": "25.09", "signing": {"unsigned_reason": "a test"},
           "models": {"t2t": {"backend": "python", "weights": str(folder), "max_batch_size": 4,
                              "task": {"kind": "text2text-generation"}}},
           "endpoints": {"e": {"kind": "single-model", "models": ["t2t"], "instance_type": "ml.g5.xlarge"}},
           "environments": {"dev": {"region": "us-east-1"}}}
    with pytest.raises(BuildError) as refused:
        load_python(parse_spec(raw, tmp_path / "spec.yaml").models["t2t"], tmp_path, False)
    assert str(refused.value) == (
        f"models.t2t.weights: {folder} is a '{model_type}' checkpoint, which is not an encoder-decoder (its "
        "config.json has no is_encoder_decoder: true; transformers maps it for AutoModelForSeq2SeqLM for its audio "
        f"input, which a text2text-generation request does not send); fix: {fix}")
