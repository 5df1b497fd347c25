"""One deployment environment of the spec: its storage stack and one stack per endpoint."""
from __future__ import annotations

import pathlib
from typing import Collection, Mapping, Optional

import aws_cdk as cdk
from constructs import Construct

from deployment_spec import Spec
from deployment_spec.cost.capacity import Drain, Measurement
from deployment_spec.sections.endpoint import EndpointKind
from deployment_spec.sections.environment import EnvironmentSpec, RemovalPolicy
from deployment_spec.builds.manifest import Manifest
from .components_stack import ComponentsEndpointStack
from .endpoint_stack import EndpointStack
from .storage_stack import StorageStack
from triton_constructs import checks


# The cost-allocation tag of a stage with a budget (its value: <project>-<environment>); activate it once in Billing.
COST_TAG = "tritonsm-stage"


class TritonStage(cdk.Stage):
    """A ``cdk.Stage`` per environment; deploy it with ``cdk deploy "TritonProd/*"`` (see ``app.stage_id``).

    Stack names are ``<project>-<environment>-Storage`` and ``<project>-<environment>-<endpoint>``
    (also the SageMaker endpoint's name). An environment without account and region synthesizes
    environment-agnostic stacks.

    Args:
        scope: The app.
        id_: Construct ID, e.g. ``TritonProd``.
        spec: The deployment spec.
        environment: The environment.
        manifest: The build manifest.
        manifest_path: Where it was read from (for messages).
        capacity: Measured capacity per endpoint (capacity.json). Defaults to none.
        drains: Measured drain rates of asynchronous endpoints (capacity.json's ``drain``). Defaults to none.
        endpoints: Only these endpoints get a stack (``cdk synth -c endpoints=...``). Defaults to all.
        pool_manifests: Builds made on other GPUs, for fallback pools (``cdk synth -c pool_manifests=...``).

    Attributes:
        storage: The storage stack.
        endpoints: The endpoint stacks, by spec endpoint name.
    """

    def __init__(self, scope: Construct, id_: str, *, spec: Spec, environment: EnvironmentSpec, manifest: Manifest,
                 manifest_path: pathlib.Path, capacity: Optional[Mapping[str, Measurement]] = None,
                 drains: Optional[Mapping[str, Drain]] = None, endpoints: Optional[Collection[str]] = None,
                 pool_manifests: Optional[Mapping[pathlib.Path, Manifest]] = None) -> None:
        super().__init__(scope, id_, env=cdk.Environment(account=environment.account, region=environment.region))
        prefix = f"{spec.project}-{environment.name}"
        protect = environment.termination_protection
        budget = environment.budget.monthly_usd if environment.budget is not None else None
        if budget is not None:
            # Every taggable resource of the stage, so the budget's cost-allocation tag sees all it bills.
            cdk.Tags.of(self).add(COST_TAG, prefix)
        self.storage = StorageStack(
            self, "Storage", stack_name=f"{prefix}-Storage", termination_protection=protect,
            removal_policy=cdk.RemovalPolicy.DESTROY if environment.removal_policy is RemovalPolicy.DESTROY
            else cdk.RemovalPolicy.RETAIN, object_lock=environment.object_lock, budget_usd=budget,
            cost_tag=(COST_TAG, prefix))
        self.endpoints: dict[str, EndpointStack | ComponentsEndpointStack] = {}
        for name, endpoint in environment.endpoints.items():
            if endpoints is not None and name not in endpoints:
                continue  # left out of this assembly on request; app.py names it
            # The stack is named like the SageMaker endpoint; checked first for a readable error.
            endpoint_name = checks.endpoint_name(spec.project, environment.name, name)
            if endpoint.kind is EndpointKind.INFERENCE_COMPONENTS:
                self.endpoints[name] = ComponentsEndpointStack(
                    self, name, stack_name=endpoint_name, termination_protection=protect, spec=spec,
                    environment=environment, endpoint=endpoint, endpoint_name=endpoint_name, manifest=manifest,
                    manifest_path=manifest_path, storage=self.storage)
                continue
            self.endpoints[name] = EndpointStack(
                self, name, stack_name=endpoint_name, termination_protection=protect, spec=spec,
                environment=environment, endpoint=endpoint, endpoint_name=endpoint_name, manifest=manifest,
                manifest_path=manifest_path, storage=self.storage,
                capacity=dict(capacity or {}), drains=dict(drains or {}), pool_manifests=dict(pool_manifests or {}))
