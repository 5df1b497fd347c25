"""One spec endpoint in one environment: the spec and the build manifest, turned into a ``TritonSageMakerEndpoint``."""
from __future__ import annotations

import dataclasses
import pathlib
from typing import Any, Mapping, Optional

import aws_cdk as cdk
from aws_cdk import aws_logs as logs
from constructs import Construct

from deployment_spec import Spec
from deployment_spec.cost.capacity import Drain, Measurement, backlog_target, load_target
from deployment_spec.sections.endpoint import EndpointKind, EndpointSpec
from deployment_spec.sections.environment import EnvironmentSpec, RemovalPolicy
from deployment_spec.builds.manifest import Manifest
from deployment_spec.rules.variant_plan import build_for, own_builds
from . import model_signatures
from .image_props import image_repository, image_tag
from .network_props import network_props
from .pool_builds import pool_models
from .storage_stack import StorageStack
from triton_constructs import Alarms, ModelRepositories, TritonSageMakerEndpoint, checks


class EndpointStack(cdk.Stack):
    """Checks the build manifest against the spec, then maps the spec endpoint onto the construct's props.

    The construct's ID is ``Default``, which CDK leaves out of logical IDs: its resources keep the IDs they
    had when this stack built them itself, so moving to the construct replaced nothing.

    Args:
        spec: The deployment spec. environment: This environment (guardrails, removal policy).
        endpoint: The endpoint with this environment's overrides. endpoint_name: Its SageMaker name.
        manifest, manifest_path: The build manifest and where it was read from.
        storage: The environment's storage stack (model bucket and key).
        capacity: Measured capacity per endpoint, for the load target the spec leaves out.
        drains: Measured drain rates, for the backlog target an asynchronous endpoint's spec leaves out.
        pool_manifests: Builds made on other GPUs, for the fallback pools the endpoint's own plans do not run on.
        **kwargs: ``cdk.Stack`` arguments.
    """

    def __init__(self, scope: Construct, id_: str, *, spec: Spec, environment: EnvironmentSpec,
                 endpoint: EndpointSpec, endpoint_name: str, manifest: Manifest, manifest_path: pathlib.Path,
                 storage: StorageStack, capacity: Optional[Mapping[str, Measurement]] = None,
                 drains: Optional[Mapping[str, Drain]] = None, pool_manifests: Optional[Mapping[pathlib.Path, Manifest]] = None, **kwargs: Any) -> None:
        super().__init__(scope, id_, description=f"Triton endpoint {endpoint.name} ({environment.name})", **kwargs)
        models = self._built(spec, environment, endpoint, manifest, manifest_path)
        # A variant or shadow whose model or instance type is not the endpoint's serves a build of its own, the
        # manifest's <endpoint>.<variant> entry (deployment_spec.rules.variant_plan.own_builds).
        derived = own_builds(endpoint)
        variant_models = {variant: self._built(spec, environment, derived[build], manifest, manifest_path)
                          for variant in [v.name for v in endpoint.variants] + (
                              [endpoint.shadow.name] if endpoint.shadow else [])
                          if (build := build_for(endpoint, variant)) != endpoint.name}
        disposable = environment.removal_policy is RemovalPolicy.DESTROY
        bucket, key = storage.import_into(self)
        multi = endpoint.kind is EndpointKind.MULTI_MODEL
        self.endpoint = TritonSageMakerEndpoint(
            self, "Default", models=models, instance_type=endpoint.instance_type, triton_version=spec.triton_version,
            fallback_instance_types=endpoint.fallback_instance_types,
            capacity_reservation=endpoint.capacity_reservation,
            pool_models=pool_models(spec, endpoint, models, pool_manifests or {}) if not multi else None,
            multi_model=multi, endpoint_name=endpoint_name, initial_instances=endpoint.initial_instances,
            variant_name=endpoint.variant_name, scaling=self._scaling(endpoint, capacity or {}),
            alarms=Alarms.notifying(endpoint.alarms, storage.alarm_topic_into(self)),
            deployment=endpoint.deployment if environment.guardrails else None,
            network=network_props(self, endpoint.network), model_cache=endpoint.model_cache, data_capture=endpoint.data_capture,
            # Triton's own default is verbose logging; only throw-away environments keep it.
            container=endpoint.container.verbose_unless_set(disposable), observability=endpoint.observability,
            bucket=bucket, encryption_key=key, storage_name=endpoint.name,
            removal_policy=cdk.RemovalPolicy.DESTROY if disposable else cdk.RemovalPolicy.RETAIN,
            # One year in every environment (CT.CLOUDWATCH.PR.2); a throw-away stage deletes them with the stack.
            log_retention=logs.RetentionDays.ONE_YEAR,
            volume_size_gb=endpoint.volume_size_gb, startup_timeout_s=endpoint.startup_timeout_s,
            download_timeout_s=endpoint.download_timeout_s, image_repository=image_repository(self, endpoint),
            image_tag=image_tag(endpoint, spec.models, spec.triton_version),
            asynchronous=self._asynchronous(endpoint, drains or {}),
            # A variant served by the endpoint's own build names no model: the construct's model is a label for
            # archives of its own (variant_models).
            variants=[v if v.name in variant_models else dataclasses.replace(v, model=None) for v in endpoint.variants],
            shadow=endpoint.shadow, variant_models=variant_models, comparison=endpoint.comparison)

        cdk.CfnOutput(self, "EndpointName", value=endpoint_name, description="SageMaker endpoint name")
        objects = [archive.object_name for archive in models.archives]
        target_flag = f" --target-model {objects[0]}" if multi else ""
        call = (f"aws sagemaker-runtime invoke-endpoint --region {self.region} --endpoint-name {endpoint_name}"
                f"{target_flag} --content-type application/json --body fileb://request.json response.json")
        if self.endpoint.asynchronous is not None:   # no InvokeEndpoint: the request goes through S3
            # The bucket by its storage stack's output, looked up when the command runs: an output holding the
            # imported name would be an ImportValue in an output (cfn-lint W6001).
            request = f"s3://$bucket/{self.endpoint.asynchronous.input_prefix}request.json"
            call = (f"bucket=$(aws cloudformation describe-stacks --region {self.region} --stack-name "
                    f"{storage.stack_name} --query \"Stacks[0].Outputs[?OutputKey=='BucketName'].OutputValue\" "
                    f"--output text) && aws s3 cp request.json {request} && aws sagemaker-runtime "
                    f"invoke-endpoint-async --region {self.region} --endpoint-name {endpoint_name} --content-type "
                    f"application/json --input-location {request}")
        cdk.CfnOutput(self, "InvokeCommand", description="Example call (request.json: a KServe v2 JSON request)",
                      value=call)
        if multi:
            cdk.CfnOutput(self, "TargetModels", description="TargetModel values, one per model", value=" ".join(objects))

    def _built(self, spec: Spec, environment: EnvironmentSpec, endpoint: EndpointSpec, manifest: Manifest,
               manifest_path: pathlib.Path) -> ModelRepositories:
        """The manifest's archives for ``endpoint`` (or a variant's own build), checked against the spec and its
        signing block."""
        # The signing block first: with a key, the signed build statement decides what the manifest may say.
        model_signatures.check(self, spec, environment, endpoint.name, manifest, manifest_path)
        built = checks.built_endpoint(endpoint, spec.models, spec.triton_version, manifest, manifest_path,
                                      spec_root=spec.root)
        return ModelRepositories.from_built(
            manifest, built.artifacts, origin=str(manifest_path), default_model=built.default_model,
            public_key=model_signatures.public_key(spec),
            hardware_compatibility={m.name: m.tensorrt.hardware_compatibility
                                    for m in spec.served_models(endpoint) if m.tensorrt})

    def _asynchronous(self, endpoint: EndpointSpec, drains: Mapping[str, Drain]) -> Any:
        """The spec's asynchronous settings, with the backlog target the measured drain rate implies when the
        spec gives none."""
        target = backlog_target(endpoint, dict(drains))
        if endpoint.asynchronous is None or target is None or not target.measured:
            return endpoint.asynchronous
        cdk.Annotations.of(self).add_warning_v2(
            "tritonsm:backlogTargetFromCapacity",
            f"backlog target {target.value:g} requests per instance comes from {target.source}")
        return dataclasses.replace(endpoint.asynchronous, backlog_per_instance=target.value)

    def _scaling(self, endpoint: EndpointSpec, capacity: Mapping[str, Measurement]) -> Any:
        """The spec's scaling, with the load target capacity.json measured when the spec gives none (an
        asynchronous endpoint's load target is its backlog per instance, set in its asynchronous block)."""
        if endpoint.asynchronous is not None:
            return endpoint.scaling
        target = load_target(endpoint, dict(capacity))
        if endpoint.scaling is not None and endpoint.scaling.on_concurrency and target is None:
            cdk.Annotations.of(self).add_warning_v2(
                "tritonsm:noConcurrencyTarget",
                f"endpoints.{endpoint.name}.scaling.load_metric is concurrency but no target is known: no "
                "concurrency policy; set scaling.concurrent_requests_per_model, or record a load test "
                f"(tritonsm bench load --endpoint {endpoint.name} --record {endpoint.name}) in capacity.json")
        if endpoint.scaling is None or target is None or not target.measured:
            return endpoint.scaling
        # A measured number steers production scaling: show where it came from on every synth and diff.
        if target.metric == "concurrency":
            cdk.Annotations.of(self).add_warning_v2(
                "tritonsm:concurrencyTargetFromCapacity",
                f"concurrency target {target.value:g} requests in flight per model comes from {target.source}")
            return dataclasses.replace(endpoint.scaling, concurrent_requests_per_model=target.value)
        cdk.Annotations.of(self).add_warning_v2(
            "tritonsm:invocationsTargetFromCapacity",
            f"invocations target {target.value:g} per instance per minute comes from {target.source}")
        return dataclasses.replace(endpoint.scaling, invocations_target=target.value)
