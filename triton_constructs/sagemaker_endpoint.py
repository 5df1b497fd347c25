"""``TritonSageMakerEndpoint``: one NVIDIA Triton endpoint on SageMaker, secure and autoscaled, for any CDK app."""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr, aws_iam as iam, aws_kms as kms, aws_logs as logs, aws_s3 as s3
from constructs import Construct

from deployment_spec.facts import instances, network_rules, triton_metrics
from deployment_spec.rules import generation_alarms, sagemaker as sagemaker_rules, streaming
from deployment_spec.sections import asynchronous as async_rules
from deployment_spec.sections.asynchronous import Asynchronous
from deployment_spec.sections.capacity_reservation import CapacityReservation, reservation_problems
from deployment_spec.rules.container_env import container_environment
from deployment_spec.sections.endpoint import Alarms as SpecAlarms, Container, Observability, DataCapture, Deployment, EndpointSpec
from deployment_spec.sections.scaling import Scaling
from deployment_spec.parsing.errors import Problem, PropsError, raise_problems
from deployment_spec.parsing.parse import values_problems
from deployment_spec.facts.serving_runtimes import DEFAULT_TRITON_VERSION
from deployment_spec.sections.variants import Comparison, Shadow, Variant
from deployment_spec.rules.variant_plan import describe_weights
from triton_constructs.alarm_props import Alarms
from triton_constructs.alarms import EndpointAlarms
from triton_constructs.async_inference import AsyncInference
from triton_constructs.bucket_region import bucket_region_problems
from triton_constructs.dashboard import EndpointDashboard
from triton_constructs import endpoint_storage, endpoint_variants, generation_promql, security_hub, triton_promql
from triton_constructs.endpoint import DataCaptureSettings, ServedVariant, TritonEndpoint
from triton_constructs.endpoint_reference import EndpointReference, ImportedTritonEndpoint, endpoint_arn
from triton_constructs.execution_role import TritonExecutionRole
from triton_constructs.image import TritonImage
from triton_constructs.metrics import EndpointMetrics
from triton_constructs.model_repositories import ModelRepositories
from triton_constructs.model_store import ENDPOINT_LOG_GROUPS, ModelStore, allow_logs
from triton_constructs.network import NetworkProps
from triton_constructs.pool_models import pools_problems, with_pool_archives
from triton_constructs.promql_graphs import PromQLGraphs
from triton_constructs.props import checked_props
from triton_constructs.scaling import VariantScaling
from triton_constructs.triton_model import TritonModel
from triton_constructs.variant_comparison import ComparisonAlarms
from triton_constructs.variant_dashboard import VariantDashboard


class TritonSageMakerEndpoint(Construct, EndpointReference):
    """A SageMaker real-time endpoint running NVIDIA Triton: model data, role, model, endpoint, scaling, alarms.

    Everything SageMaker would refuse minutes into a deploy is refused at synth, every problem at once
    (``PropsError``, with the same words as the YAML spec's validator: ``deployment_spec.rules.sagemaker``).
    Secure by default: a KMS-encrypted, versioned, SSL-only model bucket with access logs (unless you
    bring one), a least-privilege execution role, network isolation, encrypted logs.

    Args:
        scope: Parent construct.
        id_: Construct ID.
        models: What it serves: ``ModelRepositories.from_manifest`` (the output of ``tritonsm build``)
            or ``ModelRepositories.from_archives`` (tarballs you bring).
        instance_type: e.g. ``ml.g5.xlarge``.
        triton_version: The ``sagemaker-tritonserver`` release. Defaults to the newest one this library
            verifies models for (``deployment_spec.facts.serving_runtimes.DEFAULT_TRITON_VERSION``).
        multi_model: One archive per model under one prefix, each called by its ``TargetModel``.
            Defaults to a single-model endpoint (one archive).
        endpoint_name: The SageMaker endpoint's name. Defaults to a name derived from the construct path
            (stable across deploys; the alarms and the role name it, so it cannot be left to CloudFormation).
        initial_instances: Instances at creation (1-100). Defaults to 1.
        variant_name: Defaults to ``AllTraffic``.
        scaling: Target tracking on invocations per instance and GPU utilization. Defaults to none: the
            instance count stays ``initial_instances``.
        alarms: Latency, 5XX, GPU memory, disk (and model loading on multi-model endpoints) thresholds.
            Defaults to ``Alarms()``.
        deployment: Blue/green updates with traffic shifting and auto-rollback on the latency and 5XX
            alarms. Defaults to none: SageMaker's all-at-once update without rollback alarms.
        network: VPC, security groups and network isolation. Defaults to no VPC, isolation on.
        container: ``SAGEMAKER_TRITON_*`` settings. Defaults to ``Container()`` (quiet logs, the ping
            mode of the endpoint kind).
        model_cache: Multi-model only: keep loaded models cached. Defaults to True.
        data_capture: Capture requests and responses into the model bucket. Defaults to none.
        bucket: Where local archives are copied and data is captured. Defaults to a new bucket (KMS,
            versioned, SSL-only, access-logged) when there is anything to put there.
        encryption_key: Encrypts the bucket, the volume, the logs, and S3 archives you bring. Defaults to
            the bucket's key, or a new key with rotation. The key's policy must let CloudWatch Logs use
            it for this endpoint's log groups: added to a key of this app, already there on an imported key.
        storage_name: Objects go under ``models/<storage_name>/`` and ``data-capture/<storage_name>/``.
            Defaults to the endpoint name.
        removal_policy: Of what this construct creates to hold data (bucket, key, endpoint log group), and
            of the model and endpoint config when deleted (a replaced one is always kept, for SageMaker's
            auto-rollback). Defaults to ``RETAIN`` (the log group, model and config are still removed when
            the operation that created them rolls back).
        log_retention: Retention of the endpoint's log group. Defaults to one year.
        volume_size_gb: ML storage volume, on types without local NVMe storage only. Defaults to SageMaker's.
        startup_timeout_s: Container health-check timeout (60-3600). Defaults to 600.
        download_timeout_s: Model download timeout (60-3600). Defaults to 600.
        instance_facts: What the rules need of an instance type that exists (it is in botocore's
            ``ProductionVariantInstanceType``) but not in this library's table: GPUs, compute capability,
            vCPUs, memory (``InstanceFacts``). Defaults to none: the table's facts; a type the table lacks
            is refused naming exactly this prop.
        fallback_instance_types: Instance pools: where SageMaker finds no capacity of ``instance_type``, it takes
            these in order (priorities 2-5; single-model endpoints; each must pass every rule ``instance_type``
            does, with its GPU count; a TensorRT plan must run on each). Defaults to none.
        observability: What SageMaker publishes (the configuration's ``MetricsConfig``): detailed observability
            on, enhanced metrics on single-model endpoints, every 60 s. Defaults to ``Observability()``.
        capacity_reservation: An ML capacity reservation (a training plan for inference) the instances launch
            into, and only into (``CapacityReservation``: its ARN, instance type and instance count, which synth
            holds the endpoint to). Defaults to none: on-demand capacity.
        pool_models: A build of the same models per fallback pool whose GPU the endpoint's TensorRT plans do not
            run on (key: the pool's instance type): that pool serves it (``ModelNameOverride``). Defaults to none:
            every pool serves ``models``.
        image_repository: Pull the Triton image from this ECR repository of yours, under AWS's tag for
            ``triton_version`` (copy it there first): for accounts that allow only their own registries. Still an
            ECR pull (``RepositoryAccessMode: Platform``), so Security Hub's SageMaker.16 stays acknowledged.
            Defaults to AWS's ``sagemaker-tritonserver`` repository.
        image_tag: The tag to pull from ``image_repository`` instead of AWS's: NVIDIA's engine image mirrored there
            for a model that vLLM or TensorRT-LLM decodes (``engine_image_tag``). Defaults to AWS's tag.
        asynchronous: Serve through SageMaker Asynchronous Inference (``Asynchronous``): requests and answers in
            S3 under the bucket's ``async/<storage_name>/`` (or your locations), success and error topics, scaling
            on the queue with ``scaling.min_instances`` 0 allowed, the queue's alarms; single-model only. Callers
            get ``grant_invoke_async``. Defaults to none: real-time.
        variants: Weighted production variants, an A/B test (``Variant``: name, weight, and its own
            ``instance_type``, ``initial_instances``, ``scaling``, else the endpoint's); the first is the incumbent,
            each later one a candidate. Each has its own model (``variant_models``, else ``models``), scaling target,
            alarms; a caller may pin one with ``TargetVariant``. Single-model, real-time endpoints only. Defaults to
            none: one variant, ``variant_name``.
        shadow: A shadow variant (``Shadow``): SageMaker copies ``sampling_percent`` % of the production variant's
            requests to it and returns only the production variant's answers. Needs one production variant (no
            ``variants``); its scaling defaults to the endpoint's (SageMaker's shadow-test guide advises scaling
            the shadow like production before promoting it). Defaults to none.
        variant_models: The archives a variant or the shadow serves instead of ``models``, by variant name
            (single-model, local files as ``models`` are or S3 objects under their prefix; a ``Variant`` that
            names a ``model`` needs one). Defaults to none.
        comparison: When a candidate (each variant after the first, or the shadow) alarms against the incumbent:
            error-rate and p99-latency margins over ``periods`` minutes (``variant_comparison``). Defaults to
            ``Comparison()``.

    With variants or a shadow, a guarded update (``deployment``) is left out: deployment guardrails need the same
    variant names before and after, which adding or removing a variant breaks (``TritonEndpoint``); synth says so (an info annotation).
    Weights changed at run time (UpdateEndpointWeightsAndCapacities) return to these on the next deploy that updates
    the endpoint (``ExcludeRetainedVariantProperties`` DesiredWeight with scaling; without scaling every update
    applies the configuration). Data capture covers every variant, the shadow's too, under
    ``<prefix><endpoint>/<variant>/``.

    Attributes:
        models: What it serves.
        endpoint_name, endpoint_arn, variant_name: The endpoint.
        bucket, key: Where the model data lives, and its key (None when nothing is stored).
        role: The execution role. model, endpoint: The model and endpoint constructs.
        pool_models: The ``TritonModel`` of each pool with a build of its own, by instance type.
        alarms: ``EndpointAlarms`` (the incumbent's). scaling: ``VariantScaling`` (the incumbent's) or None.
        dashboard: ``EndpointDashboard`` (the incumbent's).
        variant_metrics: Every variant's ``EndpointMetrics``, the shadow's too, by name.
        variant_alarms: ``EndpointAlarms`` of each production variant. variant_scaling: ``VariantScaling`` of each
            scaled variant. variant_models: The ``TritonModel`` of each variant with archives of its own.
        comparison: ``ComparisonAlarms`` (with variants or a shadow) or None. variant_dashboard: ``VariantDashboard``
            or None.
        graphs: ``PromQLGraphs`` (``observability.graphs``) or None.
        asynchronous: ``AsyncInference`` (locations, topics) or None.
    """

    @checked_props
    def __init__(self, scope: Construct, id_: str, *, models: ModelRepositories, instance_type: str,
                 triton_version: str = DEFAULT_TRITON_VERSION, multi_model: bool = False,
                 endpoint_name: Optional[str] = None, initial_instances: int = 1, variant_name: str = "AllTraffic",
                 scaling: Optional[Scaling] = None, alarms: SpecAlarms = Alarms(), deployment: Optional[Deployment] = None,
                 network: Optional[NetworkProps] = None, container: Container = Container(),
                 model_cache: bool = True, data_capture: Optional[DataCapture] = None,
                 bucket: Optional[s3.IBucket] = None, encryption_key: Optional[kms.IKey] = None,
                 storage_name: Optional[str] = None, removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
                 log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
                 volume_size_gb: Optional[int] = None, startup_timeout_s: int = 600,
                 download_timeout_s: int = 600, instance_facts: Optional[instances.InstanceFacts] = None,
                 observability: Observability = Observability(), fallback_instance_types: Sequence[str] = (),
                 capacity_reservation: Optional[CapacityReservation] = None,
                 pool_models: Optional[Mapping[str, ModelRepositories]] = None,
                 image_repository: Optional[ecr.IRepository] = None, image_tag: Optional[str] = None,
                 asynchronous: Optional[Asynchronous] = None, variants: Sequence[Variant] = (),
                 shadow: Optional[Shadow] = None, variant_models: Optional[Mapping[str, ModelRepositories]] = None,
                 comparison: Comparison = Comparison()) -> None:
        super().__init__(scope, id_)
        name = endpoint_name or cdk.Names.unique_resource_name(self, max_length=63, separator="-")
        network = network or NetworkProps()
        subnet_ids = network.subnet_ids()
        triton_args = asynchronous.triton_args() if asynchronous else ()
        environment = container_environment(container, multi_model=multi_model,
                                            default_model=None if multi_model else models.served_default(),
                                            extra_args=triton_args)
        deploy_instances = scaling.min_instances if scaling else initial_instances
        # The scalar props, checked against the spec's own bounds (EndpointSpec's field metadata: one home).
        problems = values_problems(EndpointSpec, dict(
            initial_instances=initial_instances, variant_name=variant_name, volume_size_gb=volume_size_gb,
            startup_timeout_s=startup_timeout_s, download_timeout_s=download_timeout_s))
        problems += sagemaker_rules.endpoint_name_valid(name, "endpoint_name", repr(name),
                                                        "use letters, digits and '-' only")
        problems += sagemaker_rules.triton_version_known(triton_version)
        problems += sagemaker_rules.endpoint_problems(
            instance_type=instance_type, multi_model=multi_model, triton_version=triton_version,
            initial_instances=initial_instances, scaling=scaling, volume_size_gb=volume_size_gb,
            model_cache=model_cache, data_capture=data_capture is not None, instance_facts=instance_facts,
            enhanced_metrics=observability.enhanced, asynchronous=asynchronous is not None)
        if asynchronous is not None:
            problems += async_rules.combination_problems(
                asynchronous, kind="multi-model" if multi_model else "single-model", data_capture=data_capture is not None,
                scaling=scaling, triton_version=triton_version)
        if deployment is not None:
            problems += sagemaker_rules.deployment_problems(deployment, deploy_instances=deploy_instances,
                                                            download_timeout_s=download_timeout_s,
                                                            startup_timeout_s=startup_timeout_s)
        problems += sagemaker_rules.prefixed("network", network_rules.subnets_in_zones(len(subnet_ids), "subnets")
                                             + network.problems())
        problems += sagemaker_rules.container_environment_limits(environment)
        problems += streaming.container_problems(container.inference_type, multi_model=multi_model,
                                                 triton_version=triton_version)
        problems += triton_metrics.graphs_problems(
            observability.graphs, detailed=observability.detailed, container_metrics=container.metrics,
            path="observability.graphs")
        problems += generation_alarms.time_to_first_token_problems(
            alarms.time_to_first_token_ms, container.inference_type, metrics=container.metrics,
            detailed=observability.detailed)
        if alarms.time_to_first_token_ms is not None and image_tag is not None:
            problems.append(Problem("alarms.time_to_first_token_ms", str(alarms.time_to_first_token_ms),
                                    f"no threshold with image_tag {image_tag!r} (the engine's image publishes its own "
                                    "metrics, not the time to first token this alarm reads)",
                                    "remove alarms.time_to_first_token_ms"))
        problems += models.problems(multi_model=multi_model, triton_version=triton_version, instance_type=instance_type,
                                    instance_facts=instance_facts)
        problems += sagemaker_rules.fallback_instance_types(
            instance_type, fallback_instance_types, multi_model=multi_model, triton_version=triton_version,
            volume_size_gb=volume_size_gb, instance_facts=instance_facts)
        pool_models = dict(pool_models or {})
        if not multi_model:  # what serves each pool runs on its GPU (pools on multi-model endpoints are refused)
            problems += pools_problems(models, fallback_instance_types, pool_models, triton_version=triton_version)
        variant_models = dict(variant_models or {})
        problems += endpoint_variants.problems(
            variants, shadow, variant_models, models=models, multi_model=multi_model, variant_name=variant_name,
            asynchronous=asynchronous, instance_type=instance_type, initial_instances=initial_instances,
            scaling=scaling, triton_version=triton_version, volume_size_gb=volume_size_gb, instance_facts=instance_facts)
        region = cdk.Stack.of(self).region
        problems += reservation_problems(capacity_reservation, instance_type=instance_type,
                                         fallbacks=tuple(fallback_instance_types), initial_instances=initial_instances,
                                         max_instances=scaling.max_instances if scaling else None,
                                         region=None if cdk.Token.is_unresolved(region) else region)
        problems += bucket_region_problems(self, bucket)
        raise_problems(f"TritonSageMakerEndpoint {self.node.path}", problems)

        plans = endpoint_variants.plans(variants, shadow, variant_models, variant_name=variant_name,
                                        instance_type=instance_type, initial_instances=initial_instances,
                                        scaling=scaling)
        self.models = models
        self.endpoint_name = name
        self.variant_name = plans[0].name  # the incumbent: what metric_* and grant_invoke's metrics name
        self.metrics = EndpointMetrics(name, self.variant_name)
        self.variant_metrics = {plan.name: EndpointMetrics(name, plan.name) for plan in plans}
        self.endpoint_arn = endpoint_arn(self, name)
        storage_name = storage_name or name
        local = [a for a in models.archives if a.path is not None]
        self.bucket, self.key = endpoint_storage.storage(self, bucket, encryption_key, removal_policy,
                                                         needed=bool(local) or data_capture is not None
                                                         or asynchronous is not None)
        allow_logs(self.key, [f"{cdk.Stack.of(self).stack_name}-*", f"{ENDPOINT_LOG_GROUPS}{name}"])
        image = TritonImage(self, "Image", version=triton_version, repository=image_repository, tag=image_tag)
        placement = network.function_placement(self)
        archives = endpoint_variants.with_variant_archives(with_pool_archives(models, pool_models), variant_models)
        data = endpoint_storage.model_data(self, archives, self.bucket, self.key, storage_name, placement)
        capture_prefix = ModelStore.capture_prefix(storage_name) if data_capture else None
        self.role = TritonExecutionRole(self, "ExecutionRole", image=image, bucket=data.bucket, key=self.key,
                                        model_prefix=data.prefix, capture_bucket=self.bucket,
                                        capture_prefix=capture_prefix, vpc=bool(subnet_ids))
        self.asynchronous = AsyncInference(self, "Async", settings=asynchronous, bucket=self.bucket, key=self.key,
                                           storage_name=storage_name) \
            if asynchronous is not None and self.bucket is not None and self.key is not None else None
        if self.asynchronous is not None:
            self.asynchronous.grant_serve(self.role.role)
        # RetainExceptOnCreate: kept on update and delete, but removed when the operation that created it rolls
        # back (a retry does not fail on the log group's fixed name; a failed update leaves no orphan config).
        kept = cdk.RemovalPolicy.RETAIN_ON_UPDATE_OR_DELETE if removal_policy == cdk.RemovalPolicy.RETAIN \
            else removal_policy
        security_group_ids = network.security_group_ids(
            self, f"Triton endpoint {name}: no inbound; outbound for the model data download through the VPC")
        self.model = TritonModel(
            self, "Model", image=image, role=self.role.role, multi_model=multi_model, model_cache=model_cache,
            model_data_url=data.prefix_url if multi_model else data.urls[models.archives[0].object_name],
            environment=environment, subnet_ids=subnet_ids,
            security_group_ids=security_group_ids, network_isolation=network.isolation,
            removal_policy=kept)
        # Each pool with a build of its own (a plan for its GPU) serves it as a second model of the same kind.
        self.pool_models: dict[str, TritonModel] = {}
        for fallback, own in pool_models.items():
            self.pool_models[fallback] = TritonModel(
                self, f"Model-{fallback}", image=image, role=self.role.role, multi_model=False,
                model_cache=model_cache, model_data_url=data.urls[own.archives[0].object_name],
                environment=container_environment(container, multi_model=False, default_model=own.served_default()),
                subnet_ids=subnet_ids, security_group_ids=security_group_ids, network_isolation=network.isolation,
                removal_policy=kept)
        # Each variant with archives of its own serves them as a model of its own, read under the same prefix.
        self.variant_models: dict[str, TritonModel] = {}
        for plan in plans:
            if plan.models is not None:
                self.variant_models[plan.name] = TritonModel(
                    self, f"Model-{plan.name}", image=image, role=self.role.role, multi_model=False,
                    model_cache=model_cache, model_data_url=data.urls[plan.models.archives[0].object_name],
                    environment=container_environment(container, multi_model=False,
                                                      default_model=plan.models.served_default()),
                    subnet_ids=subnet_ids, security_group_ids=security_group_ids,
                    network_isolation=network.isolation, removal_policy=kept)
        for model in (self.model, *self.pool_models.values(), *self.variant_models.values()):
            security_hub.acknowledge(model, security_hub.NETWORK_ISOLATION, network.isolation_opt_out_reason or "",
                                     when=not network.isolation)
            if data.artifacts is not None:  # the objects must be in place before CreateModel checks them
                model.node.add_dependency(data.artifacts)

        # Our generation metrics come from our model (hf_generate); NVIDIA's engine image (image_tag: vLLM,
        # TensorRT-LLM) publishes its own, so its endpoint gets neither these graphs nor this alarm.
        generating = generation_alarms.generates(container.inference_type) and image_tag is None
        gpu_counts = {plan.name: _gpus(plan.instance_type, instance_type, instance_facts) for plan in plans}
        gpus = gpu_counts[self.variant_name]
        self.alarms = EndpointAlarms(self, "Alarms", metrics=self.metrics, thresholds=alarms,
                                     gpu_count=gpus, multi_model=multi_model, notify=alarms.sns_topic,
                                     topic=getattr(alarms, "topic", None),
                                     triton_metrics=container.metrics and observability.detailed,
                                     asynchronous=asynchronous, generating=generating)
        # Every production variant answers callers: each has the incumbent's alarms, on the same topic (Triton's
        # queue alarm is per endpoint: the incumbent's covers it).
        self.variant_alarms = {self.variant_name: self.alarms}
        for plan in plans[1:]:
            if not plan.shadow:
                self.variant_alarms[plan.name] = EndpointAlarms(
                    self, f"Alarms-{plan.name}", metrics=self.variant_metrics[plan.name], thresholds=alarms,
                    gpu_count=gpu_counts[plan.name], topic=self.alarms.topic, subject=f"{name} variant {plan.name}")
        guarded = deployment is not None and len(plans) == 1
        rollback = [self.alarms.errors, self.alarms.latency] if guarded and deployment and deployment.auto_rollback \
            else []
        self.endpoint = TritonEndpoint(
            self, "Endpoint", model=self.model, endpoint_name=name, instance_type=instance_type,
            initial_instances=initial_instances, variant_name=variant_name,
            inference_ami_version=image.inference_ami_version, inference_ami_reason=image.inference_ami_reason,
            volume_key=self.key, volume_size_gb=volume_size_gb,
            startup_timeout=cdk.Duration.seconds(startup_timeout_s),
            download_timeout=cdk.Duration.seconds(download_timeout_s),
            data_capture=DataCaptureSettings(f"s3://{self.bucket.bucket_name}/{capture_prefix}", self.key,
                                             data_capture.sampling_percent, data_capture.capture)
            if data_capture and self.bucket else None,
            deployment=deployment, rollback_alarms=rollback, deploy_instances=deploy_instances,
            log_retention=log_retention, log_removal_policy=kept, config_removal_policy=kept,
            log_key=self.key, scaled=any(plan.scaling for plan in plans), instance_facts=instance_facts,
            observability=observability, multi_model=multi_model,
            fallback_instance_types=tuple(fallback_instance_types), capacity_reservation=capacity_reservation,
            pool_model_names={t: m.model_name for t, m in self.pool_models.items()},
            async_config=self.asynchronous.config() if self.asynchronous else None,
            variants=[self._served(plan, instance_type, instance_facts, fallback_instance_types,
                                   capacity_reservation) for plan in plans if not plan.shadow] if variants else (),
            shadow=next((self._served(plan, instance_type, instance_facts, fallback_instance_types,
                                      capacity_reservation) for plan in plans if plan.shadow), None))
        self.node.default_child = self.endpoint.resource  # the CfnEndpoint, for escape hatches
        self.role.grant_logs(self.endpoint.log_group)
        if rollback:
            self.role.grant_describe_alarms(rollback)
        self.variant_scaling: dict[str, VariantScaling] = {}
        for i, plan in enumerate(plans):
            if plan.scaling is not None:
                shared = next(iter(self.variant_scaling.values()), None)
                self.variant_scaling[plan.name] = VariantScaling(
                    self, "Scaling" if i == 0 else f"Scaling-{plan.name}", endpoint=self.endpoint,
                    scaling=plan.scaling, log_key=self.key, placement=placement, asynchronous=asynchronous,
                    variant=plan.name, handover_function=shared.handover.function if shared else None)
        self.scaling = self.variant_scaling.get(self.variant_name)
        _note_unscaled(self, name, plans)
        self.graphs = PromQLGraphs(self, "TritonGraphs", log_key=self.key, placement=placement) \
            if observability.graphs else None
        self.dashboard = EndpointDashboard(self, "Dashboard", metrics=self.metrics,
                                           latency_sla_ms=alarms.latency_sla_ms, gpu_count=gpus,
                                           gpu_target=self.scaling.gpu_target if self.scaling else None,
                                           multi_model=multi_model,
                                           triton_queries={**triton_promql.dashboard_queries(name), **(
                                               generation_promql.dashboard_queries(name) if generating else {})}
                                           if self.alarms.triton_queue is not None else None,
                                           triton_alarm=self.alarms.triton_queue, triton_graphs=self.graphs,
                                           asynchronous=asynchronous)
        self.comparison: Optional[ComparisonAlarms] = None
        self.variant_dashboard: Optional[VariantDashboard] = None
        if len(plans) > 1:
            candidates = [self.variant_metrics[plan.name] for plan in plans[1:]]
            self.comparison = ComparisonAlarms(self, "Comparison", incumbent=self.metrics, candidates=candidates,
                                               comparison=comparison, topic=self.alarms.topic)
            spec = endpoint_variants.as_endpoint_spec(variants, shadow, multi_model=multi_model,
                                                      variant_name=variant_name, asynchronous=asynchronous)
            split = describe_weights(spec) if spec is not None else ""
            if shadow is not None:
                split += f"; shadow {shadow.name} gets a copy of {shadow.sampling_percent} % of the requests"
            self.variant_dashboard = VariantDashboard(
                self, "VariantDashboard", variants=[self.variant_metrics[plan.name] for plan in plans],
                gpu_counts=gpu_counts, split=split, alarms=self.comparison.all)

    def _served(self, plan: endpoint_variants.VariantPlan, instance_type: str,
                instance_facts: Optional[instances.InstanceFacts], fallbacks: Sequence[str],
                reservation: Optional[CapacityReservation]) -> ServedVariant:
        """A planned variant as the endpoint configuration holds it: the endpoint's pools and reservation where it
        serves the endpoint's archives on the endpoint's type (a pool's build is a build of those archives)."""
        like = plan.like_endpoint(instance_type)
        return ServedVariant(
            plan.name, self.variant_models.get(plan.name, self.model), plan.instance_type, plan.initial_instances,
            plan.weight, instance_facts if plan.instance_type == instance_type else None,
            tuple(fallbacks) if like else (),
            {t: m.model_name for t, m in self.pool_models.items()} if like else {},
            reservation if plan.instance_type == instance_type else None)

    def grant_invoke_async(self, grantee: iam.IGrantable) -> iam.Grant:
        """Lets ``grantee`` call this asynchronous endpoint: ``sagemaker:InvokeEndpointAsync`` on its ARN, writing
        requests under its input prefix (``asynchronous.input_url``), reading its answers and failures."""
        if self.asynchronous is None:
            raise PropsError(f"TritonSageMakerEndpoint {self.node.path}: grant_invoke_async", [Problem(
                "asynchronous", "nothing (a real-time endpoint)", "an asynchronous endpoint",
                "use grant_invoke for a real-time endpoint, or set asynchronous=Asynchronous(...)")])
        return self.asynchronous.grant_invoke(grantee, self.endpoint_arn)

    @classmethod
    def from_endpoint_name(cls, scope: Construct, id_: str, endpoint_name: str, *,
                           variant_name: str = "AllTraffic") -> ImportedTritonEndpoint:
        """An endpoint already deployed (by another stack or app): ``grant_invoke`` and the ``metric_*`` methods."""
        problems = sagemaker_rules.endpoint_name_valid(endpoint_name, "endpoint_name", repr(endpoint_name),
                                                       "use letters, digits and '-' only")
        raise_problems(f"TritonSageMakerEndpoint.from_endpoint_name {id_}", problems)
        return ImportedTritonEndpoint(scope, id_, endpoint_name=endpoint_name, variant_name=variant_name)


def _gpus(variant_type: str, instance_type: str, facts: Optional[instances.InstanceFacts]) -> int:
    found = instances.lookup(variant_type, facts if variant_type == instance_type else None)
    return found.gpu_count if found else 0


def _note_unscaled(scope: Construct, name: str, plans: Sequence[endpoint_variants.VariantPlan]) -> None:
    """SageMaker keeps every variant's running count when the endpoint is scaled (``RetainAllVariantProperties`` is
    per endpoint), so an unscaled variant beside a scaled one keeps its count across updates too."""
    fixed = [plan.name for plan in plans if plan.scaling is None]
    if fixed and len(fixed) < len(plans):
        cdk.Annotations.of(scope).add_info((
            f"endpoint {name}: variant(s) {', '.join(fixed)} have no scaling beside scaled ones; SageMaker keeps "
            "every variant's running instance count across updates (RetainAllVariantProperties), so a changed "
            "initial_instances reaches them only when the endpoint is created; give them scaling to size them"))
