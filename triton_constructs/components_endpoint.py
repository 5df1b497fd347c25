"""``TritonComponentsEndpoint``: several Triton models on one SageMaker endpoint, each an inference component
with its own reservation, copies and scaling, for any CDK app."""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch, aws_ecr as ecr, aws_iam as iam, aws_kms as kms, aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from deployment_spec.facts import instances, network_rules, triton_metrics
from deployment_spec.rules import sagemaker as sagemaker_rules, streaming
from deployment_spec.sections.capacity_reservation import CapacityReservation, reservation_problems
from deployment_spec.rules.component_endpoint import archive_default_model, capacity
from deployment_spec.sections.components import ComponentSpec, ManagedInstances, RollingUpdate
from deployment_spec.rules.container_env import container_environment
from deployment_spec.sections.endpoint import Alarms, Container, EndpointSpec, Observability
from deployment_spec.parsing.errors import Problem, PropsError, raise_problems
from deployment_spec.parsing.parse import values_problems
from deployment_spec.facts.serving_runtimes import DEFAULT_TRITON_VERSION
from triton_constructs import endpoint_storage, security_hub, triton_promql
from triton_constructs.component_monitoring import COMPONENT_NAMESPACE, component_metric
from triton_constructs.endpoint_reference import checked_metric, endpoint_arn, with_options
from triton_constructs.execution_role import TritonExecutionRole
from triton_constructs.metrics import INVOCATION_NAMESPACE
from triton_constructs.image import TritonImage
from triton_constructs.inference_components import ComponentProps, TritonInferenceComponents
from triton_constructs.model_repositories import ModelRepositories
from triton_constructs.model_store import COMPONENT_LOG_GROUPS, ENDPOINT_LOG_GROUPS, allow_logs
from triton_constructs.network import NetworkProps
from triton_constructs.promql_graphs import PromQLGraphs
from triton_constructs.props import checked_props


class TritonComponentsEndpoint(Construct):
    """A SageMaker endpoint running NVIDIA Triton with one inference component per model archive.

    Each archive of ``models`` becomes one component serving the archive's first model (an ensemble with
    its steps: ``SAGEMAKER_TRITON_DEFAULT_MODEL_NAME`` is set to it); callers name the component in
    InvokeEndpoint (``InferenceComponentName``, ``component_name(model)``). SageMaker adds and removes
    instances within ``managed_instances`` to place the copies. Everything SageMaker would refuse minutes
    into a deploy is refused at synth, every problem at once (``PropsError``): reservations that do not fit
    the instance type, copies that can never be placed, scale to zero where it is not allowed, an archive
    with several models, and the endpoint rules ``TritonSageMakerEndpoint`` applies.
    Secure by default as ``TritonSageMakerEndpoint``: a KMS-encrypted model bucket with access logs (unless
    you bring one), a least-privilege execution role, network isolation, encrypted logs.

    Args:
        scope: Parent construct.
        id_: Construct ID.
        models: One archive per component (``ModelRepositories.from_manifest`` or ``from_archives``).
        instance_type: e.g. ``ml.g5.12xlarge``: a type of the instance table (its GPUs, vCPUs and memory
            bound what the copies may reserve).
        components: Per model (an archive's first model): what one copy reserves, the copies at creation,
            their scaling. Defaults to ``ComponentSpec()`` for each: one copy, one GPU on a GPU type, 1 GiB.
        triton_version: The ``sagemaker-tritonserver`` release. Defaults to the newest one verified.
        endpoint_name: Defaults to a name derived from the construct path (stable across deploys).
        component_names: ``InferenceComponentName`` per model. Defaults to ``<endpoint_name>-<model>``.
        initial_instances: Instances at creation (at least 1). Defaults to 1.
        managed_instances: The instance bounds SageMaker keeps (minimum 0: scale to zero, when every
            component may reach zero copies). Defaults to 1..``initial_instances``.
        variant_name: Defaults to ``AllTraffic``.
        rolling_update: Update components in rolling batches, rolled back on their latency and 5XX alarms.
            Defaults to none: SageMaker's own update.
        alarms: Thresholds of each component's alarms. Defaults to ``Alarms()``.
        network: VPC, security groups and network isolation. Defaults to no VPC, isolation on.
        container: ``SAGEMAKER_TRITON_*`` settings of every component. Defaults to ``Container()``.
        bucket, encryption_key, storage_name, removal_policy, log_retention: As ``TritonSageMakerEndpoint``'s.
        startup_timeout_s: Each copy's container health-check timeout (60-3600). Defaults to 600.
        download_timeout_s: Each copy's model download timeout (60-3600). Defaults to 600.
        instance_facts: As ``TritonSageMakerEndpoint``'s: the facts of a real type the table lacks.
        observability: As ``TritonSageMakerEndpoint``'s (enhanced metrics per component).
        capacity_reservation: As ``TritonSageMakerEndpoint``'s; the managed instance ceiling stays within it.
        fallback_instance_types: Instance pools, as ``TritonSageMakerEndpoint``'s; every component's copies must
            fit each pool's instances as they fit ``instance_type``'s. Defaults to none.
        image_repository: As ``TritonSageMakerEndpoint``'s: the Triton image from your ECR repository.
        image_tag: As ``TritonSageMakerEndpoint``'s. Defaults to AWS's tag.

    Attributes:
        models, endpoint_name, endpoint_arn, variant_name, bucket, key, role: As ``TritonSageMakerEndpoint``'s.
        serving: The ``TritonInferenceComponents`` (endpoint, config, components, alarms, scaling by model).
        graphs: ``PromQLGraphs`` drawing Triton's metrics on each component's dashboard
            (``observability.graphs``), or None.
    """

    @checked_props
    def __init__(self, scope: Construct, id_: str, *, models: ModelRepositories, instance_type: str,
                 components: Optional[Mapping[str, ComponentSpec]] = None,
                 triton_version: str = DEFAULT_TRITON_VERSION, endpoint_name: Optional[str] = None,
                 component_names: Optional[Mapping[str, str]] = None, initial_instances: int = 1,
                 managed_instances: Optional[ManagedInstances] = None, variant_name: str = "AllTraffic",
                 rolling_update: Optional[RollingUpdate] = None, alarms: Alarms = Alarms(),
                 network: Optional[NetworkProps] = None, container: Container = Container(),
                 bucket: Optional[s3.IBucket] = None, encryption_key: Optional[kms.IKey] = None,
                 storage_name: Optional[str] = None, removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
                 log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
                 startup_timeout_s: int = 600, download_timeout_s: int = 600,
                 instance_facts: Optional[instances.InstanceFacts] = None,
                 observability: Observability = Observability(),
                 capacity_reservation: Optional[CapacityReservation] = None,
                 fallback_instance_types: Sequence[str] = (),
                 image_repository: Optional[ecr.IRepository] = None, image_tag: Optional[str] = None) -> None:
        super().__init__(scope, id_)
        name = endpoint_name or cdk.Names.unique_resource_name(self, max_length=50, separator="-")
        network = network or NetworkProps()
        components = dict(components or {})
        served = {archive.models[0]: archive for archive in models.archives}
        names = {model: (component_names or {}).get(model, f"{name}-{model}") for model in served}
        problems = values_problems(EndpointSpec, dict(
            initial_instances=initial_instances, variant_name=variant_name,
            startup_timeout_s=startup_timeout_s, download_timeout_s=download_timeout_s))
        problems += sagemaker_rules.endpoint_name_valid(name, "endpoint_name", repr(name),
                                                        "use letters, digits and '-' only")
        problems += sagemaker_rules.triton_version_known(triton_version)
        problems += sagemaker_rules.instance_type_known(instance_type, instance_facts)
        problems += sagemaker_rules.prefixed("network", network_rules.subnets_in_zones(len(network.subnet_ids()),
                                                                                       "subnets") + network.problems())
        problems += [Problem(f"components.{model}", repr(model), f"a model that leads an archive ({', '.join(served)})",
                             "key each ComponentSpec by the first model of its archive")
                     for model in components if model not in served]
        problems += [Problem(f"component_names.{model}", repr(model), f"a model that leads an archive "
                             f"({', '.join(served)})", "key each name by the first model of its archive")
                     for model in (component_names or {}) if model not in served]
        environment = {model: container_environment(container, multi_model=False,
                                                    default_model=archive_default_model(archive.models))
                       for model, archive in served.items()}
        for env in environment.values():
            problems += sagemaker_rules.container_environment_limits(env)
        problems += streaming.container_problems(container.inference_type, multi_model=False,
                                                 triton_version=triton_version)
        problems += triton_metrics.graphs_problems(
            observability.graphs, detailed=observability.detailed, container_metrics=container.metrics,
            path="observability.graphs")
        # One archive per component, read by one role: the archives' rules are a multi-model endpoint's.
        problems += models.problems(multi_model=True, triton_version=triton_version, instance_type=instance_type,
                                    instance_facts=instance_facts)
        problems += sagemaker_rules.fallback_instance_types(
            instance_type, fallback_instance_types, multi_model=False, triton_version=triton_version,
            volume_size_gb=None, instance_facts=instance_facts)
        for i, fallback in enumerate(fallback_instance_types):  # a TensorRT plan must run on every pool's GPU
            problems += sagemaker_rules.prefixed(f"fallback_instance_types[{i}]", models.problems(
                multi_model=True, triton_version=triton_version, instance_type=fallback))
        region = cdk.Stack.of(self).region
        problems += reservation_problems(
            capacity_reservation, instance_type=instance_type, fallbacks=tuple(fallback_instance_types),
            initial_instances=initial_instances,
            max_instances=(managed_instances or ManagedInstances(1, max(1, initial_instances))).max_instances,
            max_field="managed_instances.max_instances", region=None if cdk.Token.is_unresolved(region) else region)
        raise_problems(f"TritonComponentsEndpoint {self.node.path}", problems)

        self.models = models
        self.endpoint_name = name
        self.endpoint_arn = endpoint_arn(self, name)
        self.variant_name = variant_name
        storage_name = storage_name or name
        self.bucket, self.key = endpoint_storage.storage(
            self, bucket, encryption_key, removal_policy, needed=any(a.path is not None for a in models.archives))
        allow_logs(self.key, [f"{cdk.Stack.of(self).stack_name}-*", f"{ENDPOINT_LOG_GROUPS}{name}",
                              f"{COMPONENT_LOG_GROUPS}{name}-*"])
        image = TritonImage(self, "Image", version=triton_version, repository=image_repository, tag=image_tag)
        placement = network.function_placement(self)
        data = endpoint_storage.model_data(self, models, self.bucket, self.key, storage_name, placement)
        self.graphs = PromQLGraphs(self, "TritonGraphs", log_key=self.key, placement=placement) \
            if observability.graphs else None
        subnet_ids = network.subnet_ids()
        self.role = TritonExecutionRole(self, "ExecutionRole", image=image, bucket=data.bucket, key=self.key,
                                        model_prefix=data.prefix, vpc=bool(subnet_ids))
        itype = instances.lookup(instance_type, instance_facts)
        instance_gpus = itype.gpu_count if itype else 0
        props = []
        for model, archive in served.items():
            spec = components.get(model, ComponentSpec())
            props.append(ComponentProps(
                model=model, name=names[model], model_data_url=data.urls[archive.object_name],
                archive_models=archive.models, default_model=archive_default_model(archive.models),
                gpus=spec.reservation.gpus_on(instance_gpus), cpu_cores=spec.reservation.cpu_cores,
                memory_mb=spec.reservation.memory_mb, max_memory_mb=spec.reservation.max_memory_mb,
                copies=spec.copies, scaling=spec.scaling, environment=environment[model]))
        # Kept on update and delete unless removed by the operation that created it (as TritonSageMakerEndpoint).
        kept = cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE if removal_policy == cdk.RemovalPolicy.RETAIN \
            else removal_policy
        try:
            self.serving = TritonInferenceComponents(
                self, "Endpoint", image=image, execution_role=self.role, endpoint_name=name,
                instance_type=instance_type, components=props, initial_instances=initial_instances,
                capacity=capacity(instance_type, instance_facts),
                managed_instances=managed_instances or ManagedInstances(1, max(1, initial_instances)),
                variant_name=variant_name, inference_ami_version=image.inference_ami_version,
                inference_ami_reason=image.inference_ami_reason, volume_key=self.key,
                startup_timeout=cdk.Duration.seconds(startup_timeout_s),
                download_timeout=cdk.Duration.seconds(download_timeout_s), rolling_update=rolling_update,
                thresholds=alarms, subnet_ids=subnet_ids,
                security_group_ids=network.security_group_ids(
                    self, f"Triton endpoint {name}: no inbound; outbound for the model data download through the VPC"),
                network_isolation=network.isolation, log_retention=log_retention, log_removal_policy=kept,
                log_key=self.key, removal_policy=kept, observability=observability,
                capacity_reservation=capacity_reservation, fallback_instance_types=tuple(fallback_instance_types),
                graphs=self.graphs)
        except PropsError as caught:
            # The building block checks what the copies need of the instances: report it as this construct's.
            raise PropsError(f"TritonComponentsEndpoint {self.node.path}", caught.problems) from None
        self.node.default_child = self.serving.endpoint  # the CfnEndpoint, for escape hatches
        # Every component's model: the opt-out's reason (NetworkProps requires one).
        security_hub.acknowledge(self.serving, security_hub.NETWORK_ISOLATION, network.isolation_opt_out_reason or "",
                                 when=not network.isolation)
        if data.artifacts is not None:
            for component in self.serving.components.values():
                component.node.add_dependency(data.artifacts)  # the archives must be in place before copies start

    def component_name(self, model: str) -> str:
        """The ``InferenceComponentName`` of ``model``'s component."""
        return self.serving.component_name(model)

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Lets ``grantee`` call InvokeEndpoint on this endpoint (any of its components), by its written-out ARN."""
        return iam.Grant.add_to_principal(grantee=grantee, actions=["sagemaker:InvokeEndpoint"],
                                          resource_arns=[self.endpoint_arn])

    def _metric(self, model: str, name: str, statistic: str, props: Optional[cloudwatch.MetricOptions],
                namespace: str = INVOCATION_NAMESPACE) -> cloudwatch.Metric:
        return with_options(component_metric(self.component_name(model), name, statistic, namespace=namespace), props)

    @checked_metric()
    def metric_invocations(self, model: str, props: Optional[cloudwatch.MetricOptions] = None) -> cloudwatch.Metric:
        """Requests to ``model``'s component per minute (Sum)."""
        return self._metric(model, "Invocations", "Sum", props)

    @checked_metric()
    def metric_model_latency(self, model: str, props: Optional[cloudwatch.MetricOptions] = None) -> cloudwatch.Metric:
        """``model``'s component's ModelLatency (microseconds, Average)."""
        return self._metric(model, "ModelLatency", "Average", props)

    @checked_metric()
    def metric_errors(self, model: str, kind: str = "5XX",
                      props: Optional[cloudwatch.MetricOptions] = None) -> cloudwatch.Metric:
        """``model``'s component's ``Invocation5XXErrors`` (or ``kind="4XX"``) per minute, Sum."""
        return self._metric(model, f"Invocation{kind}Errors", "Sum", props)

    @checked_metric()
    def metric_gpu_utilization(self, model: str, props: Optional[cloudwatch.MetricOptions] = None) -> cloudwatch.Metric:
        """GPU utilization of ``model``'s copies against what they reserve, 0-100 % (Average)."""
        return self._metric(model, "GPUUtilizationNormalized", "Average", props, COMPONENT_NAMESPACE)

    def promql_queue_ms(self, model: str) -> str:
        """PromQL: ms a request to ``model``'s component waits in Triton's queue (``triton_promql``)."""
        return triton_promql.queue_ms(self.endpoint_name, self.component_name(model))

    def promql_compute_ms(self, model: str) -> str:
        """PromQL: ms Triton computes per request in ``model``'s component."""
        return triton_promql.compute_ms(self.endpoint_name, self.component_name(model))

    def promql_average_batch(self, model: str) -> str:
        """PromQL: the batch size dynamic batching formed in ``model``'s component."""
        return triton_promql.average_batch(self.endpoint_name, self.component_name(model))

    def promql_pending_requests(self, model: str) -> str:
        """PromQL: requests ``model``'s component holds and has not started computing."""
        return triton_promql.pending_requests(self.endpoint_name, self.component_name(model))

    @checked_metric()
    def metric_gpu_memory_utilization(self, model: str,
                                      props: Optional[cloudwatch.MetricOptions] = None) -> cloudwatch.Metric:
        """GPU memory of ``model``'s copies against what they reserve, 0-100 % (Average)."""
        return self._metric(model, "GPUMemoryUtilizationNormalized", "Average", props, COMPONENT_NAMESPACE)
