"""The model step of a ``task:``: the checkpoint's inputs and head, or a refusal naming what is missing."""
from __future__ import annotations

import pytest

from model_build.errors import BuildError
from model_build.recipes import text_tasks
from tritonsm.benchmarking import text_checkpoints

from mb_support import make_spec


def _model(tmp_path, kind: str, folder: str):
    spec = make_spec(tmp_path, f"""\
        m:
          task: {{kind: {kind}}}
          backend: onnxruntime
          weights: {folder}
          max_batch_size: 4
          sequence_length: 32
        """, version="25.09")
    return spec.models["m-model"], spec.root


def test_an_encoder_without_the_task_head_is_refused(tmp_path):
    # A sentence-embedding checkpoint (no classifier) asked to classify: its head would be random at every load.
    text_checkpoints.save(tmp_path / "encoder", "sentence-embedding", "bert")
    model, root = _model(tmp_path, "text-classification", "encoder")
    with pytest.raises(BuildError) as caught:
        text_tasks.exportable(model, root)
    assert str(caught.value) == (
        f"models.m-model.weights: {tmp_path / 'encoder'} has no weights for the text-classification head "
        "(classifier.bias, classifier.weight); transformers would give it new random weights at every load; fix: save "
        "the checkpoint fine-tuned for this task (save_pretrained after training the head), or pick the task it was "
        "trained for (an encoder without a head: task: {kind: sentence-embedding})")


@pytest.mark.parametrize("family, names", [("bert", ("input_ids", "attention_mask", "token_type_ids")),
                                           ("roberta", ("input_ids", "attention_mask"))])
def test_the_model_step_takes_what_its_tokenizer_gives_and_the_model_takes(tmp_path, family, names):
    text_checkpoints.save(tmp_path / "ner", "token-classification", family)
    model, root = _model(tmp_path, "token-classification", "ner")
    made = text_tasks.exportable(model, root)
    # Per-token logits keep the sequence axis dynamic, like the inputs.
    assert (made.input_names, made.output_names) == (names, ("logits",))
    assert made.dynamic_axes["logits"] == {0: "batch", 1: "sequence"}
    assert made.module(**made.example_inputs).shape == (2, 32, len(text_checkpoints.LABELS["token-classification"]))
