"""The manifest's verification and execution-environment records are typed (schema 3); a schema 2
manifest (``serving_check``, ``python_env`` dicts) is refused with the command that rewrites it."""
import json

import pytest

from deployment_spec.builds.manifest import (ExecutionEnvironment, Manifest, ManifestError, ModelEntry, TensorSpec,
                                      Verification, load_manifest)
from model_build.verification.record import not_run, typed

ENTRY = ModelEntry("m", "m", "onnxruntime", 4, (TensorSpec("x", "TYPE_FP32", (4,)),),
                   (TensorSpec("y", "TYPE_FP32", (2,)),), "h" * 64)


def test_a_backend_record_keeps_its_shared_fields_typed_and_the_rest_as_details():
    record = {"ran": True, "triton_version": "25.09", "runtime": "onnxruntime", "version": "1.23.0", "device": "cpu",
              "cases": 9, "graph": "transformer-fused graph", "max_abs_error": 5e-7, "max_rel_error": 1e-6,
              "invariance_error": 0.0, "rejected": {"graph as exported": "differs"},
              "int8": {"shipped": False, "refused": "below the bound"}}
    assert typed(record) == Verification(True, "25.09", None, "onnxruntime", "1.23.0", "cpu", 9,
                                          "transformer-fused graph", 5e-7, 1e-6, 0.0, {"graph as exported": "differs"},
                                          {"int8": {"shipped": False, "refused": "below the bound"}})


def test_typed_records_survive_the_manifest_file(tmp_path):
    env = ExecutionEnvironment("python-env-1.tar.gz", "image", "3.12", "Triton 25.09 image", 10, 20,
                               ("numpy==1.26.4",))
    entry = ModelEntry(**{**ENTRY.__dict__, "verification": typed({"ran": True, "cases": 3, "placement": "gpu"}),
                          "execution_environment": env})
    ensemble = ModelEntry(**{**ENTRY.__dict__, "name": "e", "verification": not_run("25.09", "no file of its own")})
    path = tmp_path / "manifest.json"
    path.write_text(Manifest("25.09", {"m": entry, "e": ensemble}, {}).to_json())
    loaded = load_manifest(path)
    assert loaded.models["m"] == entry and loaded.models["e"] == ensemble
    assert json.loads(path.read_text())["models"]["m"]["verification"]["details"] == {"placement": "gpu"}


def test_a_schema_2_manifest_is_refused_with_the_rebuild_command(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"schema": 2, "triton_version": "25.09", "models": {}, "endpoints": {}}))
    with pytest.raises(ManifestError) as caught:
        load_manifest(path)
    assert str(caught.value) == f"{path}: manifest schema 2, this tool reads 3; run `tritonsm build` to rewrite it"
