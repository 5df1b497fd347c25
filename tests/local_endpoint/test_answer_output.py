"""`tritonsm invoke` prints a task ensemble's answer per row, not a tensor dump; other models' outputs as before."""
from __future__ import annotations

import json

import numpy as np

from local_endpoint.client.payload import DecodedResponse, NamedTensor
from local_endpoint.client.response_output import format_response


def _bytes(rows):
    return np.array(rows, dtype=np.object_)


def test_labels_and_scores_are_one_line_per_row():
    response = DecodedResponse("sentiment", [
        NamedTensor("labels", "BYTES", _bytes([[b"positive", b"negative"], [b"negative", b"positive"]])),
        NamedTensor("scores", "FP32", np.array([[0.97, 0.03], [0.6, 0.4]], dtype=np.float32))])
    assert format_response(response) == ("model: sentiment\nrow 0: positive 0.9700, negative 0.0300\n"
                                         "row 1: negative 0.6000, positive 0.4000")


def test_the_options_an_answer_applied_follow_its_rows_once_per_distinct_set():
    applied = json.dumps({"top_k": 2, "function_to_apply": "sigmoid"}).encode()
    response = DecodedResponse("sentiment", [
        NamedTensor("labels", "BYTES", _bytes([[b"positive", b"negative"], [b"negative", b"positive"]])),
        NamedTensor("scores", "FP32", np.array([[0.97, 0.03], [0.6, 0.4]], dtype=np.float32)),
        NamedTensor("options", "BYTES", _bytes([[applied], [applied]]))])
    assert format_response(response) == ("model: sentiment\nrow 0: positive 0.9700, negative 0.0300\n"
                                         "row 1: negative 0.6000, positive 0.4000\n"
                                         "options: function_to_apply sigmoid, top_k 2")
    # On a model that is not a task's answer, an "options" output is shown as any other tensor.
    response = DecodedResponse("m", [NamedTensor("options", "INT64", np.array([[1]]))])
    assert format_response(response) == "model: m\noptions INT64 [1, 1]\n[[1]]"


def test_entities_and_answers_are_their_json_and_embeddings_their_size_and_norm():
    entity = [{"entity_group": "PER", "score": 0.99, "word": "Zoë", "start": 0, "end": 3}]
    response = DecodedResponse("ner", [NamedTensor("entities", "BYTES", _bytes([[json.dumps(entity).encode()]]))])
    assert format_response(response) == f"model: ner\nrow 0 entities: {json.dumps(entity, ensure_ascii=False)}"
    vector = np.full((1, 4), 0.5, dtype=np.float32)
    response = DecodedResponse(None, [NamedTensor("sentence_embedding", "FP32", vector)])
    assert format_response(response) == "row 0: sentence_embedding, 4 values, norm 1.0000: [0.5 0.5 0.5 0.5]"


def test_other_outputs_are_shown_as_tensors():
    # A model that happens to have a "labels" output but no "scores" is not a task's answer.
    response = DecodedResponse("m", [NamedTensor("labels", "INT64", np.array([[1, 2]]))])
    assert format_response(response) == "model: m\nlabels INT64 [1, 2]\n[[1 2]]"
