"""`tritonsm build` from the command line: arguments, exit codes, messages without tracebacks."""
from __future__ import annotations

import subprocess
import sys

from tritonsm.cli import main

from mb_support import HERE, TINY_SPEC, skip_on_a_plan_building_host

ROOT = HERE.parents[1]


def test_unknown_model_is_a_user_error_exit_2(tmp_path, capsys):
    code = main(["build", "--spec", str(TINY_SPEC), "--model", "visoin", "--out", str(tmp_path / "a"),
                 "--work-dir", str(tmp_path / "w")])
    assert code == 2
    assert capsys.readouterr().err == ("error: --model visoin: not in tiny.yaml (models: vision, classifier, "
                                       "preprocess, text, traced, plan)\n")


def test_bad_spec_is_reported_without_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [\n")
    assert main(["build", "--spec", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}: 1 problem") and "Traceback" not in err


def test_requested_tensorrt_model_without_gpu_exits_1(tmp_path):
    skip_on_a_plan_building_host()
    # Explicitly asked for, but no GPU/Docker here: the reason is printed, exit code 1.
    proc = subprocess.run([sys.executable, "-m", "tritonsm", "build", "--spec", str(TINY_SPEC), "--model", "plan",
                           "--out", str(tmp_path / "a"), "--work-dir", str(tmp_path / "w")],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1, proc.stderr
    assert "not built here: model plan: a TensorRT plan needs an NVIDIA GPU and a Docker engine" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_build_help_loads_no_torch():
    # Argument parsing must stay light: heavy imports happen inside the build only.
    code = "from tritonsm.cli import build_parser; build_parser().parse_args(['build', '--help'])"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert "--model NAME" in proc.stdout
    check = ("import sys\nfrom tritonsm.cli import build_parser\n"
             "build_parser().parse_args(['build'])\nprint('torch' in sys.modules, 'onnx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, cwd=ROOT).stdout
    assert out.strip() == "False False"


def test_model_build_never_imports_aws_cdk():
    # The two halves meet only at the manifest (docs/concepts/layout.md: model_build never imports aws_cdk).
    import re
    pattern = re.compile(r"^\s*(import|from)\s+aws_cdk", re.MULTILINE)
    offenders = [p.relative_to(ROOT).as_posix() for p in (ROOT / "model_build").rglob("*.py")
                 if pattern.search(p.read_text())]
    assert offenders == []


def test_second_cli_build_of_unchanged_tiny_spec_builds_and_writes_nothing(tiny_build):
    skip_on_a_plan_building_host()  # the fixture built as without GPU; the subprocess would build the plan
    # Its speed is measured by benchmarks/build_memory.py, not asserted here.
    spec, out, work, _, _ = tiny_build
    proc = subprocess.run([sys.executable, "-m", "tritonsm", "build", "--spec", str(TINY_SPEC), "--out", str(out),
                           "--work-dir", str(work)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "0 built, 5 unchanged" in proc.stdout and "0 file(s) written" in proc.stdout


def test_require_all_fails_the_build_that_left_a_model_out(tiny_build, tmp_path, capsys):
    # The CI mode of a build stage that must produce every artifact; the cached models are reused.
    from deployment_spec.builds.manifest import load_manifest

    spec, _, work, _, _ = tiny_build
    skip_on_a_plan_building_host()
    out = tmp_path / "assets"
    code = main(["build", "--spec", str(TINY_SPEC), "--out", str(out), "--work-dir", str(work), "--require-all"])
    assert code == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "error: --require-all: 1 model(s) of tiny.yaml not built on this machine: plan; run the build on a GPU host "
        "with a Docker engine (docs/howto/unbuildable-models.md), or leave out --require-all "
        "to build the rest")
    # The manifest still describes what was built, and marks the model for another host.
    assert load_manifest(out / "manifest.json").unavailable_here == ("plan",)


def test_a_full_disk_while_packing_is_told_as_one_and_leaves_no_partial_archive(tiny_build, tmp_path, capsys,
                                                                                monkeypatch):
    # A full disk cannot be made on demand: the OS's answer is played where an archive's bytes are written.
    import errno
    import re

    from model_build import archive

    skip_on_a_plan_building_host()
    spec, _, work, _, _ = tiny_build
    out = tmp_path / "assets"

    def write_on_a_full_disk(path, *args, **kwargs):
        path.write_bytes(b"half an archive")
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(archive, "write_tarball", write_on_a_full_disk)
    assert main(["build", "--spec", str(TINY_SPEC), "--out", str(out), "--work-dir", str(work)]) == 1
    err = capsys.readouterr().err
    assert re.fullmatch(
        re.escape(f"error: no space left on the disk of {out} to build the models of tiny.yaml (No space left on "
                  "device; ") + r"[0-9.]+ (GiB|MiB|KiB)" + re.escape(
            " free there now); free space on that disk, or give --work-dir (the build cache) and --out folders on "
            "a larger one; the half-written files were removed, and the models already built are kept and not "
            "rebuilt\n"), err), err
    assert list(out.iterdir()) == []  # no partial archive, no manifest naming one
