"""The endpoint configuration and the endpoint: variants, storage, timeouts, guarded deployments."""
from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch, aws_kms as kms, aws_logs as logs, aws_sagemaker as sagemaker
from constructs import Construct

from deployment_spec.facts import instances
from deployment_spec.sections.capacity_reservation import PREFERENCE, CapacityReservation
from deployment_spec.sections.endpoint import CaptureMode, Deployment, Observability, Strategy
from triton_constructs import control_tower, security_hub
from triton_constructs.metrics import EndpointMetrics
from triton_constructs.triton_model import TritonModel

_CAPTURE = {CaptureMode.INPUT: ["Input"], CaptureMode.OUTPUT: ["Output"], CaptureMode.BOTH: ["Input", "Output"]}


@dataclasses.dataclass(frozen=True)
class DataCaptureSettings:
    """Where and how much of the traffic to capture (single-model endpoints).

    Attributes:
        destination_url: ``s3://`` prefix to write to.
        key: KMS key to encrypt the captured objects with.
        sampling_percent: Share of requests captured, 0-100.
        mode: Requests, responses or both.
    """

    destination_url: str
    key: kms.IKey
    sampling_percent: int
    mode: CaptureMode = CaptureMode.BOTH


@dataclasses.dataclass(frozen=True)
class ServedVariant:
    """One variant of the endpoint configuration: what it serves, on what, and its ``InitialVariantWeight``.

    Attributes:
        name: ``VariantName``.
        model: The model it serves.
        instance_type: e.g. ``ml.g5.xlarge``.
        initial_instances: Instances at creation.
        weight: ``InitialVariantWeight``: a production variant's share of the traffic is its weight / the sum of
            the production variants' weights (botocore's SageMaker service model, ``ProductionVariant``); a
            shadow's, ``deployment_spec.sections.variants.shadow_weight``.
        instance_facts: The facts of a type the instance table lacks. Defaults to the table's.
        fallback_instance_types: Instance pools after ``instance_type``. Defaults to none.
        pool_model_names: The model each pool serves instead of ``model``. Defaults to none.
        capacity_reservation: The ML capacity reservation its instances launch into. Defaults to none.
    """

    name: str
    model: TritonModel
    instance_type: str
    initial_instances: int = 1
    weight: float = 1.0
    instance_facts: Optional[instances.InstanceFacts] = None
    fallback_instance_types: tuple[str, ...] = ()
    pool_model_names: Mapping[str, str] = dataclasses.field(default_factory=dict)
    capacity_reservation: Optional[CapacityReservation] = None


@dataclasses.dataclass(frozen=True)
class EndpointVariant:
    """What scaling, alarms and dashboards need of one variant of a ``TritonEndpoint``.

    Attributes:
        endpoint_name, variant_name: The variant.
        instance_type: Its instance type (the first pool's with instance pools).
        instance: That type's facts, or None for a type the rules have refused.
        instance_types: Every type it may run on, the pools' in priority order.
        metrics: Its CloudWatch metrics (``VariantName`` = its name, a shadow's too).
        shadow: It is the shadow variant.
    """

    endpoint_name: str
    variant_name: str
    instance_type: str
    instance: Optional[instances.InstanceType]
    instance_types: tuple[str, ...]
    metrics: EndpointMetrics
    shadow: bool = False


class TritonEndpoint(Construct):
    """A real-time SageMaker endpoint whose production variants (one by default) serve ``TritonModel`` s.

    Settings SageMaker would reject at deploy time are handled at synth:
    ``VolumeSizeInGB`` is left out on instance types with local NVMe storage.
    ``KmsKeyId`` is set on every instance type: the CreateEndpointConfig API
    reference (botocore 1.44, ``KmsKeyId``) accepts it where local storage
    exists and says it then does not encrypt that storage, which a hardware
    module encrypts; the template's metadata says which applies.
    With auto-scaling, ``RetainAllVariantProperties`` keeps the instance
    count the autoscaler chose across configuration updates; the weights and data capture still follow the
    configuration (``ExcludeRetainedVariantProperties``), so weights changed at run time with
    UpdateEndpointWeightsAndCapacities return to the configuration's on the next update of the endpoint.
    SageMaker applies ``RetainAllVariantProperties`` to every variant of the endpoint.
    Several production variants, or a shadow, leave ``DeploymentConfig`` out, with an info annotation (see ``guarded``).

    Args:
        scope: Parent construct.
        id_: Construct ID.
        model: The model to serve.
        endpoint_name: The endpoint's name (see ``checks.endpoint_name`` for why it is not generated).
        instance_type: e.g. ``ml.g5.xlarge``.
        initial_instances: Instances at creation. Defaults to 1.
        variant_name: Defaults to ``AllTraffic``.
        inference_ami_version: Host AMI (driver) for GPU types, from the image's CUDA version.
            Defaults to SageMaker's default AMI.
        inference_ami_reason: Why that AMI; written into the endpoint config's template metadata.
        volume_key: Encrypts the ML storage volume; ignored on NVMe instance types. Defaults to an
            AWS-managed key.
        volume_size_gb: ML storage volume size; only on instance types without local NVMe storage.
            Defaults to SageMaker's default.
        startup_timeout: Container start-up health check timeout. Defaults to 10 minutes.
        download_timeout: Model download timeout. Defaults to 10 minutes.
        data_capture: Capture requests and responses. Defaults to none.
        deployment: Blue/green traffic shifting for updates. Defaults to SageMaker's all-at-once.
        rollback_alarms: Alarms that roll a guarded deployment back; used with ``deployment``.
        log_retention: Retention of the endpoint's log group. Defaults to one year.
        log_removal_policy: Defaults to ``RETAIN_ON_UPDATE_OR_DELETE`` (CloudFormation
            ``RetainExceptOnCreate``): the fixed-name log group survives updates and deletes, but not a
            failed first create, which a retry could not get past.
        config_removal_policy: What happens to the endpoint config when it leaves the template or its stack
            is deleted (``DeletionPolicy``); a replaced config is always kept (see below). Defaults to
            ``RETAIN_ON_UPDATE_OR_DELETE`` (``RetainExceptOnCreate``); ``DESTROY`` suits throw-away
            environments.
        log_key: Encrypts the endpoint's log group; its key policy must let CloudWatch Logs use it
            (``ModelStore`` does for the stage's log groups). Defaults to Logs' own encryption.
        scaled: Auto-scaling owns the instance count. Then an update keeps the running count
            (``RetainAllVariantProperties``), and ``initial_instances`` applies at creation only;
            without scaling each update applies ``initial_instances``.
        deploy_instances: The fewest instances the variant can have when an update starts (the scaling
            minimum), which decides the ``auto`` traffic-shift strategy. Defaults to ``initial_instances``.
        instance_facts: The facts of a type the instance table lacks. Defaults to the table's.
        observability: The configuration's ``MetricsConfig``. Defaults to ``Observability()``.
        multi_model: The model is multi-model (no enhanced metrics). Defaults to False.
        fallback_instance_types: Instance pools after ``instance_type`` (``sagemaker_rules.fallback_instance_types``
            checks them). Defaults to none.
        capacity_reservation: The ML capacity reservation the instances launch into. Defaults to none.
        pool_model_names: The model each fallback pool serves instead of ``model`` (by instance type). Defaults to
            none.
        async_config: The configuration's ``AsyncInferenceConfig`` (``AsyncInference.config``): an asynchronous
            endpoint. Defaults to none: real-time.
        variants: The production variants, the incumbent first (``ServedVariant``), instead of the one variant
            the arguments above describe. Defaults to that one.
        shadow: The shadow variant (``ShadowProductionVariants``): a copy of the production variant's requests,
            its answers never returned. Needs exactly one production variant. Defaults to none.

    The rules SageMaker applies to these values (``deployment_spec.rules.sagemaker``) are checked by
    ``TritonSageMakerEndpoint`` before it builds this.

    Attributes:
        metrics: The (first) production variant's CloudWatch metrics.
        variants: Every variant, the shadow last, as ``EndpointVariant`` by name.
        guarded: The update is guarded (``DeploymentConfig``): a deployment was asked for and the endpoint has one
            production variant and no shadow.
        config: The ``CfnEndpointConfig``.
        resource: The ``CfnEndpoint``.
        log_group: The endpoint's log group, ``/aws/sagemaker/Endpoints/<name>``.
    """

    def __init__(self, scope: Construct, id_: str, *, model: TritonModel, endpoint_name: str, instance_type: str,
                 initial_instances: int = 1, variant_name: str = "AllTraffic",
                 inference_ami_version: Optional[str] = None, inference_ami_reason: Optional[str] = None,
                 volume_key: Optional[kms.IKey] = None,
                 volume_size_gb: Optional[int] = None,
                 startup_timeout: cdk.Duration = cdk.Duration.minutes(10),
                 download_timeout: cdk.Duration = cdk.Duration.minutes(10),
                 data_capture: Optional[DataCaptureSettings] = None, deployment: Optional[Deployment] = None,
                 rollback_alarms: Sequence[cloudwatch.IAlarm] = (),
                 log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
                 log_removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE,
                 config_removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE,
                 log_key: Optional[kms.IKey] = None, scaled: bool = False,
                 deploy_instances: Optional[int] = None,
                 instance_facts: Optional[instances.InstanceFacts] = None,
                 observability: Observability = Observability(), multi_model: bool = False,
                 fallback_instance_types: Sequence[str] = (),
                 capacity_reservation: Optional[CapacityReservation] = None,
                 pool_model_names: Optional[Mapping[str, str]] = None,
                 async_config: Optional[sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty] = None,
                 variants: Sequence[ServedVariant] = (), shadow: Optional[ServedVariant] = None) -> None:
        super().__init__(scope, id_)
        production = list(variants) or [ServedVariant(
            variant_name, model, instance_type, initial_instances, 1.0, instance_facts,
            tuple(fallback_instance_types), dict(pool_model_names or {}), capacity_reservation)]
        served = production + ([shadow] if shadow is not None else [])
        fleet_start_s = int(startup_timeout.to_seconds() + download_timeout.to_seconds())
        # Deployment guardrails need the same variant names in the old and the new configuration (SageMaker
        # developer guide, "Deployment guardrails > Exclusions"), which adding or removing a variant or a shadow
        # breaks, and synth cannot see what is deployed. So only a lone production variant is guarded; with more,
        # SageMaker's default applies: "If no update policy is specified, SageMaker uses a blue/green deployment
        # strategy with all at once traffic shifting by default" (botocore's SageMaker service model,
        # DeploymentConfig.BlueGreenUpdatePolicy), and the comparison alarms watch the candidate instead.
        self.guarded = deployment is not None and len(production) == 1 and shadow is None
        if deployment is not None and not self.guarded:
            cdk.Annotations.of(self).add_info((
                f"endpoint {endpoint_name}: deployment guardrails left out with {len(production)} production "
                f"variant(s){' and a shadow' if shadow is not None else ''}: a blue/green update needs the same "
                "variant names in the old and the new configuration (SageMaker developer guide, Deployment "
                "guardrails > Exclusions), which adding or removing a variant breaks; SageMaker updates the "
                "endpoint blue/green with all traffic shifted at once and no auto-rollback, and the comparison "
                "alarms watch the candidate against the incumbent"))
        deployment = deployment.resolved(deploy_instances or initial_instances, fleet_start_s) \
            if deployment is not None and self.guarded else None
        first = production[0]
        itype = instances.lookup(first.instance_type, first.instance_facts)
        self.endpoint_name = endpoint_name
        self.variant_name = first.name
        self.instance_type = first.instance_type
        self.instance = itype
        self.metrics = EndpointMetrics(endpoint_name, first.name)
        # SageMaker writes the container's output here; created up front to set retention and removal.
        self.log_group = logs.LogGroup(self, "Logs", log_group_name=f"/aws/sagemaker/Endpoints/{endpoint_name}",
                                       retention=log_retention, removal_policy=log_removal_policy,
                                       encryption_key=log_key)
        if log_key is not None:
            control_tower.acknowledge_imported_key(self.log_group, log_key)
        self.instance_types = (first.instance_type, *first.fallback_instance_types)
        self.variants = {v.name: EndpointVariant(
            endpoint_name, v.name, v.instance_type, instances.lookup(v.instance_type, v.instance_facts),
            (v.instance_type, *v.fallback_instance_types), EndpointMetrics(endpoint_name, v.name), v is shadow)
            for v in served}

        def production_variant(v: ServedVariant) -> sagemaker.CfnEndpointConfig.ProductionVariantProperty:
            found = self.variants[v.name].instance
            pools = instance_pools(v.instance_type, v.fallback_instance_types, v.pool_model_names)
            return sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                variant_name=v.name, model_name=v.model.model_name,
                instance_type=None if pools else v.instance_type, instance_pools=pools,
                initial_instance_count=v.initial_instances, initial_variant_weight=v.weight,
                inference_ami_version=inference_ami_version if found and found.is_gpu else None,
                volume_size_in_gb=None if found and found.family.nvme else volume_size_gb,
                container_startup_health_check_timeout_in_seconds=int(startup_timeout.to_seconds()),
                model_data_download_timeout_in_seconds=int(download_timeout.to_seconds()),
                capacity_reservation_config=reservation_config(v.capacity_reservation))

        variant_properties = [production_variant(v) for v in production]
        nvme = [v.instance_type for v in served if (found := self.variants[v.name].instance) and found.family.nvme]
        capture = None
        if data_capture is not None:
            capture = sagemaker.CfnEndpointConfig.DataCaptureConfigProperty(
                enable_capture=True, initial_sampling_percentage=data_capture.sampling_percent,
                destination_s3_uri=data_capture.destination_url, kms_key_id=data_capture.key.key_arn,
                capture_options=[sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode=m)
                                 for m in _CAPTURE[data_capture.mode]],
                # JSON requests (KServe v2) stay readable; binary+json payloads are stored base64.
                capture_content_type_header=sagemaker.CfnEndpointConfig.CaptureContentTypeHeaderProperty(
                    json_content_types=["application/json"]))
        # One DataCaptureConfig covers every variant, the shadow's too (SageMaker writes
        # <destination>/<endpoint>/<variant>/yyyy/mm/dd/hh/; developer guide, "Create a shadow test": data capture
        # logs the production and shadow variants' requests and responses).
        self.config = sagemaker.CfnEndpointConfig(
            self, "Config", production_variants=variant_properties, data_capture_config=capture,
            shadow_production_variants=[production_variant(shadow)] if shadow is not None else None,
            async_inference_config=async_config,
            metrics_config=metrics_config(observability, multi_model),
            kms_key_id=volume_key.key_arn if volume_key is not None else None)
        security_hub.acknowledge(self.config, security_hub.INSTANCE_COUNT, security_hub.ONE_INSTANCE,
                                 when=any(v.initial_instances < 2 for v in production))
        # A replaced config is kept, not deleted in the stack update's cleanup: if SageMaker's auto-rollback
        # returned the endpoint to it while CloudFormation saw the update succeed, deleting it would leave
        # the endpoint on a deleted config. Configs cost nothing; docs/operations/changes.md says how to prune them.
        # A config that leaves the template (a changed logical ID) meets the same cleanup: the default
        # removal policy keeps it too; DESTROY (throw-away environments) deletes it with its stack.
        self.config.apply_removal_policy(config_removal_policy, apply_to_update_replace_policy=False)
        self.config.cfn_options.update_replace_policy = cdk.CfnDeletionPolicy.RETAIN
        if inference_ami_reason and any(v.inference_ami_version for v in variant_properties):
            self.config.add_metadata("InferenceAmiVersion", inference_ami_reason)
        if nvme and volume_key is not None:
            self.config.add_metadata("KmsKeyId", (
                f"{', '.join(dict.fromkeys(nvme))} has local NVMe instance storage, which a hardware module on the "
                "instance encrypts; the key encrypts what SageMaker keeps on an attached volume (CreateEndpointConfig, "
                "KmsKeyId). VolumeSizeInGB is left out there: there is no such volume to size."))
        self.resource = sagemaker.CfnEndpoint(
            self, "Resource", endpoint_config_name=self.config.attr_endpoint_config_name,
            endpoint_name=endpoint_name, retain_all_variant_properties=scaled,
            # Retain only what the autoscaler owns (the count); weight and data capture follow the config.
            exclude_retained_variant_properties=[
                sagemaker.CfnEndpoint.VariantPropertyProperty(variant_property_type=kind)
                for kind in ("DesiredWeight", "DataCaptureConfig")] if scaled else None,
            deployment_config=_deployment_config(deployment, rollback_alarms) if deployment else None)
        if scaled:
            cdk.Annotations.of(self).add_info(
                f"endpoint {endpoint_name}: auto-scaling owns the instance count, so an update keeps the running "
                f"count; initial_instances ({initial_instances}) applies when the endpoint is created (change the "
                "scaling bounds to move a running endpoint)")


def _deployment_config(deployment: Deployment, alarms: Sequence[cloudwatch.IAlarm]
                       ) -> sagemaker.CfnEndpoint.DeploymentConfigProperty:
    size = sagemaker.CfnEndpoint.CapacitySizeProperty
    routing = sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(
        type=deployment.strategy.value.upper(), wait_interval_in_seconds=deployment.wait_s,
        canary_size=size(type="CAPACITY_PERCENT", value=deployment.canary_percent)
        if deployment.strategy is Strategy.CANARY else None,
        linear_step_size=size(type="CAPACITY_PERCENT", value=deployment.linear_step_percent)
        if deployment.strategy is Strategy.LINEAR else None)
    rollback = sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
        alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=a.alarm_name) for a in alarms]) \
        if deployment.auto_rollback else None
    return sagemaker.CfnEndpoint.DeploymentConfigProperty(
        blue_green_update_policy=sagemaker.CfnEndpoint.BlueGreenUpdatePolicyProperty(
            traffic_routing_configuration=routing, termination_wait_in_seconds=deployment.termination_wait_s,
            maximum_execution_timeout_in_seconds=deployment.max_execution_timeout_s),
        auto_rollback_configuration=rollback)


def metrics_config(observability: Observability, multi_model: bool) -> sagemaker.CfnEndpointConfig.MetricsConfigProperty:
    """``MetricsConfig``, set explicitly so a review sees it (detailed observability is on by default only for
    configurations created after it existed; botocore's SageMaker service model, ``MetricsConfig``)."""
    return sagemaker.CfnEndpointConfig.MetricsConfigProperty(
        enable_detailed_observability=observability.detailed,
        enable_enhanced_metrics=observability.enhanced_for(multi_model),
        metric_publish_frequency_in_seconds=observability.publish_frequency_s)


def reservation_config(reservation: Optional[CapacityReservation]) -> Optional[
        sagemaker.CfnEndpointConfig.CapacityReservationConfigProperty]:
    """The variant's ``CapacityReservationConfig``: launch only into the reservation (its one preference)."""
    if reservation is None:
        return None
    return sagemaker.CfnEndpointConfig.CapacityReservationConfigProperty(
        capacity_reservation_preference=PREFERENCE, ml_reservation_arn=reservation.arn)


def instance_pools(instance_type: str, fallbacks: Sequence[str],
                   model_names: Optional[Mapping[str, str]] = None) -> Optional[
        list[sagemaker.CfnEndpointConfig.InstancePoolProperty]]:
    """The variant's ``InstancePools``, which replace its ``InstanceType`` (realtime-endpoints-heterogeneous.html):
    the type first (priority 1), then the fallbacks in order, each with its own model where ``model_names`` has
    one (``ModelNameOverride``); None without fallbacks."""
    if not fallbacks:
        return None
    return [sagemaker.CfnEndpointConfig.InstancePoolProperty(instance_type=name, priority=i + 1,
                                                             model_name_override=(model_names or {}).get(name))
            for i, name in enumerate([instance_type, *fallbacks])]
