"""Runs one TorchScript trace in a fresh process: ``python -m model_build.trace_worker SPEC MODEL OUT_DIR``.

Why a subprocess: TorchScript names classes ``___torch_mangle_<N>`` with a per-process counter,
so a second trace in the same process writes different bytes; a fresh process gives the same
model.pt for the same inputs. Writes OUT_DIR/model.pt and OUT_DIR/parity.json.
"""
from __future__ import annotations

import json
import pathlib
import sys

FAILED = 3
MARKER = "tritonsm-build-error: "


def main(argv: list[str]) -> int:
    from deployment_spec import load_spec
    from model_build import parity, torchscript
    from model_build.errors import BuildError
    from model_build.recipes import load_exportable

    spec_path, name, out = argv
    spec = load_spec(spec_path)
    model = spec.models[name]
    out_dir = pathlib.Path(out)
    try:
        made = load_exportable(model, spec.root)
        if made.note:
            print(f"  {name}: {made.note}", flush=True)
        traced = torchscript.trace(name, made, out_dir / "model.pt", model.max_batch_size)
        result = parity.check_traced(name, made, traced, model.tolerance)
    except BuildError as exc:
        print(MARKER + str(exc).replace("\n", " "), file=sys.stderr)
        return FAILED
    (out_dir / "parity.json").write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
