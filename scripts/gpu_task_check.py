"""A task ensemble's steps where they are served: the image's CPython with the shipped environment, and CUDA.

    python3 scripts/gpu_task_check.py prepare SPEC MANIFEST OUT_DIR    # on the build machine
    python3 scripts/gpu_task_check.py run OUT_DIR REPORT.json          # on a GPU host with the image's CPython

``prepare`` copies each task ensemble's built steps (tokenizer step with its execution environment built for
the image, TorchScript model step, answer step) and what the build machine's chain made of the raw inputs
(tokens, model outputs, answers) into OUT_DIR. ``run`` needs only the standard library, numpy and torch: it
unpacks each environment and runs the tokenizer and answer steps' own model.py in a child of this Python
(``-I``, the environment's site-packages alone on the path: what the Python backend's stub does with
EXECUTION_ENV_PATH), and the TorchScript model step on ``cuda:0`` (as the libtorch backend loads a KIND_GPU
instance), then compares each with the build machine's: tokens equal, outputs and scores within 1e-4.
"""
from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile

TOLERANCE = 1e-4
STEP = r"""
import importlib.util, json, pickle, sys
import numpy as np
spec = importlib.util.spec_from_file_location("step", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
args = pickle.load(open(sys.argv[2], "rb"))
if args["kind"] == "tokenize":
    made = module.Tokenize(args["tokenizer"], args["params"]).encode(args["texts"], args["pairs"])
else:
    made = module.answer(args["task"], module.load_params(args["params"]), args["inputs"])
pickle.dump({"made": made, "python": sys.version.split()[0], "numpy": np.__version__,
             "tokenizers": __import__("tokenizers").__version__ if args["kind"] == "tokenize" else None},
            open(sys.argv[3], "wb"))
"""


def prepare(spec_path: str, manifest_path: str, out: str) -> int:
    """On the build machine (the project's venv): steps and the build's own answers, per task ensemble."""
    import pickle

    import numpy as np

    from deployment_spec import load_spec
    from deployment_spec.builds.manifest import load_manifest
    from model_build.backends.ensemble import task_check, task_reference

    spec, manifest = load_spec(spec_path), load_manifest(manifest_path)
    work = pathlib.Path(manifest_path).resolve().parent.parent / "work"
    target = pathlib.Path(out)
    target.mkdir(parents=True, exist_ok=True)
    for name, model in spec.models.items():
        if model.task is None or model.ensemble is None or spec.models[f"{name}-model"].backend.value != "pytorch":
            continue
        steps = [s.model for s in model.ensemble.steps]
        dirs = [work / "models" / f"{s}-{manifest.models[s].build_hash[:16]}" / s for s in steps]
        for folder in dirs:
            copy = pathlib.Path(shutil.copytree(folder, target / name / folder.name, dirs_exist_ok=True))
            for archive in copy.glob("python-env-*.tar.gz"):  # one copy of each environment, shared by the steps
                (target / "envs").mkdir(exist_ok=True)
                archive.replace(target / "envs" / archive.name)
        model_step = spec.models[steps[1]]
        chain = task_check.Chain(name, model.task, model_step, manifest.models[steps[1]], dirs,
                                 spec.root / model_step.weights, spec.triton_version)
        inputs = task_reference.rows(model.task)
        tokenizer = task_check.step_module(dirs[0], "tokenize").Tokenize(str(dirs[0] / "1" / "tokenizer.json"),
                                                                    task_check.step_parameters(dirs[0]))
        with tempfile.TemporaryDirectory() as scratch:
            answers, tokens, _ = task_check.run_chain(chain, tokenizer, inputs, pathlib.Path(scratch), print)
        texts = np.array([r.text.encode() for r in inputs], dtype=np.object_)
        pairs = np.array([r.pair.encode() for r in inputs], dtype=np.object_) if model.task.takes_pair() else None
        # The steps' config.pbtxt parameters as Triton hands them to model.py (the GPU host has no protobuf of ours).
        params = [task_check.step_parameters(folder) for folder in dirs]
        record = {"task": model.task.kind.value, "steps": steps, "texts": texts, "pairs": pairs, "tokens": tokens,
                  "params": params,
                  "model_inputs": [t.name for t in manifest.models[steps[1]].inputs],
                  "model_outputs": [t.name for t in manifest.models[steps[1]].outputs], "answers": answers}
        (target / name / "expected.pkl").write_bytes(pickle.dumps(record))
        print(f"{name}: {', '.join(steps)} with the build's answers on {len(inputs)} raw inputs")
    return 0


def run(folder: str, report_path: str) -> int:
    import pickle

    import numpy as np
    import torch

    report: dict = {"torch": torch.__version__, "cuda": torch.cuda.is_available(),
                    "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "ensembles": {}}
    for expected_file in sorted(pathlib.Path(folder).glob("*/expected.pkl")):
        root = expected_file.parent
        expected = pickle.loads(expected_file.read_bytes())
        tokenize_dir, model_dir = root / expected["steps"][0], root / expected["steps"][1]
        params = expected["params"][0]
        env_site = _unpack_env(pathlib.Path(folder) / "envs", params)
        tokens, facts = _in_env(env_site, tokenize_dir / "1" / "model.py", {
            "kind": "tokenize", "tokenizer": str(tokenize_dir / "1" / "tokenizer.json"), "params": params,
            "texts": expected["texts"], "pairs": expected["pairs"]})
        same_tokens = all(np.array_equal(tokens[k], expected["tokens"][k]) for k in expected["tokens"])
        device = "cuda:0" if torch.cuda.is_available() else "cpu"  # the CPU only to try the script out
        module = torch.jit.load(str(model_dir / "1" / "model.pt"), map_location=device).eval()
        feeds = [torch.from_numpy(tokens[n.rsplit("__", 1)[0]]).to(device) for n in expected["model_inputs"]]
        with torch.no_grad():
            got = module(*feeds)
        got = [g.float().cpu().numpy() for g in (got if isinstance(got, (tuple, list)) else (got,))]
        entry = {"python": facts["python"], "tokenizers": facts["tokenizers"], "numpy": facts["numpy"],
                 "tokens_equal": same_tokens, "model_device": device}
        outputs = {n.rsplit("__", 1)[0]: g for n, g in zip(expected["model_outputs"], got)}
        if len(expected["steps"]) > 2:
            answer_dir = root / expected["steps"][2]
            made, _ = _in_env(env_site, answer_dir / "1" / "model.py", {
                "kind": "answer", "task": expected["task"], "params": expected["params"][2]["answer_params"],
                "inputs": {**tokens, **outputs, "TEXT": expected["texts"],
                           **({"TEXT_PAIR": expected["pairs"]} if expected["pairs"] is not None else {})}})
            entry["answer_difference"] = _answer_difference(expected["task"], made, expected["answers"])
        else:
            entry["answer_difference"] = float(max(1 - np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b))
                                                   for a, b in zip(outputs["sentence_embedding"], expected["answers"])))
        entry["ok"] = same_tokens and entry["answer_difference"] <= TOLERANCE
        report["ensembles"][root.name] = entry
        print(root.name, json.dumps(entry), flush=True)
    pathlib.Path(report_path).write_text(json.dumps(report, indent=2) + "\n")
    return 0 if report["ensembles"] and all(e["ok"] for e in report["ensembles"].values()) else 1


def _answer_difference(task: str, made: dict, expected: list) -> float:
    """The largest score difference; 1.0 where a label, entity or span differs."""
    if task == "text-classification":
        rows = [[{"label": l.decode(), "score": float(s)} for l, s in zip(ls, ss)]
                for ls, ss in zip(made["labels"], made["scores"])]
    else:
        rows = [json.loads(r[0]) for r in made["entities" if task == "token-classification" else "answers"]]
    worst = 0.0
    for got, want in zip(rows, expected):
        if [{k: v for k, v in g.items() if k != "score"} for g in got] != \
                [{k: v for k, v in w.items() if k != "score"} for w in want]:
            return 1.0
        worst = max([worst] + [abs(g["score"] - w["score"]) for g, w in zip(got, want)])
    return worst


def _in_env(site: pathlib.Path, model_py: pathlib.Path, args: dict) -> tuple[dict, dict]:
    """Runs a step's model.py in a child of this Python that sees the environment's packages alone."""
    import pickle

    with tempfile.TemporaryDirectory() as work:
        (pathlib.Path(work) / "args.pkl").write_bytes(pickle.dumps(args))
        code = f"import sys; sys.path.insert(0, {str(site)!r}); exec(compile({STEP!r}, 'step', 'exec'))"
        subprocess.run([sys.executable, "-I", "-c", code, str(model_py), f"{work}/args.pkl", f"{work}/out.pkl"],
                       check=True)
        result = pickle.loads((pathlib.Path(work) / "out.pkl").read_bytes())
    return result["made"], result


def _unpack_env(envs: pathlib.Path, params: dict) -> pathlib.Path:
    archive = envs / params["EXECUTION_ENV_PATH"].split("/")[-1]
    target = envs / archive.name.removesuffix(".tar.gz")
    if not target.exists():
        with tarfile.open(archive) as tar:
            tar.extractall(target, filter="tar")  # bin/python3 links to the image's interpreter
    (site,) = target.glob("lib/python3*/site-packages")
    return site


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "prepare" and len(sys.argv) == 5:
        sys.exit(prepare(*sys.argv[2:]))
    if command == "run" and len(sys.argv) == 4:
        sys.exit(run(*sys.argv[2:]))
    sys.exit(__doc__)
