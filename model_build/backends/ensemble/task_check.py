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

import importlib.util
import json
import pathlib
import sys
import types
from typing import Any, Mapping

import numpy as np

from deployment_spec.manifest import ModelEntry, Verification
from deployment_spec.model import Backend, ModelSpec
from deployment_spec.serving_runtimes import runtime
from deployment_spec.tasks import TaskKind, TextTask
from model_build import dispatch, layout, model_config
from model_build.backends.ensemble import task_reference
from model_build.build_context import BuildContext
from model_build.errors import BuildError
from model_build.progress import Step
from model_build.verification import file_check, side_env, verify
from model_build.verification.cases import Case, Plan
from model_build.verification.record import not_run

FILES = {Backend.ONNXRUNTIME: ("onnx", "model.onnx"), Backend.PYTORCH: ("torchscript", "model.pt")}


def verify_task(ctx: BuildContext, model: ModelSpec, built: Mapping[str, ModelEntry], scratch: pathlib.Path) -> Verification:
    task = model.task
    assert task is not None and model.ensemble is not None  # only task ensembles come here
    steps = [s.model for s in model.ensemble.steps]
    dirs = {name: dispatch.cache_dir(ctx.work, name, built[name].build_hash) / name for name in steps}
    model_step = ctx.spec.models[steps[1]]
    if model_step.backend not in FILES:
        return not_run(ctx.spec.triton_version, f"the model step is a {model_step.backend.value} plan, which runs only "
                       "on a GPU; the tokenizer and answer steps are checked when it is served (tritonsm smoke)")
    step = Step(ctx, model.name, f"verify raw text in, answers out against the {task.kind.value} reference")
    folder = (ctx.spec.root / model_step.weights).resolve() if model_step.weights else pathlib.Path()
    tokenize = _load(dirs[steps[0]], "tokenize")
    params = _parameters(dirs[steps[0]])
    seq = int(params["max_length"])
    inputs = task_reference.rows(task)
    tokenizer = tokenize.Tokenize(str(layout.version_dir(dirs[steps[0]]) / "tokenizer.json"), params)
    ours, ran = _run_chain(ctx, model_step, built[steps[1]], dirs, steps, tokenizer, task, inputs, scratch)
    where, theirs = task_reference.reference(task, folder, seq, inputs)
    worst, problems = task_reference.compare(task, ours, theirs, model_step.tolerance.atol)
    step.done()
    if problems:
        raise BuildError(f"model {model.name}: raw text through its steps does not answer as {where} on "
                         f"{len(problems)} of {len(inputs)} inputs: " + "; ".join(problems[:3]) +
                         ". The tokenizer step follows the checkpoint's tokenizer.json and tokenizer_config.json; "
                         "if the checkpoint's tokenizer needs Python code of its own (a slow tokenizer), save a "
                         "fast one (tokenizer.json) into the weights folder")
    measure = "1 - cosine" if task.kind is TaskKind.SENTENCE_EMBEDDING else "max score difference"
    ctx.log(f"  {model.name}: {len(inputs)} raw inputs answer as {where} ({measure} {worst:.2g})")
    return Verification(ran=True, triton_version=ctx.spec.triton_version, runtime=ran["runtime"],
                        version=ran["version"], device="cpu", cases=len(inputs), max_abs_error=worst,
                        details={"reference": where, "measure": measure, "task": task.kind.value,
                                 "sequence_length": seq, "tokenize": f"tokenizers {_version('tokenizers')} "
                                 f"(Python {sys.version_info.major}.{sys.version_info.minor} of the build)"})


def _run_chain(ctx: BuildContext, model_step: ModelSpec, entry: ModelEntry, dirs: Mapping[str, pathlib.Path],
               steps: list[str], tokenizer: Any, task: TextTask, inputs: list, scratch: pathlib.Path
               ) -> tuple[list[Any], dict[str, str]]:
    texts = [r.text.encode() for r in inputs]
    pairs = [r.pair.encode() for r in inputs] if task.takes_pair() else None
    tokens = tokenizer.encode(np.array(texts, dtype=np.object_),
                              None if pairs is None else np.array(pairs, dtype=np.object_))
    names = [t.name for t in entry.inputs]
    outputs = [t.name for t in entry.outputs]
    kind, file_name = FILES[model_step.backend]
    if kind == "onnx":
        env = side_env.ensure("onnxruntime", runtime(ctx.spec.triton_version).onnxruntime_wheel, ctx.log)
    else:
        env = file_check.this_machines("torch")
    import torch

    dtype = {"TYPE_INT32": np.int32}.get(entry.inputs[0].data_type, np.int64)
    plan = Plan((Case("raw", {n: torch.from_numpy(tokens[n].astype(dtype)) for n in names}),), (), None)
    path = layout.version_dir(dirs[steps[1]]) / file_name
    got = verify.run_candidates(env, kind, [verify.Candidate("served", path if path.is_file() else path / file_name)],
                                plan, names, outputs, scratch)["served"]
    if isinstance(got, str):
        raise BuildError(f"model {model_step.name}: the raw-text check could not run it in {env.package} "
                         f"{env.version}: {got}")
    produced = {**tokens, **dict(zip(outputs, got["raw"])), "TEXT": np.array(texts, dtype=np.object_)}
    if pairs is not None:
        produced["TEXT_PAIR"] = np.array(pairs, dtype=np.object_)
    ran = {"runtime": env.package, "version": env.version}
    if len(steps) == 2:  # sentence embeddings: the model's output is the answer
        return list(produced["sentence_embedding"]), ran
    answer = _load(dirs[steps[2]], "answer")
    params = _parameters(dirs[steps[2]])
    made = answer.answer(params["task"], answer.load_params(params["answer_params"]), produced)
    if task.kind is TaskKind.TEXT_CLASSIFICATION:
        rows = [[{"label": label.decode(), "score": float(score)} for label, score in zip(ls, ss)]
                for ls, ss in zip(made["labels"], made["scores"])]
        return rows, ran
    key = "entities" if task.kind is TaskKind.TOKEN_CLASSIFICATION else "answers"
    return [json.loads(row[0]) for row in made[key]], ran


def _parameters(model_dir: pathlib.Path) -> dict[str, str]:
    config = model_config.parse((model_dir / layout.CONFIG).read_text(), str(model_dir / layout.CONFIG))
    return {k: v.string_value for k, v in config.parameters.items()}


def _load(model_dir: pathlib.Path, label: str) -> types.ModuleType:
    """The step's shipped model.py as a module (it imports Triton's utilities only when Triton runs it)."""
    path = layout.version_dir(model_dir) / "model.py"
    spec = importlib.util.spec_from_file_location(f"tritonsm_task_{label}_{model_dir.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _version(package: str) -> str:
    import importlib.metadata

    return importlib.metadata.version(package)
