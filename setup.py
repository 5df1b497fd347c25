"""The wheel's packages (the rest of the configuration is pyproject.toml's).

The library and the tools keep their folder names; the spec app's ``stacks/`` (its CDK stacks and ``spec_app``)
ships as ``triton_sagemaker_stacks``: a top-level ``stacks`` would shadow the one most CDK apps have. Its modules
import each other relatively, so they work under either name. ``app.py`` is this checkout's entry point and stays
out (the wheel's is ``python -m triton_sagemaker_stacks``).
"""
from setuptools import find_packages, setup

LIBRARY = ["deployment_spec*", "triton_constructs*", "model_build*", "local_endpoint*", "tritonsm*"]
SPEC_APP = "triton_sagemaker_stacks"

setup(packages=[*find_packages(include=LIBRARY), SPEC_APP], package_dir={SPEC_APP: "stacks"})
