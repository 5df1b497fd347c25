"""The tritonserver command line matches the SageMaker container's serve script."""

from __future__ import annotations

import pytest

from local_endpoint.errors import EnvironmentVariableError
from local_endpoint.server.serve_flags import (
    MME,
    SME,
    effective_ping_mode,
    sagemaker_server_launch,
    validate_environment,
)


def launch(mode: str = SME, env: dict[str, str] | None = None, **kwargs):
    return sagemaker_server_launch(
        mode=mode, model_repository="/repo", port=8080, env=env or {},
        default_model="pipeline" if mode == SME else None, **kwargs,
    )


def test_sme_without_environment_uses_the_scripts_defaults() -> None:
    # Front end only, explicit model control, the default model loaded, and the
    # script's own defaults: verbose logs and 16 MB / 1 MB Python-backend SHM.
    assert launch().arguments == (
        "--allow-sagemaker=true",
        "--allow-grpc=false",
        "--allow-http=false",
        "--allow-metrics=false",
        "--model-control-mode=explicit",
        "--model-repository=/repo",
        "--model-namespacing=true",
        "--sagemaker-port=8080",
        "--log-verbose=true",
        "--backend-config=python,shm-default-byte-size=16777216",
        "--backend-config=python,shm-growth-byte-size=1048576",
        "--load-model=pipeline",
    )


def test_sme_routes_invocations_through_the_default_model_variable() -> None:
    # tritonserver reads the model /invocations serves from its environment.
    assert launch().environment["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"] == "pipeline"


@pytest.mark.parametrize(
    ("variable", "value", "flag"),
    [
        ("SAGEMAKER_TRITON_THREAD_COUNT", "16", "--sagemaker-thread-count=16"),
        ("SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT", "4", "--buffer-manager-thread-count=4"),
        ("SAGEMAKER_TRITON_LOG_VERBOSE", "0", "--log-verbose=0"),
        ("SAGEMAKER_TRITON_LOG_INFO", "false", "--log-info=false"),
        ("SAGEMAKER_TRITON_LOG_WARNING", "false", "--log-warning=false"),
        ("SAGEMAKER_TRITON_LOG_ERROR", "true", "--log-error=true"),
        ("SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE", "33554432", "--backend-config=python,shm-default-byte-size=33554432"),
        ("SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE", "2097152", "--backend-config=python,shm-growth-byte-size=2097152"),
        ("SAGEMAKER_TRITON_DISABLE_MODEL_NAMESPACING", "false", "--model-namespacing=false"),
        ("SAGEMAKER_SAFE_PORT_RANGE", "8000-9000", "--sagemaker-safe-port-range=8000-9000"),
        ("SAGEMAKER_TRITON_ALLOW_METRICS", "true", "--allow-metrics=true"),
        ("SAGEMAKER_TRITON_TENSORFLOW_VERSION", "2", "--backend-config=tensorflow,version=2"),
    ],
)
def test_each_container_variable_becomes_its_flag(variable: str, value: str, flag: str) -> None:
    # One flag per variable, spelled as the serve script spells it.
    assert flag in launch(env={variable: value}).arguments


def test_default_shm_flags_give_way_to_the_variables() -> None:
    # A set variable replaces the default rather than adding a second flag.
    arguments = launch(env={"SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": "33554432"}).arguments
    assert [a for a in arguments if "shm-default-byte-size" in a] == [
        "--backend-config=python,shm-default-byte-size=33554432"
    ]


def test_additional_args_are_appended_word_by_word() -> None:
    # The script expands the variable unquoted, so it splits on whitespace.
    arguments = launch(env={"SAGEMAKER_TRITON_ADDITIONAL_ARGS": "--cache-config local,size=1048576  --exit-timeout-secs=5"}).arguments
    assert arguments[-3:] == ("--cache-config", "local,size=1048576", "--exit-timeout-secs=5")


def test_gpu_load_limit_adds_one_flag_per_gpu() -> None:
    # One --model-load-gpu-limit per GPU the script counts with nvidia-smi -L.
    arguments = launch(env={"SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT": "0.8"}, gpu_count=2).arguments
    assert arguments[-5:-1] == ("--model-load-gpu-limit", "0:0.8", "--model-load-gpu-limit", "1:0.8")
    assert "--model-load-gpu-limit" not in launch(env={"SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT": "0.8"}).arguments


def test_mme_starts_empty_and_ignores_the_default_model() -> None:
    # MME: no --load-model, SAGEMAKER_MULTI_MODEL set, default model name dropped.
    result = launch(MME, env={"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "x"})
    assert not any(a.startswith("--load-model") for a in result.arguments)
    assert result.environment["SAGEMAKER_MULTI_MODEL"] == "true"
    assert "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME" not in result.environment


def test_bind_to_port_is_replaced_by_the_chosen_port() -> None:
    # The local port wins over the platform's variable.
    result = launch(env={"SAGEMAKER_BIND_TO_PORT": "9999"})
    assert "--sagemaker-port=8080" in result.arguments
    assert "SAGEMAKER_BIND_TO_PORT" not in result.environment


@pytest.mark.parametrize(
    ("mode", "env", "expected"),
    [
        (SME, {}, None),
        (MME, {"SAGEMAKER_TRITON_OVERRIDE_PING_MODE": "live"}, None),
        (SME, {"SAGEMAKER_TRITON_PING_MODE": "anything"}, "ready"),
        (MME, {"SAGEMAKER_TRITON_PING_MODE": "anything"}, "live"),
        (SME, {"SAGEMAKER_TRITON_PING_MODE": "x", "SAGEMAKER_TRITON_OVERRIDE_PING_MODE": "live"}, "live"),
    ],
)
def test_ping_mode_reaches_the_server_only_when_already_in_the_environment(mode, env, expected) -> None:
    # The script never exports its computed ping mode (the Triton server's docker/sagemaker/serve script, r25.09).
    assert effective_ping_mode(mode, env) == expected
    assert launch(mode, env=env).environment.get("SAGEMAKER_TRITON_PING_MODE") == expected


def test_environment_errors_are_listed_at_once() -> None:
    with pytest.raises(EnvironmentVariableError) as caught:
        validate_environment({
            "SAGEMAKER_TRITON_SHM_DEFAULT_BYTESIZE": "1",
            "SAGEMAKER_TRITON_THREAD_COUNT": "many",
            "SAGEMAKER_TRITON_LOG_VERBOSE": "loud",
            "SAGEMAKER_TRITON_ALLOW_METRICS": "yes",
            "SAGEMAKER_TRITON_INFERENCE_TYPE": "stream",
            "1BAD": "x",
            "MODEL_SETTING": "kept",
        })
    assert str(caught.value) == (
        "invalid container environment:\n"
        "  '1BAD' is not a valid environment variable name; SageMaker allows [a-zA-Z_][a-zA-Z0-9_]*\n"
        "  SAGEMAKER_TRITON_ALLOW_METRICS='yes' must be one of true, false, 1, 0\n"
        "  SAGEMAKER_TRITON_INFERENCE_TYPE='stream' must be one of infer, generate, generate_stream\n"
        "  SAGEMAKER_TRITON_LOG_VERBOSE='loud' must be a verbosity level (0, 1, ...) or true/false\n"
        "  SAGEMAKER_TRITON_SHM_DEFAULT_BYTESIZE is not a variable the SageMaker Triton container reads, "
        "so it would be ignored; did you mean SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE?\n"
        "  SAGEMAKER_TRITON_THREAD_COUNT='many' must be a positive whole number (bytes or a count)"
    )
