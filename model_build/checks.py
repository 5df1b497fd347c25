"""Repository checks run before anything is packed; each failure says what is wrong and the fix."""
from __future__ import annotations

import pathlib
from typing import Iterable, Sequence

from deployment_spec.builds.manifest import TensorSpec
from model_build import layout, model_config
from model_build.errors import BuildError

MODEL_FILES = {"onnxruntime_onnx": "model.onnx", "tensorrt_plan": "model.plan", "pytorch_libtorch": "model.pt"}
BACKEND_FILES = {"python": "model.py", "dali": "model.dali"}


def check_model_dir(model_dir: pathlib.Path) -> None:
    """Layout and config of one model directory, as Triton will judge them at load time."""
    name = model_dir.name
    config_path = model_dir / layout.CONFIG
    if not config_path.is_file():
        raise BuildError(f"model directory {name}/ has no {layout.CONFIG}; every Triton model needs one")
    config = model_config.parse(config_path.read_text(), f"{name}/{layout.CONFIG}")
    if config.name and config.name != name:
        raise BuildError(f"model directory {name}/: config.pbtxt names the model {config.name!r}; Triton refuses "
                         f"a name that differs from its directory, set name: \"{name}\" or rename the directory")
    versions = [p for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit() and not p.name.startswith("0")]
    if not versions:
        raise BuildError(f"model directory {name}/ has no version directory (e.g. {name}/1/); Triton loads only "
                         "numeric version subdirectories, so the model would have no version to serve")
    wanted = BACKEND_FILES.get(config.backend) or MODEL_FILES.get(config.platform)
    for vdir in versions:
        if wanted and not (vdir / wanted).exists():
            raise BuildError(f"model directory {name}/{vdir.name}/ has no {wanted}, which "
                             f"{config.platform or config.backend} loads")
    _check_dims(name, config)


def _check_dims(name: str, config) -> None:
    for tensor in list(config.input) + list(config.output):
        if not tensor.dims and config.max_batch_size == 0:
            raise BuildError(f"model {name}: tensor {tensor.name} has no dims while max_batch_size is 0; without "
                             "batching the dims are the full shape, give at least one dimension")
        if not tensor.dims:  # also with batching: Triton's core refuses it at load ("must specify 'dims'")
            raise BuildError(f"model {name}: tensor {tensor.name} has no dims; Triton refuses to load a tensor "
                             "without dims: for one value per batch row write dims: [ 1 ] with reshape: "
                             "{ shape: [ ] }")
        if any(d < -1 or d == 0 for d in tensor.dims):
            raise BuildError(f"model {name}: tensor {tensor.name} has dims {list(tensor.dims)}; use positive sizes "
                             "or -1 for a variable size")


def check_onnx_matches_config(name: str, config_inputs: Sequence[TensorSpec], onnx_inputs: Sequence[TensorSpec]) -> None:
    """The config's inputs must be the graph's inputs: same names, types and dims (batch axis excluded)."""
    have = {t.name: t for t in onnx_inputs}
    want = {t.name: t for t in config_inputs}
    missing, extra = sorted(set(have) - set(want)), sorted(set(want) - set(have))
    if missing or extra:
        raise BuildError(f"model {name}: config.pbtxt inputs {sorted(want)} do not match the ONNX graph inputs "
                         f"{sorted(have)} (not in config: {missing or 'none'}; not in graph: {extra or 'none'}); "
                         "regenerate the config from the graph")
    for key in sorted(want):
        c, g = want[key], have[key]
        if c.data_type != g.data_type:
            raise BuildError(f"model {name}: input {key} is {c.data_type} in config.pbtxt but {g.data_type} in the "
                             "ONNX graph; make them equal")
        if len(c.dims) != len(g.dims) or any(a != b and -1 not in (a, b) for a, b in zip(c.dims, g.dims)):
            raise BuildError(f"model {name}: input {key} has dims {list(c.dims)} in config.pbtxt but {list(g.dims)} "
                             "in the ONNX graph (batch axis excluded); make them agree")


def check_unique_names(endpoint: str, names: Iterable[str]) -> None:
    """Triton needs unique model names on one endpoint; an MME maps each tarball to one name."""
    seen: set[str] = set()
    dupes = []
    for name in names:
        if name in seen:
            dupes.append(name)
        seen.add(name)
    if dupes:
        raise BuildError(f"endpoint {endpoint}: model name(s) {', '.join(sorted(set(dupes)))} appear more than once; "
                         "Triton requires unique model names, rename one model or use copies (renamed <name>-<i>)")
