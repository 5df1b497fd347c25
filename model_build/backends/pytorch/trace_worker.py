"""Runs one TorchScript trace in a fresh process.

``python -m model_build.backends.pytorch.trace_worker SPEC MODEL OUT_DIR``

Why a subprocess: TorchScript names classes ``___torch_mangle_<N>`` with a per-process counter,
so a second trace in the same process writes different bytes; a fresh process gives the same
model.pt for the same inputs. Writes OUT_DIR/model.pt and OUT_DIR/parity.json (``parity``: the
trace against eager PyTorch on the serving cases; ``verification``: what ran where).

``--serving-torch VERSION`` (opt-in, ``tritonsm build --check-serving-torch``) also runs model.pt in
that PyPI torch release, the one nearest the image's libtorch, in a side environment.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

FAILED = 3
MARKER = "tritonsm-build-error: "
# Eager PyTorch and the trace run the same ATen kernels here, so only constants and branches that
# tracing froze at the example's shape can differ: varying the batch and the length one at a time
# finds them (cases.plan). Batches above this many tokens run at the short length only; BERT-large's
# 9 cases at sequence 512 (43k tokens, about 500 s on 2 cores) become 11 cases of 5.9k tokens.
FULL_LENGTH_TOKENS = 2048


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("spec")
    parser.add_argument("model")
    parser.add_argument("out")
    parser.add_argument("--serving-torch")
    args = parser.parse_args(argv)

    from deployment_spec import load_spec
    from deployment_spec.facts.serving_runtimes import runtime
    from model_build.backends.pytorch import torchscript, trace_failures
    from model_build.errors import BuildError
    from model_build.recipes import load_exportable
    from model_build.verification import cases, verify

    spec = load_spec(args.spec)
    model = spec.models[args.model]
    out_dir = pathlib.Path(args.out)
    serving_runtime = runtime(spec.triton_version)
    try:
        made = load_exportable(model, spec.root)
        if made.note:
            print(f"  {model.name}: {made.note}", flush=True)
        step = _Steps(model.name)
        step("tracing TorchScript")
        traced = torchscript.trace(model.name, made, out_dir / "model.pt", model.max_batch_size)
        plan = cases.plan(made, model, full_length_tokens=FULL_LENGTH_TOKENS)
        step(f"eager PyTorch on {len(plan.cases)} cases (batch sizes, lengths, padded rows)")
        want, failures = trace_failures.run(made.module, plan, made.input_names)
        if failures:
            raise BuildError(trace_failures.eager_fails(model.name, failures, len(plan.cases), made.input_names[0]))
        step(f"the traced graph on the same {len(plan.cases)} cases")
        got, failures = trace_failures.run(_Positional(traced, made.input_names), plan, made.input_names)
        if failures:  # the tracer's own text would print its stack frames: the case and one line instead
            first = made.input_names[0]
            raise BuildError(trace_failures.trace_fails(model.name, failures, len(plan.cases), first,
                                                        tuple(made.example_inputs[first].shape)))
        step("done")
        import torch
        build_torch = torch.__version__.split("+")[0]
        verdict = verify.judge("traced graph", got, want, plan, made.output_names, model.tolerance,
                               model_reference=True)
        if not verdict.ok:
            raise BuildError(f"model {model.name}: the TorchScript trace gives other answers than eager PyTorch "
                             f"(torch {build_torch}, CPU): it {verdict.problems[0]}; a data-dependent branch was "
                             f"frozen by tracing: make forward() branch-free, or serve it with backend: onnxruntime")
        parity = {"max_abs_error": verdict.max_abs_error, "max_rel_error": verdict.max_rel_error,
                  "atol": model.tolerance.atol, "rtol": model.tolerance.rtol}
        serving = {"ran": False, "triton_version": serving_runtime.triton_version, "runtime": "torch",
                   "version": serving_runtime.torch_release, "device_agnostic": True, "traced_with": build_torch,
                   "why": f"opt-in (tritonsm build --check-serving-torch): the registry's torch "
                          f"{serving_runtime.torch_release} for Linux is a multi-GB CUDA build",
                   "cases": len(plan.cases)}
        if args.serving_torch:
            serving = _serving_torch(model, made, plan, want, out_dir, serving_runtime, args.serving_torch)
    except BuildError as exc:
        print(MARKER + str(exc).replace("\n", " "), file=sys.stderr)
        return FAILED
    (out_dir / "parity.json").write_text(json.dumps({"parity": parity, "verification": serving}))
    return 0


class _Steps:
    """One line per step, with the time the previous one took: a large model spends minutes here."""

    def __init__(self, name: str) -> None:
        import time

        self.name, self.clock, self.started, self.what = name, time.monotonic, time.monotonic(), ""

    def __call__(self, what: str) -> None:
        now = self.clock()
        if self.what:
            print(f"  {self.name}: {self.what} took {now - self.started:.1f} s", flush=True)
        if what != "done":
            print(f"  {self.name}: {what} ...", flush=True)
        self.started, self.what = now, what


def _serving_torch(model, made, plan, want, out_dir: pathlib.Path, serving_runtime, version: str) -> dict:
    from model_build.errors import BuildError
    from model_build.verification import side_env, verify

    env = side_env.ensure("torch", version, lambda line: print(line, flush=True))
    candidate = verify.Candidate("traced graph", out_dir / "model.pt")
    got = verify.run_candidates(env, "torchscript", [candidate], plan, made.input_names, made.output_names, out_dir)
    verdict = verify.judge(candidate.label, got[candidate.label], want, plan, made.output_names, model.tolerance,
                           model_reference=True)
    if not verdict.ok:
        raise BuildError(f"model {model.name}: model.pt is wrong in torch {version} (nearest the libtorch "
                         f"{serving_runtime.pytorch} of Triton {serving_runtime.triton_version}), CPU: it "
                         f"{verdict.problems[0]}; serve it with backend: onnxruntime or pick another triton_version")
    print(f"  {model.name}: verified in torch {version} (CPU): max abs error {verdict.max_abs_error:.2e}", flush=True)
    return verify.record(serving_runtime, "torch", version, "cpu", verdict, [verdict], len(plan.cases))


class _Positional:
    """Calls a traced module (positional tensors) the way eager recipes are called (keywords)."""

    def __init__(self, traced, names) -> None:
        self.traced, self.names = traced, tuple(names)

    def __call__(self, **inputs):
        return self.traced(*[inputs[n] for n in self.names])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
