"""``TritonSageMakerEndpoint``'s weighted variants and shadow: what each serves, on what, and what is refused.

SageMaker's refusals are the spec's own (``deployment_spec.rules.variant_plan.combination_problems``, run on an endpoint spec
made of the props); the instance rules are ``sagemaker_rules.endpoint_problems`` on each variant's own type, scaling
and count. What is the construct's alone: a variant's archives come from ``variant_models`` (the YAML spec's
``model:`` names a spec model, which the construct does not have) and must be readable where the endpoint's are.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping, Optional, Sequence

from deployment_spec.facts import instances
from deployment_spec.rules import sagemaker as sagemaker_rules
from deployment_spec.sections.asynchronous import Asynchronous
from deployment_spec.sections.endpoint import EndpointKind, EndpointSpec
from deployment_spec.parsing.errors import Problem
from deployment_spec.parsing.parse import values_problems
from deployment_spec.sections.scaling import Scaling
from deployment_spec.sections.variants import Shadow, Variant, shadow_weight
from deployment_spec.rules.variant_plan import combination_problems
from triton_constructs.model_repositories import ModelRepositories

# What the spec's model check sees for the endpoint's own models: the construct names no spec models.
ENDPOINT_MODELS = "the endpoint's models"


@dataclasses.dataclass(frozen=True)
class VariantPlan:
    """One variant (or the shadow) as the endpoint serves it, every default resolved.

    Attributes:
        name: Its ``VariantName``.
        models: Its own archives (``variant_models``), or None: the endpoint's.
        instance_type, initial_instances, scaling: Its own, else the endpoint's.
        weight: Its ``InitialVariantWeight``.
        shadow: It is the shadow.
    """

    name: str
    models: Optional[ModelRepositories]
    instance_type: str
    initial_instances: int
    scaling: Optional[Scaling]
    weight: float
    shadow: bool = False

    def like_endpoint(self, instance_type: str) -> bool:
        """It serves the endpoint's archives on the endpoint's type: the endpoint's pools and reservation apply."""
        return self.models is None and self.instance_type == instance_type


def plans(variants: Sequence[Variant], shadow: Optional[Shadow], variant_models: Mapping[str, ModelRepositories], *,
          variant_name: str, instance_type: str, initial_instances: int,
          scaling: Optional[Scaling]) -> list[VariantPlan]:
    """The production variants (the incumbent first), then the shadow. Without variants the endpoint's own variant is
    the production one, weight 1, and the shadow's weight makes its sampled share (``shadow_weight``)."""
    out = [VariantPlan(v.name, variant_models.get(v.name), v.instance_type or instance_type,
                       v.initial_instances or initial_instances, v.scaling or scaling, v.weight) for v in variants]
    if not out:
        out.append(VariantPlan(variant_name, None, instance_type, initial_instances, scaling, 1.0))
    if shadow is not None:
        out.append(VariantPlan(shadow.name, variant_models.get(shadow.name), shadow.instance_type or instance_type,
                               shadow.initial_instances or initial_instances, shadow.scaling or scaling,
                               shadow_weight(1.0, shadow.sampling_percent), shadow=True))
    return out


def as_endpoint_spec(variants: Sequence[Variant], shadow: Optional[Shadow], *, multi_model: bool,
                     variant_name: str, asynchronous: Optional[Asynchronous]) -> Optional[EndpointSpec]:
    """The props as the spec's endpoint, for the spec's own rules (None while ``variant_name`` is refused)."""
    if values_problems(EndpointSpec, {"variant_name": variant_name}):
        return None
    return EndpointSpec(kind=EndpointKind.MULTI_MODEL if multi_model else EndpointKind.SINGLE_MODEL,
                        models=(ENDPOINT_MODELS,), variant_name=variant_name, asynchronous=asynchronous,
                        variants=tuple(variants), shadow=shadow)


def problems(variants: Sequence[Variant], shadow: Optional[Shadow], variant_models: Mapping[str, ModelRepositories],
             *, models: ModelRepositories, multi_model: bool, variant_name: str,
             asynchronous: Optional[Asynchronous], instance_type: str, initial_instances: int,
             scaling: Optional[Scaling], triton_version: str, volume_size_gb: Optional[int],
             instance_facts: Optional[instances.InstanceFacts]) -> list[Problem]:
    """Everything SageMaker would refuse about the variants and the shadow, and every ``variant_models`` mistake."""
    names = [v.name for v in variants] + ([shadow.name] if shadow is not None else [])
    out = [Problem(f"variant_models.{key}", repr(key), f"the name of a variant or of the shadow "
                   f"({', '.join(names) or 'none given'})", "key each build by the name of the variant that serves it")
           for key in variant_models if key not in names]
    spec = as_endpoint_spec(variants, shadow, multi_model=multi_model, variant_name=variant_name,
                            asynchronous=asynchronous)
    if spec is None or not names:
        return out
    labels = {ENDPOINT_MODELS} | {v.model for v in variants if v.model} | ({shadow.model} if shadow else set())
    out += combination_problems(spec, labels, "")
    named = [(f"variants[{i}]", v.name, v.model) for i, v in enumerate(variants)]
    if shadow is not None:  # a shadow always names its model: without its own archives it would serve the endpoint's
        named.append(("shadow", shadow.name, shadow.model))
    for path, name, model in named:
        own_models = list(variant_models[name].model_names) if name in variant_models else None
        if model is not None and own_models is None:
            out.append(Problem(f"{path}.model", repr(model), f"a variant_models entry for {name!r}: the construct "
                               "serves archives, and model only names them",
                               f"add variant_models={{{name!r}: ModelRepositories...}}" + (
                                   "" if path == "shadow" else ", or remove model: the variant then serves the "
                                   "endpoint's models")))
        elif model is not None and own_models is not None and model not in own_models:
            out.append(Problem(f"{path}.model", repr(model), f"a model variant_models[{name!r}] serves "
                               f"({', '.join(own_models)})", "name the model its archives hold, or give the "
                               "archives that hold it"))
    given = [(f"variants[{i}]", v.name, v.instance_type, v.initial_instances, v.scaling) for i, v in enumerate(variants)]
    if shadow is not None:
        given.append(("shadow", shadow.name, shadow.instance_type, shadow.initial_instances, shadow.scaling))
    for path, name, own_type, own_count, own_scaling in given:
        effective = own_type or instance_type
        if own_type or own_count or own_scaling:  # the endpoint's own values are checked by the endpoint's rules
            found = sagemaker_rules.endpoint_problems(
                instance_type=effective, multi_model=False, triton_version=triton_version,
                initial_instances=own_count or initial_instances, scaling=own_scaling or scaling,
                volume_size_gb=volume_size_gb if own_type else None,
                instance_facts=instance_facts if effective == instance_type else None)
            out += sagemaker_rules.prefixed(path, found)
        own = variant_models.get(name)
        if own is not None:
            out += sagemaker_rules.prefixed(f"variant_models.{name}", own.problems(
                multi_model=False, triton_version=triton_version, instance_type=effective) + _place(own, models))
        elif effective != instance_type:  # the endpoint's archives on another GPU (a TensorRT plan may not run)
            found = models.problems(multi_model=False, triton_version=triton_version, instance_type=effective)
            out += sagemaker_rules.prefixed(path, [p for p in found if p.path.startswith("models.")
                                                   and p.path != "models.default_model"])
    return out


def _place(own: ModelRepositories, models: ModelRepositories) -> list[Problem]:
    """The execution role reads one prefix (``endpoint_storage.model_data``): local archives are all copied under
    it; S3 archives must already share the endpoint's."""
    first = models.archives[0]
    if all(a.path is not None for a in own.archives) and first.path is not None:
        return []
    if first.s3_prefix is not None and all(a.s3_prefix == first.s3_prefix for a in own.archives):
        return []
    where = f"S3 objects under the endpoint's prefix s3://{'/'.join(first.s3_prefix)}" if first.s3_prefix \
        else "local files, as the endpoint's are (copied under one prefix)"
    return [Problem("", "archives from another place than the endpoint's", f"{where}, which the execution role "
                    "reads", "give the variant's archives the way the endpoint's are given")]


def with_variant_archives(models: ModelRepositories, variant_models: Mapping[str, ModelRepositories]
                          ) -> ModelRepositories:
    """The archives with every variant's, to put under the endpoint's one prefix; an archive of the same object
    name is the same content (content-versioned names), put there once."""
    seen = {a.object_name for a in models.archives}
    extra = []
    for own in variant_models.values():
        for archive in own.archives:
            if archive.object_name not in seen:
                seen.add(archive.object_name)
                extra.append(archive)
    return dataclasses.replace(models, archives=models.archives + tuple(extra))
