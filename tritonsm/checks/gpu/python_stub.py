"""A Python-backend model served by the real Triton Python stub built for the image's Python, on the GPU.

The nvidia-pytriton wheel ships `triton_python_backend_stub` for CPython 3.8 to 3.13
(`python_backend_stubs/<X.Y>/`); its server has CUDA (it bundles libcudart). Here the stub of the image's
Python (`deployment_spec.facts.serving_runtimes`: 3.12 from 25.04) runs the model unchanged, inside the
execution environment the archive ships, with the container environment the endpoint gets and the
host's GPUs visible, so KIND_GPU instances load on them. The environment is used as shipped when this
host's interpreter at its `bin/python3` target (the image's /usr/bin/python3) is that CPython; otherwise it
is unpacked into the model folder with `bin/python3` pointed at another CPython of the same release and
`EXECUTION_ENV_PATH` at that folder (the Python backend takes unpacked environments: python_backend
README.md, "Using Custom Python Execution Environments", r24.10, the release of the wheel's server); its
packages are the shipped ones either way, and the report says which. One smoke request then goes through
the SageMaker front end and its answer is checked as `tritonsm smoke` checks one.
"""
from __future__ import annotations

import pathlib
import tarfile

from tritonsm.checks import smoke_requests as smoke
from tritonsm.checks.gpu import interpreters
from tritonsm.checks.gpu.inputs import model_folder
from tritonsm.checks.gpu.report import FAILED, NOT_RUN, PASSED
from local_endpoint.client.invoke import invoke_url
from local_endpoint.client.payload import encode_request
from local_endpoint.errors import InvokeError, LocalEndpointError, ServerStartError
from local_endpoint.server import python_envs
from local_endpoint.server.ports import free_port
from local_endpoint.server.serve_flags import SME, sagemaker_server_launch
from local_endpoint.server.server_process import TritonProcess
from local_endpoint.server.triton_install import (StubPython, find_triton_install, prepare_backend_directory,
                                                  server_process_environment)

UNPACKED = "python-env-verify"


def what(python: str) -> str:
    return f"served by the Triton Python stub for CPython {python} in its shipped environment, GPUs visible"


def check(tarball: pathlib.Path, repository: pathlib.Path, case: smoke.SmokeCase, *, env: dict[str, str],
          python: str, gpu_count: int, work: pathlib.Path, timeout: float) -> tuple[str, str, dict]:
    facts: dict = {"stub python": python}
    try:
        install = find_triton_install()
    except LocalEndpointError as error:
        return NOT_RUN, str(error), facts
    if not install.stub_for(python).is_file():
        shipped = sorted(p.name for p in (install.root / "python_backend_stubs").iterdir())
        return NOT_RUN, f"nvidia-pytriton ships no stub for CPython {python} (it ships {', '.join(shipped)})", facts
    folder = model_folder(repository, case.model)
    shipped_envs = [(m, r) for m, r in python_envs.records(tarball)
                    if pathlib.PurePosixPath(m).parent.name in (case.model, "")]
    interpreter, how = _interpreter(folder, shipped_envs, python, facts)
    if interpreter is None:
        return NOT_RUN, how, facts
    facts.update(interpreter=interpreter.executable, environment=how, instance_kinds=_instance_kinds(folder))
    bin_dir = work / "python-bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "python3").symlink_to(interpreter.executable)
    backends = prepare_backend_directory(install, work / "backends", python)
    port, log = free_port(), work / "server.log"
    launch = sagemaker_server_launch(mode=SME, model_repository=str(repository), port=port, env=env,
                                     default_model=case.model, gpu_count=gpu_count)
    process = TritonProcess(install, [*launch.arguments, f"--backend-directory={backends}"],
                            server_process_environment(install, launch.environment,
                                                       StubPython(python, bin_dir, interpreter.libdir)), log)
    try:
        process.wait_until_ready(port, timeout)
        response = invoke_url(f"http://127.0.0.1:{port}", encode_request(case.tensors(), binary=True), timeout=timeout)
    except (ServerStartError, InvokeError) as error:
        return FAILED, str(error), facts
    finally:
        process.stop()
    facts["server log says"] = [line.strip() for line in log.read_text(errors="replace").splitlines()
                                if "Using Python execution env" in line][:1]
    problems = smoke.check(case, response).problems
    if problems:
        return FAILED, "; ".join(problems), facts
    return PASSED, (f"answered {', '.join(t.name for t in response.outputs)} as the manifest records them (stub "
                    f"CPython {python}, {interpreter.executable}, environment {how}, instances "
                    f"{', '.join(facts['instance_kinds']) or 'default'})"), facts


def _interpreter(folder: pathlib.Path, shipped_envs: list, python: str, facts: dict):
    """The CPython to run, and how the environment is used (or None and why not)."""
    if not shipped_envs:
        found, tried = interpreters.find(python, need_numpy=True)
        if found is None:
            return None, (f"no CPython {python} with a shared libpython and numpy here (the image's Python; tried: "
                          f"{'; '.join(tried) or 'none found'}); install one, e.g. python{python} with numpy")
        return found, "none (the image's own Python packages; here those of " + found.executable + ")"
    member, record = shipped_envs[0]
    target = record["target"]
    facts["environment target"] = {k: target[k] for k in ("python", "interpreter", "label") if k in target}
    if target["python"] != python:
        return None, (f"{member} was built for CPython {target['python']}, not the image's {python}; "
                      "rebuild it (tritonsm build)")
    as_built = interpreters.probe(target["interpreter"])
    if as_built and as_built.version == python and as_built.shared:
        return as_built, f"{member} as shipped"
    found, tried = interpreters.find(python)
    if found is None:
        return None, (f"{member} runs {target['interpreter']} (the image's CPython {python}), which is not CPython "
                      f"{python} with a shared libpython here, and no other is (tried: {'; '.join(tried) or 'none'}); "
                      f"install CPython {python} with its shared library")
    _unpack_pointing_at(folder, folder / pathlib.PurePosixPath(member).name, found)
    return found, (f"{member} unpacked into {UNPACKED}/ with bin/python3 pointing at {found.executable} instead of "
                   f"{target['interpreter']} (packages as shipped)")


def _unpack_pointing_at(folder: pathlib.Path, archive: pathlib.Path, interpreter: interpreters.Interpreter) -> None:
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    unpacked = folder / UNPACKED
    with tarfile.open(archive, "r:gz") as env:
        env.extractall(unpacked, filter="tar")  # our own build's archive; bin/python3 is an absolute link by design
    link = unpacked / "bin" / "python3"
    link.unlink()
    link.symlink_to(interpreter.executable)
    (unpacked / "pyvenv.cfg").write_text(f"home = {pathlib.Path(interpreter.executable).parent}\n"
                                         f"include-system-site-packages = false\nversion = {interpreter.version}\n")
    config_file = folder / "config.pbtxt"
    config = text_format.Parse(config_file.read_text(), model_config_pb2.ModelConfig())
    config.parameters["EXECUTION_ENV_PATH"].string_value = f"$$TRITON_MODEL_DIRECTORY/{UNPACKED}"
    config_file.write_text(text_format.MessageToString(config))
    archive.unlink()  # the folder stands in for it; no second copy on disk


def _instance_kinds(folder: pathlib.Path) -> list[str]:
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    config = text_format.Parse((folder / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
    names = model_config_pb2.ModelInstanceGroup.Kind.Name
    return [f"{names(g.kind)} x{g.count or 1}" for g in config.instance_group]
