"""NVIDIA Triton endpoints on Amazon SageMaker as a CDK construct library (not named ``constructs``: that is the library).

The public face is one construct and its props::

    from triton_constructs import ModelRepositories, Scaling, TritonSageMakerEndpoint

    models = ModelRepositories.from_manifest("assets/manifest.json", ["resnet50"])
    endpoint = TritonSageMakerEndpoint(stack, "Classifier", models=models, instance_type="ml.g5.xlarge",
                                       scaling=Scaling(max_instances=4))
    endpoint.grant_invoke(my_function)

A candidate model on 10 % of the traffic, alarming against the incumbent (or ``shadow=Shadow(model="v2")``)::

    endpoint = TritonSageMakerEndpoint(stack, "Classifier", models=models, instance_type="ml.g5.xlarge",
                                       variants=[Variant(name="incumbent", weight=90),
                                                 Variant(name="candidate", model="v2", weight=10)],
                                       variant_models={"candidate": ModelRepositories.from_manifest(...)})

Several models on one endpoint, each an inference component with its own reservation and copies::

    from triton_constructs import ComponentSpec, CopyScaling, TritonComponentsEndpoint

    TritonComponentsEndpoint(stack, "Shared", models=ModelRepositories.from_manifest("assets/manifest.json", ["resnet50", "bert"]),
                             instance_type="ml.g5.12xlarge",
                             components={"bert": ComponentSpec(scaling=CopyScaling(min_copies=0, max_copies=4,
                                                                                   invocations_per_copy=600))})

The props are plain frozen dataclasses that refuse out-of-bounds values when built (``PropsError``),
with the same words as the YAML spec's validator. The building blocks (``TritonModel``,
``TritonEndpoint``, ``VariantScaling``, ...) live in their own modules. Nothing here imports torch
or model_build.
"""
from deployment_spec.sections.asynchronous import Asynchronous
from deployment_spec.sections.capacity_reservation import CapacityReservation
from deployment_spec.sections.components import ComponentSpec, CopyScaling, ManagedInstances, Reservation, RollingUpdate
from deployment_spec.sections.endpoint import CaptureMode, Container, DataCapture, Deployment, Observability, Strategy
from deployment_spec.facts.instances import InstanceFacts
from deployment_spec.parsing.errors import Problem, PropsError
from deployment_spec.sections.scaling import LoadMetric, Scaling
from deployment_spec.sections.scheduled_scaling import ScheduledCopies, ScheduledScaling
from deployment_spec.sections.variants import Comparison, Shadow, Variant
from triton_constructs.alarm_props import Alarms
from triton_constructs.components_endpoint import TritonComponentsEndpoint
from triton_constructs.endpoint_reference import ImportedTritonEndpoint
from triton_constructs.errors import SynthError
from triton_constructs.model_repositories import ModelArchive, ModelRepositories
from triton_constructs.model_store import ModelStore
from triton_constructs.network import NetworkProps
from triton_constructs.promql_graphs import PromQLGraphs
from triton_constructs.sagemaker_endpoint import TritonSageMakerEndpoint
from triton_constructs.stage_budget import StageBudget

__all__ = ["Alarms", "Asynchronous", "CapacityReservation", "CaptureMode", "Comparison", "ComponentSpec", "Container", "CopyScaling", "DataCapture", "Deployment",
           "ImportedTritonEndpoint", "InstanceFacts", "LoadMetric", "ManagedInstances", "ModelArchive", "ModelRepositories", "ModelStore", "NetworkProps", "Observability", "Problem", "PromQLGraphs", "PropsError",
           "Reservation", "RollingUpdate", "Scaling", "ScheduledCopies", "ScheduledScaling", "Shadow", "StageBudget", "Strategy", "SynthError", "TritonComponentsEndpoint",
           "TritonSageMakerEndpoint", "Variant"]
