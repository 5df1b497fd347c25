"""Builds made on other GPUs (``cdk synth -c pool_manifests=a/manifest.json,b/manifest.json``): for each fallback
instance pool whose GPU the endpoint's own TensorRT plans do not run on, the first of them whose plans do, which
that pool then serves (``TritonSageMakerEndpoint(pool_models=...)``, ``ModelNameOverride``)."""
from __future__ import annotations

import pathlib
from typing import Mapping

from deployment_spec import Spec
from deployment_spec.sections.endpoint import EndpointSpec
from deployment_spec.builds.manifest import Manifest
from . import model_signatures
from triton_constructs import ModelRepositories, checks


def pool_models(spec: Spec, endpoint: EndpointSpec, models: ModelRepositories,
                pool_manifests: Mapping[pathlib.Path, Manifest]) -> dict[str, ModelRepositories]:
    """Fallback instance type -> the build it serves, where the endpoint's own does not run there. A pool that no
    build fits is left out: the construct then refuses it, naming the pool and how to build for it."""
    chosen: dict[str, ModelRepositories] = {}
    for fallback in endpoint.fallback_instance_types:
        if not models.problems(multi_model=False, triton_version=spec.triton_version, instance_type=fallback):
            continue  # the endpoint's own models run there (no plan, or a hardware-compatible one)
        for path, manifest in pool_manifests.items():
            if endpoint.name not in manifest.endpoints:
                continue  # a build of other endpoints
            built = checks.built_endpoint(endpoint, spec.models, spec.triton_version, manifest, path,
                                           spec_root=spec.root)
            candidate = ModelRepositories.from_built(
                manifest, built.artifacts, origin=str(path), default_model=built.default_model,
                public_key=model_signatures.public_key(spec),
                hardware_compatibility={m.name: m.tensorrt.hardware_compatibility
                                        for m in spec.served_models(endpoint) if m.tensorrt})
            if not candidate.problems(multi_model=False, triton_version=spec.triton_version, instance_type=fallback):
                chosen[fallback] = candidate
                break
    return chosen
