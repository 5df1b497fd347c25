"""A user's model file, run where it will be served and compared with the same file elsewhere.

There is no PyTorch model to compare an ONNX or TorchScript file with, so the reference is the
file itself in another runtime release: the same inputs through the image's runtime and through
this machine's, within the model's tolerance (Polygraphy's way of comparing runtimes,
``polygraphy run --onnxrt`` against another backend). The inputs are verification/cases.py's: batch 1,
the preferred batch sizes and ``max_batch_size``, full and short lengths where a dimension is
variable, and for an ``attention_mask`` input the masked-token and padded-vs-unpadded invariance
checks the recipes get. Every output is also checked against its declared type and dims, which
Triton enforces at run time.

Each backend runs its own file kind (model_build/backends/onnxruntime/given_file.py,
model_build/backends/pytorch/given_file.py); what they share is here.

* ONNX: the image's ONNX Runtime (side environment) against this machine's (the build's venv),
  both run by verification/worker.py in a child process. A file the image's release cannot load or
  run is refused with that release's reason.
* TorchScript: this machine's torch, on every case, for the invariances and the declared outputs;
  with ``tritonsm build --check-serving-torch`` also the torch release nearest the image's
  libtorch, compared with this machine's (the registry's Linux torch is a multi-GB CUDA build).
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import pathlib
from typing import Any, Optional, Sequence

from deployment_spec.builds.manifest import TensorSpec
from deployment_spec.sections.model import ModelSpec
from model_build.errors import BuildError
from model_build.recipes.contract import ExportableModel
from model_build.verification import cases, side_env, verify

DEVICE = "cpu"
LABEL = "file as given"



def this_machines(package: str) -> side_env.SideEnv:
    """The build's own release of ``package``, run by the same worker as the side environments."""
    found = importlib.util.find_spec(package)
    site = pathlib.Path(found.origin).resolve().parent.parent
    return side_env.SideEnv(package, importlib.metadata.version(package).split("+")[0], site)


def parity(model: ModelSpec, serving: dict[str, Any]) -> Optional[dict[str, float]]:
    """The manifest's parity record: the file in the serving runtime against this machine's, when both ran."""
    if "reference" not in serving:
        return None
    return {"max_abs_error": serving["max_abs_error"], "max_rel_error": serving["max_rel_error"],
            "atol": model.tolerance.atol, "rtol": model.tolerance.rtol}


def run_in(model: ModelSpec, env: side_env.SideEnv, runtime: str, kind: str, made: ExportableModel, plan: cases.Plan,
         target: pathlib.Path, user_file: pathlib.Path, scratch: pathlib.Path, level: str, fix: str) -> dict:
    """Outputs per case in one runtime; a BuildError naming the file, the runtime, the case and the error."""
    candidate = verify.Candidate(LABEL, target)
    got = verify.run_candidates(env, kind, [candidate], plan, made.input_names, made.output_names, scratch,
                                graph_level=level)[LABEL]
    if isinstance(got, str):
        error = got.replace(str(target), str(user_file))
        raise BuildError(f"models.{model.name}.source.{'onnx' if kind == 'onnx' else 'torchscript'}: {user_file} does "
                         f"not run in {runtime}: {error}; {fix}")
    return got


def check_declared(model: ModelSpec, outputs: Sequence[TensorSpec], made: ExportableModel, got: dict,
                    plan: cases.Plan, user_file: pathlib.Path, runtime: str) -> None:
    """Each output has the declared data type and dims on every case: Triton refuses other ones at run time."""
    from model_build.tensor_types import TORCH_TO_TRITON

    declared = {t.name: (index, t) for index, t in enumerate(model.outputs)}
    kinds = {t.name: (t.data_type, t.dims) for t in outputs}
    for case in plan.cases:
        rows = int(next(iter(case.inputs.values())).shape[0])
        for name, array in zip(made.output_names, got[case.name]):
            data_type, dims = kinds[name]
            want = ([rows] if model.max_batch_size > 0 else []) + list(dims)
            have_type = TORCH_TO_TRITON.get(str(array.dtype), str(array.dtype))
            fits = len(array.shape) == len(want) and all(w == -1 or w == s for w, s in zip(want, array.shape))
            if have_type == data_type and fits:
                continue
            field = (f"models.{model.name}.outputs[{declared[name][0]}]" if name in declared
                     else f"{user_file.name}'s output")
            shape = list(array.shape[1:] if model.max_batch_size > 0 else array.shape)
            raise BuildError(f"{field} {name} is declared {data_type} with dims {list(dims)}, but {user_file} returns "
                             f"{have_type} of shape {list(array.shape)} on case {case.name} in {runtime}; declare "
                             f"data_type {have_type} and dims {shape} (-1 where the size varies)")
