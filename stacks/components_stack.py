"""One inference-components endpoint of one environment: the archives, the role, the endpoint and its components."""
from __future__ import annotations

import pathlib
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_logs as logs
from constructs import Construct

from deployment_spec import Spec
from deployment_spec.component_endpoint import archive_default_model, component_name, demand
from deployment_spec.endpoint import EndpointSpec
from deployment_spec.environment import EnvironmentSpec, RemovalPolicy
from deployment_spec.manifest import Artifact, Manifest
from stacks.storage_stack import StorageStack
from deployment_spec.container_env import container_environment
from deployment_spec.errors import raise_problems
from triton_constructs import ModelRepositories, ModelStore, checks
from triton_constructs.artifacts import ArtifactFile, ModelArtifacts
from triton_constructs.errors import SynthError
from triton_constructs.execution_role import TritonExecutionRole
from triton_constructs.image import TritonImage
from triton_constructs.inference_components import ComponentProps, TritonInferenceComponents


class ComponentsEndpointStack(cdk.Stack):
    """Everything one ``kind: inference-components`` endpoint needs in one environment.

    Args:
        scope: The stage.
        id_: Construct ID.
        spec: The deployment spec.
        environment: The environment (guardrails, removal policy).
        endpoint: The endpoint with this environment's overrides applied.
        endpoint_name: Its SageMaker name, from ``checks.endpoint_name``.
        manifest: The build manifest (one archive per model: the model and, for an ensemble, its steps).
        manifest_path: Where it was read from (for messages).
        storage: The environment's storage stack.
        **kwargs: ``cdk.Stack`` arguments.

    Raises:
        SynthError: a missing or stale archive, a TensorRT plan for another GPU, or a reservation, copy count
            or scaling setting SageMaker would refuse.
    """

    def __init__(self, scope: Construct, id_: str, *, spec: Spec, environment: EnvironmentSpec,
                 endpoint: EndpointSpec, endpoint_name: str, manifest: Manifest, manifest_path: pathlib.Path,
                 storage: StorageStack, **kwargs: Any) -> None:
        super().__init__(scope, id_, description=f"Triton inference components {endpoint.name} ({environment.name})",
                         **kwargs)
        built = checks.built_endpoint(endpoint, spec.models, spec.triton_version, manifest, manifest_path)
        # What the build recorded about each model, checked for this image and instance type (one home:
        # ModelRepositories): verified in the image's runtimes, environments for the image, plans for the GPU.
        models = ModelRepositories.from_built(
            manifest, built.artifacts, origin=str(manifest_path),
            hardware_compatibility={m.name: m.tensorrt.hardware_compatibility
                                    for m in spec.served_models(endpoint) if m.tensorrt})
        raise_problems(f"endpoint '{endpoint.name}'", models.problems(
            multi_model=True, triton_version=spec.triton_version, instance_type=endpoint.instance_type))
        archives = _archive_per_model(endpoint, built.artifacts, manifest_path)
        disposable = environment.removal_policy is RemovalPolicy.DESTROY
        keep = cdk.RemovalPolicy.DESTROY if disposable else cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE
        prefix = ModelStore.model_prefix(endpoint.name)

        bucket, key = storage.import_into(self)
        image = TritonImage(self, "Image", version=spec.triton_version)
        artifacts = ModelArtifacts(self, "Artifacts", bucket=bucket, key=key, prefix=prefix, files=[
            ArtifactFile(manifest.artifact_path(a), a.sha256, a.size, a.object_name) for a in built.artifacts])
        network = endpoint.network
        role = TritonExecutionRole(self, "ExecutionRole", image=image, bucket=bucket, key=key, model_prefix=prefix,
                                   vpc=bool(network and network.subnet_ids))
        components = []
        for model in endpoint.models:
            archive = archives[model]
            default = archive_default_model(archive.models)
            settings, reserved = endpoint.component(model), demand(endpoint, model)
            components.append(ComponentProps(
                model=model, name=component_name(spec.project, environment.name, endpoint.name, model),
                model_data_url=artifacts.object_urls[archive.object_name], archive_models=archive.models,
                default_model=default, gpus=reserved.gpus, cpu_cores=reserved.cpu_cores,
                memory_mb=reserved.memory_mb, max_memory_mb=settings.reservation.max_memory_mb,
                copies=settings.copies, scaling=settings.scaling,
                environment=container_environment(endpoint.container, multi_model=False, default_model=default,
                                                  verbose_default=disposable)))
        serving = TritonInferenceComponents(
            self, "Endpoint", image=image, execution_role=role, endpoint_name=endpoint_name,
            instance_type=endpoint.instance_type, components=components,
            initial_instances=endpoint.initial_instances, managed_instances=endpoint.instance_bounds,
            variant_name=endpoint.variant_name, inference_ami_version=image.inference_ami_version,
            inference_ami_reason=image.inference_ami_reason, volume_key=key,
            startup_timeout=cdk.Duration.seconds(endpoint.startup_timeout_s),
            download_timeout=cdk.Duration.seconds(endpoint.download_timeout_s),
            rolling_update=endpoint.rolling_update if environment.guardrails else None, thresholds=endpoint.alarms,
            subnet_ids=network.subnet_ids if network else (),
            security_group_ids=network.security_group_ids if network else (),
            network_isolation=network.isolation if network else True,
            log_retention=logs.RetentionDays.ONE_MONTH if disposable else logs.RetentionDays.ONE_YEAR,
            log_removal_policy=keep, log_key=key, removal_policy=keep)
        for component in serving.components.values():
            component.node.add_dependency(artifacts)  # the archives must be in place before the copies start

        names = [serving.component_name(m) for m in endpoint.models]
        cdk.CfnOutput(self, "EndpointName", value=endpoint_name, description="SageMaker endpoint name")
        cdk.CfnOutput(self, "InferenceComponents", value=" ".join(names),
                      description="InferenceComponentName values, one per model (InvokeEndpoint needs one)")
        cdk.CfnOutput(self, "InvokeCommand", description="Example call (request.json: a KServe v2 JSON request)",
                      value=f"aws sagemaker-runtime invoke-endpoint --region {self.region} --endpoint-name "
                            f"{endpoint_name} --inference-component-name {names[0]} --content-type application/json "
                            "--body fileb://request.json response.json")


def _archive_per_model(endpoint: EndpointSpec, artifacts: tuple[Artifact, ...],
                       manifest_path: pathlib.Path) -> dict[str, Artifact]:
    """Each model's archive: the one whose first top-level model it is (model_build.packaging puts it first)."""
    found = {a.models[0]: a for a in artifacts if a.models}
    missing = [m for m in endpoint.models if m not in found]
    if missing:
        raise SynthError(f"endpoint '{endpoint.name}'", [
            f"{manifest_path} has no archive led by model '{m}' (one archive per component); run `tritonsm build`"
            for m in missing])
    return found
