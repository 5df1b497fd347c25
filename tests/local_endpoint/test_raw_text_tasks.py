"""Raw text in, answers out: tiny checkpoints with tokenizers of their real algorithm (WordPiece, byte-level BPE,
Unigram), built as ``task:`` ensembles, verified at build time against transformers' pipeline and
sentence-transformers, then served by the real Triton server and compared with the same references again.

Also: a planted wrong truncation side and a planted missing pair separator fail the build-time check, and bad
requests get a 400 naming the input while the server goes on answering.
"""
from __future__ import annotations

import concurrent.futures
import json
import pathlib

import numpy as np
import pytest

from deployment_spec import load_spec
from deployment_spec.sections.tasks import TaskKind
from local_endpoint.client.invoke import invoke_url
from local_endpoint.client.payload import NamedTensor, encode_request
from local_endpoint.errors import InvokeError
from model_build import layout
from benchmarks.tooling import text_checkpoints
from model_build.backends.ensemble import task_check, task_reference
from model_build.errors import BuildError
import task_fixtures  # tests/local_endpoint is on sys.path (conftest.py)

pytestmark = pytest.mark.triton

SPEC = """\
project: Tasks
triton_version: "25.09"
models:
  sentiment:
    task: {kind: text-classification, top_k: 2}
    backend: onnxruntime
    weights: sentiment-bert
    max_batch_size: 8
    sequence_length: 48
    dynamic_batching: {max_queue_delay_us: 500}
  nli:
    task: {kind: text-classification, text_pair: true, top_k: 3}
    backend: pytorch
    weights: nli-roberta
    max_batch_size: 8
    sequence_length: 40
  embedder:
    task: {kind: sentence-embedding}
    backend: onnxruntime
    weights: embedder-xlmr
    max_batch_size: 8
  entities:
    task: {kind: token-classification, aggregation: simple}
    backend: onnxruntime
    weights: entities-bert
    max_batch_size: 8
    sequence_length: 64
  answers:
    task: {kind: question-answering, top_k: 2, requests: {options: [top_k, max_answer_len, doc_stride], max_answer_len: 30}}
    backend: onnxruntime
    weights: answers-roberta
    max_batch_size: 8
    sequence_length: 64
endpoints:
  text:
    kind: multi-model
    models: [sentiment, nli, embedder, entities, answers]
    instance_type: ml.g5.xlarge
environments:
  dev: {region: us-east-1}
"""
CHECKPOINTS = {  # folder: (task, family, sentence-transformers modules)
    "sentiment-bert": ("text-classification", "bert", False),
    "nli-roberta": ("text-classification", "roberta", False),
    "embedder-xlmr": ("sentence-embedding", "xlm-roberta", True),
    "entities-bert": ("token-classification", "bert", False),
    "answers-roberta": ("question-answering", "roberta", False),
}
TASKS = ("sentiment", "nli", "embedder", "entities", "answers")
REFERENCES = {
    "sentiment": "transformers 5.23.0 pipeline('text-classification')",
    "nli": "transformers 5.23.0 pipeline('text-classification')",
    "embedder": "sentence-transformers 6.2.0 SentenceTransformer.encode",
    "entities": "transformers 5.23.0 pipeline('token-classification')",
    "answers": "transformers 5.23.0 tokenizer and eager model with pipeline('question-answering') 4.57.6's span "
               "rules (transformers 5 has no such pipeline)",
}


@pytest.fixture(scope="module")
def built(module_tmp) -> task_fixtures.Built:
    def save(root: pathlib.Path) -> None:
        for folder, (task, family, modules) in CHECKPOINTS.items():
            text_checkpoints.save(root / folder, task, family, sentence_transformers=modules)
    return task_fixtures.build(module_tmp.mktemp("raw-text"), SPEC, "text", save)


RUNTIME_NAME = "Tasks-dev-text"


@pytest.fixture(scope="module")
def runtime(built, module_tmp):
    with task_fixtures.served(built, TASKS, RUNTIME_NAME, module_tmp.mktemp("logs")) as served:
        yield served


@pytest.fixture(scope="module")
def served(runtime):
    """The container's own /invocations (Triton's SageMaker front end behind the local front door)."""
    return runtime.endpoints[0].server


def test_the_build_verifies_each_task_against_its_reference(built):
    models = built.manifest().models
    # What ran and against what is in the manifest, with the worst difference.
    for name, reference in REFERENCES.items():
        check = models[name].verification
        assert check.ran and check.details["reference"] == reference, name
        assert check.max_abs_error < 1e-4, (name, check.max_abs_error)
    assert models["nli"].verification.runtime == "torch" and models["sentiment"].verification.runtime == "onnxruntime"
    # RoBERTa takes no token_type_ids: the model step's inputs are what its checkpoint takes.
    assert [t.name for t in models["nli-model"].inputs] == ["input_ids__0", "attention_mask__1"]
    assert [t.name for t in models["sentiment-model"].inputs] == ["input_ids", "attention_mask", "token_type_ids"]


_chain = task_fixtures.chain


def _set_parameter(model_dir: pathlib.Path, key: str, value: str) -> None:
    config = model_dir / layout.CONFIG
    text = config.read_text()
    start = text.index(f'key: "{key}"')
    old = text[text.index("string_value:", start):text.index("\n", text.index("string_value:", start))]
    config.write_text(text[:start] + text[start:].replace(old, f'string_value: "{value}"', 1))


def test_the_check_passes_on_the_built_steps(built, tmp_path):
    # The twin of the planted defects below: the same call on the untouched copies finds nothing.
    assert task_check.check(_chain(built, "sentiment", tmp_path), tmp_path, print).ran


@pytest.mark.parametrize("name, cut", [("sentiment", [7]), ("embedder", [6, 7]), ("entities", [7])])
def test_a_planted_wrong_truncation_side_fails_the_check(built, tmp_path, name, cut):
    chain = _chain(built, name, tmp_path)
    _set_parameter(chain.dirs[0], "truncation_side", "left")  # the checkpoint cuts long texts on the right
    with pytest.raises(BuildError) as caught:
        task_check.check(chain, tmp_path, print)
    # Only the texts longer than the sequence length are cut, so only their rows differ (the first token after the
    # start token is already another one).
    assert str(caught.value).startswith(
        f"model {name}: raw text through its steps does not answer as {REFERENCES[name]} on {len(cut)} of 8 inputs: "
        f"row {cut[0]}: the tokenizer step's input_ids differ from transformers' tokenizer at token 1 (")


@pytest.mark.parametrize("name, rows", [("nli", 6), ("answers", 5)])
def test_a_planted_missing_pair_separator_fails_the_check(built, tmp_path, name, rows):
    chain = _chain(built, name, tmp_path)
    tokenizer_file = layout.version_dir(chain.dirs[0]) / "tokenizer.json"
    document = json.loads(tokenizer_file.read_text())
    # <s> A </s></s> B </s> becomes <s> A B </s>: the pair runs together.
    bos, eos = document["post_processor"]["cls"][1], document["post_processor"]["sep"][1]
    document["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                   {"SpecialToken": {"id": "</s>", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"Sequence": {"id": "B", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [bos], "tokens": ["<s>"]},
                           "</s>": {"id": "</s>", "ids": [eos], "tokens": ["</s>"]}}}
    tokenizer_file.write_text(json.dumps(document))
    with pytest.raises(BuildError) as caught:
        task_check.check(chain, tmp_path, print)
    assert str(caught.value).startswith(
        f"model {name}: raw text through its steps does not answer as {REFERENCES[name]} on {rows} of {rows} inputs: "
        "row 0: the tokenizer step's input_ids differ from transformers' tokenizer at token ")


def _send(served, model: str, rows: list, pairs: list | None = None, binary: bool = False):
    tensors = [NamedTensor("TEXT", "BYTES", np.array([[r] for r in rows], dtype=np.object_))]
    if pairs is not None:
        tensors.append(NamedTensor("TEXT_PAIR", "BYTES", np.array([[p] for p in pairs], dtype=np.object_)))
    return invoke_url(served.url, encode_request(tensors, binary=binary), target_model=f"{model}.tar.gz")


def _windows_of(built, stride: int = 32):
    """How many windows transformers' tokenizer cuts a context into for the "answers" entry (sequence_length 64)."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(built.root / "answers-roberta")
    return lambda question, context: len(tokenizer(question, context, truncation="only_second", max_length=64,
                                                   stride=stride, return_overflowing_tokens=True)["input_ids"])


def _target(built, model):
    return built.target(model)


def _answers(task, outputs: dict) -> list:
    if task.kind is TaskKind.SENTENCE_EMBEDDING:
        return list(outputs["sentence_embedding"])
    if task.kind is TaskKind.TEXT_CLASSIFICATION:
        return [[{"label": label.decode(), "score": float(score)} for label, score in zip(ls, ss)]
                for ls, ss in zip(outputs["labels"], outputs["scores"])]
    key = "entities" if task.kind is TaskKind.TOKEN_CLASSIFICATION else "answers"
    return [json.loads(row[0]) for row in outputs[key]]


def test_the_served_ensembles_answer_as_their_references(built, served, tmp_path):
    spec = load_spec(built.spec_path)
    found = {}
    for name in TASKS:
        task = spec.models[name].task
        seq = int(built.manifest().models[name].verification.details["sequence_length"])
        # Question answering: one context of several windows too.
        inputs = task_reference.rows(task, seq, _windows_of(built) if name == "answers" else None)
        texts = [r.text.encode() for r in inputs]
        pairs = [r.pair.encode() for r in inputs] if task.takes_pair() else None
        response = _send(served, _target(built, name), texts, pairs, binary=name in ("nli", "answers"))
        ours = _answers(task, {o.name: o.array for o in response.outputs})
        _, theirs = task_check.reference(_chain(built, name, tmp_path / name), seq, inputs)
        worst, problems = task_reference.compare(task, ours, theirs, 1e-4)
        assert problems == [] and worst < 1e-4, (name, problems, worst)
        found[name] = ours
    # The tiny random models still give answers worth comparing: entities and spans, not empty lists.
    assert sum(len(row) for row in found["entities"]) >= 4
    assert all(len(row) == 2 and row[0]["end"] > row[0]["start"] for row in found["answers"])
    windows_of = _windows_of(built)
    long = task_reference.rows(spec.models["answers"].task, 64, windows_of)[-1]  # its windows came through BLS
    assert windows_of(long.text, long.pair) >= 3


def test_bad_requests_are_400s_naming_the_input_and_the_server_goes_on(built, served):
    sentiment, nli = _target(built, "sentiment"), _target(built, "nli")
    bad = {
        (sentiment, ("",), None): f"in ensemble '{sentiment}.tar.gz', TEXT row 0 is empty; send at least one "
                                  "character that is not a space",
        (sentiment, ("fine", b"caf\xe9 au lait"), None): f"in ensemble '{sentiment}.tar.gz', TEXT row 1 is not "
                                                         "UTF-8 text (byte 0xe9 at position 3); send the text encoded "
                                                         "as UTF-8",
        (sentiment, ("one text",), ("a pair",)): "expected 1 inputs but got 2 inputs for model "
                                                 f"'{sentiment}.tar.gz'. Got input(s) ['TEXT_PAIR','TEXT'], but "
                                                 "missing required input(s) ]",
        (nli, ("a premise",), None): f"expected 2 inputs but got 1 inputs for model '{nli}.tar.gz'. Got input(s) "
                                     "['TEXT'], but missing required input(s) ['TEXT_PAIR']",
        # A batch mixing rows with and without a pair: Triton itself refuses the uneven inputs.
        (nli, ("premise one", "premise two"), ("one hypothesis",)): "input 'TEXT' batch size does not match other "
                                                                    f"inputs for '{nli}.tar.gz'",
    }
    good = ("a fine film",)

    def send(case):
        model, texts, pairs = case
        try:
            # binary+json: the only body that can carry bytes that are not UTF-8
            return _send(served, model, list(texts), None if pairs is None else list(pairs), binary=True)
        except InvokeError as error:
            return str(error)

    # Bad and good requests at once: each bad one fails alone, the good ones are answered.
    cases = list(bad) + [(sentiment, good, None)] * 6
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(send, cases))
    for case, answer in zip(cases, answers):
        if case in bad:
            assert isinstance(answer, str) and answer.startswith("the endpoint rejected the request (HTTP 400): "), answer
            assert bad[case] in answer, (bad[case], answer)
        else:
            assert sorted(o.name for o in answer.outputs) == ["labels", "options", "scores"]
    assert _send(served, sentiment, list(good)).outputs  # still answering afterwards


def test_the_sagemaker_runtime_api_takes_the_same_bodies(built, runtime):
    # What an application's boto3 code sends to the deployed endpoint, pointed at the local runtime.
    import boto3

    client = boto3.client("sagemaker-runtime", endpoint_url=runtime.url, region_name="us-east-1",
                          aws_access_key_id="local", aws_secret_access_key="local")
    body = {"inputs": [{"name": "TEXT", "shape": [1, 1], "datatype": "BYTES", "data": ["Who met Macron?"]},
                       {"name": "TEXT_PAIR", "shape": [1, 1], "datatype": "BYTES",
                        "data": ["Angela Merkel met Emmanuel Macron in Paris on Monday."]}]}
    reply = client.invoke_endpoint(EndpointName=RUNTIME_NAME, TargetModel=built.tarball("answers").name,
                                   ContentType="application/json", Body=json.dumps(body))
    outputs = {o["name"]: o for o in json.loads(reply["Body"].read())["outputs"]}
    assert sorted(outputs) == ["answers", "options"]  # the answers and the options they were answered with
    answers = outputs["answers"]
    (row,) = [json.loads(cell) for cell in answers["data"]]
    context = body["inputs"][1]["data"][0]
    assert answers["name"] == "answers" and len(row) == 2
    # Each answer is a span of the context it came with, by character offsets.
    assert all(context[a["start"]:a["end"]] == a["answer"] and 0 <= a["score"] <= 1 for a in row)


def _row(text: object) -> dict:
    return {"inputs": [{"name": "TEXT", "shape": [1, 1], "datatype": "BYTES", "data": [text]}]}


# What applications send that a text task does not take, and what reaches their boto3 client: (content type, body)
# -> (the container's status on a single-model endpoint, on a multi-model one, its message). Triton's SageMaker front
# end parses the body before any model runs, so it decides these, on the deployed endpoint as here (Triton's
# sagemaker_server.cc; the local server is Triton 24.10, the wheel's): a body it cannot parse is a 500 on
# /invocations (single-model) and a 400 on a multi-model endpoint's model route. SageMaker answers each as
# ModelError (HTTP 424) with that OriginalStatusCode and OriginalMessage. docs/text-tasks.md, "Bad requests".
PARSE = "Unable to parse JSON bytes array: attempt to access JSON non-string as string"
CLIENT_MISTAKES = {
    "malformed JSON": ("application/json", b'{"inputs": [', 500, 400,
                       '{"error":"failed to parse the request JSON buffer: Invalid value. at 12"}'),
    "plain text": ("text/plain", b"a fine film", 500, 400,
                   '{"error":"failed to parse the request JSON buffer: Invalid value. at 0"}'),
    "{instances: [...]}": ("application/json", json.dumps({"instances": ["a fine film"]}).encode(), 500, 400,
                           '{"error":"Unable to parse \'inputs\': attempt to access non-existing object member '
                           '\'inputs\'"}'),
    "{inputs: text} (Hugging Face toolkit)": ("application/json", json.dumps({"inputs": "a fine film"}).encode(),
                                              500, 400, '{"error":"Unable to parse \'inputs\': attempt to access '
                                                        'JSON non-array as array"}'),
    "a number as TEXT": ("application/json", json.dumps(_row(42)).encode(), 500, 400, f'{{"error":"{PARSE}"}}'),
    "null as TEXT": ("application/json", json.dumps(_row(None)).encode(), 500, 400, f'{{"error":"{PARSE}"}}'),
    "9 rows, max_batch_size 8": ("application/json", json.dumps(
        {"inputs": [{"name": "TEXT", "shape": [9, 1], "datatype": "BYTES", "data": ["a fine film"] * 9}]}).encode(),
        400, 400, '{"error":"[request id: <id_unknown>] inference request batch-size must be <= 8 for \'MODEL\'"}'),
}
SME_NAME = "Tasks-dev-sentiment-sme"


@pytest.fixture(scope="module")
def single_model(built, module_tmp):
    """The sentiment ensemble's repository served as a single-model endpoint (its default model)."""
    from deployment_spec.sections.endpoint import EndpointKind
    from local_endpoint.endpoints.single_model import SingleModelEndpoint
    from local_endpoint.runtime.local_runtime import LocalRuntime, NamedEndpoint

    sme = SingleModelEndpoint(built.tarball("sentiment"), default_model="sentiment", cpu_stand_in=True,
                              log_file=module_tmp.mktemp("sme-logs") / "sme.log")
    with LocalRuntime([NamedEndpoint(SME_NAME, EndpointKind.SINGLE_MODEL, sme)]) as runtime:
        yield runtime


def _mistakes_seen(url: str, endpoint: str, target: str | None) -> dict:
    import boto3
    from botocore.exceptions import ClientError

    client = boto3.client("sagemaker-runtime", endpoint_url=url, region_name="us-east-1",
                          aws_access_key_id="local", aws_secret_access_key="local")
    seen = {}
    for case, (content_type, body, *_) in CLIENT_MISTAKES.items():
        with pytest.raises(ClientError) as caught:
            client.invoke_endpoint(EndpointName=endpoint, ContentType=content_type, Body=body,
                                   **({"TargetModel": target} if target else {}))
        error = caught.value.response
        assert error["Error"]["Code"] == "ModelError" and error["ResponseMetadata"]["HTTPStatusCode"] == 424
        seen[case] = (error["OriginalStatusCode"], error["OriginalMessage"])
    return seen


def test_what_a_client_mistake_answers_through_boto3_on_a_multi_model_endpoint(built, runtime):
    tarball = built.tarball("sentiment").name
    seen = _mistakes_seen(runtime.url, RUNTIME_NAME, tarball)
    want = {case: (mme, message.replace("MODEL", tarball)) for case, (_, _, _, mme, message) in CLIENT_MISTAKES.items()}
    assert seen == want, json.dumps(seen, indent=1)


def test_what_a_client_mistake_answers_through_boto3_on_a_single_model_endpoint(single_model):
    seen = _mistakes_seen(single_model.url, SME_NAME, None)
    want = {case: (sme, message.replace("MODEL", "sentiment")) for case, (_, _, sme, _, message)
            in CLIENT_MISTAKES.items()}
    assert seen == want, json.dumps(seen, indent=1)


def test_a_question_longer_than_the_model_reads_is_a_400_naming_its_bound(built, runtime):
    import boto3
    from botocore.exceptions import ClientError

    client = boto3.client("sagemaker-runtime", endpoint_url=runtime.url, region_name="us-east-1",
                          aws_access_key_id="local", aws_secret_access_key="local")
    import transformers

    question = " ".join(["who"] * 80)
    tokens = len(transformers.AutoTokenizer.from_pretrained(built.root / "answers-roberta")(
        question, add_special_tokens=False)["input_ids"])
    body = {"inputs": [{"name": "TEXT", "shape": [1, 1], "datatype": "BYTES", "data": [question]},
                       {"name": "TEXT_PAIR", "shape": [1, 1], "datatype": "BYTES", "data": ["Angela Merkel met Macron."]}]}
    with pytest.raises(ClientError) as caught:
        client.invoke_endpoint(EndpointName=RUNTIME_NAME, TargetModel=built.tarball("answers").name,
                               ContentType="application/json", Body=json.dumps(body))
    error = caught.value.response
    assert error["OriginalStatusCode"] == 400
    assert json.loads(error["OriginalMessage"])["error"] == (
        f"in ensemble '{built.tarball('answers').name}', TEXT row 0 is {tokens} tokens; this model reads 64 tokens per "
        "window (its sequence_length) and repeats 32 context tokens from one window to the next (task.doc_stride), so "
        "TEXT must leave TEXT_PAIR more than 32: send a TEXT of at most 27 tokens"), error["OriginalMessage"]


def _invoke_json(runtime, built, model: str, body: dict) -> dict:
    import boto3

    client = boto3.client("sagemaker-runtime", endpoint_url=runtime.url, region_name="us-east-1",
                          aws_access_key_id="local", aws_secret_access_key="local")
    reply = client.invoke_endpoint(EndpointName=RUNTIME_NAME, TargetModel=built.tarball(model).name,
                                   ContentType="application/json", Body=json.dumps(body))
    return {o["name"]: o["data"] for o in json.loads(reply["Body"].read())["outputs"]}


OPTION_TEXTS = ["a fine film, truly moving", "Angela Merkel met Emmanuel Macron in Paris", "the end"]


@pytest.mark.parametrize("options", [{"top_k": 1}, {"top_k": 3, "function_to_apply": "sigmoid"},
                                     {"function_to_apply": "none"}])
def test_classification_options_per_request_answer_as_pipeline_called_with_them(built, runtime, options):
    import transformers

    body = {"inputs": [{"name": "TEXT", "shape": [len(OPTION_TEXTS), 1], "datatype": "BYTES", "data": OPTION_TEXTS}],
            "parameters": options}
    got = _invoke_json(runtime, built, "sentiment", body)
    k = options.get("top_k", 2)   # the spec's top_k: 2
    pipe = transformers.pipeline("text-classification", model=str(built.root / "sentiment-bert"), device="cpu")
    want = pipe(OPTION_TEXTS, top_k=k, function_to_apply=options.get("function_to_apply", "softmax"))
    labels = np.array(got["labels"]).reshape(len(OPTION_TEXTS), k)
    scores = np.array(got["scores"], dtype=np.float64).reshape(len(OPTION_TEXTS), k)
    for row, expected in enumerate(want):
        assert list(labels[row]) == [e["label"] for e in expected]
        np.testing.assert_allclose(scores[row], [e["score"] for e in expected], atol=1e-5)
    # Each row says what it was answered with: the request's options over the model's defaults.
    applied = {"top_k": k, "function_to_apply": options.get("function_to_apply", "softmax")}
    assert [json.loads(row) for row in got["options"]] == [applied] * len(OPTION_TEXTS)


@pytest.mark.parametrize("strategy", ["none", "first", "average", "max"])
def test_aggregation_strategy_per_request_answers_as_pipeline_called_with_it(built, runtime, strategy):
    import transformers

    body = {"inputs": [{"name": "TEXT", "shape": [len(OPTION_TEXTS), 1], "datatype": "BYTES", "data": OPTION_TEXTS}],
            "parameters": {"aggregation_strategy": strategy}}
    got = [json.loads(row) for row in _invoke_json(runtime, built, "entities", body)["entities"]]
    pipe = transformers.pipeline("token-classification", model=str(built.root / "entities-bert"), device="cpu")
    want = [pipe(text, aggregation_strategy=strategy) for text in OPTION_TEXTS]
    assert sum(map(len, want)) > 0   # tiny random models still find entities to compare
    task = load_spec(built.spec_path).models["entities"].task
    worst, problems = task_reference.compare(task, got, [list(w) for w in want], 1e-4)
    assert problems == [], problems


def test_an_option_outside_its_bound_is_a_400_through_the_ensemble(built, runtime):
    from botocore.exceptions import ClientError

    body = {"inputs": [{"name": "TEXT", "shape": [1, 1], "datatype": "BYTES", "data": ["a fine film"]}],
            "parameters": {"top_k": 9}}
    with pytest.raises(ClientError) as caught:
        _invoke_json(runtime, built, "sentiment", body)
    error = caught.value.response
    assert error["OriginalStatusCode"] == 400
    assert json.loads(error["OriginalMessage"])["error"].endswith(
        "request parameter 'top_k' is 9; allowed: an integer from 1 to 3, the labels answered per row, best first "
        "(this model's default: 2); send e.g. \"parameters\": {\"top_k\": 1} beside \"inputs\""), error


QUESTION = {"inputs": [{"name": "TEXT", "shape": [1, 1], "datatype": "BYTES", "data": ["Who met Macron?"]},
                       {"name": "TEXT_PAIR", "shape": [1, 1], "datatype": "BYTES",
                        "data": ["Angela Merkel met Emmanuel Macron in Paris"]}]}


def test_the_spec_s_request_bounds_hold_through_the_ensemble(built, runtime):
    # answers: task.requests allows top_k, max_answer_len (at most 30) and doc_stride, not handle_impossible_answer.
    from botocore.exceptions import ClientError

    got = _invoke_json(runtime, built, "answers", {**QUESTION, "parameters": {"max_answer_len": 30}})
    assert json.loads(got["options"][0]) == {"top_k": 2, "max_answer_len": 30, "handle_impossible_answer": False,
                                             "doc_stride": 32}
    refusals = {}
    for sent in ({"max_answer_len": 31}, {"handle_impossible_answer": True}):
        with pytest.raises(ClientError) as caught:
            _invoke_json(runtime, built, "answers", {**QUESTION, "parameters": sent})
        assert caught.value.response["OriginalStatusCode"] == 400
        refusals[next(iter(sent))] = json.loads(caught.value.response["OriginalMessage"])["error"]
    assert refusals["max_answer_len"].endswith(
        "request parameter 'max_answer_len' is 31; allowed: an integer from 1 to 30 (this endpoint's task.requests "
        "bound), the longest answer in tokens (this model's default: 15); send e.g. \"parameters\": "
        "{\"max_answer_len\": 1} beside \"inputs\""), refusals
    assert refusals["handle_impossible_answer"].endswith(
        "request parameter 'handle_impossible_answer' is not allowed on this endpoint (its spec's "
        "task.requests.options: top_k, max_answer_len, doc_stride); remove 'handle_impossible_answer'"), refusals


def test_a_request_s_doc_stride_cuts_the_context_as_the_pipeline_called_with_it(built, runtime, tmp_path):
    task = load_spec(built.spec_path).models["answers"].task
    long = task_reference.rows(task, 64, _windows_of(built))[-1]
    body = {"inputs": [{"name": "TEXT", "shape": [1, 1], "datatype": "BYTES", "data": [long.text]},
                       {"name": "TEXT_PAIR", "shape": [1, 1], "datatype": "BYTES", "data": [long.pair]}],
            "parameters": {"doc_stride": 8}}
    got = _invoke_json(runtime, built, "answers", body)
    assert json.loads(got["options"][0])["doc_stride"] == 8
    answer, params = task_check.answer_step(_chain(built, "answers", tmp_path))
    _, want = task_reference.qa_reference(built.root / "answers-roberta", 64, 8, [long], answer.qa_module(), params)
    _, other = task_reference.qa_reference(built.root / "answers-roberta", 64, 32, [long], answer.qa_module(), params)
    ours = [json.loads(got["answers"][0])]
    assert task_reference.compare(task, ours, want, 1e-4) == (pytest.approx(0, abs=1e-4), [])
    assert ours != other  # the stride changed the windows, and the answer with them
    assert _windows_of(built, stride=8)(long.text, long.pair) >= 2
