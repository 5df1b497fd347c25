"""A task's ensemble verified as a whole at build time: raw inputs through the files that ship, against the
reference users trust (task_reference.py).

The tokenizer step's and the answer step's ``model.py`` are the built files themselves, imported here with
their own ``tokenizer.json`` and config.pbtxt parameters (tokenizers of the same release as the execution
environment's, on this machine's Python); the model step's file runs in the serving runtime: ONNX in the
image's ONNX Runtime (the side environment the model step was verified in), TorchScript in this machine's
torch. A difference fails the build with the rows that differ; the manifest records what ran, the
reference and the worst difference.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import pathlib
import sys
import types
from typing import Any, Callable, Mapping, Optional

import numpy as np

from deployment_spec.builds.manifest import ModelEntry, Verification
from deployment_spec.sections.model import Backend, ModelSpec
from deployment_spec.facts.serving_runtimes import runtime
from deployment_spec.sections.tasks import TaskKind, Task
from model_build import dispatch, layout, model_config
from model_build.backends.ensemble import task_reference
from model_build.backends.ensemble.by_name import plain
from model_build.build_context import BuildContext
from model_build.errors import BuildError
from model_build.progress import Step
from model_build.verification import file_check, side_env, verify
from model_build.verification.cases import Case, Plan
from model_build.verification.record import not_run

CHECK_WINDOWS = 64  # the most windows of one context the check reads
FILES = {Backend.ONNXRUNTIME: ("onnx", "model.onnx"), Backend.PYTORCH: ("torchscript", "model.pt")}
TOKENS_DIFFER = ("The tokenizer step follows the checkpoint's tokenizer.json and tokenizer_config.json; if the "
                 "checkpoint's tokenizer needs Python code of its own (a slow tokenizer), save a fast one "
                 "(tokenizer.json) into the weights folder")
# Same tokens, other answers: the reference runs each row alone; the served steps pad the rows of a request to one
# length and run the model's file in the serving runtime.
ANSWERS_DIFFER = ("The tokens equal transformers'; the model answers otherwise on padded rows (the tokenizer step "
                  "pads each request's rows to a common length: an architecture whose answer changes with padding "
                  "does not honour its attention mask) or in the serving runtime; try the other backend "
                  "(onnxruntime or pytorch), or another architecture")


@dataclasses.dataclass(frozen=True)
class Chain:
    """A task's built steps: the tokenizer's (image tasks: the preprocessing step's), the model's and (except for
    embeddings) the answer's folders."""

    name: str
    task: Task
    model_step: ModelSpec
    model_entry: ModelEntry
    dirs: list[pathlib.Path]
    checkpoint: pathlib.Path
    triton_version: str


def check(chain: Chain, scratch: pathlib.Path, log: Callable[[str], None]) -> Verification:
    """Raw inputs through the chain's files against the reference; BuildError naming the rows that differ."""
    task = chain.task
    params = step_parameters(chain.dirs[0])
    seq = int(params["max_length"])
    module = step_module(chain.dirs[0], "tokenize")
    # The check's contexts may take more windows than the spec lets a request (task.max_windows: a tiny tokenizer
    # spells a short context out piece by piece): the windows are what is checked here, the limit by
    # tests/model_build/test_tokenize_step.py.
    checked = {**params, "max_windows": str(CHECK_WINDOWS)} if "doc_stride" in params else params
    tokenizer = module.Tokenize(str(layout.version_dir(chain.dirs[0]) / "tokenizer.json"), checked)

    def windows_of(question: str, context: str) -> Optional[int]:
        try:
            return 1 + int(tokenizer.encode([question], [context])["window_count"][0, 0])
        except module.RequestError:  # a question with no room beyond the stride, or more windows than checked
            return None

    inputs = task_reference.rows(task, seq, windows_of if "doc_stride" in params else None)
    # The inputs as one request (rows padded to the longest's bucket), then each alone (a short text padded to
    # its own bucket, as most applications send them): both must answer as the reference.
    (ours, *alone), (tokens, *_), ran = run_requests(chain, tokenizer, [inputs] + [[row] for row in inputs],
                                                    scratch, log)
    where, theirs = _reference_or_refuse(chain, seq, inputs)
    wrong_tokens = task_reference.token_problems(task, chain.checkpoint, seq, inputs, tokens)
    worst, problems = task_reference.compare(task, ours, theirs, chain.model_step.tolerance.atol, wrong_tokens)
    if not problems:
        worst_alone, problems = task_reference.compare(task, [a[0] for a in alone], theirs,
                                                       chain.model_step.tolerance.atol)
        problems = [p.replace(":", " sent alone:", 1) for p in problems]
        worst = max(worst, worst_alone)
    if problems:
        raise BuildError(f"model {chain.name}: raw text through its steps does not answer as {where} on "
                         f"{len(problems)} of {len(inputs)} inputs: " + "; ".join(problems[:3]) + ". " +
                         (TOKENS_DIFFER if wrong_tokens else ANSWERS_DIFFER))
    measure = "1 - cosine" if task.kind is TaskKind.SENTENCE_EMBEDDING else "max score difference"
    # Question answering: how many windows its longest context took (1: the check's question leaves no room).
    windows = {"windows": 1 + int(tokens["window_count"].max())} if "window_count" in tokens else {}
    said = f", contexts of up to {windows['windows']} windows" if windows else ""
    log(f"  {chain.name}: {len(inputs)} raw inputs answer as {where} ({measure} {worst:.2g}{said})")
    return Verification(ran=True, triton_version=chain.triton_version, runtime=ran["runtime"],
                        version=ran["version"], device="cpu", cases=len(inputs), max_abs_error=worst,
                        details={"reference": where, "measure": measure, "task": task.kind.value,
                                 "sequence_length": seq, "tokenize": f"tokenizers {package_version('tokenizers')} "
                                 f"(Python {sys.version_info.major}.{sys.version_info.minor} of the build)",
                                 **windows})


def reference(chain: Chain, seq: int, inputs: list) -> tuple[str, list[Any]]:
    """(what answered, its answers) for ``inputs``: the task's reference (task_reference.py)."""
    if chain.task.kind is TaskKind.QUESTION_ANSWERING:
        answer, answer_params = answer_step(chain)
        stride = int(step_parameters(chain.dirs[0]).get("doc_stride", "0"))
        return task_reference.qa_reference(chain.checkpoint, seq, stride, inputs, answer.qa_module(), answer_params)
    return task_reference.reference(chain.task, chain.checkpoint, seq, inputs)


def _reference_or_refuse(chain: Chain, seq: int, inputs: list) -> tuple[str, list[Any]]:
    """The reference's answers; a BuildError naming the first raw input the reference itself cannot answer."""
    try:
        return reference(chain, seq, inputs)
    except Exception as whole:  # the model's own library fails: find the row, say it in one line
        for index, row in enumerate(inputs):
            try:
                reference(chain, seq, [row])
            except Exception as exc:
                whole = exc
                break
        else:
            index, row = -1, None
        said = f"raw input row {index} ({row.text[:40]!r})" if row is not None else "the raw inputs together"
        raise BuildError(
            f"model {chain.name}: the {chain.task.kind.value} reference (the checkpoint in transformers, as its "
            f"users run it) itself fails on {said}: {verify.last_line(whole)}; so this checkpoint cannot be verified for raw "
            "text, and would fail on such requests when served; fix: serve it with a recipe of your own that "
            "handles such texts (source: {recipe: module:function}, then an ensemble), or use another "
            "architecture") from None


def run_chain(chain: Chain, tokenizer: Any, inputs: list, scratch: pathlib.Path, log: Callable[[str], None]
              ) -> tuple[list[Any], dict[str, Any], dict[str, str]]:
    """The inputs as one request: (answers per row, the tokenizer step's tensors, what ran)."""
    (answers,), (tokens,), ran = run_requests(chain, tokenizer, [inputs], scratch, log)
    return answers, tokens, ran


def run_requests(chain: Chain, tokenizer: Any, requests: list[list[Any]], scratch: pathlib.Path,
                 log: Callable[[str], None]) -> tuple[list[list[Any]], list[dict[str, Any]], dict[str, str]]:
    """Each request (a list of raw inputs) through the chain, as Triton gives each request to the steps (its rows
    padded together, to their own bucket): answers per request, tokens per request, what ran."""
    task = chain.task
    made_tokens, sent = [], []
    for inputs in requests:
        texts = np.array([r.text.encode() for r in inputs], dtype=np.object_)
        pairs = np.array([r.pair.encode() for r in inputs], dtype=np.object_) if task.takes_pair() else None
        made_tokens.append(tokenizer.encode(texts, pairs))
        sent.append({"TEXT": texts, **({"TEXT_PAIR": pairs} if pairs is not None else {})})
    # Question answering's windows after each row's first, which the served answer step sends the model step itself
    # (BLS): here with the requests, in the same run of the serving runtime.
    windows = [answer_step(chain)[0].other_windows({**tokens, **texts})[1] if "window_count" in tokens else {}
               for tokens, texts in zip(made_tokens, sent)]
    outputs, ran = run_model_requests(chain, made_tokens + [w for w in windows if w], scratch, log)
    window_outputs = iter(outputs[len(made_tokens):])
    answers = []
    for tokens, got, texts, extra in zip(made_tokens, outputs, sent, windows):
        ran_windows = next(window_outputs) if extra else None
        answers.append(_answers(chain, {**tokens, **got, **texts}, lambda arrays, done=ran_windows: done))
    return answers, made_tokens, ran


def _answers(chain: Chain, produced: dict[str, Any], run_model: Callable[[Any], Any]) -> list[Any]:
    """The answer step's answers per row for one request's tensors (embeddings: the model's output); ``run_model``:
    the model step's outputs on question answering's other windows."""
    task = chain.task
    if len(chain.dirs) == 2:  # sentence embeddings: the model's output is the answer
        return list(produced["sentence_embedding"])
    answer, params = answer_step(chain)
    made = answer.answer(task.kind.value, params, produced, run_model)
    if task.kind is TaskKind.TEXT_CLASSIFICATION:
        return label_rows(made)
    key = "entities" if task.kind is TaskKind.TOKEN_CLASSIFICATION else "answers"
    return [json.loads(row[0]) for row in made[key]]


def label_rows(made: Mapping[str, Any]) -> list[list[dict[str, Any]]]:
    """The answer step's labels and scores as the pipeline answers them: [{label, score}] per row."""
    return [[{"label": label.decode(), "score": float(score)} for label, score in zip(ls, ss)]
            for ls, ss in zip(made["labels"], made["scores"])]


def run_model(chain: Chain, arrays: Mapping[str, np.ndarray], scratch: pathlib.Path, log: Callable[[str], None]
              ) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The model step's shipped file in its serving runtime on what the first step made: ({output: array}, ran)."""
    (got,), ran = run_model_requests(chain, [arrays], scratch, log)
    return got, ran


def run_model_requests(chain: Chain, requests: list[Mapping[str, np.ndarray]], scratch: pathlib.Path,
                       log: Callable[[str], None]) -> tuple[list[dict[str, np.ndarray]], dict[str, str]]:
    """The model step's file on several requests at once (one run of the serving runtime), outputs per request."""
    entry = chain.model_entry
    names = [t.name for t in entry.inputs]
    outputs = [t.name for t in entry.outputs]
    kind, file_name = FILES[chain.model_step.backend]
    if kind == "onnx":
        env = side_env.ensure("onnxruntime", runtime(chain.triton_version).onnxruntime_wheel, log)
    else:
        env = file_check.this_machines("torch")
    import torch

    dtypes = {"TYPE_INT32": np.int32, "TYPE_INT64": np.int64, "TYPE_FP32": np.float32}
    cases = tuple(Case(f"raw {i}", {n: torch.from_numpy(np.ascontiguousarray(arrays[plain(n)],
                                                                             dtype=dtypes[t.data_type]))
                                    for n, t in zip(names, entry.inputs)}) for i, arrays in enumerate(requests))
    path = layout.version_dir(chain.dirs[1]) / file_name
    got = verify.run_candidates(env, kind, [verify.Candidate("served", path if path.is_file() else path / file_name)],
                                Plan(cases, (), None), names, outputs, scratch)["served"]
    if isinstance(got, str):
        raise BuildError(f"model {chain.model_step.name}: the raw-input check could not run it in {env.package} "
                         f"{env.version}: {got}")
    return ([{plain(n): v for n, v in zip(outputs, got[case.name])} for case in cases],
            {"runtime": env.package, "version": env.version})


def answer_step(chain: Chain) -> tuple[types.ModuleType, dict[str, Any]]:
    """The shipped answer step's module and its parameters as it reads them."""
    module = step_module(chain.dirs[2], "answer")
    return module, module.load_params(step_parameters(chain.dirs[2])["answer_params"])


def step_parameters(model_dir: pathlib.Path) -> dict[str, str]:
    config = model_config.parse((model_dir / layout.CONFIG).read_text(), str(model_dir / layout.CONFIG))
    return {k: v.string_value for k, v in config.parameters.items()}


def step_module(model_dir: pathlib.Path, label: str) -> types.ModuleType:
    """The step's shipped model.py as a module (it imports Triton's utilities only when Triton runs it)."""
    path = layout.version_dir(model_dir) / "model.py"
    spec = importlib.util.spec_from_file_location(f"tritonsm_task_{label}_{model_dir.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def package_version(package: str) -> str:
    import importlib.metadata

    return importlib.metadata.version(package)
