"""The project's CDK constructs for Triton on SageMaker (not named ``constructs``: that is the library).

One construct per module; stacks in ``stacks/`` compose them. Nothing here imports torch or model_build.
"""
from triton_constructs import checks
from triton_constructs.alarms import EndpointAlarms
from triton_constructs.artifacts import ArtifactFile, ModelArtifacts
from triton_constructs.dashboard import EndpointDashboard
from triton_constructs.endpoint import DataCaptureSettings, TritonEndpoint
from triton_constructs.errors import SynthError
from triton_constructs.execution_role import TritonExecutionRole
from triton_constructs.image import TritonImage
from triton_constructs.model_store import ModelStore
from triton_constructs.scaling import VariantScaling
from triton_constructs.triton_model import TritonModel, container_environment

__all__ = ["ArtifactFile", "DataCaptureSettings", "EndpointAlarms", "EndpointDashboard", "ModelArtifacts",
           "ModelStore", "SynthError", "TritonEndpoint", "TritonExecutionRole", "TritonImage", "TritonModel",
           "VariantScaling", "checks", "container_environment"]
