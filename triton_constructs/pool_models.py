"""A model per instance pool: where a TensorRT plan does not run on a fallback pool's GPU, that pool serves a
build of its own (``InstancePool.ModelNameOverride``: "a different model optimized for the instance type in
this pool"; botocore's SageMaker service model, ProductionVariant.InstancePools).

A plan runs only on the compute capability it was built on unless built hardware-compatible, so a g5 (A10G,
8.6) plan cannot serve a g6 (L4, 8.9) pool: build the same models on an L4 and give that build to the pool.
Callers see one endpoint and the same Triton models whichever pool served them.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Sequence

from deployment_spec.facts import instances
from deployment_spec.parsing.errors import Problem
from deployment_spec.rules.sagemaker import prefixed
from triton_constructs.model_repositories import ModelRepositories

# How the spec app gives a pool its build; the construct's own prop is named in the same sentence.
POOL_BUILD_FIX = ("or build the models on that GPU and give the pool that build (construct: pool_models; "
                  "app: tritonsm build --out DIR on that GPU, then cdk synth -c pool_manifests=DIR/manifest.json)")


def pools_problems(models: ModelRepositories, fallbacks: Sequence[str], pool_models: Mapping[str, ModelRepositories],
                   *, triton_version: str, instance_facts: Optional[instances.InstanceFacts] = None) -> list[Problem]:
    """Each fallback pool serves its own build if it has one, else the endpoint's models: what serves a pool must
    run there (a TensorRT plan on its GPU); a pool's own build holds the same Triton models (callers name them)."""
    out = [Problem(f"pool_models.{name}", repr(name), f"one of fallback_instance_types ({', '.join(fallbacks) or 'none'})",
                   "key each build by the instance type of its pool") for name in pool_models if name not in fallbacks]
    for i, fallback in enumerate(fallbacks):
        own = pool_models.get(fallback)
        if own is None:
            found = models.problems(multi_model=False, triton_version=triton_version, instance_type=fallback)
            out += prefixed(f"fallback_instance_types[{i}]", [_with_pool_fix(p) for p in found])
            continue
        where = f"pool_models.{fallback}"
        out += prefixed(where, own.problems(multi_model=False, triton_version=triton_version, instance_type=fallback))
        if sorted(own.model_names) != sorted(models.model_names):
            out.append(Problem(where, f"models {', '.join(own.model_names)}", f"the endpoint's models "
                               f"({', '.join(models.model_names)}): callers name them whichever pool serves",
                               "build the same spec models on that pool's GPU"))
        if any((a.path is None) != (models.archives[0].path is None) for a in own.archives):
            out.append(Problem(where, "archives from another place than the endpoint's", "local files as the "
                               "endpoint's are (copied under one prefix), or S3 objects as theirs are",
                               "give the pool's archives the way the endpoint's are given"))
    return out


def with_pool_archives(models: ModelRepositories, pool_models: Mapping[str, ModelRepositories]) -> ModelRepositories:
    """The endpoint's archives and every pool's, to put under the endpoint's one prefix (the role reads it)."""
    extra = tuple(a for own in pool_models.values() for a in own.archives)
    return dataclasses.replace(models, archives=models.archives + extra)


def _with_pool_fix(problem: Problem) -> Problem:
    if not problem.path.startswith("models."):
        return problem
    return dataclasses.replace(problem, fix=f"{problem.fix}, {POOL_BUILD_FIX}")
