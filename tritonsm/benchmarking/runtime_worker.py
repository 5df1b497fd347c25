"""One engine (eager PyTorch or an ONNX Runtime session) in its own process.

A process per engine keeps each engine's peak resident memory its own, and lets the parent
interleave the engines' timed blocks so background load on the machine hits all of them alike.
The parent sends commands over a pipe; while one engine runs, the others wait in ``recv()``.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Optional

EAGER, ONNXRUNTIME = "pytorch", "onnxruntime"


@dataclasses.dataclass(frozen=True)
class EngineSpec:
    label: str                       # column name, e.g. "onnxruntime-int8"
    kind: str                        # EAGER or ONNXRUNTIME
    threads: int
    spec_path: Optional[str] = None  # EAGER: the deployment spec and the model to rebuild from its recipe
    model_name: Optional[str] = None
    onnx_path: Optional[str] = None  # ONNXRUNTIME: the file to load
    ort_site: Optional[str] = None   # ONNXRUNTIME: a serving-runtime side environment (else the venv's)
    ort_version: Optional[str] = None


def serve(conn: Any, engine: EngineSpec) -> None:
    """Worker main loop: ("load",) -> rss; ("run", feeds, count) -> latencies, first output; ("stop",) -> peak."""
    import psutil

    try:
        run = None
        while True:
            command = conn.recv()
            if command[0] == "load":
                rss_before = psutil.Process().memory_info().rss
                run = _load(engine)
                conn.send(("ok", {"rss_before_load_mib": rss_before / 2**20}))
            elif command[0] == "run":
                _, feeds, count = command
                latencies, first = [], None
                for _ in range(count):
                    started = time.perf_counter()
                    out = run(feeds)
                    latencies.append((time.perf_counter() - started) * 1000)
                    if first is None:
                        first = out
                conn.send(("ok", {"latencies_ms": latencies, "output": first}))
            elif command[0] == "stop":
                conn.send(("ok", {"peak_rss_mib": _peak_rss_mib()}))
                return
    except Exception as exc:  # reported to the parent, which raises it with the engine's name
        conn.send(("error", f"{type(exc).__name__}: {exc}"))


def _peak_rss_mib() -> float:
    """This process's resident high-water mark (VmHWM), imports included.

    Not getrusage's ru_maxrss: Linux carries it over from the parent through fork + exec, so a
    worker spawned by a parent holding a 500 MiB model would report at least 500 MiB.
    """
    import pathlib

    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB
    import psutil  # not Linux: the current RSS is the best available
    return psutil.Process().memory_info().rss / 2**20


def _load(engine: EngineSpec):
    if engine.kind == EAGER:
        return _load_eager(engine)
    return _load_onnxruntime(engine)


def _load_eager(engine: EngineSpec):
    import torch

    from deployment_spec import load_spec
    from model_build.recipes import load_exportable

    # Same thread budget as ONNX Runtime (intra-op = threads, inter-op = 1), set before any op runs.
    torch.set_num_threads(engine.threads)
    torch.set_num_interop_threads(1)
    spec = load_spec(engine.spec_path)
    module = load_exportable(spec.models[engine.model_name], spec.root).module.eval()

    def run(feeds):
        tensors = {k: torch.from_numpy(v) for k, v in feeds.items()}
        with torch.inference_mode():
            out = module(**tensors)
        return (out[0] if isinstance(out, (tuple, list)) else out).numpy()

    return run


def _load_onnxruntime(engine: EngineSpec):
    import sys

    if engine.ort_site:
        # A fresh spawned process that has not imported onnxruntime: the image's release comes first.
        sys.path.insert(0, engine.ort_site)
    import onnxruntime

    if engine.ort_version and onnxruntime.__version__ != engine.ort_version:
        raise RuntimeError(f"wanted ONNX Runtime {engine.ort_version} from {engine.ort_site}, "
                           f"imported {onnxruntime.__version__}")

    options = onnxruntime.SessionOptions()
    # What Triton's onnxruntime backend does by default: all graph optimizations at load.
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = engine.threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(engine.onnx_path, options, providers=["CPUExecutionProvider"])
    first_output = session.get_outputs()[0].name

    def run(feeds):
        return session.run([first_output], feeds)[0]

    return run
