"""Runs model files in one serving runtime release; executed inside a side environment.

    python -S -E worker.py SITE_DIR version PACKAGE
    python -S -E worker.py SITE_DIR onnx REQUEST.json
    python -S -E worker.py SITE_DIR torchscript REQUEST.json

Standard library, numpy and the runtime only (no project code): with ``-S`` the build's own
site-packages are not on the path, so ``import onnxruntime`` finds the pinned release in SITE_DIR.
REQUEST.json: ``{"models": {label: path}, "cases": CASES.npz, "outputs": [names], "out": DIR}``;
CASES.npz holds ``<case>::<input>`` arrays. For each label the worker writes ``DIR/<label>.npz``
(``<case>::<output>``) and reports load or run failures in ``DIR/result.json``, so one broken
candidate does not hide the others.
"""
import json
import os
import sys


def main(argv):
    site_dir, command = argv[0], argv[1]
    sys.path.insert(0, site_dir)
    if command == "version":
        import importlib.metadata
        print(importlib.metadata.version(argv[2]))
        return 0
    with open(argv[2]) as fh:
        request = json.load(fh)
    runner = {"onnx": OnnxRuntime, "torchscript": TorchScript}[command]
    options = {"graph_level": request.get("graph_level", "all")} if command == "onnx" else {}
    import numpy as np

    cases = {}
    with np.load(request["cases"]) as data:
        for key in data.files:
            case, name = key.split("::", 1)
            cases.setdefault(case, {})[name] = data[key]
    result = {}
    for label, path in request["models"].items():
        outputs = {}
        try:
            model = runner(path, **options)
        except Exception as exc:  # report, then go on with the other candidates
            result[label] = {"error": f"load failed: {_one_line(exc)}"}
            continue
        failed = None
        for case, feed in cases.items():
            try:
                arrays = model.run(request["outputs"], feed)
                if len(arrays) != len(request["outputs"]):
                    raise ValueError(f"it returns {len(arrays)} output(s), {len(request['outputs'])} declared")
                for name, array in zip(request["outputs"], arrays):
                    outputs[f"{case}::{name}"] = array
            except Exception as exc:
                failed = f"run failed on case {case}: {_one_line(exc)}"
                break
        np.savez(os.path.join(request["out"], f"{label}.npz"), **outputs)
        result[label] = {"error": failed} if failed else {"runtime": model.describe()}
    with open(os.path.join(request["out"], "result.json"), "w") as fh:
        json.dump(result, fh, sort_keys=True)
    return 0


class OnnxRuntime:
    def __init__(self, path, graph_level="all"):
        import onnxruntime

        levels = onnxruntime.GraphOptimizationLevel
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        # One thread: reductions then run in a fixed order, so the recorded errors repeat exactly.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        # The server applies the config's optimization.graph.level when it loads the model (all by default).
        options.graph_optimization_level = {"all": levels.ORT_ENABLE_ALL, "extended": levels.ORT_ENABLE_EXTENDED,
                                            "basic": levels.ORT_ENABLE_BASIC,
                                            "disabled": levels.ORT_DISABLE_ALL}[graph_level]
        self.session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self.version = onnxruntime.__version__

    def run(self, names, feed):
        wanted = {i.name for i in self.session.get_inputs()}
        return self.session.run(names, {k: v for k, v in feed.items() if k in wanted})

    def describe(self):
        return {"onnxruntime": self.version, "provider": "CPUExecutionProvider"}


class TorchScript:
    def __init__(self, path):
        import torch

        self.torch = torch
        torch.set_num_threads(1)
        self.module = torch.jit.load(path, map_location="cpu").eval()
        self.inputs = None

    def run(self, names, feed):
        torch = self.torch
        # TorchScript takes positional tensors; the request lists them in the model's input order.
        ordered = [torch.from_numpy(feed[key]) for key in sorted(feed, key=_position)]
        with torch.no_grad():
            out = self.module(*ordered)
        out = out if isinstance(out, (tuple, list)) else (out,)
        return [o.numpy() for o in out]

    def describe(self):
        return {"torch": self.torch.__version__.split("+")[0], "device": "cpu"}


def _position(key):
    """Inputs arrive as ``<index>:<name>`` for TorchScript, which has no input names."""
    return int(key.split(":", 1)[0])


def _one_line(exc):
    import re

    text = str(exc).strip().splitlines()
    # ONNX Runtime puts its C++ source line and function signature before the reason: noise to a user.
    first = re.sub(r" ?/onnxruntime_src/\S+:\d+ [^(]*\([^)]*\) ", " ", text[0]) if text else ""
    return f"{type(exc).__name__}: {first}"[:600]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
