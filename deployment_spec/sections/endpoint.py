"""The ``endpoints:`` section: how models are served, scaled, watched and updated."""
from __future__ import annotations

import dataclasses
import enum
import re
from typing import Mapping, Optional

from deployment_spec.facts import instances, network_rules, triton_metrics
from deployment_spec.sections.asynchronous import Asynchronous
from deployment_spec.sections.capacity_reservation import CapacityReservation
from deployment_spec.sections.components import ComponentSpec, ManagedInstances, RollingUpdate
from deployment_spec.parsing.errors import Problem, describe
from deployment_spec.parsing.parse import Validated, join, meta
# Re-exported: their home before deployment_spec.sections.scaling.
from deployment_spec.sections.scaling import DEFAULT_GPU_TARGET as DEFAULT_GPU_TARGET, LoadMetric as LoadMetric, Scaling as Scaling
from deployment_spec.sections.variants import Comparison, Shadow, Variant

ENV_KEY = r"[a-zA-Z_][a-zA-Z0-9_]*"


class EndpointKind(str, enum.Enum):
    SINGLE_MODEL = "single-model"
    MULTI_MODEL = "multi-model"
    INFERENCE_COMPONENTS = "inference-components"  # one inference component per model (deployment_spec.sections.components)


class Strategy(str, enum.Enum):
    AUTO = "auto"  # canary where the variant has 2+ instances, else all at once (see Deployment.resolved)
    ALL_AT_ONCE = "all_at_once"
    CANARY = "canary"
    LINEAR = "linear"


class CaptureMode(str, enum.Enum):
    INPUT = "input"
    OUTPUT = "output"
    BOTH = "both"


@dataclasses.dataclass(frozen=True)
class Alarms(Validated):
    latency_sla_ms: float = dataclasses.field(default=500.0, metadata=meta(minimum=0.001))
    error_5xx_threshold: float = dataclasses.field(default=1.0, metadata=meta(minimum=0))
    gpu_memory_percent: float = dataclasses.field(default=90.0, metadata=meta(minimum=1, maximum=100))
    disk_percent: float = dataclasses.field(default=90.0, metadata=meta(minimum=1, maximum=100))
    model_loading_wait_ms: float = dataclasses.field(default=10_000.0, metadata=meta(minimum=1))
    cache_hit_ratio_min: float = dataclasses.field(default=0.5, metadata=meta(minimum=0, maximum=1))
    # Triton's queue time above this share of latency_sla_ms (from Triton's own metrics) alarms.
    queue_share_of_sla: float = dataclasses.field(default=0.5, metadata=meta(minimum=0.01, maximum=1))
    # A generating model's time to first token (its own metric: model_build/python_models/generation_metrics.py)
    # above this at p90 alarms; only where the container runs the generate route (rules/generation_alarms.py).
    time_to_first_token_ms: Optional[float] = dataclasses.field(default=None, metadata=meta(
        minimum=1, help="alarm when the p90 time to first token of a generating model exceeds this, ms"))
    sns_topic: bool = False


@dataclasses.dataclass(frozen=True)
class Deployment(Validated):
    """Blue/green traffic shifting with auto-rollback, used where the environment enables guardrails.

    ``CanarySize`` and ``LinearStepSize`` must be at most 50 % of the variant's instances (CreateEndpoint
    API reference, ``CapacitySize``), so a one-instance variant can only shift all at once; ``auto``
    picks canary from 2 instances on. ``max_execution_timeout_s`` left out is computed to cover the new
    fleet's start (health-check and download timeouts), every traffic step and the bake time.
    """

    strategy: Strategy = Strategy.AUTO
    canary_percent: int = dataclasses.field(default=10, metadata=meta(minimum=1, maximum=50))
    linear_step_percent: int = dataclasses.field(default=20, metadata=meta(minimum=10, maximum=50))
    wait_s: int = dataclasses.field(default=300, metadata=meta(minimum=0, maximum=3600))
    termination_wait_s: int = dataclasses.field(default=120, metadata=meta(minimum=0, maximum=3600))
    max_execution_timeout_s: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=600, maximum=28800))
    auto_rollback: bool = True

    def steps(self) -> int:
        """Traffic steps of the shift (all at once: 1)."""
        if self.strategy is Strategy.LINEAR:
            return -(-100 // self.linear_step_percent)
        return 2 if self.strategy is Strategy.CANARY else 1

    def needed_s(self, fleet_start_s: int) -> int:
        """Seconds the whole update may take: new fleet start, every traffic step's wait, the bake time."""
        return fleet_start_s + self.steps() * self.wait_s + self.termination_wait_s

    def resolved(self, instances: int, fleet_start_s: int) -> "Deployment":
        """The strategy and timeout to deploy with, for a variant of ``instances`` instances."""
        strategy = self.strategy
        if strategy is Strategy.AUTO:
            strategy = Strategy.CANARY if instances >= 2 else Strategy.ALL_AT_ONCE
        out = dataclasses.replace(self, strategy=strategy)
        if out.max_execution_timeout_s is None:
            # Whole minutes, within the API's 600-28800 s.
            needed = -(-out.needed_s(fleet_start_s) // 60) * 60
            out = dataclasses.replace(out, max_execution_timeout_s=min(max(600, needed), 28800))
        return out


# The values the image's serve script accepts for SAGEMAKER_TRITON_INFERENCE_TYPE (it exits 1 on another).
INFERENCE_TYPES = ("infer", "generate", "generate_stream")


@dataclasses.dataclass(frozen=True)
class Container(Validated):
    """SageMaker Triton container settings, mapped to SAGEMAKER_TRITON_* variables (the Triton server's docker/sagemaker/serve script, r25.09)."""

    thread_count: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=1, maximum=1024))
    buffer_manager_thread_count: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=0, maximum=1024))
    shm_default_bytes: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=1))
    shm_growth_bytes: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=1))
    log_verbose: Optional[bool] = None
    model_load_gpu_limit: Optional[float] = dataclasses.field(default=None, metadata=meta(minimum=0.01, maximum=1))
    ping_mode: Optional[str] = None
    additional_args: tuple[str, ...] = ()
    environment: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # Triton's Prometheus metrics (queue, compute, batch sizes, model loads), on a port SageMaker allows.
    metrics: bool = True
    metrics_port: int = dataclasses.field(default=triton_metrics.DEFAULT_METRICS_PORT,
                                          metadata=meta(minimum=1, maximum=65535))
    # SAGEMAKER_TRITON_INFERENCE_TYPE (Triton 25.03 on): what /invocations is. The spec sets generate_stream itself
    # where the endpoint serves a streaming task (deployment_spec.rules.streaming); unset: the image's default, infer.
    inference_type: Optional[str] = dataclasses.field(default=None, metadata=meta(
        help="infer, generate or generate_stream (SAGEMAKER_TRITON_INFERENCE_TYPE; Triton 25.03 or later)"))

    def problems(self, path: str) -> list[Problem]:
        out = triton_metrics.metrics_port_problems(self.metrics_port, join(path, "metrics_port")) \
            if self.metrics else []
        for key in self.environment:
            if not re.fullmatch(ENV_KEY, key):
                out.append(Problem(join(path, f"environment.{key}"), repr(key),
                                   "names matching [a-zA-Z_][a-zA-Z0-9_]*", "rename the variable"))
        if self.inference_type not in (None, *INFERENCE_TYPES):
            out.append(Problem(join(path, "inference_type"), repr(self.inference_type), ", ".join(INFERENCE_TYPES),
                               "use one of them, or remove inference_type (infer)"))
        if self.ping_mode not in (None, "ready", "live"):
            out.append(Problem(join(path, "ping_mode"), repr(self.ping_mode), "ready, live", "use ready or live"))
        return out

    def verbose_unless_set(self, verbose: bool) -> "Container":
        """These settings with ``log_verbose`` set to ``verbose`` where left unset (Triton's own default is
        verbose; an environment's removal policy decides whether it keeps that)."""
        return self if self.log_verbose is not None else dataclasses.replace(self, log_verbose=verbose)


@dataclasses.dataclass(frozen=True)
class Observability(Validated):
    """What SageMaker publishes about the endpoint (the endpoint configuration's ``MetricsConfig``).

    ``detailed``: ``EnableDetailedObservability``: per-GPU (per inference component), per-instance host
    and container metrics as OpenTelemetry metrics in CloudWatch, queried with PromQL (SageMaker
    "detailed observability"); on by default for new endpoint configurations, set here explicitly.
    ``enhanced``: ``EnableEnhancedMetrics``: invocation and utilization metrics per instance (and per
    container for inference components); single-model and inference-component endpoints only.
    Defaults to on where allowed. ``publish_frequency_s``: ``MetricPublishFrequencyInSeconds``.
    ``graphs``: draw Triton's own metrics (queue and compute time, batch size, pending requests) on the
    dashboard, through a custom widget's Lambda function that queries CloudWatch's PromQL API
    (``triton_constructs.promql_graphs``); off: the dashboard lists the queries for Query Studio.
    """

    detailed: bool = True
    enhanced: Optional[bool] = None
    publish_frequency_s: int = 60
    graphs: bool = False

    def problems(self, path: str) -> list[Problem]:
        return triton_metrics.publish_frequency_problems(self.publish_frequency_s, join(path, "publish_frequency_s"))

    def enhanced_for(self, multi_model: bool) -> bool:
        """``EnableEnhancedMetrics``: as set, else on except on multi-model endpoints."""
        return self.enhanced if self.enhanced is not None else not multi_model


@dataclasses.dataclass(frozen=True)
class DataCapture(Validated):
    sampling_percent: int = dataclasses.field(default=20, metadata=meta(minimum=0, maximum=100))
    capture: CaptureMode = CaptureMode.BOTH


@dataclasses.dataclass(frozen=True)
class Network(Validated):
    """Where the model container runs, and whether it may use the network at all.

    ``isolation`` (SageMaker ``EnableNetworkIsolation``, on by default) forbids the container any
    inbound or outbound call; SageMaker itself still downloads the model data from S3 (also for a
    multi-model endpoint's per-request loads), writes the logs and captures data, so a Triton model
    needs no network. Turning it off needs ``isolation_opt_out_reason``: a ``model.py`` that calls an
    AWS API or downloads at start-up, for example.
    """

    subnet_ids: tuple[str, ...] = ()
    security_group_ids: tuple[str, ...] = ()
    isolation: bool = True
    isolation_opt_out_reason: Optional[str] = None

    def problems(self, path: str) -> list[Problem]:
        found = (network_rules.network_isolation_reason(self.isolation, self.isolation_opt_out_reason)
                 + network_rules.subnets_in_zones(len(self.subnet_ids))
                 + network_rules.vpc_complete(len(self.subnet_ids), len(self.security_group_ids)))
        return [dataclasses.replace(p, path=join(path, p.path) if p.path else path) for p in found]


@dataclasses.dataclass(frozen=True)
class EndpointSpec(Validated):
    kind: EndpointKind = dataclasses.field(metadata=meta(help="single-model, multi-model or inference-components"))
    models: tuple[str, ...] = dataclasses.field(metadata=meta(help="the names of the models served here"))
    default_model: Optional[str] = None
    instance_type: str = "ml.g5.xlarge"
    # Serve AWS's Triton image from this ECR repository of the stage's account and region (a copy under the
    # same tag), for accounts that allow only their own registries. Defaults to AWS's repository.
    image_repository: Optional[str] = dataclasses.field(default=None, metadata=meta(
        pattern=r"(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*",
        pattern_help="an ECR repository name such as ml/tritonserver (lowercase letters, digits, . _ - and /)"))
    # The type's facts when this library's instance table lacks it (instances.InstanceFacts).
    instance_facts: Optional[instances.InstanceFacts] = None
    # Instance pools: where SageMaker finds no capacity of instance_type, these in order (priorities 2-5).
    fallback_instance_types: tuple[str, ...] = ()
    # An ML capacity reservation the instances launch into (deployment_spec.sections.capacity_reservation).
    capacity_reservation: Optional[CapacityReservation] = None
    initial_instances: int = dataclasses.field(default=1, metadata=meta(minimum=1, maximum=100))
    variant_name: str = dataclasses.field(default="AllTraffic", metadata=meta(
        pattern=r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", pattern_help="1-63 letters, digits or '-'"))
    scaling: Optional[Scaling] = None
    alarms: Alarms = Alarms()
    deployment: Deployment = Deployment()
    container: Container = Container()
    observability: Observability = Observability()
    model_cache: bool = True
    data_capture: Optional[DataCapture] = None
    # SageMaker Asynchronous Inference (single-model only): a queue in front, payloads and answers in S3.
    asynchronous: Optional[Asynchronous] = None
    # Weighted production variants (an A/B test) or one shadow variant (deployment_spec.sections.variants).
    variants: tuple[Variant, ...] = ()
    shadow: Optional[Shadow] = None
    # When a candidate variant alarms against the incumbent (with variants or a shadow).
    comparison: Comparison = Comparison()
    network: Optional[Network] = None
    volume_size_gb: Optional[int] = dataclasses.field(default=None, metadata=meta(minimum=1, maximum=512))
    startup_timeout_s: int = dataclasses.field(default=600, metadata=meta(minimum=60, maximum=3600))
    download_timeout_s: int = dataclasses.field(default=600, metadata=meta(minimum=60, maximum=3600))
    # Why this endpoint may run a single instance in a production environment.
    single_instance_reason: Optional[str] = None
    # kind: inference-components only: per-model settings, the instance bounds, the guarded update.
    components: Mapping[str, ComponentSpec] = dataclasses.field(default_factory=dict)
    managed_instances: Optional[ManagedInstances] = None
    rolling_update: RollingUpdate = RollingUpdate()
    name: str = dataclasses.field(default="", metadata=meta(yaml=False))

    @property
    def instance(self) -> Optional[instances.InstanceType]:
        """The instance type's facts: declared, or from the table (None: not a type this product serves on)."""
        return instances.lookup(self.instance_type, self.instance_facts)

    @property
    def triton_args(self) -> tuple[str, ...]:
        """Triton arguments this endpoint's settings need beyond ``container.additional_args``."""
        return self.asynchronous.triton_args() if self.asynchronous else ()

    @property
    def deploy_instances(self) -> int:
        """The fewest instances the variant can have when an update starts (scaling may sit at its minimum)."""
        if self.managed_instances is not None:
            return self.managed_instances.min_instances
        return self.scaling.min_instances if self.scaling else self.initial_instances

    @property
    def fleet_start_s(self) -> int:
        """The longest a new fleet may take to serve: model download, then the container health check."""
        return self.download_timeout_s + self.startup_timeout_s

    def component(self, model: str) -> ComponentSpec:
        """An inference-components endpoint's settings for ``model``: as written, or the defaults."""
        return self.components.get(model, ComponentSpec())

    @property
    def instance_bounds(self) -> ManagedInstances:
        """An inference-components endpoint's managed instance bounds: as written, or 1..initial_instances."""
        return self.managed_instances or ManagedInstances(1, max(1, self.initial_instances))
