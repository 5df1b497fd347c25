"""One inference-components endpoint of one environment: the archives, the role, the endpoint and its components."""
from __future__ import annotations

import pathlib
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_logs as logs
from constructs import Construct

from deployment_spec import Spec
from deployment_spec.rules.component_endpoint import component_name
from deployment_spec.sections.endpoint import EndpointSpec
from deployment_spec.sections.environment import EnvironmentSpec, RemovalPolicy
from deployment_spec.builds.manifest import Artifact, Manifest
from . import model_signatures
from .image_props import image_repository, image_tag
from .network_props import network_props
from .storage_stack import StorageStack
from triton_constructs import Alarms, ModelRepositories, TritonComponentsEndpoint, checks
from triton_constructs.errors import SynthError


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
        # The signing block first: with a key, the signed build statement decides what the manifest may say.
        model_signatures.check(self, spec, environment, endpoint.name, manifest, manifest_path)
        built = checks.built_endpoint(endpoint, spec.models, spec.triton_version, manifest, manifest_path,
                                      spec_root=spec.root)
        # What the build recorded about each model; the construct checks it for this image and instance type
        # (ModelRepositories.problems): verified in the image's runtimes, environments for the image, plans for the GPU.
        models = ModelRepositories.from_built(
            manifest, built.artifacts, origin=str(manifest_path), public_key=model_signatures.public_key(spec),
            hardware_compatibility={m.name: m.tensorrt.hardware_compatibility
                                    for m in spec.served_models(endpoint) if m.tensorrt})
        _every_model_leads_an_archive(endpoint, built.artifacts, manifest_path)
        disposable = environment.removal_policy is RemovalPolicy.DESTROY
        bucket, key = storage.import_into(self)
        self.endpoint = TritonComponentsEndpoint(
            self, "Default", models=models, instance_type=endpoint.instance_type,
            components={model: endpoint.component(model) for model in endpoint.models},
            triton_version=spec.triton_version, endpoint_name=endpoint_name,
            component_names={m: component_name(spec.project, environment.name, endpoint.name, m)
                             for m in endpoint.models},
            initial_instances=endpoint.initial_instances, managed_instances=endpoint.instance_bounds,
            variant_name=endpoint.variant_name,
            rolling_update=endpoint.rolling_update if environment.guardrails else None,
            alarms=Alarms.notifying(endpoint.alarms, storage.alarm_topic_into(self)),
            network=network_props(self, endpoint.network),
            # Triton's own default is verbose logging; only throw-away environments keep it.
            container=endpoint.container.verbose_unless_set(disposable), observability=endpoint.observability,
            capacity_reservation=endpoint.capacity_reservation,
            fallback_instance_types=endpoint.fallback_instance_types, bucket=bucket, encryption_key=key, storage_name=endpoint.name,
            removal_policy=cdk.RemovalPolicy.DESTROY if disposable else cdk.RemovalPolicy.RETAIN,
            # One year in every environment (CT.CLOUDWATCH.PR.2); a throw-away stage deletes them with the stack.
            log_retention=logs.RetentionDays.ONE_YEAR,
            startup_timeout_s=endpoint.startup_timeout_s, download_timeout_s=endpoint.download_timeout_s,
            image_repository=image_repository(self, endpoint),
            image_tag=image_tag(endpoint, spec.models, spec.triton_version))

        names = [self.endpoint.component_name(m) for m in endpoint.models]
        cdk.CfnOutput(self, "EndpointName", value=endpoint_name, description="SageMaker endpoint name")
        cdk.CfnOutput(self, "InferenceComponents", value=" ".join(names),
                      description="InferenceComponentName values, one per model (InvokeEndpoint needs one)")
        cdk.CfnOutput(self, "InvokeCommand", description="Example call (request.json: a KServe v2 JSON request)",
                      value=f"aws sagemaker-runtime invoke-endpoint --region {self.region} --endpoint-name "
                            f"{endpoint_name} --inference-component-name {names[0]} --content-type application/json "
                            "--body fileb://request.json response.json")


def _every_model_leads_an_archive(endpoint: EndpointSpec, artifacts: tuple[Artifact, ...],
                                  manifest_path: pathlib.Path) -> None:
    """Each model's component serves the archive it leads (model_build.packaging puts it first); refused
    here, naming the manifest, when a model leads none."""
    leading = {a.models[0] for a in artifacts if a.models}
    missing = [m for m in endpoint.models if m not in leading]
    if missing:
        raise SynthError(f"endpoint '{endpoint.name}'", [
            f"{manifest_path} has no archive led by model '{m}' (one archive per component); run `tritonsm build`"
            for m in missing])
