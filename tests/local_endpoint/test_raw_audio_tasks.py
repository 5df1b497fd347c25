"""Audio files in, labels and transcripts out: tiny checkpoints with their own feature extractors (wav2vec2's
group-normalised raw samples, AST's log-mel filter bank through its numpy stand-in, HuBERT's layer-normalised
raw samples with a CTC head and a character tokenizer, Parakeet's log-mel features through their numpy stand-in
with the attention_mask the pipeline passes and a SentencePiece tokenizer),
built as ``task:`` ensembles, verified at build time against transformers' pipeline on raw WAV files (lengths,
encodings, stereo), then served by the real Triton server and compared with the pipeline again.

Also: a planted wrong normalisation and a planted wrong sampling rate fail the build-time check, and bad audio
gets a 400 naming AUDIO while the server goes on answering.
"""
from __future__ import annotations

import concurrent.futures
import json
import pathlib

import numpy as np
import pytest

from deployment_spec import load_spec
from local_endpoint.client.invoke import invoke_url
from local_endpoint.client.payload import NamedTensor, encode_request
from local_endpoint.errors import InvokeError
from model_build import layout
from model_build.backends.ensemble import audio_check, audio_samples, task_check, task_reference
from model_build.errors import BuildError
from benchmarks.tooling import audio_checkpoints
from tritonsm.cli import main as tritonsm_main

import shipped_env  # tests/local_endpoint is on sys.path (conftest.py)
import task_fixtures

pytestmark = pytest.mark.triton

SPEC = """\
project: Sounds
triton_version: "25.09"
models:
  sounds:
    task: {kind: audio-classification, top_k: 2, max_audio_seconds: 2}
    backend: onnxruntime
    weights: sounds-wav2vec2
    max_batch_size: 4
  scenes:
    task: {kind: audio-classification}
    backend: pytorch
    weights: scenes-ast
    max_batch_size: 4
  words:
    task: {kind: automatic-speech-recognition}
    backend: onnxruntime
    weights: words-hubert
    max_batch_size: 4
  speech:
    task: {kind: automatic-speech-recognition}
    backend: pytorch
    weights: speech-parakeet
    max_batch_size: 4
endpoints:
  sounds:
    kind: multi-model
    models: [sounds, scenes, words, speech]
    instance_type: ml.g5.xlarge
environments:
  dev: {region: us-east-1}
"""
CHECKPOINTS = {"sounds-wav2vec2": ("audio-classification", "wav2vec2"), "scenes-ast": ("audio-classification", "ast"),
               "words-hubert": ("automatic-speech-recognition", "hubert")}
MODELS = ("sounds", "scenes", "words", "speech")
SPEECH = ("words", "speech")
RUNTIME_NAME = "Sounds-dev-sounds"
RATE = audio_checkpoints.RATE
FEATURES = {"sounds": "Wav2Vec2FeatureExtractor", "scenes": "ASTFeatureExtractor",
            "words": "Wav2Vec2FeatureExtractor", "speech": "ParakeetFeatureExtractor"}


@pytest.fixture(scope="module")
def built(module_tmp) -> task_fixtures.Built:
    def save(root: pathlib.Path) -> None:
        for folder, (task, family) in CHECKPOINTS.items():
            audio_checkpoints.save(root / folder, task, family)
        audio_checkpoints.save_mapped("parakeet_ctc", "ParakeetForCTC", root / "speech-parakeet")
    return task_fixtures.build(module_tmp.mktemp("raw-audio"), SPEC, "sounds", save)


@pytest.fixture(scope="module")
def runtime(built, module_tmp):
    with task_fixtures.served(built, MODELS, RUNTIME_NAME, module_tmp.mktemp("logs")) as served:
        yield served


@pytest.fixture(scope="module")
def served(runtime):
    return runtime.endpoints[0].server


_chain = task_fixtures.chain


def test_the_build_verifies_each_audio_task_against_the_pipeline(built):
    models = built.manifest().models
    for name in MODELS:
        check = models[name].verification
        kind = "automatic-speech-recognition" if name in SPEECH else "audio-classification"
        assert check.ran and check.details["reference"] == (
            f"transformers 5.23.0 pipeline('{kind}') ({FEATURES[name]})"), name
        # sounds refuses clips over 2 s by its spec: the 2 s noise is its longest
        assert check.cases == 7 and check.details["sampling_rate"] == RATE
        assert check.max_abs_error < 1e-5, (name, check.max_abs_error)
    assert [(t.name, t.data_type, t.dims) for t in models["words"].inputs] == [("AUDIO", "TYPE_STRING", (1,))]
    assert [(t.name, t.dims) for t in models["words"].outputs] == [("text", (1,))]
    assert [(t.name, t.dims) for t in models["sounds-model"].inputs] == [("input_values", (-1,))]
    assert models["scenes"].verification.runtime == "torch" and models["sounds"].verification.runtime == "onnxruntime"
    # AST's extractor needs torch in transformers; the step runs its numpy stand-in, and the manifest says so
    stand_in = models["scenes"].verification.details["feature_stand_in"]
    assert stand_in["class"] == "ASTFeatures" and stand_in["max_feature_difference"] <= stand_in["feature_atol"]
    assert "feature_stand_in" not in models["sounds"].verification.details


def test_the_check_passes_on_the_built_steps(built, tmp_path):
    # The twin of the planted defects below: the same call on the untouched copies finds nothing.
    assert audio_check.check(_chain(built, "words", tmp_path), tmp_path, print).ran


def test_a_planted_wrong_normalisation_fails_the_check(built, tmp_path):
    chain = _chain(built, "sounds", tmp_path)
    path = layout.version_dir(chain.dirs[0]) / "preprocessor_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "do_normalize": False}))
    with pytest.raises(BuildError) as caught:
        audio_check.check(chain, tmp_path, print)
    assert str(caught.value).startswith(
        "model sounds: raw audio through its steps does not answer as transformers 5.23.0 "
        "pipeline('audio-classification') (Wav2Vec2FeatureExtractor) on 7 of 7 clips: clip 0 (tone 440 Hz, 0.6 s, "
        "16-bit PCM): features differ from the feature extractor's by up to "), str(caught.value)
    assert str(caught.value).endswith(audio_check.FEATURES_DIFFER)


def test_a_planted_wrong_sampling_rate_fails_the_check(built, tmp_path):
    chain = _chain(built, "words", tmp_path)
    config = chain.dirs[0] / layout.CONFIG
    config.write_text(config.read_text().replace(f'string_value: "{RATE}"', 'string_value: "8000"'))
    with pytest.raises(BuildError) as caught:
        audio_check.check(chain, tmp_path, print)
    # The step resamples the clip to its (wrong) 8 kHz; the checkpoint's feature extractor refuses that rate.
    assert str(caught.value) == (
        "model words: the preprocessing step refuses raw clip 0 (tone 440 Hz, 0.6 s, 16-bit PCM) at 16000 Hz, which "
        "the checkpoint's feature extractor takes: ValueError: was trained using a sampling rate of 16000. Please make "
        "sure that the provided `raw_speech` input was sampled with 16000 and not 8000.; rebuild the model (its step "
        "does not follow the checkpoint's preprocessor_config.json)")


def _send(served, model: str, clips: list[bytes]):
    tensors = [NamedTensor("AUDIO", "BYTES", np.array([[c] for c in clips], dtype=np.object_))]
    return invoke_url(served.url, encode_request(tensors, binary=True), target_model=f"{model}.tar.gz")


def _target(built, model):
    return built.target(model)


def test_the_served_ensembles_answer_as_the_pipeline(built, served, tmp_path):
    spec = load_spec(built.spec_path)
    texts = []
    for name in MODELS:
        task = spec.models[name].task
        clips = audio_samples.clips(RATE, task.max_audio_seconds)
        ours = []
        for clip in clips:  # one clip per request, as the clips differ in length
            outputs = {o.name: o.array for o in _send(served, _target(built, name), [clip.data]).outputs}
            ours.append(outputs["text"][0][0].decode() if name in SPEECH else task_check.label_rows(outputs)[0])
        chain = _chain(built, name, tmp_path / name)
        _, theirs, _ = audio_check.reference(chain, clips, RATE, task_check.step_parameters(chain.dirs[0])["output"])
        worst, problems = task_reference.compare(task, ours, theirs, 1e-5)
        assert problems == [] and worst < 1e-5, (name, problems, worst)
        texts += ours if name in SPEECH else []
    # The tiny random CTC head still spells: transcripts with letters and word breaks, not empty strings.
    assert all(text.strip() for text in texts) and any(" " in text for text in texts), texts


def test_bad_audio_is_a_400_naming_the_input_and_the_server_goes_on(built, served):
    sounds = _target(built, "sounds")
    tone = audio_samples.clips(RATE)[0].data
    long_clip = audio_samples.pcm_wav(np.zeros(int(2.5 * RATE)), RATE)
    prefix = f"in ensemble '{sounds}.tar.gz', "
    accepted = "WAV, FLAC, Ogg (Vorbis or Opus), MP3, AIFF or another format libsndfile reads"
    bad = {
        (b"",): f"AUDIO: no bytes; this model takes one audio file per request ({accepted}); send the file's bytes "
                "(row 0)",
        (audio_samples.flac(np.zeros(RATE), RATE)[:60],): "AUDIO: 60 bytes that libsndfile cannot read as audio (",
        (audio_samples.pcm_wav(np.zeros(100), 16001),): "AUDIO: the WAV file at 16001 Hz; this model resamples to its "
                                                         "16000 Hz from a rate that shares a large common factor with "
                                                         "it (",
        (long_clip,): "AUDIO: the WAV file of 2.50 s (40000 samples at 16000 Hz); this model takes at most 2 s; cut it "
                      "into pieces of at most 2 s before sending (row 0)",
        (b"\x00\x00\x00\x20ftypM4A " + bytes(40),): f"AUDIO: an MP4/M4A file (AAC), which libsndfile does not read; "
                                                   f"this model takes {accepted}; convert it to WAV, FLAC, Ogg or MP3 "
                                                   "before sending (row 0)",
        (tone, audio_samples.clips(RATE)[1].data): "AUDIO: the clips of one request have 2 lengths (9600 to 20800 "
                                                   "samples); this model takes clips of one length per request (it "
                                                   "has no attention mask, padding would change its answers); send "
                                                   "one clip per request",
    }
    good = (tone,)

    def send(clips):
        try:
            return _send(served, sounds, list(clips))
        except InvokeError as error:
            return str(error)

    cases = list(bad) + [good] * 6
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(send, cases))
    for case, answer in zip(cases, answers):
        if case in bad:
            assert isinstance(answer, str) and answer.startswith("the endpoint rejected the request (HTTP 400): "), answer
            assert prefix + bad[case] in answer, (bad[case], answer)
        else:
            assert sorted(o.name for o in answer.outputs) == ["labels", "options", "scores"]
    assert _send(served, sounds, list(good)).outputs  # still answering afterwards


def test_a_recording_at_another_rate_or_in_a_lossy_format_is_decoded_and_resampled(built, served):
    """What phones and browsers send: the same clip as 48 kHz FLAC answers as it does at the model's 16 kHz (the
    step resamples it back: scores within 1e-3), and as 44.1 kHz MP3 and Ogg Vorbis it is answered too."""
    import io

    import soundfile
    from scipy import signal

    sounds = _target(built, "sounds")
    clip = audio_samples.clips(RATE)[0]
    samples, _ = soundfile.read(io.BytesIO(clip.data), dtype="float32")

    def scores(data: bytes) -> np.ndarray:
        return {o.name: o.array for o in _send(served, sounds, [data]).outputs}["scores"]

    def written(rate: int, fmt: str, subtype: str) -> bytes:
        out = io.BytesIO()
        soundfile.write(out, signal.resample_poly(samples, rate // 100, RATE // 100), rate, format=fmt, subtype=subtype)
        return out.getvalue()

    at_16k = scores(clip.data)
    np.testing.assert_allclose(scores(written(48000, "FLAC", "PCM_24")), at_16k, atol=1e-3)
    for fmt, subtype in (("MP3", "MPEG_LAYER_III"), ("OGG", "VORBIS")):
        assert scores(written(44100, fmt, subtype)).shape == at_16k.shape


def test_the_sagemaker_runtime_api_and_the_cli_take_audio_bytes(built, runtime, tmp_path, capsys):
    import boto3

    clip = audio_samples.clips(RATE)[5]
    body = encode_request([NamedTensor("AUDIO", "BYTES", np.array([[clip.data]], dtype=np.object_))], binary=True)
    client = boto3.client("sagemaker-runtime", endpoint_url=runtime.url, region_name="us-east-1",
                          aws_access_key_id="local", aws_secret_access_key="local")
    reply = client.invoke_endpoint(EndpointName=RUNTIME_NAME, TargetModel=built.tarball("words").name,
                                   ContentType=body.content_type, Body=body.body)
    assert reply["Body"].read()
    _, (want,), _ = audio_check.reference(_chain(built, "words", tmp_path), [clip], RATE, "input_values")
    path = tmp_path / "clip.wav"
    path.write_bytes(clip.data)
    assert tritonsm_main(["invoke", "--url", runtime.url, "--target-model", built.tarball("words").name,
                          "--audio", str(path)]) == 0
    assert f"row 0 text: {json.dumps(want)}" in capsys.readouterr().out


def test_a_feature_extractor_that_needs_torch_without_a_stand_in_is_refused(tmp_path):
    # transformers 5.23 marks ClapFeatureExtractor @requires(backends=("torch",)) and there is no numpy stand-in
    # of it: it would not start in the step's environment (transformers and numpy), whatever the build machine has.
    import transformers

    from deployment_spec.sections.model import Backend, ModelSpec
    from deployment_spec.sections.tasks import Task, TaskKind
    from model_build.recipes import audio_steps

    folder = audio_checkpoints.save(tmp_path / "clap", "audio-classification", "ast")
    transformers.ClapFeatureExtractor().save_pretrained(folder)  # planted: the checkpoint's extractor is CLAP's
    model = ModelSpec(backend=Backend.PYTHON, weights=str(folder), task=Task(TaskKind.AUDIO_CLASSIFICATION),
                      name="scenes-preprocess", task_entry="scenes")
    with pytest.raises(BuildError) as caught:
        audio_steps.preprocess(model, tmp_path)
    assert str(caught.value) == (
        "models.scenes.weights: its feature extractor ClapFeatureExtractor needs torch (transformers 5.23.0 marks it "
        "so), and the preprocessing step's execution environment has transformers and numpy only; allowed: feature "
        "extractors that run on numpy (Wav2Vec2FeatureExtractor, WhisperFeatureExtractor, "
        "SeamlessM4TFeatureExtractor...) and those with a numpy stand-in here (ASTFeatureExtractor, "
        "LasrFeatureExtractor, ParakeetFeatureExtractor); fix: use a checkpoint with one of them, or serve the model "
        "with a recipe of your own (source: {recipe: module:function}) that takes the features your application "
        "computes")


def test_smoke_sends_each_task_model_a_file_of_its_kind(built, runtime, capsys):
    # One request per model of the endpoint, each a real encoded file (a JPEG, a WAV at the model's rate).
    assert tritonsm_main(["smoke", "sounds", "--spec", str(built.spec_path), "--manifest",
                          str(built.root / "assets" / "manifest.json"), "--url", runtime.url]) == 0, \
        capsys.readouterr().out


def test_the_shipped_environment_preprocesses_as_the_build_did(built, tmp_path):
    # The preprocessing step's own code (WAV decoding, the feature extractor: transformers' own for words, the
    # numpy stand-in of AST's for scenes) in the environment that ships for the image's CPython 3.12, without torch:
    # the same features as the build's check computed.
    python = shipped_env.interpreter("python3.12")
    if python is None:
        pytest.skip("no python3.12 here: the shipped environment is built for the Triton 25.09 image's CPython 3.12")
    for name in ("words", "scenes"):
        chain = _chain(built, name, tmp_path / name)
        params = task_check.step_parameters(chain.dirs[0])
        step = task_check.step_module(chain.dirs[0], "preprocess").Preprocess(
            str(layout.version_dir(chain.dirs[0])), params)
        clips = audio_samples.clips(RATE)
        batches = [np.array([clip.data], dtype=np.object_) for clip in clips]  # one clip per request
        shipped = shipped_env.run_preprocess_each(chain.dirs[0], python, "features", batches, params)
        assert shipped["python"].startswith("3.12.") and len(shipped["made"]) == len(clips) == 7
        for clip, rows, made in zip(clips, batches, shipped["made"]):
            assert np.abs(made - step.features(rows)).max() <= 1e-6, (name, clip.what)
