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

from benchmarks.tooling import speech_checkpoints  # noqa: E402
from deployment_spec import SpecError  # noqa: E402
from deployment_spec.sections import task_models  # noqa: E402
from deployment_spec.spec import parse_spec  # noqa: E402
from model_build.backends.python import generation_check  # noqa: E402
from model_build.python_models import generation_engine as ge  # noqa: E402
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
    assert set(speech_checkpoints.MAKERS) | {"whisper"} == task_models.GENERATED_SPEECH_TYPES
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
