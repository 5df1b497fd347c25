"""Speech recognition that generates (issue #59): ``kind: automatic-speech-recognition`` with ``backend: python`` is a
Whisper checkpoint decoded token by token, one Python-backend model like the text kinds; the loader checks the
checkpoint's config.json agrees with the backend and that clips fit its one window, with exact messages."""
import copy
import json
import pathlib

import pytest
import yaml

from deployment_spec import SpecError
from deployment_spec.sections import task_models
from deployment_spec.sections.model import Backend
from deployment_spec.spec import parse_spec

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((ROOT / "triton.yaml").read_text())
WHISPER = {"backend": "python", "weights": "ckpt", "max_batch_size": 4,
           "task": {"kind": "automatic-speech-recognition"}}


def _spec(tmp_path: pathlib.Path, entry: dict, model_type: str = "whisper", chunk_length: int = 30,
          version: str = "25.09", generation: dict | None = None):
    folder = tmp_path / "ckpt"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": model_type}))
    if generation is not None:
        (folder / "generation_config.json").write_text(json.dumps(generation))
    (folder / "preprocessor_config.json").write_text(json.dumps({"feature_extractor_type": "WhisperFeatureExtractor",
                                                                 "chunk_length": chunk_length}))
    raw = copy.deepcopy(BASE)
    raw["triton_version"] = version
    raw["models"]["asr"] = entry
    raw["endpoints"]["classifier"].update({"models": ["asr"]})
    return parse_spec(raw, tmp_path / "triton.yaml")


def _problems(tmp_path: pathlib.Path, entry: dict, **kwargs) -> list[str]:
    with pytest.raises(SpecError) as caught:
        _spec(tmp_path, entry, **kwargs)
    return [str(p) for p in caught.value.problems if p.path.startswith("models.asr")]


def test_a_whisper_entry_is_one_generating_python_model(tmp_path):
    spec = _spec(tmp_path, WHISPER)
    asr = spec.models["asr"]
    assert (asr.backend, asr.source.recipe, asr.task_entry) == (Backend.PYTHON, "hf-generate", "asr")
    assert asr.task.generates() and asr.task.streams()
    assert not [name for name in spec.models if name.startswith("asr-")]  # no steps, no ensemble
    endpoint = spec.environments["dev"].endpoints["classifier"]
    assert endpoint.container.inference_type == "generate_stream"


def test_a_whisper_entry_may_answer_whole_texts(tmp_path):
    spec = _spec(tmp_path, {**WHISPER, "task": {**WHISPER["task"], "stream": False,
                                                "generation": {"max_new_tokens": 440}}})
    assert not spec.models["asr"].task.streams()
    assert spec.models["asr"].task.generation.max_new_tokens == 440


def test_a_ctc_entry_is_still_an_ensemble(tmp_path):
    spec = _spec(tmp_path, {**WHISPER, "backend": "onnxruntime"}, model_type="wav2vec2")
    assert not spec.models["asr"].task.generates()
    assert spec.models["asr"].backend is Backend.ENSEMBLE
    assert spec.models["asr-model"].source.recipe == "hf-ctc"


ENGINE = ("a speech encoder-decoder (Whisper, Speech2Text, SpeechT5, Moonshine, Canary, Seamless M4T...), an audio "
          "language model with a transcription request (Qwen3-ASR, VibeVoice-ASR, Voxtral) or a streaming speech model "
          "(Kyutai STT, Voxtral Realtime)")


def test_a_ctc_checkpoint_with_backend_python_is_refused(tmp_path):
    assert _problems(tmp_path, WHISPER, model_type="wav2vec2") == [
        "models.asr.backend: got 'python' with the 'wav2vec2' checkpoint in ckpt (a CTC model, served as an "
        f"ensemble); allowed: onnxruntime, tensorrt or pytorch for a CTC checkpoint; python for {ENGINE}; fix: set "
        "backend: onnxruntime for a CTC checkpoint, or give a speech encoder-decoder checkpoint"]


@pytest.mark.parametrize("model_type,why", [
    ("granite_speech", "an audio language model whose feature extractor needs torchaudio, which has no release for "
                       "the torch the serving environment pins (2.13.0; torchaudio's newest is 2.11.1)"),
    ("dia", "speech synthesis: it writes audio codes from text, not text from audio"),
    ("pop2piano", "music transcription: it writes MIDI event tokens, not text"),
])
def test_a_speech_seq2seq_checkpoint_the_engine_does_not_decode_is_refused_with_its_cause(tmp_path, model_type, why):
    assert _problems(tmp_path, WHISPER, model_type=model_type) == [
        f"models.asr.backend: got 'python' with the '{model_type}' checkpoint in ckpt ({why}); allowed: onnxruntime, "
        f"tensorrt or pytorch for a CTC checkpoint; python for {ENGINE}; fix: give a speech encoder-decoder, an audio "
        "language model with a transcription request, a streaming speech model, or a CTC checkpoint"]


@pytest.mark.parametrize("model_type", ["kyutai_speech_to_text", "voxtral_realtime"])
def test_a_streaming_speech_model_is_a_generating_python_model(tmp_path, model_type):
    spec = _spec(tmp_path, WHISPER, model_type=model_type)
    assert spec.models["asr"].task.generates() and spec.models["asr"].source.recipe == "hf-generate"


def test_another_speech_encoder_decoder_is_a_generating_python_model(tmp_path):
    spec = _spec(tmp_path, WHISPER, model_type="speech_to_text")
    assert spec.models["asr"].task.generates() and spec.models["asr"].source.recipe == "hf-generate"
    for audio_llm in ("qwen3_asr", "vibevoice_asr"):
        assert _spec(tmp_path, WHISPER, model_type=audio_llm).models["asr"].source.recipe == "hf-generate"
    # its clips are not held to Whisper's window: the model takes any length its positions hold
    assert _spec(tmp_path, {**WHISPER, "task": {**WHISPER["task"], "max_audio_seconds": 60}},
                 model_type="speech_to_text")


def test_a_whisper_checkpoint_with_backend_onnxruntime_is_refused(tmp_path):
    assert _problems(tmp_path, {**WHISPER, "backend": "onnxruntime"}) == [
        "models.asr.backend: got 'onnxruntime' with the 'whisper' checkpoint in ckpt (a sequence-to-sequence model: "
        f"it generates text token by token, which no exported graph step does); allowed: python for {ENGINE} (our "
        "generation engine); onnxruntime, tensorrt or pytorch for a CTC checkpoint; fix: set backend: python"]


def test_clips_longer_than_the_window_are_refused(tmp_path):
    entry = {**WHISPER, "task": {**WHISPER["task"], "max_audio_seconds": 60}}
    assert _problems(tmp_path, entry) == [str(task_models.Problem(
        "models.asr.task.max_audio_seconds", "60 with the Whisper checkpoint in ckpt",
        "at most 30 (its feature extractor's chunk_length: the model hears one 30 s window; long-form "
        "transcription is not served)", "set max_audio_seconds: 30 or less, and split longer recordings before "
        "sending"))]
    assert _spec(tmp_path, {**WHISPER, "task": {**WHISPER["task"], "max_audio_seconds": 10}})


def test_generation_settings_on_a_ctc_entry_name_the_python_backend(tmp_path):
    entry = {**WHISPER, "backend": "onnxruntime", "task": {**WHISPER["task"], "stream": False}}
    assert _problems(tmp_path, entry, model_type="wav2vec2") == [
        "models.asr.task.stream: got false; allowed: only with text-generation, text2text-generation, or "
        "automatic-speech-recognition with backend python (a automatic-speech-recognition answers in one piece); "
        "fix: remove stream"]


def test_a_gpu_engine_is_refused_for_whisper(tmp_path):
    entry = {**WHISPER, "task": {**WHISPER["task"], "engine": "vllm"}}
    problems = _problems(tmp_path, entry)
    assert str(task_models.Problem(
        "models.asr.task.engine", "'vllm' with automatic-speech-recognition",
        "transformers (our engine builds Whisper's decoder prompt from its clip's features; the GPU engines take "
        "text prompts)", "remove engine (transformers)")) in problems


def test_whisper_streaming_follows_the_text_kinds_rules(tmp_path):
    """Streaming needs Triton 25.03 or later, as for the text kinds (deployment_spec/rules/streaming.py)."""
    with pytest.raises(SpecError) as caught:
        _spec(tmp_path, WHISPER, version="24.09")
    assert [str(p) for p in caught.value.problems] == [
        "triton_version: got '24.09'; allowed: 25.03 or later with the streaming model asr "
        "(SAGEMAKER_TRITON_INFERENCE_TYPE=generate_stream came with Triton 25.03); fix: set triton_version: "
        "\"25.04\" or later, or set models.asr.task.stream: false (the whole text in one answer)"]


def test_the_model_types_are_transformers_own():
    mapping = pytest.importorskip("transformers.models.auto.modeling_auto")
    assert task_models.SPEECH_SEQ2SEQ_TYPES == set(mapping.MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES)


MULTILINGUAL = {"lang_to_id": {"<|en|>": 50259, "<|fr|>": 50265, "<|de|>": 50261}, "is_multilingual": True}


def _languages(*codes: str) -> dict:
    return {**WHISPER, "task": {**WHISPER["task"], "generation": {"languages": list(codes)}}}


def test_the_languages_a_request_may_ask_are_the_checkpoints_own(tmp_path):
    spec = _spec(tmp_path, _languages("en", "fr"), generation=MULTILINGUAL)
    assert spec.models["asr"].task.generation.languages == ("en", "fr")
    assert _problems(tmp_path, _languages("fr", "es", "<|de|>"), generation=MULTILINGUAL) == [
        "models.asr.task.generation.languages: got 'es' with the Whisper checkpoint in ckpt; allowed: a code of its "
        "generation_config.json lang_to_id: de, en, fr; fix: remove 'es' or correct it",
        "models.asr.task.generation.languages: got '<|de|>' with the Whisper checkpoint in ckpt; allowed: a code of "
        "its generation_config.json lang_to_id: de, en, fr; fix: remove '<|de|>' or correct it"]


def test_an_english_only_whisper_takes_no_languages(tmp_path):
    assert _problems(tmp_path, _languages("en"), generation={"is_multilingual": False}) == [
        "models.asr.task.generation.languages: got en with the Whisper checkpoint in ckpt; allowed: none: it is "
        "English-only (its generation_config.json has no lang_to_id or is_multilingual false); fix: remove languages"]
    assert _spec(tmp_path, _languages(), generation={"is_multilingual": False})  # [] asks for none


def test_languages_belong_to_speech_recognition(tmp_path):
    entry = {"backend": "python", "weights": "ckpt", "max_batch_size": 4,
             "task": {"kind": "text-generation", "generation": {"languages": ["fr"]}}}
    assert _problems(tmp_path, entry, model_type="gpt2") == [
        "models.asr.task.generation.languages: got fr; allowed: only with automatic-speech-recognition on a Whisper "
        "(a request's parameters.language); text-generation takes none; fix: remove languages"]
