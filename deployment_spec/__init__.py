"""The deployment spec: models, endpoints and environments in one validated file.

Light on purpose: imports only the standard library and PyYAML, so both the CDK
app (no torch) and model_build (no aws_cdk) can use it.
"""
from deployment_spec.sections.endpoint import EndpointKind, EndpointSpec
from deployment_spec.sections.environment import EnvironmentSpec, RemovalPolicy
from deployment_spec.parsing.errors import Problem, SpecError
from deployment_spec.sections.model import Backend, ModelSpec, Precision
from deployment_spec.spec import DEFAULT_SPEC, Spec, load_spec

__all__ = ["Backend", "DEFAULT_SPEC", "EndpointKind", "EndpointSpec", "EnvironmentSpec", "ModelSpec", "Precision",
           "Problem", "RemovalPolicy", "Spec", "SpecError", "load_spec"]
