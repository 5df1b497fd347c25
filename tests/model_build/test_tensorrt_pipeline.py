"""The TensorRT path end to end on a CPU, with the GPU machine's commands faked at the subprocess boundary."""
from __future__ import annotations

import pathlib
import subprocess

from deployment_spec import load_spec
from deployment_spec.builds.manifest import load_manifest
from model_build import build, model_config
from model_build.backends.tensorrt import gpu, runner

from mb_support import TINY_SPEC


def test_plan_build_runs_probe_trtexec_and_plan_version_in_the_triton_tag_image(tmp_path, monkeypatch):
    commands: list[list[str]] = []
    real_run = subprocess.run

    def fake_run(cmd, *args, **kwargs):
        if cmd[0] != "docker":  # other tools (e.g. the exporter's probes) run for real
            return real_run(cmd, *args, **kwargs)
        commands.append(cmd)
        if "--saveEngine=/workspace/model.plan" in cmd:
            workdir = cmd[cmd.index("-v", 6) + 1].split(":")[0]
            (pathlib.Path(workdir) / "model.plan").write_bytes(b"plan")
        out = "10.9.0.34\n" if "import tensorrt" in " ".join(cmd) else "[I] Plan was created with TensorRT 10.9.0.34\n"
        return subprocess.CompletedProcess(cmd, 0, out, "")

    monkeypatch.setattr(gpu, "detect", lambda: gpu.Toolchain(gpu.Gpu("NVIDIA A10G", "8.6"), True, False))
    monkeypatch.setattr(runner.subprocess, "run", fake_run)
    report = build.run(load_spec(TINY_SPEC), tmp_path / "assets", tmp_path / "work", requested=["plan"],
                       log=lambda line: None)
    assert report.exit_code() == 0, report.failed

    # Probe, build, then ask the plan which TensorRT made it; all in nvcr.io/nvidia/tensorrt:25.04-py3.
    assert [c[c.index("nvcr.io/nvidia/tensorrt:25.04-py3") + 1:] for c in commands] == [
        ["python3", "-c", "import tensorrt; print(tensorrt.__version__)"],
        ["/usr/src/tensorrt/bin/trtexec", "--onnx=/workspace/model.onnx", "--saveEngine=/workspace/model.plan",
         "--minShapes=input_ids:1x16,attention_mask:1x16", "--optShapes=input_ids:4x16,attention_mask:4x16",
         "--maxShapes=input_ids:8x16,attention_mask:8x16", "--memPoolSize=workspace:4096M",
         "--builderOptimizationLevel=3", "--timingCacheFile=/cache/timing-trt10.9.0.34-sm86.cache", "--fp16",
         "--skipInference"],
        ["/usr/src/tensorrt/bin/trtexec", "--loadEngine=/workspace/model.plan", "--getPlanVersionOnly"],
    ]
    manifest = load_manifest(tmp_path / "assets" / "manifest.json")
    facts = manifest.models["plan"].builder
    assert (facts.gpu_name, facts.gpu_compute_capability) == ("NVIDIA A10G", "8.6")
    assert facts.versions["tensorrt"] == facts.versions["tensorrt_plan"] == "10.9.0.34"
    assert [t.data_type for t in manifest.models["plan"].inputs] == ["TYPE_INT32", "TYPE_INT32"]
    assert [t.dims for t in manifest.models["plan"].inputs] == [(16,), (16,)]
    (artifact,) = manifest.endpoints["gpu-only"].artifacts
    assert artifact.models == ("plan",)
    config = next((tmp_path / "work" / "models").glob("plan-*/plan/config.pbtxt")).read_text()
    assert model_config.parse(config).platform == "tensorrt_plan"


def test_plan_for_another_gpu_architecture_is_not_built_here(tmp_path, monkeypatch):
    # The endpoint runs on ml.g5 (A10G, 8.6); a T4 (7.5) here cannot build its plan.
    monkeypatch.setattr(gpu, "detect", lambda: gpu.Toolchain(gpu.Gpu("Tesla T4", "7.5"), True, False))
    report = build.run(load_spec(TINY_SPEC), tmp_path / "assets", tmp_path / "work", requested=["plan"],
                       log=lambda line: None)
    assert report.unavailable == {"plan": "model plan: endpoint gpu-only runs on ml.g5.xlarge (compute capability "
                                          "8.6) but this machine's GPU has 7.5; a TensorRT plan only loads on the "
                                          "architecture it was built on, build it on a 8.6 GPU"}
    assert report.exit_code() == 1
