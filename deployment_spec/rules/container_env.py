"""What a spec endpoint becomes at run time: its SageMaker name and its container environment.

Shared by the CDK app and the local endpoint, so a model proven locally runs with
the same SAGEMAKER_TRITON_* settings it gets on SageMaker. No aws_cdk, no torch.
"""
from __future__ import annotations

from typing import Optional, Sequence

from deployment_spec.sections.endpoint import Container

def endpoint_name(project: str, environment: str, endpoint: str) -> str:
    """``<project>-<environment>-<endpoint>``; the spec loader checks it is a valid endpoint name
    (``sagemaker_rules.endpoint_name_valid``)."""
    return f"{project}-{environment}-{endpoint}"


def container_environment(container: Container, *, multi_model: bool, default_model: Optional[str] = None,
                          verbose_default: bool = False, extra_args: Sequence[str] = ()) -> dict[str, str]:
    """The SAGEMAKER_TRITON_* variables for one model (the Triton server's docker/sagemaker/serve script, r25.09), deterministic and sorted.

    Args:
        container: The endpoint's container settings from the spec.
        multi_model: Whether the endpoint is multi-model.
        default_model: For a single-model endpoint whose tarball holds several model directories (an
            ensemble and its steps): the model ``/invocations`` serves. Defaults to none (one directory).
        verbose_default: ``SAGEMAKER_TRITON_LOG_VERBOSE`` when the spec leaves it unset. Defaults to False:
            the container's own default is verbose, which no production endpoint wants.
        extra_args: Triton arguments the endpoint's own settings need (an asynchronous endpoint's input-size
            limit, ``Asynchronous.triton_args``), after ``container.additional_args``. Defaults to none.

    Returns:
        The variables; ``container.environment`` entries override computed ones.
    """
    env: dict[str, str] = {}
    if default_model is not None and not multi_model:
        env["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"] = default_model
    # The serve script computes the ping mode (ready for SME, live for MME, or the override) without
    # exporting it; tritonserver only sees it when the variable is already in the environment (§2.1).
    env["SAGEMAKER_TRITON_PING_MODE"] = container.ping_mode or ("live" if multi_model else "ready")
    if container.ping_mode is not None:
        env["SAGEMAKER_TRITON_OVERRIDE_PING_MODE"] = container.ping_mode
    verbose = container.log_verbose if container.log_verbose is not None else verbose_default
    env["SAGEMAKER_TRITON_LOG_VERBOSE"] = "true" if verbose else "false"
    optional = {
        "SAGEMAKER_TRITON_THREAD_COUNT": container.thread_count,
        "SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT": container.buffer_manager_thread_count,
        "SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE": container.shm_default_bytes,
        "SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE": container.shm_growth_bytes,
        "SAGEMAKER_TRITON_MODEL_LOAD_GPU_LIMIT": container.model_load_gpu_limit,
        "SAGEMAKER_TRITON_ADDITIONAL_ARGS": " ".join((*container.additional_args, *extra_args)) or None,
    }
    env.update({k: str(v) for k, v in optional.items() if v is not None})
    if container.inference_type is not None:
        env["SAGEMAKER_TRITON_INFERENCE_TYPE"] = container.inference_type
    if container.metrics:  # the serve script's default is --allow-metrics=false
        env["SAGEMAKER_TRITON_ALLOW_METRICS"] = "true"
        env["SAGEMAKER_TRITON_METRICS_PORT"] = str(container.metrics_port)
    env.update(container.environment)
    return dict(sorted(env.items()))
