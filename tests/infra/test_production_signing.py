"""One rule for an environment marked ``production: true`` whose spec names neither ``signing.public_key`` nor
``signing.unsigned_reason`` (deployment_spec.rules.cross_section.production_signing): `tritonsm validate` and
`tritonsm verify --signatures` refuse it with the message synth refuses it with (tests/infra/test_model_signatures.py),
and pass the same spec once it gives the reason."""
from __future__ import annotations

import pathlib

from deployment_spec import load_spec
from fake_build import fake_build
from synth_helpers import ROOT
from tritonsm.cli import main

REASON = 'unsigned_reason: "a reference spec that builds on any fresh clone, where no team signing key exists"'
RULE = ("signing: got neither signing.public_key nor signing.unsigned_reason, with environment prod marked "
        "production: true; allowed: in a production environment, model tarballs signed by the team's key "
        "(signing.public_key), or unsigned ones with the reason in the spec (signing.unsigned_reason); fix: set "
        "signing.public_key and build with the key (tritonsm build --signing-key KEY), or give "
        "signing.unsigned_reason (docs/howto/signing.md)")


def _spec(folder: pathlib.Path, reason: bool) -> pathlib.Path:
    """triton.yaml (dev, staging, and prod marked production: true), with its reason or without a signing block."""
    text = (ROOT / "triton.yaml").read_text()
    block = f"signing:\n  {REASON}\n"
    assert block in text
    folder.mkdir(exist_ok=True)
    path = folder / "triton.yaml"
    path.write_text(text if reason else text.replace(block, ""))
    return path


def test_validate_refuses_an_unsigned_production_environment(tmp_path, capsys):
    spec = _spec(tmp_path, reason=False)
    assert main(["validate", "--spec", str(spec)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: {spec}: 1 problem\n  - {RULE}\n" and captured.out == ""


def test_validate_passes_it_with_the_reason(tmp_path, capsys):
    spec = _spec(tmp_path, reason=True)
    assert main(["validate", "--spec", str(spec)]) == 0
    assert capsys.readouterr().out.startswith(f"{spec}: valid (4 models, 2 endpoints, 3 environments")


def test_verify_signatures_refuses_the_production_environment_before_reading_a_tarball(tmp_path, capsys):
    spec = _spec(tmp_path, reason=False)
    manifest = fake_build(load_spec(spec), tmp_path / "assets")
    argv = ["verify", "--signatures", "--spec", str(spec), "--manifest", str(manifest)]
    assert main([*argv, "--environment", "prod"]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: {spec}: 1 problem\n  - {RULE}\n" and captured.out == ""
    # Outside production the unsigned tarballs are named, not refused (synth warns there).
    assert main([*argv, "--environment", "dev"]) == 0
    assert capsys.readouterr().out.endswith("verify --signatures: 3 tarball(s) of environment dev checked\n")


def test_verify_signatures_passes_the_production_environment_with_the_reason(tmp_path, capsys):
    spec = _spec(tmp_path, reason=True)
    manifest = fake_build(load_spec(spec), tmp_path / "assets")
    assert main(["verify", "--signatures", "--spec", str(spec), "--manifest", str(manifest), "--environment",
                 "prod"]) == 0
    out = capsys.readouterr().out
    assert "not verified: " in out and " is unsigned (the spec has no signing.public_key; docs/howto/signing.md)" in out
    assert out.endswith("verify --signatures: 3 tarball(s) of environment prod checked\n")


def test_verify_signatures_names_an_unknown_environment(tmp_path, capsys):
    spec = _spec(tmp_path, reason=True)
    assert main(["verify", "--signatures", "--spec", str(spec), "--environment", "qa"]) == 2
    assert capsys.readouterr().err == ("error: --environment 'qa' is not in triton.yaml (environments: dev, staging, "
                                       "prod)\n")
