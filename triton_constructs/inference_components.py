"""Several Triton models on one SageMaker endpoint, each an inference component with its own reservation.

The endpoint configuration's only variant names no model: it has an instance type and
``ManagedInstanceScaling`` (SageMaker adds and removes instances to fit the copies), and the configuration
carries the ``ExecutionRoleArn`` (CreateEndpointConfig API reference). Each model becomes a
``CfnModel`` (the Triton image on its archive, ``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME`` where the archive holds
an ensemble and its steps) and an ``AWS::SageMaker::InferenceComponent`` that reserves GPUs, CPU cores and
memory per copy (``ComputeResourceRequirements``) and runs ``RuntimeConfig.CopyCount`` copies; under
guardrails it updates in rolling batches and rolls back on its own alarms
(``InferenceComponentDeploymentConfig``). Callers name the component in ``InvokeEndpoint``
(``InferenceComponentName``).

The L1 ``CfnInferenceComponent`` of aws-cdk-lib 2.275 is what the CDK offers; the project's rules
(``deployment_spec.facts.component_rules``) check every setting SageMaker would refuse minutes into a deploy.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch, aws_iam as iam, aws_kms as kms, aws_logs as logs
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from deployment_spec.facts import component_rules as rules
from deployment_spec.rules import component_endpoint, generation_alarms
from deployment_spec.sections.capacity_reservation import CapacityReservation
from deployment_spec.sections.components import CopyCount, CopyScaling, ManagedInstances, RollingUpdate
from deployment_spec.sections.endpoint import Alarms, Observability
from deployment_spec.sections.generation import INFERENCE_TYPE_VARIABLE
from deployment_spec.parsing.errors import Problem, PropsError, prefixed, raise_problems
from deployment_spec.parsing.parse import Validated
from triton_constructs import control_tower, security_hub
from triton_constructs.component_monitoring import ComponentAlarms, ComponentDashboard, component_metric
from triton_constructs.promql_graphs import PromQLGraphs
from triton_constructs.component_scaling import ComponentScaling
from triton_constructs.endpoint import instance_pools, metrics_config, reservation_config
from triton_constructs.endpoint_reference import endpoint_arn
from triton_constructs.errors import SynthError
from triton_constructs.execution_role import TritonExecutionRole
from triton_constructs.image import TritonImage
from triton_constructs.model_store import COMPONENT_LOG_GROUPS, ENDPOINT_LOG_GROUPS
from triton_constructs.triton_model import TritonModel



@dataclasses.dataclass(frozen=True)
class ComponentProps(CopyCount, Validated):
    """One inference component: a Triton model archive, what each copy reserves, how many copies run.

    Attributes:
        model: The model callers reach (the archive's top-level model, or the ensemble among several).
        name: Its ``InferenceComponentName`` (1-63 letters, digits, '-'), what callers pass to InvokeEndpoint.
        model_data_url: ``s3://`` URL of the archive (one ``.tar.gz``).
        archive_models: The top-level model directories in the archive.
        default_model: ``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME``; needed when the archive holds several
            top-level models (the container exits without it). Defaults to none (one model).
        gpus: GPUs one copy reserves (``NumberOfAcceleratorDevicesRequired``; 0 leaves it out). Defaults to 1.
        cpu_cores: CPU cores one copy reserves. Defaults to none (not reserved).
        memory_mb: Memory one copy reserves (``MinMemoryRequiredInMb``). Defaults to 1024.
        max_memory_mb: Its upper limit. Defaults to none.
        copies: Copies at creation (``CopyCount``). Defaults to 1.
        scaling: Target tracking of the copy count. Defaults to none: ``copies`` fixed.
        environment: The container environment (``container_environment``). Defaults to none.
    """

    model: str
    name: str
    model_data_url: str
    archive_models: Sequence[str]
    default_model: Optional[str] = None
    gpus: int = 1
    cpu_cores: Optional[float] = None
    memory_mb: int = 1024
    max_memory_mb: Optional[int] = None
    copies: int = 1
    scaling: Optional[CopyScaling] = None
    environment: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def problems(self, path: str) -> list[Problem]:
        """What CreateInferenceComponent or the Triton container would refuse (``Validated`` raises them)."""
        found = (rules.component_name_valid(self.name)
                 + rules.default_model_required(list(self.archive_models), self.default_model)
                 + rules.memory_bounds(self.memory_mb, self.max_memory_mb)
                 + self.copy_problems())
        return prefixed(path, found)

    @property
    def demand(self) -> rules.Demand:
        return rules.Demand(self.model, self.gpus, self.cpu_cores, self.memory_mb, self.copies)


class TritonInferenceComponents(Construct):
    """A SageMaker endpoint that hosts one inference component per Triton model.

    Checked at synth, all problems at once: each copy fits one instance (GPUs, vCPUs, memory of
    ``capacity``), the copies at creation and at their scaling maximum fit into
    ``managed_instances.max_instances`` instances, scale to zero only when every component may reach zero
    copies, a rolling update's timeout covers its batches.

    Args:
        scope: Parent construct.
        id_: Construct ID.
        image: The Triton image every component runs.
        execution_role: Runs the models and the endpoint: reads the archives, pulls the image, writes the
            logs (granted here) and reads the rollback alarms (granted here, under guardrails).
        endpoint_name: The endpoint's name (the alarms and log groups are named after it and its components).
        instance_type: e.g. ``ml.g5.12xlarge``.
        components: The components, at least one.
        capacity: What one instance offers the copies. Defaults to the instance table's GPUs, vCPUs and memory
            of ``instance_type`` (``component_endpoint.capacity``); give it for a type the table lacks.
        initial_instances: Instances at creation (at least 1, even with ``min_instances`` 0). Defaults to 1.
        managed_instances: The instance bounds SageMaker keeps. Defaults to 1..``initial_instances``.
        variant_name: Defaults to ``AllTraffic``.
        inference_ami_version: Host AMI for GPU types. Defaults to SageMaker's default AMI.
        inference_ami_reason: Why that AMI; written into the configuration's template metadata.
        volume_key: Encrypts the endpoint's storage volume. Defaults to an AWS-managed key.
        startup_timeout: Each copy's container health-check timeout. Defaults to 10 minutes.
        download_timeout: Each copy's model download timeout. Defaults to 10 minutes.
        rolling_update: Update components in rolling batches with auto-rollback on their alarms. Defaults to
            none: SageMaker's own update.
        thresholds: Alarm thresholds. Defaults to the spec's defaults.
        subnet_ids: Subnets for the models. Defaults to no VPC.
        security_group_ids: Security groups, with ``subnet_ids``.
        network_isolation: Forbid the containers any network access. Defaults to True.
        log_retention: Retention of the endpoint's and components' log groups. Defaults to one year.
        log_removal_policy: Defaults to ``RETAIN_ON_UPDATE_OR_DELETE`` (as ``TritonEndpoint``'s log group).
        log_key: Encrypts the log groups. Defaults to CloudWatch Logs' own encryption.
        removal_policy: What happens to the endpoint configuration and the models when they leave the template
            or the stack is deleted (``DeletionPolicy``); a replaced one is always kept (a rolled-back update may
            still use it). Defaults to ``RETAIN_ON_UPDATE_OR_DELETE``; ``DESTROY`` suits throw-away environments.
        capacity_reservation: The ML capacity reservation the instances launch into. Defaults to none.
        fallback_instance_types: Instance pools after ``instance_type``; every copy must fit each. Defaults to none.
        graphs: Draws Triton's metrics on each component's dashboard (``PromQLGraphs``). Defaults to none.

    Attributes:
        config: The ``CfnEndpointConfig``.
        endpoint: The ``CfnEndpoint``.
        components: The ``CfnInferenceComponent`` of each component, by model.
        alarms: The ``ComponentAlarms`` of each component, by model.
        scaling: The ``ComponentScaling`` of each scaled component, by model.
    """

    def __init__(self, scope: Construct, id_: str, *, image: TritonImage, execution_role: TritonExecutionRole,
                 endpoint_name: str, instance_type: str, components: Sequence[ComponentProps],
                 capacity: Optional[rules.InstanceCapacity] = None, initial_instances: int = 1,
                 managed_instances: Optional[ManagedInstances] = None, variant_name: str = "AllTraffic",
                 inference_ami_version: Optional[str] = None, inference_ami_reason: Optional[str] = None,
                 volume_key: Optional[kms.IKey] = None,
                 startup_timeout: cdk.Duration = cdk.Duration.minutes(10),
                 download_timeout: cdk.Duration = cdk.Duration.minutes(10),
                 rolling_update: Optional[RollingUpdate] = None, thresholds: Alarms = Alarms(),
                 subnet_ids: Sequence[str] = (), security_group_ids: Sequence[str] = (),
                 network_isolation: bool = True,
                 log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
                 log_removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE,
                 log_key: Optional[kms.IKey] = None,
                 removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE,
                 observability: Observability = Observability(),
                 capacity_reservation: Optional[CapacityReservation] = None,
                 fallback_instance_types: Sequence[str] = (), graphs: Optional[PromQLGraphs] = None) -> None:
        super().__init__(scope, id_)
        capacity = capacity or component_endpoint.capacity(instance_type)
        if capacity is None:
            raise PropsError(f"TritonInferenceComponents {endpoint_name}", [Problem(
                "instance_type", repr(instance_type), "a type of the instance table (deployment_spec/facts/instances.py)",
                "use a known type, or give capacity=InstanceCapacity(...)")])
        bounds = managed_instances or ManagedInstances(1, max(1, initial_instances))
        copy_start_s = int(startup_timeout.to_seconds() + download_timeout.to_seconds())
        problems = self._problems(components, capacity, initial_instances, bounds, rolling_update, copy_start_s)
        for i, fallback in enumerate(fallback_instance_types):  # the copies must fit whichever pool SageMaker takes
            pool = component_endpoint.capacity(fallback)
            if pool is not None and not problems:  # one root cause, one problem
                problems += prefixed(f"fallback_instance_types[{i}]", rules.placement_problems(
                    [c.demand for c in components],
                    [dataclasses.replace(c.demand, copies=c.max_copies) for c in components], pool,
                    bounds.max_instances))
        problems += _time_to_first_token_problems(components, thresholds, observability)
        raise_problems(f"TritonInferenceComponents {endpoint_name}", problems)
        self.endpoint_name = endpoint_name
        self.endpoint_arn = endpoint_arn(self, endpoint_name)
        self.variant_name = variant_name
        role = execution_role.role
        log_args: dict[str, Any] = dict(retention=log_retention, removal_policy=log_removal_policy,
                                        encryption_key=log_key)
        self.log_group = logs.LogGroup(self, "Logs", log_group_name=f"{ENDPOINT_LOG_GROUPS}{endpoint_name}",
                                       **log_args)
        execution_role.grant_logs(self.log_group)
        if log_key is not None:
            control_tower.acknowledge_imported_key(self.log_group, log_key)
        gpu = capacity.gpus > 0
        pools = instance_pools(instance_type, fallback_instance_types)
        variant = sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=variant_name, instance_type=None if pools else instance_type, instance_pools=pools,
            initial_instance_count=initial_instances,
            managed_instance_scaling=sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
                status="ENABLED", min_instance_count=bounds.min_instances, max_instance_count=bounds.max_instances),
            # Each request goes to the copy with the fewest requests in flight (ProductionVariantRoutingConfig).
            routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                routing_strategy="LEAST_OUTSTANDING_REQUESTS"),
            inference_ami_version=inference_ami_version if gpu else None,
            capacity_reservation_config=reservation_config(capacity_reservation))
        self.config = sagemaker.CfnEndpointConfig(
            self, "Config", production_variants=[variant], execution_role_arn=role.role_arn,
            kms_key_id=volume_key.key_arn if volume_key is not None else None,
            metrics_config=metrics_config(observability, multi_model=False))
        security_hub.acknowledge(self.config, security_hub.INSTANCE_COUNT, security_hub.ONE_INSTANCE,
                                 when=initial_instances < 2)
        # Kept when replaced, as TritonEndpoint's: a rolled-back endpoint may still use it.
        _keep_when_replaced(self.config, removal_policy)
        if inference_ami_reason and variant.inference_ami_version:
            self.config.add_metadata("InferenceAmiVersion", inference_ami_reason)
        policy = role.node.try_find_child("DefaultPolicy")
        self.config.node.add_dependency(policy if policy is not None else role)
        self.endpoint = sagemaker.CfnEndpoint(self, "Resource", endpoint_name=endpoint_name,
                                              endpoint_config_name=self.config.attr_endpoint_config_name)
        self.components: dict[str, sagemaker.CfnInferenceComponent] = {}
        self.alarms: dict[str, ComponentAlarms] = {}
        self.scaling: dict[str, ComponentScaling] = {}
        self._names = {c.model: c.name for c in components}
        rollback: list[cloudwatch.IAlarm] = []
        for props in components:
            group = Construct(self, props.model)
            model = TritonModel(group, "Model", image=image, role=role, model_data_url=props.model_data_url,
                                environment=props.environment, subnet_ids=subnet_ids,
                                security_group_ids=security_group_ids, network_isolation=network_isolation)
            _keep_when_replaced(model.resource, removal_policy)
            component_logs = logs.LogGroup(group, "Logs", log_group_name=f"{COMPONENT_LOG_GROUPS}{props.name}", **log_args)
            execution_role.grant_logs(component_logs)
            if log_key is not None:
                control_tower.acknowledge_imported_key(component_logs, log_key)
            triton_metrics = observability.detailed and props.environment.get("SAGEMAKER_TRITON_ALLOW_METRICS") == "true"
            generating = generation_alarms.generates(props.environment.get(INFERENCE_TYPE_VARIABLE))
            alarms = ComponentAlarms(group, "Alarms", component_name=props.name, thresholds=thresholds,
                                     gpus=props.gpus, endpoint_name=endpoint_name if triton_metrics else None,
                                     topic=getattr(thresholds, "topic", None), generating=generating)
            if rolling_update is not None and rolling_update.auto_rollback:
                rollback += [alarms.errors, alarms.latency]
            component = sagemaker.CfnInferenceComponent(
                group, "Resource", endpoint_name=self.endpoint.attr_endpoint_name, variant_name=variant_name,
                inference_component_name=props.name,
                specification=_specification(props, model, startup_timeout, download_timeout),
                runtime_config=sagemaker.CfnInferenceComponent.InferenceComponentRuntimeConfigProperty(
                    copy_count=props.copies),
                deployment_config=_deployment_config(rolling_update, [alarms.errors, alarms.latency], copy_start_s)
                if rolling_update is not None else None)
            self.components[props.model] = component
            self.alarms[props.model] = alarms
            if props.scaling is not None:
                self.scaling[props.model] = ComponentScaling(group, "Scaling", component=component,
                                                             component_name=props.name, scaling=props.scaling)
            ComponentDashboard(group, "Dashboard", component_name=props.name, endpoint_name=endpoint_name,
                               variant_name=variant_name, latency_sla_ms=thresholds.latency_sla_ms,
                               per_copy_target=props.scaling.per_copy_target if props.scaling else None,
                               triton_alarm=alarms.triton_queue, triton_graphs=graphs, generating=generating)
        if rollback:
            execution_role.grant_describe_alarms(rollback)

    @staticmethod
    def _problems(components: Sequence[ComponentProps], capacity: rules.InstanceCapacity, initial_instances: int,
                  bounds: ManagedInstances, rolling_update: Optional[RollingUpdate],
                  copy_start_s: int) -> list[Problem]:
        if not components:
            return [Problem("components", "none", "one or more ComponentProps", "give the models to host")]
        out = rules.initial_within_instances(initial_instances, bounds.min_instances, bounds.max_instances)
        out += rules.instance_bounds(bounds.min_instances, bounds.max_instances)
        out += rules.scale_to_zero(bounds.min_instances, {c.model: c.min_copies for c in components})
        out += rules.placement_problems([c.demand for c in components],
                                        [dataclasses.replace(c.demand, copies=c.max_copies) for c in components],
                                        capacity, bounds.max_instances)
        if rolling_update is not None:
            out += rules.rolling_timeout(rolling_update.max_execution_timeout_s, rolling_update.batch_percent,
                                         rolling_update.wait_s, copy_start_s)
        return out

    def component_name(self, model: str) -> str:
        """The ``InferenceComponentName`` of ``model``'s component."""
        if model not in self._names:
            raise SynthError(f"endpoint {self.endpoint_name}", [
                f"no component serves model {model!r}; components: {', '.join(self._names)}"])
        return self._names[model]

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Lets ``grantee`` call InvokeEndpoint on this endpoint (any of its components)."""
        return iam.Grant.add_to_principal(grantee=grantee, actions=["sagemaker:InvokeEndpoint"],
                                          resource_arns=[self.endpoint_arn])  # not the Ref: endpoint_reference

    def metric_invocations(self, model: str) -> cloudwatch.Metric:
        """Requests to ``model``'s component per minute (Sum)."""
        return component_metric(self.component_name(model), "Invocations", "Sum")

    def metric_model_latency(self, model: str) -> cloudwatch.Metric:
        """``model``'s component's ModelLatency (microseconds, Average)."""
        return component_metric(self.component_name(model), "ModelLatency", "Average")


def _time_to_first_token_problems(components: Sequence[ComponentProps], thresholds: Alarms,
                                  observability: Observability) -> list[Problem]:
    """The threshold needs a component whose container generates, with Triton's metrics and detailed observability
    (the rule of a single-model endpoint, applied to the first generating component, else the first)."""
    if thresholds.time_to_first_token_ms is None or not components:
        return []
    generating = [c for c in components if generation_alarms.generates(c.environment.get(INFERENCE_TYPE_VARIABLE))]
    first = (generating or list(components))[0]
    return generation_alarms.time_to_first_token_problems(
        thresholds.time_to_first_token_ms, first.environment.get(INFERENCE_TYPE_VARIABLE),
        metrics=first.environment.get("SAGEMAKER_TRITON_ALLOW_METRICS") == "true", detailed=observability.detailed,
        path="thresholds.time_to_first_token_ms")


def _keep_when_replaced(resource: cdk.CfnResource, removal_policy: cdk.RemovalPolicy) -> None:
    """Replaced: retained (an update SageMaker rolls back may still use it); deleted or kept as ``removal_policy`` says."""
    resource.apply_removal_policy(removal_policy, apply_to_update_replace_policy=False)
    resource.cfn_options.update_replace_policy = cdk.CfnDeletionPolicy.RETAIN


def _specification(props: ComponentProps, model: TritonModel, startup_timeout: cdk.Duration,
                   download_timeout: cdk.Duration) -> sagemaker.CfnInferenceComponent.InferenceComponentSpecificationProperty:
    spec = sagemaker.CfnInferenceComponent
    return spec.InferenceComponentSpecificationProperty(
        model_name=model.model_name,
        compute_resource_requirements=spec.InferenceComponentComputeResourceRequirementsProperty(
            number_of_accelerator_devices_required=props.gpus or None, number_of_cpu_cores_required=props.cpu_cores,
            min_memory_required_in_mb=props.memory_mb, max_memory_required_in_mb=props.max_memory_mb),
        startup_parameters=spec.InferenceComponentStartupParametersProperty(
            container_startup_health_check_timeout_in_seconds=int(startup_timeout.to_seconds()),
            model_data_download_timeout_in_seconds=int(download_timeout.to_seconds())))


def _deployment_config(update: RollingUpdate, alarms: Sequence[cloudwatch.IAlarm], copy_start_s: int
                       ) -> sagemaker.CfnInferenceComponent.InferenceComponentDeploymentConfigProperty:
    spec = sagemaker.CfnInferenceComponent
    size = spec.InferenceComponentCapacitySizeProperty
    return spec.InferenceComponentDeploymentConfigProperty(
        rolling_update_policy=spec.InferenceComponentRollingUpdatePolicyProperty(
            maximum_batch_size=size(type="CAPACITY_PERCENT", value=update.batch_percent),
            wait_interval_in_seconds=update.wait_s,
            maximum_execution_timeout_in_seconds=update.timeout_s(copy_start_s),
            rollback_maximum_batch_size=size(type="CAPACITY_PERCENT", value=update.rollback_batch_percent)
            if update.rollback_batch_percent is not None else None),
        auto_rollback_configuration=spec.AutoRollbackConfigurationProperty(
            alarms=[spec.AlarmProperty(alarm_name=a.alarm_name) for a in alarms]) if update.auto_rollback else None)
