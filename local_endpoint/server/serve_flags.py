"""The tritonserver command line the SageMaker Triton container would run.

This mirrors the container's `serve` script (triton-inference-server/server
`docker/sagemaker/serve` in the Triton server repository, r25.09): fixed front-end flags, then one flag
per SAGEMAKER_TRITON_* variable that is set, with the script's defaults. Pure
functions, so every mapping is unit-tested without starting a server.
"""

from __future__ import annotations

import dataclasses
import difflib
import re

from local_endpoint.errors import EnvironmentVariableError

SME = "sme"
MME = "mme"

# The script's defaults differ from plain Triton's (1 MB default SHM).
DEFAULT_SHM_BYTE_SIZE = "16777216"
DEFAULT_SHM_GROWTH_BYTE_SIZE = "1048576"

# Variable -> flag, each passed as `<flag>=<value>` when the variable is set.
VALUE_FLAGS = {
    "SAGEMAKER_SAFE_PORT_RANGE": "--sagemaker-safe-port-range",
    "SAGEMAKER_TRITON_ALLOW_GRPC": "--allow-grpc",
    "SAGEMAKER_TRITON_GRPC_PORT": "--grpc-port",
    "SAGEMAKER_TRITON_ALLOW_METRICS": "--allow-metrics",
    "SAGEMAKER_TRITON_METRICS_PORT": "--metrics-port",
    "SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT": "--buffer-manager-thread-count",
    "SAGEMAKER_TRITON_THREAD_COUNT": "--sagemaker-thread-count",
    "SAGEMAKER_TRITON_LOG_INFO": "--log-info",
    "SAGEMAKER_TRITON_LOG_WARNING": "--log-warning",
    "SAGEMAKER_TRITON_LOG_ERROR": "--log-error",
}

# Read by tritonserver itself or by the script without a flag of their own.
OTHER_KNOWN = (
    "SAGEMAKER_MULTI_MODEL",
    "SAGEMAKER_BIND_TO_PORT",
    "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME",
    "SAGEMAKER_TRITON_PING_MODE",
    "SAGEMAKER_TRITON_OVERRIDE_PING_MODE",
    "SAGEMAKER_TRITON_INFERENCE_TYPE",
    "SAGEMAKER_TRITON_DISABLE_MODEL_NAMESPACING",
    "SAGEMAKER_TRITON_LOG_VERBOSE",
    "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE",
    "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE",
    "SAGEMAKER_TRITON_TENSORFLOW_VERSION",
    "SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT",
    "SAGEMAKER_TRITON_ADDITIONAL_ARGS",
)
KNOWN_VARIABLES = tuple(sorted(set(VALUE_FLAGS) | set(OTHER_KNOWN)))

POSITIVE_INTEGER_VARIABLES = (
    "SAGEMAKER_TRITON_THREAD_COUNT",
    "SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT",
    "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE",
    "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE",
    "SAGEMAKER_TRITON_GRPC_PORT",
    "SAGEMAKER_TRITON_METRICS_PORT",
)
BOOLEAN_VARIABLES = (
    "SAGEMAKER_TRITON_ALLOW_GRPC",
    "SAGEMAKER_TRITON_ALLOW_METRICS",
    "SAGEMAKER_TRITON_DISABLE_MODEL_NAMESPACING",
    "SAGEMAKER_TRITON_LOG_INFO",
    "SAGEMAKER_TRITON_LOG_WARNING",
    "SAGEMAKER_TRITON_LOG_ERROR",
)
CHOICES = {
    "SAGEMAKER_TRITON_INFERENCE_TYPE": ("infer", "generate", "generate_stream"),
    "SAGEMAKER_TRITON_OVERRIDE_PING_MODE": ("ready", "live"),
}
# SageMaker's rule for Model Environment keys (CreateModel API reference, ContainerDefinition.Environment).
ENVIRONMENT_KEY = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
BOOLEAN_VALUES = ("true", "false", "1", "0")


# Local only: SageMaker's serve script passes none of these (its container is alone on its instance, behind
# SageMaker's own network). `start_sagemaker_triton` puts them before the script's flags, so
# SAGEMAKER_TRITON_ADDITIONAL_ARGS still overrides them; the image paths (local_endpoint/image/) run the real serve
# script and never get them. They bind every front end that takes an address to loopback (`tritonserver --help`,
# nvidia-pytriton 0.7.0: --http-address, --grpc-address, --metrics-address, the last defaulting to the first).
# The SageMaker front end takes none (src/command_line_parser.h: `sagemaker_address_{"0.0.0.0"}`, no option):
# ``loopback`` keeps it off the network.
LOCAL_LOOPBACK_FLAGS = ("--http-address=127.0.0.1", "--grpc-address=127.0.0.1", "--metrics-address=127.0.0.1")


@dataclasses.dataclass(frozen=True)
class ServerLaunch:
    """Arguments after `tritonserver`, and variables its process must see."""

    arguments: tuple[str, ...]
    environment: dict[str, str]


def validate_environment(env: dict[str, str]) -> None:
    """Raise once, listing every bad container environment variable."""
    errors = []
    for key, value in sorted(env.items()):
        if not ENVIRONMENT_KEY.fullmatch(key):
            errors.append(
                f"{key!r} is not a valid environment variable name; SageMaker allows "
                "[a-zA-Z_][a-zA-Z0-9_]*"
            )
        elif key.startswith("SAGEMAKER_TRITON_") and key not in KNOWN_VARIABLES:
            close = difflib.get_close_matches(key, KNOWN_VARIABLES, n=1)
            hint = f"did you mean {close[0]}?" if close else "remove it"
            errors.append(
                f"{key} is not a variable the SageMaker Triton container reads, so it would be "
                f"ignored; {hint}"
            )
        elif key in POSITIVE_INTEGER_VARIABLES and not (value.isdigit() and int(value) > 0):
            errors.append(f"{key}={value!r} must be a positive whole number (bytes or a count)")
        elif key in BOOLEAN_VARIABLES and value.lower() not in BOOLEAN_VALUES:
            errors.append(f"{key}={value!r} must be one of {', '.join(BOOLEAN_VALUES)}")
        elif key == "SAGEMAKER_TRITON_LOG_VERBOSE" and not (
            value.isdigit() or value.lower() in BOOLEAN_VALUES
        ):
            errors.append(f"{key}={value!r} must be a verbosity level (0, 1, ...) or true/false")
        elif key in CHOICES and value not in CHOICES[key]:
            errors.append(f"{key}={value!r} must be one of {', '.join(CHOICES[key])}")
    if errors:
        raise EnvironmentVariableError(
            "invalid container environment:\n  " + "\n  ".join(errors)
        )


def sagemaker_server_launch(
    *,
    mode: str,
    model_repository: str,
    port: int,
    env: dict[str, str],
    default_model: str | None = None,
    gpu_count: int = 0,
) -> ServerLaunch:
    """Flags and environment of `tritonserver` as the serve script builds them.

    Args:
        mode: "sme" (repository = the unpacked archive) or "mme" (an empty
            repository; models arrive through the `/models` API).
        model_repository: The directory passed as `--model-repository`.
        port: The SageMaker front end's port; it replaces SAGEMAKER_BIND_TO_PORT,
            which the platform, not the user, sets.
        env: The container environment (Model `Environment`), already validated.
        default_model: SME only: the model `/invocations` serves. Must be given
            in SME mode (see `archive.choose_default_model`).
        gpu_count: GPUs visible to the server; SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT
            adds one flag per GPU. Defaults to none (this is a CPU machine).
    """
    # The script passes --allow-grpc / --allow-metrics from their variables, =false only when they are unset.
    args = [
        "--allow-sagemaker=true",
        *(["--allow-grpc=false"] if "SAGEMAKER_TRITON_ALLOW_GRPC" not in env else []),
        "--allow-http=false",
        *(["--allow-metrics=false"] if "SAGEMAKER_TRITON_ALLOW_METRICS" not in env else []),
        "--model-control-mode=explicit",
        f"--model-repository={model_repository}",
        f"--model-namespacing={env.get('SAGEMAKER_TRITON_DISABLE_MODEL_NAMESPACING', 'true')}",
        f"--sagemaker-port={port}",
    ]
    for variable, flag in VALUE_FLAGS.items():
        if variable in env:
            args.append(f"{flag}={env[variable]}")
    args.append(f"--log-verbose={env.get('SAGEMAKER_TRITON_LOG_VERBOSE', 'true')}")
    shm_default = env.get("SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE", DEFAULT_SHM_BYTE_SIZE)
    shm_growth = env.get("SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE", DEFAULT_SHM_GROWTH_BYTE_SIZE)
    args.append(f"--backend-config=python,shm-default-byte-size={shm_default}")
    args.append(f"--backend-config=python,shm-growth-byte-size={shm_growth}")
    if "SAGEMAKER_TRITON_TENSORFLOW_VERSION" in env:
        args.append(f"--backend-config=tensorflow,version={env['SAGEMAKER_TRITON_TENSORFLOW_VERSION']}")
    if "SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT" in env:
        for gpu in range(gpu_count):
            args += ["--model-load-gpu-limit", f"{gpu}:{env['SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT']}"]
    process_env = {k: v for k, v in env.items() if k != "SAGEMAKER_BIND_TO_PORT"}
    if mode == SME:
        if default_model is None:
            raise ValueError("SME mode needs the default model")
        args.append(f"--load-model={default_model}")
        # tritonserver routes /invocations to the model named in its environment.
        process_env["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"] = default_model
    elif mode == MME:
        process_env.pop("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME", None)  # ignored in MME
        process_env["SAGEMAKER_MULTI_MODEL"] = "true"
    else:
        raise ValueError(f"mode must be {SME!r} or {MME!r}, got {mode!r}")
    ping_mode = effective_ping_mode(mode, env)
    if ping_mode is None:
        process_env.pop("SAGEMAKER_TRITON_PING_MODE", None)
    else:
        process_env["SAGEMAKER_TRITON_PING_MODE"] = ping_mode
    # Word splitting, not shell quoting: the script expands it unquoted.
    args += env.get("SAGEMAKER_TRITON_ADDITIONAL_ARGS", "").split()
    return ServerLaunch(arguments=tuple(args), environment=process_env)


def effective_ping_mode(mode: str, env: dict[str, str]) -> str | None:
    """The SAGEMAKER_TRITON_PING_MODE tritonserver sees, or None if unset.

    The script computes the mode (override, else `ready` for SME and `live`
    for MME) into a shell variable it never exports. tritonserver therefore
    sees the computed value only when the variable already exists in the
    container environment; otherwise it is unset and /ping means "ready"
    (the Triton server's docker/sagemaker/serve script, r25.09, a reading of the script not yet confirmed on SageMaker).
    """
    if "SAGEMAKER_TRITON_PING_MODE" not in env:
        return None
    return env.get("SAGEMAKER_TRITON_OVERRIDE_PING_MODE") or ("live" if mode == MME else "ready")
