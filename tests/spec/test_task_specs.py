"""``task:`` entries: one checkpoint becomes a tokenizer step, a model step, an answer step and their ensemble
(deployment_spec/sections/task_models.py); every misuse is refused with its exact message."""
import copy
import pathlib

import pytest
import yaml

from deployment_spec import SpecError
from deployment_spec.sections.model import Backend, DynamicBatching
from deployment_spec.spec import parse_spec

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((ROOT / "triton.yaml").read_text())
SENTIMENT = {"backend": "onnxruntime", "task": {"kind": "text-classification", "top_k": 2}, "weights": "ckpt",
             "max_batch_size": 8, "dynamic_batching": {"max_queue_delay_us": 50}}


def _spec(models: dict, served: tuple[str, ...] = ("sentiment",)):
    raw = copy.deepcopy(BASE)
    raw["models"].update(models)
    raw["endpoints"]["classifier"]["models"] = list(served)
    return parse_spec(raw, pathlib.Path("/tmp/task-spec/triton.yaml"))


def test_a_task_entry_becomes_its_ensemble_and_steps():
    spec = _spec({"sentiment": SENTIMENT})
    ensemble = spec.models["sentiment"]
    # The entry's own name is the ensemble the endpoint serves; its steps follow it, wired by name at build time.
    assert ensemble.backend is Backend.ENSEMBLE and ensemble.ensemble.by_name
    assert [s.model for s in ensemble.ensemble.steps] == ["sentiment-tokenize", "sentiment-model", "sentiment-answer"]
    assert ensemble.ensemble.outputs == ("labels", "scores", "options")  # and the options each row was answered with
    tokenize, model, answer = (spec.models[f"sentiment-{s}"] for s in ("tokenize", "model", "answer"))
    assert (tokenize.backend, tokenize.source.recipe) == (Backend.PYTHON, "hf-tokenize")
    assert (answer.backend, answer.source.recipe) == (Backend.PYTHON, "hf-answer")
    # The model step keeps the entry's serving settings; every step batches like it.
    assert (model.backend, model.source.recipe, model.weights) == (Backend.ONNXRUNTIME, "hf-sequence-classification", "ckpt")
    assert {m.max_batch_size for m in (tokenize, model, answer, ensemble)} == {8}
    # The model step waits for batches as the entry says; the Python steps take what is queued, without a delay.
    assert model.dynamic_batching == DynamicBatching(max_queue_delay_us=50)
    assert tokenize.dynamic_batching == answer.dynamic_batching == DynamicBatching(max_queue_delay_us=0)
    # The endpoint serves the ensemble with every step in its archive.
    served = [m.name for m in spec.served_models(spec.endpoints["classifier"])]
    assert served == ["sentiment", "sentiment-tokenize", "sentiment-model", "sentiment-answer"]


def test_sentence_embeddings_have_no_answer_step():
    spec = _spec({"sentiment": {**SENTIMENT, "task": {"kind": "sentence-embedding"}}})
    assert [s.model for s in spec.models["sentiment"].ensemble.steps] == ["sentiment-tokenize", "sentiment-model"]
    assert spec.models["sentiment-model"].source.recipe == "hf-sentence-embedding"
    assert spec.models["sentiment"].ensemble.outputs == ("sentence_embedding",)


LONG = "s" * 60
REFUSED = {
    "a Python model step": ({"sentiment": {**SENTIMENT, "backend": "python"}},
                            "models.sentiment.backend: got 'python'; allowed: onnxruntime, tensorrt, pytorch with task "
                            "(the model step's backend); fix: set backend: onnxruntime"),
    "no checkpoint": ({"sentiment": {"backend": "onnxruntime", "task": {"kind": "text-classification"}}},
                      "models.sentiment.weights: got nothing; allowed: the checkpoint directory with task (config.json, "
                      "weights and tokenizer.json, as save_pretrained writes them); fix: add weights: <directory>, "
                      "relative to the spec's folder"),
    "a source besides the task": ({"sentiment": {**SENTIMENT, "source": {"recipe": "bert-base"}}},
                                  "models.sentiment.source: got source with task; allowed: nothing: the task makes the "
                                  "steps from the weights checkpoint; fix: remove source"),
    "a pair for embeddings": ({"sentiment": {**SENTIMENT, "task": {"kind": "sentence-embedding", "text_pair": True}}},
                              "models.sentiment.task.text_pair: got true; allowed: false for sentence-embedding (it takes "
                              "one text per row); fix: remove text_pair"),
    "top_k for entities": ({"sentiment": {**SENTIMENT, "task": {"kind": "token-classification", "top_k": 3}}},
                           "models.sentiment.task.top_k: got 3; allowed: only with text-classification, "
                           "question-answering, image-classification, audio-classification; fix: remove top_k"),
    "a threshold on a classifier": ({"sentiment": {**SENTIMENT, "task": {"kind": "image-classification",
                                                                         "threshold": 0.3}}},
                                    "models.sentiment.task.threshold: got 0.3; allowed: only with object-detection; "
                                    "fix: remove threshold"),
    "a doc_stride on a classifier": ({"sentiment": {**SENTIMENT, "task": {"kind": "text-classification",
                                                                          "doc_stride": 64}}},
                                     "models.sentiment.task.doc_stride: got 64; allowed: only with question-answering; "
                                     "fix: remove doc_stride"),
    "max_windows on a tagger": ({"sentiment": {**SENTIMENT, "task": {"kind": "token-classification",
                                                                     "max_windows": 4}}},
                                "models.sentiment.task.max_windows: got 4; allowed: only with question-answering; "
                                "fix: remove max_windows"),
    "a step name taken": ({"sentiment": SENTIMENT,
                           "sentiment-tokenize": {"backend": "python", "source": {"recipe": "text-preprocess"}}},
                          "models.sentiment-tokenize: got a model declared by hand; allowed: no model of this name: "
                          "models.sentiment.task adds it as a step; fix: rename models.sentiment-tokenize, or remove "
                          "task from models.sentiment"),
    "an unknown task": ({"sentiment": {**SENTIMENT, "task": {"kind": "summarization"}}},
                        "models.sentiment.task.kind: got 'summarization'; allowed: text-classification, "
                        "token-classification, sentence-embedding, question-answering, image-classification, "
                        "object-detection, image-embedding, audio-classification, automatic-speech-recognition, text-generation, text2text-generation; fix: "
                        "use one of text-classification, token-classification, sentence-embedding, "
                        "question-answering, image-classification, object-detection, image-embedding, "
                        "audio-classification, automatic-speech-recognition, text-generation, text2text-generation"),
    "normalize on sentence embeddings": ({"sentiment": {**SENTIMENT, "task": {"kind": "sentence-embedding",
                                                                              "normalize": True}}},
                                         "models.sentiment.task.normalize: got true; allowed: only with "
                                         "image-embedding (sentence-embedding normalises as its sentence-transformers "
                                         "modules say); fix: remove normalize"),
    "an audio limit on an image task": ({"sentiment": {**SENTIMENT, "task": {"kind": "image-classification",
                                                                             "max_audio_seconds": 5}}},
                                        "models.sentiment.task.max_audio_seconds: got 5; allowed: only with an audio "
                                        "task (audio-classification, automatic-speech-recognition); fix: remove "
                                        "max_audio_seconds"),
    "an image limit on a text task": ({"sentiment": {**SENTIMENT, "task": {"kind": "text-classification",
                                                                           "max_image_bytes": 4096}}},
                                      "models.sentiment.task.max_image_bytes: got 4096; allowed: only with an image "
                                      "task (image-classification, image-embedding, object-detection); fix: remove "
                                      "max_image_bytes"),
    "a pair for images": ({"sentiment": {**SENTIMENT, "task": {"kind": "image-classification", "text_pair": True}}},
                          "models.sentiment.task.text_pair: got true; allowed: false for image-classification (it "
                          "takes one image per row); fix: remove text_pair"),
    "an image task without weights": ({"sentiment": {"task": {"kind": "image-classification"},
                                                     "backend": "onnxruntime"}},
                                      "models.sentiment.weights: got nothing; allowed: the checkpoint directory with "
                                      "task (config.json, weights and preprocessor_config.json, as save_pretrained "
                                      "writes them); fix: add weights: <directory>, relative to the spec's folder"),
    "the model step's own rules": ({"sentiment": {**SENTIMENT, "precision": "fp16"}},
                                   "models.sentiment.precision: got 'fp16'; allowed: fp16 with backend tensorrt (or "
                                   "onnxruntime.tensorrt_accelerator.precision); fix: use fp32, or set backend: tensorrt"),
    "a name too long for its steps": ({LONG: SENTIMENT},
                                      f"models.{LONG}: got the name '{LONG}' (60 characters); allowed: at most 54 "
                                      f"characters with task (its steps are named {LONG}-tokenize and so on); fix: "
                                      "shorten the name"),
}


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_task_misuse_is_refused_with_its_message(case):
    models, message = REFUSED[case]
    served = tuple(m for m in models if not m.endswith("-tokenize"))
    with pytest.raises(SpecError) as caught:
        _spec(models, served)
    assert str(caught.value) == f"/tmp/task-spec/triton.yaml: 1 problem\n  - {message}"


def test_the_spec_s_request_bounds_load_from_yaml_and_a_bad_one_is_refused_with_its_path():
    requests = {"options": ["top_k"], "max_top_k": 2}
    spec = _spec({"sentiment": {**SENTIMENT, "task": {**SENTIMENT["task"], "requests": requests}}})
    loaded = spec.models["sentiment"].task.requests
    assert (loaded.options, loaded.max_top_k, loaded.answer_bounds("text-classification")) == (
        ("top_k",), 2, {"options": ["top_k"], "bounds": {"top_k": 2}})
    with pytest.raises(SpecError) as caught:
        _spec({"sentiment": {**SENTIMENT, "task": {**SENTIMENT["task"], "requests": {"max_top_k": 1,
                                                                                    "options": ["top_k", "treshold"]}}}})
    assert [str(p) for p in caught.value.problems] == [
        "models.sentiment.task.requests.options: got 'treshold'; allowed: one of top_k, function_to_apply; fix: "
        "remove 'treshold'",
        "models.sentiment.task.requests.max_top_k: got 1; allowed: at least the task's own 2 (a request that sends "
        "nothing gets it); fix: set max_top_k to 2 or raise it"]
