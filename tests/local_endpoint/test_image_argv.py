"""The command lines and mounts of `--image`, checked against the SageMaker container contract and Triton's own
SageMaker serve script (triton-inference-server/server docker/sagemaker/serve at r23.12 and r25.04; the copies
in local_endpoint/image/serve_scripts are run here with a stand-in `tritonserver` that prints its arguments)."""
from __future__ import annotations

import base64
import hashlib
import os
import pathlib
import subprocess

import boto3
import pytest
from botocore.stub import Stubber

from deployment_spec.facts import images as registry
from deployment_spec.rules.container_env import container_environment
from deployment_spec.sections.endpoint import Container
from local_endpoint.errors import LocalEndpointError
from local_endpoint.image import docker_argv, images, registry_login, serve_script, shared_memory
from local_endpoint.image.endpoints import container_name
from local_endpoint.server import archive
from local_endpoint.server.serve_flags import MME, SME, sagemaker_server_launch
from tritonsm.commands import options as tritonsm_options
from image_fixtures import install_fake_docker

MODEL = pathlib.Path("/work/unpacked")


def spec(**overrides) -> docker_argv.ContainerSpec:
    fields = dict(name="tritonsm-ep-42-abcdef", image="nvcr.io/nvidia/tritonserver:25.09-py3", host_port=18080,
                  environment={"SAGEMAKER_TRITON_LOG_VERBOSE": "false", "SAGEMAKER_TRITON_PING_MODE": "ready"},
                  mounts=(docker_argv.Mount(MODEL, "/opt/ml/model"),), shm_bytes=128 << 20)
    return docker_argv.ContainerSpec(**{**fields, **overrides})


def test_a_single_model_container_runs_serve_on_8080_with_the_model_read_only_at_opt_ml_model():
    assert docker_argv.run_argv(spec()) == [
        "docker", "run", "--rm", "--name", "tritonsm-ep-42-abcdef", "--init", "--sig-proxy=true", "--gpus", "all",
        "--shm-size", "128m", "-p", "127.0.0.1:18080:8080",
        "-e", "SAGEMAKER_TRITON_LOG_VERBOSE=false", "-e", "SAGEMAKER_TRITON_PING_MODE=ready",
        "--mount", "type=bind,source=/work/unpacked,target=/opt/ml/model,readonly",
        "nvcr.io/nvidia/tritonserver:25.09-py3", "serve"]


def test_the_ngc_variant_mounts_the_releases_serve_script_over_usr_bin_serve():
    script = serve_script.script_for("25.09")
    argv = docker_argv.run_argv(spec(mounts=(docker_argv.Mount(MODEL, "/opt/ml/model"),
                                             docker_argv.Mount(script.path, serve_script.CONTAINER_PATH))))
    assert argv[-4:] == ["--mount", f"type=bind,source={script.path},target=/usr/bin/serve,readonly",
                         "nvcr.io/nvidia/tritonserver:25.09-py3", "serve"]
    assert os.access(script.path, os.X_OK)


def test_values_with_spaces_stay_one_argument_and_the_platform_adds_multi_model_mode():
    env = docker_argv.container_environment({"SAGEMAKER_TRITON_ADDITIONAL_ARGS": "--a=1 --b 2"}, multi_model=True)
    assert env == {"SAGEMAKER_MULTI_MODEL": "true", "SAGEMAKER_TRITON_ADDITIONAL_ARGS": "--a=1 --b 2"}
    argv = docker_argv.run_argv(spec(environment=env, mounts=(docker_argv.Mount(MODEL, "/opt/ml/models"),)))
    assert "SAGEMAKER_TRITON_ADDITIONAL_ARGS=--a=1 --b 2" in argv and "SAGEMAKER_MULTI_MODEL=true" in argv
    assert "type=bind,source=/work/unpacked,target=/opt/ml/models,readonly" in argv
    assert docker_argv.container_environment({"A": "1"}, multi_model=False) == {"A": "1"}


def test_stop_remove_pull_and_inspect_argv():
    assert docker_argv.stop_argv("c") == ["docker", "stop", "-t", "30", "c"]  # SageMaker's 30 s SIGTERM grace
    assert docker_argv.remove_argv("c") == ["docker", "rm", "--force", "c"]
    assert docker_argv.pull_argv("i") == ["docker", "pull", "i"]
    assert docker_argv.inspect_argv("i") == ["docker", "image", "inspect", "--format", "{{.Id}}", "i"]


def test_a_mount_source_with_a_comma_is_refused():
    with pytest.raises(ValueError, match="may not contain ','"):
        docker_argv.Mount(pathlib.Path("/a,b"), "/opt/ml/model").flags()


def test_container_names_are_ours_unique_and_in_dockers_alphabet():
    first, second = container_name("bert mme/v2"), container_name("bert mme/v2")
    assert first != second and first.startswith(f"tritonsm-bert-mme-v2-{os.getpid()}-")
    assert container_name("???").startswith("tritonsm-endpoint-")


@pytest.mark.parametrize("env, instances, mib", [
    ({}, 0, 64),                                            # no Python model: Docker's default
    ({}, 1, 64 + 16 + 16),                                  # the script's 16 MiB region + 16 growths of 1 MiB
    ({"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "33554432", "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE": "2097152"},
     3, 64 + 3 * (32 + 32)),
    ({"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "1000"}, 1, 81),  # rounded up to whole MiB
])
def test_the_shared_memory_rule(env, instances, mib):
    assert shared_memory.shm_size_bytes(env, instances) == mib << 20


def test_python_instances_count_groups_per_gpu(tarballs, tmp_path):
    # add: KIND_CPU x1; the ensemble's two Python steps: KIND_CPU x1 each; the ensemble itself is no Python model.
    assert shared_memory.python_instances([tarballs["add"]], gpu_count=4) == 1
    assert shared_memory.python_instances([tarballs["ensemble"]], gpu_count=4) == 2
    from triton_model_fixtures import ADD_CONFIG, ADD_MODEL, pack
    for name, group in (("gpu", "{ kind: KIND_GPU count: 2 }"), ("auto", "{ count: 1 }"),
                        ("listed", "{ kind: KIND_GPU count: 3 gpus: [ 0 ] }"), ("none", None)):
        model = tmp_path / name / name
        (model / "1").mkdir(parents=True)
        config = ADD_CONFIG.replace("instance_group [ { kind: KIND_CPU count: 1 } ]\n",
                                    f"instance_group [ {group} ]\n" if group else "")
        (model / "config.pbtxt").write_text(config)
        (model / "1" / "model.py").write_text(ADD_MODEL)
        pack(tmp_path / name, tmp_path / f"{name}.tar.gz")
    counts = {n: shared_memory.python_instances([tmp_path / f"{n}.tar.gz"], gpu_count=4)
              for n in ("gpu", "auto", "listed", "none")}
    assert counts == {"gpu": 8, "auto": 4, "listed": 3, "none": 4}


def test_every_sdk_release_has_its_serve_script_and_the_copies_are_the_upstream_files():
    assert sorted(r for s in serve_script.SCRIPTS for r in s.releases) == registry.versions()
    for script in serve_script.SCRIPTS:
        assert hashlib.sha256(script.path.read_bytes()).hexdigest() == script.sha256
        text = script.path.read_text()
        # The contract the mounts follow, in the script's own words.
        assert "SAGEMAKER_SINGLE_MODEL_REPO=/opt/ml/model/" in text and "/opt/ml/models/<hash>/model" in text
        assert 'if [ "$SAGEMAKER_MULTI_MODEL" == "true" ]; then' in text
        assert 'if [ -n "$SAGEMAKER_BIND_TO_PORT" ]; then' in text  # unset: tritonserver's SageMaker port, 8080
    assert serve_script.script_for("24.05").file == "serve.r23.12"
    assert serve_script.script_for("26.05").source("26.05") == (
        "https://github.com/triton-inference-server/server/blob/r26.05/docker/sagemaker/serve")


def test_a_changed_or_missing_serve_script_is_named(tmp_path, monkeypatch):
    with pytest.raises(LocalEndpointError) as caught:
        serve_script.script_for("22.05")
    assert str(caught.value) == (
        "no copy of Triton's SageMaker serve script for release 22.05 here (releases with one: 23.12, 24.01, 24.03, "
        "24.05, 24.09, 25.04, 25.09, 26.05); use --image sagemaker, or add the script of branch r22.05 to "
        "local_endpoint/image/serve_scripts/")
    (tmp_path / "serve.r25.04").write_text("#!/bin/bash\ntritonserver --evil\n")
    monkeypatch.setattr(serve_script, "_FOLDER", tmp_path)
    with pytest.raises(LocalEndpointError, match=r"serve.r25.04 has sha256 [0-9a-f]{64}, not 2033aa35.*restore it"):
        serve_script.script_for("25.09")


def _run_script(script: serve_script.ServeScript, root: pathlib.Path, env: dict[str, str]) -> list[str]:
    """The release's script with its two fixed folders moved under `root`, tritonserver printing its arguments."""
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "tritonserver").write_text(f'#!/bin/sh\nfor a in "$@"; do echo "$a"; done > {root}/arguments\n')
    (bin_dir / "nvidia-smi").write_text('#!/bin/sh\necho "GPU 0: A10G"\necho "GPU 1: A10G"\n')  # the instance's GPUs
    text = script.path.read_text().replace("=/opt/ml/model/", f"={root}/opt-ml-model/").replace(
        "/tmp/sagemaker", f"{root}/tmp-sagemaker")
    (root / "serve").write_text(text)
    for path in (bin_dir / "tritonserver", bin_dir / "nvidia-smi", root / "serve"):
        path.chmod(0o755)
    subprocess.run(["bash", str(root / "serve")], capture_output=True, check=True,
                   env={"PATH": f"{bin_dir}:/usr/bin:/bin", **env})
    return (root / "arguments").read_text().splitlines()


@pytest.mark.parametrize("release", ["24.09", "25.09"])
@pytest.mark.parametrize("mode", [SME, MME])
def test_the_containers_serve_script_starts_tritonserver_as_the_local_server_is_started(release, mode, tarballs,
                                                                                      tmp_path):
    """The spec's environment, handed to Triton's own script, gives the flags the local endpoint passes."""
    container = Container(thread_count=4, shm_default_bytes=33554432, shm_growth_bytes=2097152, log_verbose=False,
                          model_load_gpu_limit=0.5, additional_args=("--exit-timeout-secs=5",))
    env = docker_argv.container_environment(container_environment(container, multi_model=mode == MME),
                                            multi_model=mode == MME)
    archive.extract_tarball(tarballs["add"], tmp_path / "opt-ml-model")
    got = _run_script(serve_script.script_for(release), tmp_path, env)
    repository = f"{tmp_path}/opt-ml-model/" if mode == SME else f"{tmp_path}/tmp-sagemaker"
    want = sagemaker_server_launch(mode=mode, model_repository=repository, port=8080, env=env,
                                   default_model="add" if mode == SME else None, gpu_count=2).arguments
    # The local server names its port; in the container the script leaves tritonserver's default, 8080.
    assert sorted(got) == sorted(a for a in want if a != "--sagemaker-port=8080")


def test_the_ecr_login_uses_a_token_of_the_users_credentials_on_stdin(tmp_path, monkeypatch):
    docker = install_fake_docker(tmp_path)
    monkeypatch.setenv("PATH", docker.env()["PATH"])
    monkeypatch.setenv("FAKE_DOCKER_LOG", str(docker.log))
    client = boto3.client("ecr", region_name="eu-west-1", aws_access_key_id="k", aws_secret_access_key="s")
    token = base64.b64encode(b"AWS:secret-password").decode()
    with Stubber(client) as stubber:
        stubber.add_response("get_authorization_token", {"authorizationData": [{
            "authorizationToken": token, "proxyEndpoint": "https://111122223333.dkr.ecr.eu-west-1.amazonaws.com"}]},
            expected_params={})
        image = images.resolve(images.SAGEMAKER, "25.09", "eu-west-1")
        registry_login.docker_login(image.registry, image.region, client=client)
    assert image.uri == "763104351884.dkr.ecr.eu-west-1.amazonaws.com/sagemaker-tritonserver:25.09-py3"
    assert docker.calls()[0]["argv"] == ["login", "--username", "AWS", "--password-stdin",
                                         "763104351884.dkr.ecr.eu-west-1.amazonaws.com"]
    assert docker.calls()[0]["stdin"] == "secret-password"


def test_ecr_refusals_are_named():
    client = boto3.client("ecr", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s")
    with Stubber(client) as stubber:
        stubber.add_client_error("get_authorization_token", "AccessDeniedException", "not authorized")
        with pytest.raises(LocalEndpointError) as caught:
            registry_login.ecr_password("us-east-1", client)
    assert str(caught.value).startswith("ECR refused an authorization token in us-east-1 (An error occurred "
                                        "(AccessDeniedException)")
    assert str(caught.value).endswith("the credentials need ecr:GetAuthorizationToken, and ecr:BatchGetImage and "
                                      "ecr:GetDownloadUrlForLayer on the sagemaker-tritonserver repository; or use "
                                      "--image ngc")


@pytest.mark.parametrize("kind, release, region, message", [
    ("sagemaker", "25.09", "cn-north-1",
     "sagemaker-tritonserver 25.09 is not published in cn-north-1 (regions: af-south-1, ap-east-1, ap-east-2, "
     "ap-northeast-1, ap-northeast-2, ap-northeast-3, ap-south-1, ap-south-2, ap-southeast-1, ap-southeast-2, "
     "ap-southeast-3, ap-southeast-4, ap-southeast-5, ap-southeast-6, ap-southeast-7, ca-central-1, ca-west-1, "
     "eu-central-1, eu-central-2, eu-north-1, eu-south-1, eu-south-2, eu-west-1, eu-west-2, eu-west-3, "
     "il-central-1, me-central-1, me-south-1, mx-central-1, sa-east-1, us-east-1, us-east-2, us-west-1, "
     "us-west-2); give --region one of those, or use --image ngc"),
    ("sagemaker", "22.05", "us-east-1",
     "sagemaker-tritonserver 22.05 is not in the SageMaker SDK's registry (versions: 23.12, 24.01, 24.03, 24.05, "
     "24.09, 25.04, 25.09, 26.05); use --image ngc"),
    ("docker-hub", "25.09", "us-east-1", "--image 'docker-hub' is not an image kind; use one of sagemaker, ngc"),
])
def test_an_image_that_does_not_exist_is_named(kind, release, region, message):
    with pytest.raises(LocalEndpointError) as caught:
        images.resolve(kind, release, region)
    assert str(caught.value) == message


def test_the_ngc_image_is_the_same_release_and_needs_no_login():
    image = images.resolve(images.NGC, "24.09", None)
    assert (image.uri, image.registry, image.serve.file) == ("nvcr.io/nvidia/tritonserver:24.09-py3", None,
                                                             "serve.r23.12")


def test_the_command_line_knows_the_same_image_kinds():
    assert (tritonsm_options.SAGEMAKER, tritonsm_options.IMAGE_KINDS) == (images.SAGEMAKER, images.CHOICES)
