"""The model step of a ``task:``: the checkpoint's inputs and head, or a refusal naming what is missing."""
from __future__ import annotations

import pytest

from model_build.errors import BuildError
from model_build.recipes import text_tasks
from benchmarks.tooling import text_checkpoints

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


def test_padded_cases_end_token_ids_not_segment_ids(tmp_path):
    # A BERT-like config that names an end token: the verification ends each padded row of input_ids with it, never
    # the segment ids (an id of 3 would index past the two-row type table: "index out of range in self").
    import json

    from model_build.verification import cases

    folder = text_checkpoints.save(tmp_path / "pairs", "text-classification", "bert")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "eos_token_id": 3}))
    model, root = _model(tmp_path, "text-classification", "pairs")
    plan = cases.plan(text_tasks.exportable(model, root), model)
    padded = [case for case in plan.cases if case.lengths]
    assert padded and all(set(case.inputs["token_type_ids"].unique().tolist()) <= {0, 1} for case in plan.cases)
    assert all(int(case.inputs["input_ids"][row, n - 1]) == 3 for case in padded for row, n in enumerate(case.lengths))


def test_a_reference_that_fails_on_one_raw_input_is_named_in_one_line(monkeypatch):
    # Canine cannot downsample a one-character text; transformers itself fails there, with a long trace.
    from deployment_spec.sections.tasks import TaskKind, Task
    from model_build.backends.ensemble import task_check, task_reference

    def reference(chain, seq, rows):
        if any(row.text == "x" for row in rows):
            raise RuntimeError("Traceback (most recent call last):\n  File ...\nmax_pool1d() Invalid computed output size: 0")
        return "the pipeline", [[] for _ in rows]

    monkeypatch.setattr(task_check, "reference", reference)
    task = Task(kind=TaskKind.TEXT_CLASSIFICATION)
    chain = task_check.Chain("canine", task, None, None, [], None, "25.09")
    with pytest.raises(BuildError) as caught:
        task_check._reference_or_refuse(chain, 32, task_reference.rows(task, 32))
    assert str(caught.value) == (
        "model canine: the text-classification reference (the checkpoint in transformers, as its users run it) itself "
        "fails on raw input row 4 ('x'): RuntimeError: max_pool1d() Invalid computed output size: 0; so this "
        "checkpoint cannot be verified for raw text, and would fail on such requests when served; fix: serve it with a "
        "recipe of your own that handles such texts (source: {recipe: module:function}, then an ensemble), or use "
        "another architecture")


def test_a_missing_checkpoint_is_named_once_under_the_entry_the_spec_has(tmp_path, capsys):
    # The entry's three steps share its weights: validate notes it once, the build refuses it once, both under
    # models.<entry>.weights (the field the user wrote), with what the folder must hold.
    from tritonsm.cli import main as tritonsm_main

    make_spec(tmp_path, """\
        sentiment:
          task: {kind: text-classification}
          backend: onnxruntime
          weights: nowhere
        """, version="25.09")
    spec = str(tmp_path / "spec.yaml")
    assert tritonsm_main(["validate", "--spec", spec]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        f"note: models.sentiment.weights: {tmp_path / 'nowhere'} does not exist; tritonsm build needs it for this model"]
    assert tritonsm_main(["build", "--spec", spec, "--out", str(tmp_path / "assets"),
                          "--work-dir", str(tmp_path / "work")]) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: models.sentiment.weights: {tmp_path / 'nowhere'} is not a directory; give the checkpoint's directory "
        "(config.json, the weights and tokenizer.json, as save_pretrained writes them)",
        "error: model sentiment: not built because its step(s) sentiment-tokenize, sentiment-model, sentiment-answer "
        "failed"]


def test_a_tensorrt_model_step_gets_int32_ids_from_the_tokenizer_and_answer_steps(tmp_path):
    # TensorRT engines take INT32 token ids: the tokenizer step makes them, the answer step reads them so.
    from model_build.backends.python.build import _feeds_tensorrt
    from model_build.recipes import task_steps

    text_checkpoints.save(tmp_path / "ner", "token-classification", "bert")
    spec = make_spec(tmp_path, """\
        ner:
          task: {kind: token-classification}
          backend: tensorrt
          weights: ner
          max_batch_size: 4
          sequence_length: 32
        """, version="25.09")
    assert _feeds_tensorrt(spec, "ner-tokenize") and _feeds_tensorrt(spec, "ner-answer")
    tokenize = task_steps.tokenize(spec.models["ner-tokenize"], spec.root, consumer_int32=True)
    answer = task_steps.answer(spec.models["ner-answer"], spec.root, consumer_int32=True)
    types = {t.name: t.data_type for t in tokenize.outputs}
    assert (types["input_ids"], types["attention_mask"], types["token_type_ids"]) == ("TYPE_INT32",) * 3
    assert (types["offsets"], types["word_ids"]) == ("TYPE_INT64", "TYPE_INT64")  # not model inputs: as made
    assert {t.name: t.data_type for t in answer.inputs}["input_ids"] == "TYPE_INT32"


def test_a_folder_sentence_transformers_cannot_load_is_refused_naming_it(tmp_path):
    from model_build.recipes import checkpoint_text

    folder = tmp_path / "not-an-encoder"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "no-such-architecture"}')
    with pytest.raises(BuildError) as caught:
        checkpoint_text.sentence_transformer(folder)
    message = str(caught.value)
    assert message.startswith(f"{folder}: sentence-transformers cannot load it as a sentence embedder (")
    assert message.endswith("); save a text encoder there (SentenceTransformer.save, or save_pretrained of a model "
                            "and its tokenizer)")


def _reader_tokenizer_step(tmp_path, doc_stride: int):
    from model_build.recipes import task_steps

    spec = make_spec(tmp_path, f"""\
        m:
          task: {{kind: question-answering, doc_stride: {doc_stride}}}
          backend: onnxruntime
          weights: reader
          max_batch_size: 4
          sequence_length: 32
        """, version="25.09")
    return task_steps.tokenize(spec.models["m-tokenize"], spec.root, consumer_int32=False)


def test_a_doc_stride_no_window_can_hold_is_refused_naming_the_bound(tmp_path):
    text_checkpoints.save(tmp_path / "reader", "question-answering", "bert")
    with pytest.raises(BuildError) as caught:
        _reader_tokenizer_step(tmp_path, 28)
    # 32 tokens: [CLS] q [SEP] c [SEP] holds 3 special tokens and at least one question token.
    assert str(caught.value) == (
        "models.m.task.doc_stride: 28; allowed: 0 to 27 with sequence_length 32 (a window holds 3 special tokens, the "
        "question and more than doc_stride context tokens); fix: set doc_stride to at most 27, e.g. 16 (the "
        "pipeline's default)")
    made = _reader_tokenizer_step(tmp_path, 27)
    assert made.parameters["doc_stride"] == "27" and made.parameters["max_doc_stride"] == "27"
