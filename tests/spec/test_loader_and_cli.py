"""The loader on real files, the example specs, and the `tritonsm validate` command line."""
import pathlib
import subprocess
import sys

import pytest

from deployment_spec import EndpointKind, SpecError, load_spec

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def test_there_is_one_example_per_reference_scenario():
    # The five scenarios of the reference articles each have a spec; the ensemble one has two: a text
    # pipeline, and the article's own image pipeline (JPEG bytes -> DALI -> classifier); inference components
    # (the default spec's models on one endpoint) one more, asynchronous inference (large images) one more, a
    # candidate model as a shadow and an A/B variant one more.
    assert [p.name for p in EXAMPLES] == [
        "bert-classifier-candidate.yaml", "bert-large-tuned-sme.yaml", "ensemble-sme.yaml", "image-async-sme.yaml", "image-ensemble-sme.yaml", "inference-components.yaml",
        "onnx-vision-nlp-mme.yaml",
        "t5-python-mme.yaml", "t5-streaming-sme.yaml", "tensorrt-bert-mme.yaml"]


@pytest.mark.parametrize("path", [ROOT / "triton.yaml", *EXAMPLES], ids=lambda p: p.name)
def test_default_and_example_specs_are_valid_with_dev_staging_prod(path):
    spec = load_spec(path)
    # Every spec deploys to at least dev, staging and prod.
    assert {"dev", "staging", "prod"} <= set(spec.environments)


def test_example_scenarios_have_the_promised_shape():
    by_name = {p.stem: load_spec(p) for p in EXAMPLES}
    trt = by_name["tensorrt-bert-mme"]
    # TensorRT BERT: fp16 plan, N renamed copies on an MME.
    assert trt.models["bert"].triton_names() == ["bert-0", "bert-1", "bert-2", "bert-3"]
    assert trt.endpoints["bert-mme"].kind is EndpointKind.MULTI_MODEL
    ens = by_name["ensemble-sme"]
    # Ensemble SME: the ensemble brings its steps along.
    assert [m.name for m in ens.served_models(ens.endpoints["text-ensemble"])] == [
        "text-ensemble", "preprocess", "classifier"]


def test_environment_overrides_apply_only_to_their_environment():
    spec = load_spec(ROOT / "triton.yaml")
    # prod raises the MME's bounds; dev keeps the spec's values.
    assert spec.environments["prod"].endpoints["vision-nlp"].scaling.max_instances == 8
    assert spec.environments["dev"].endpoints["vision-nlp"].scaling.max_instances == 4


def test_invocations_target_is_rps_times_60_times_safety_factor():
    spec = load_spec(ROOT / "triton.yaml")
    # 40 RPS x 60 s x 0.5 safety factor.
    assert spec.endpoints["vision-nlp"].scaling.invocations_per_instance_target() == 1200.0


def test_missing_file(tmp_path):
    with pytest.raises(SpecError) as caught:
        load_spec(tmp_path / "absent.yaml")
    assert str(caught.value) == (
        f"{tmp_path / 'absent.yaml'}: 1 problem\n  - (file): got no such file; allowed: a path to an existing "
        "YAML spec; fix: pass --spec PATH or create triton.yaml")


def test_yaml_syntax_error_names_line_and_column(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("models:\n  bert: {backend: onnxruntime\nendpoints: {}\n")
    with pytest.raises(SpecError) as caught:
        load_spec(bad)
    assert str(caught.value) == (
        f"{bad}: 1 problem\n  - (file): got invalid YAML at line 3, column 10 (expected ',' or '}}', but got ':'); "
        "allowed: a YAML document; fix: fix the syntax at that position")


def test_top_level_not_a_mapping(tmp_path):
    bad = tmp_path / "list.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(SpecError) as caught:
        load_spec(bad)
    assert str(caught.value) == (
        f"{bad}: 1 problem\n  - (top level): got a list; allowed: a mapping with project, triton_version, models, "
        "endpoints, environments, pipeline, signing; fix: start from examples/ or the README")


def _cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "tritonsm", *args], cwd=cwd, capture_output=True, text=True)


def test_cli_validate_ok():
    done = _cli("validate")
    assert done.returncode == 0
    assert done.stdout == ("triton.yaml: valid (4 models, 2 endpoints, 3 environments: dev, staging, prod; "
                           "Triton 25.09)\n")


def test_cli_validate_notes_a_weights_folder_the_build_will_not_find(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("project: P\ntriton_version: '25.09'\nmodels:\n  cls: {backend: onnxruntime, source: {recipe: "
                    "hf-sequence-classification}, weights: ckpt}\nendpoints:\n  ep: {kind: single-model, models: "
                    "[cls], instance_type: ml.g5.xlarge}\nenvironments:\n  dev: {region: us-east-1}\n")
    done = _cli("validate", "--spec", str(spec))
    assert done.returncode == 0  # synth reads built assets, not the weights: the spec itself is valid
    assert done.stdout.splitlines()[1] == (f"note: models.cls.weights: {tmp_path.resolve() / 'ckpt'} does not exist; "
                                           "tritonsm build needs it for this model")
    (tmp_path / "ckpt").mkdir()
    assert "note:" not in _cli("validate", "--spec", str(spec)).stdout


def test_cli_validate_bad_spec_exits_2_without_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "triton.yaml").read_text().replace("max_batch_size: 16", "max_batch_sise: 16", 1))
    done = _cli("validate", "--spec", str(bad))
    # Exit code 2, the problem list on stderr, no Python traceback.
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"error: {bad}: 1 problem\n  - models.bert.max_batch_sise: got unknown key")


@pytest.mark.parametrize("command", ["validate", "build"])
def test_cli_subcommands_have_help(command):
    done = _cli(command, "--help")
    assert done.returncode == 0 and "--spec" in done.stdout


def test_a_file_that_is_not_text(tmp_path):
    binary = tmp_path / "model.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(SpecError) as caught:
        load_spec(binary)
    assert str(caught.value) == (
        f"{binary}: 1 problem\n  - (file): got a file that is not UTF-8 text; allowed: a YAML text file; "
        "fix: pass the path of the spec (.yaml)")
