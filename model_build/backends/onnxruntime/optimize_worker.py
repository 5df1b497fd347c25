"""Makes one candidate ONNX graph in a fresh process:
``python -m model_build.backends.onnxruntime.optimize_worker {fused,basic,as-exported} IN OUT REPORT.json [hints]``.

IN: the exported graph (its weights inline or in files beside it, onnx_weights); OUT: the candidate,
inline. ``fused``: transformer fusions, then ONNX Runtime's basic rewrites (ort_optimize.optimize_for_ort
with the model's attention geometry); ``basic``: the basic rewrites only; ``as-exported``: none.
Each result is stripped of host metadata (reproducible.strip_onnx) so the bytes verified are the
bytes shipped; REPORT.json gets the optimization report (``null`` for ``as-exported``).

Why a process that exits: the fusers and ONNX Runtime's optimizer make copies of what they rewrite,
and the allocator keeps memory after they return. In the build process they took BERT-base's build
to 7.6 GB (17 x its fp32 weights) and left it at 5.4 GB for the rest of the build (benchmarks/RESULTS.md,
section 5); here they rewrite graphs whose weights stay on disk, and what they used goes back to the
system when the process exits.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
from typing import Callable, Optional

FAILED = 3
MARKER = "tritonsm-optimize-error: "
MODES = ("fused", "basic", "as-exported")
# The transformer fusions are optional (the unfused graph serves the same answers), and on graphs they do not
# recognise some of their pattern searches run for many minutes (a 74 k-parameter Longformer: 10+ minutes on
# 2 cores); past this limit the build goes on without them. Generous: BERT-base fuses in well under a minute.
FUSION_BASE_SECONDS = 300
FUSION_SECONDS_PER_MB = 1.0


def fusion_limit(src: pathlib.Path) -> float:
    """Seconds the fusions of ``src`` may take: a base plus a share per megabyte of graph and weight files."""
    size = sum(f.stat().st_size for f in src.parent.glob(f"{src.name}*") if f.is_file())
    return FUSION_BASE_SECONDS + FUSION_SECONDS_PER_MB * size / 1e6


def make(mode: str, src: pathlib.Path, dst: pathlib.Path, hints: dict, log: Callable[[str], None],
         limit: Optional[float] = None):
    """Runs the worker; returns its ort_optimize.OptimizeReport (None for ``as-exported``). ``limit``: seconds
    after which the worker is stopped and the step fails (OrtOptimizeError); None: no limit."""
    from model_build.backends.onnxruntime import optimize as ort_optimize

    report = dst.with_name(dst.name + ".report.json")
    cmd = [sys.executable, "-m", __name__, mode, str(src), str(dst), str(report)]
    for key in ("model_type", "num_heads", "hidden_size"):
        if hints.get(key):
            cmd += [f"--{key.replace('_', '-')}", str(hints[key])]
    log("  $ " + " ".join(cmd))
    try:
        # subprocess.run kills the worker when the limit passes, and waits for it.
        proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=limit)
    except subprocess.TimeoutExpired:
        raise ort_optimize.OrtOptimizeError(f"the {mode} optimization of {src} did not finish within {limit:.0f} s "
                                            "and was stopped") from None
    if proc.returncode == FAILED:
        raise ort_optimize.OrtOptimizeError(proc.stderr.rsplit(MARKER, 1)[-1].strip())
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-10:])
        raise ort_optimize.OrtOptimizeError(f"the ONNX optimization process ({mode}) of {src} failed "
                                            f"(exit {proc.returncode}):\n{tail}")
    data = json.loads(report.read_text())
    report.unlink()
    return None if data is None else ort_optimize.OptimizeReport(**data)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("src", type=pathlib.Path)
    parser.add_argument("dst", type=pathlib.Path)
    parser.add_argument("report", type=pathlib.Path)
    parser.add_argument("--model-type")
    parser.add_argument("--num-heads", type=int, default=0)
    parser.add_argument("--hidden-size", type=int, default=0)
    args = parser.parse_args(argv)

    from model_build import reproducible

    from model_build.onnx_graph import weights as onnx_weights

    from model_build.backends.onnxruntime import optimize as ort_optimize

    report: Optional[dict] = None
    try:
        if args.mode == "as-exported":
            with tempfile.TemporaryDirectory(prefix="as-exported-") as scratch:
                graph = pathlib.Path(scratch) / "exported.onnx"
                onnx_weights.stage(args.src, graph)
                reproducible.strip_onnx(graph)
                onnx_weights.inline(graph, args.dst)
        else:
            model_type = args.model_type if args.mode == "fused" else None
            report = ort_optimize.optimize_for_ort(args.src, args.dst, model_type=model_type, num_heads=args.num_heads,
                                                   hidden_size=args.hidden_size,
                                                   finish=reproducible.strip_onnx).as_dict()
    except ort_optimize.OrtOptimizeError as exc:
        print(MARKER + str(exc).replace("\n", " "), file=sys.stderr)
        return FAILED
    args.report.write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
