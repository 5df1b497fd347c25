"""One Triton endpoint of one environment: artifacts, model, endpoint, scaling, alarms, dashboard."""
from __future__ import annotations

import pathlib
from typing import Any, Mapping, Optional

import aws_cdk as cdk
from aws_cdk import aws_logs as logs
from constructs import Construct

from deployment_spec import Spec, instances
from deployment_spec.capacity import Measurement, invocations_target
from deployment_spec.endpoint import EndpointKind, EndpointSpec
from deployment_spec.environment import EnvironmentSpec, RemovalPolicy
from deployment_spec.manifest import Manifest
from stacks.storage_stack import StorageStack
from triton_constructs import (ArtifactFile, DataCaptureSettings, EndpointAlarms, EndpointDashboard, ModelArtifacts,
                               ModelStore, TritonEndpoint, TritonExecutionRole, TritonImage, TritonModel,
                               VariantScaling, checks, container_environment)
from triton_constructs.errors import raise_if


class EndpointStack(cdk.Stack):
    """Everything one spec endpoint needs in one environment, after checking the build manifest.

    Args:
        scope: The stage.
        id_: Construct ID.
        spec: The deployment spec (models, Triton version, project name).
        environment: The environment (guardrails, removal policy).
        endpoint: The endpoint with this environment's overrides applied.
        endpoint_name: Its SageMaker name, from ``checks.endpoint_name``.
        manifest: The build manifest.
        manifest_path: Where it was read from (for messages).
        storage: The environment's storage stack (model bucket and key).
        capacity: Measured capacity per endpoint; used for the invocations target when the spec gives
            none. Defaults to none.
        **kwargs: ``cdk.Stack`` arguments.

    Raises:
        SynthError: a missing or stale artifact, an instance type the endpoint kind cannot use, or a
            TensorRT plan built for another GPU architecture.
    """

    def __init__(self, scope: Construct, id_: str, *, spec: Spec, environment: EnvironmentSpec,
                 endpoint: EndpointSpec, endpoint_name: str, manifest: Manifest, manifest_path: pathlib.Path,
                 storage: StorageStack, capacity: Optional[Mapping[str, Measurement]] = None, **kwargs: Any) -> None:
        super().__init__(scope, id_, description=f"Triton endpoint {endpoint.name} ({environment.name})", **kwargs)
        name = endpoint_name
        prefix, capture = ModelStore.model_prefix(endpoint.name), endpoint.data_capture
        raise_if(f"endpoint '{endpoint.name}'", checks.instance_problems(endpoint))
        built = checks.built_endpoint(endpoint, spec.models, spec.triton_version, manifest, manifest_path)
        raise_if(f"endpoint '{endpoint.name}'", checks.plan_problems(endpoint, built, manifest, spec.models))
        multi = endpoint.kind is EndpointKind.MULTI_MODEL
        disposable = environment.removal_policy is RemovalPolicy.DESTROY
        # RetainExceptOnCreate: kept on update and delete, but removed when the operation that created it
        # rolls back (a retry does not fail on the log group's fixed name, no orphan model or config).
        removal = cdk.RemovalPolicy.DESTROY if disposable else cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE
        gpus = instances.lookup(endpoint.instance_type).gpu_count

        bucket, key = storage.import_into(self)
        image = TritonImage(self, "Image", version=spec.triton_version)
        artifacts = ModelArtifacts(self, "Artifacts", bucket=bucket, key=key, prefix=prefix, files=[
            ArtifactFile(manifest.artifact_path(a), a.sha256, a.size, a.object_name) for a in built.artifacts])
        role = TritonExecutionRole(self, "ExecutionRole", image=image, bucket=bucket, key=key, model_prefix=prefix,
                                   capture_prefix=ModelStore.capture_prefix(endpoint.name) if capture else None,
                                   vpc=bool(endpoint.network and endpoint.network.subnet_ids))
        network = endpoint.network
        model = TritonModel(
            self, "Model", image=image, role=role.role, multi_model=multi, model_cache=endpoint.model_cache,
            model_data_url=artifacts.prefix_url if multi else artifacts.object_urls[built.artifacts[0].object_name],
            # Triton's own default is verbose logging; only throw-away environments keep it.
            environment=container_environment(endpoint.container, multi_model=multi,
                                              default_model=built.default_model, verbose_default=disposable),
            subnet_ids=network.subnet_ids if network else (),
            security_group_ids=network.security_group_ids if network else (),
            # On unless the spec opts out with a reason (deployment_spec.endpoint.Network).
            network_isolation=network.isolation if network else True, removal_policy=removal)
        model.node.add_dependency(artifacts)  # the objects must be in place before CreateModel checks them

        alarms = EndpointAlarms(self, "Alarms", endpoint_name=name, variant_name=endpoint.variant_name,
                                thresholds=endpoint.alarms, gpu_count=gpus, multi_model=multi,
                                notify=endpoint.alarms.sns_topic)
        guarded = environment.guardrails
        serving = TritonEndpoint(
            self, "Endpoint", model=model, endpoint_name=name, instance_type=endpoint.instance_type,
            initial_instances=endpoint.initial_instances, variant_name=endpoint.variant_name,
            inference_ami_version=image.inference_ami_version, inference_ami_reason=image.inference_ami_reason,
            volume_key=key,
            volume_size_gb=endpoint.volume_size_gb,
            startup_timeout=cdk.Duration.seconds(endpoint.startup_timeout_s),
            download_timeout=cdk.Duration.seconds(endpoint.download_timeout_s),
            data_capture=DataCaptureSettings(f"s3://{bucket.bucket_name}/{ModelStore.capture_prefix(endpoint.name)}",
                                             key, capture.sampling_percent, capture.capture) if capture else None,
            deployment=endpoint.resolved_deployment() if guarded else None,
            rollback_alarms=[alarms.errors, alarms.latency] if guarded else (),
            log_retention=logs.RetentionDays.ONE_MONTH if disposable else logs.RetentionDays.ONE_YEAR,
            log_removal_policy=removal, config_removal_policy=removal,
            log_key=key, scaled=endpoint.scaling is not None)
        role.grant_logs(serving.log_group)
        if guarded and endpoint.deployment.auto_rollback:
            role.grant_describe_alarms([alarms.errors, alarms.latency])
        target = invocations_target(endpoint, dict(capacity or {}))
        if target and target.source.startswith("capacity.json"):
            # A measured number steers production scaling: show where it came from on every synth and diff.
            cdk.Annotations.of(self).add_warning_v2(
                "tritonsm:invocationsTargetFromCapacity",
                f"invocations target {target.value:g} per instance per minute comes from {target.source}")
        scaling = VariantScaling(self, "Scaling", endpoint=serving, scaling=endpoint.scaling,
                                 initial_instances=endpoint.initial_instances,
                                 invocations_target=target.value if target else None,
                                 log_key=key) if endpoint.scaling else None
        EndpointDashboard(self, "Dashboard", endpoint_name=name, variant_name=endpoint.variant_name,
                          latency_sla_ms=endpoint.alarms.latency_sla_ms, gpu_count=gpus,
                          gpu_target=scaling.gpu_target if scaling else None, multi_model=multi)

        cdk.CfnOutput(self, "EndpointName", value=name, description="SageMaker endpoint name")
        target_flag = f" --target-model {built.artifacts[0].object_name}" if multi else ""
        cdk.CfnOutput(self, "InvokeCommand", description="Example call (request.json: a KServe v2 JSON request)",
                      value=f"aws sagemaker-runtime invoke-endpoint --region {self.region} --endpoint-name {name}"
                            f"{target_flag} --content-type application/json --body fileb://request.json response.json")
        if multi:
            cdk.CfnOutput(self, "TargetModels", description="TargetModel values, one per model",
                          value=" ".join(a.object_name for a in built.artifacts))
