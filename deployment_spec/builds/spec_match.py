"""Does a build serve what the spec names now? One rule for synth (``triton_constructs.checks.built_endpoint``) and
for `tritonsm serve` and the other local commands (``deployment_spec.served.resolve_endpoint``): every model the
spec serves from a manifest entry (an endpoint's, or a variant's or shadow's own build ``<endpoint>.<variant>``) is
in its archives, built from the sources and settings the spec names now.

Without it a shadow whose model changed after the build would be served from its previous build, under the new
model's name, and a shadow test or `tritonsm compare` would judge the wrong model.
"""
from __future__ import annotations

import pathlib
from typing import Mapping

from deployment_spec.builds import model_sources, recipe_sources
from deployment_spec.builds.manifest import Manifest
from deployment_spec.parsing.errors import UserError
from deployment_spec.rules.cross_section import served_models
from deployment_spec.sections.endpoint import EndpointSpec
from deployment_spec.sections.model import ModelSpec
from deployment_spec.sections.variants import BUILD_SEPARATOR

REBUILD = "run `tritonsm build`"


def subject(build: str) -> str:
    """Whom a problem is about: an endpoint, or a variant whose model is built apart (``<endpoint>.<variant>``)."""
    endpoint, _, variant = build.partition(BUILD_SEPARATOR)
    return f"variant '{variant}' of endpoint '{endpoint}' (its own build, '{build}')" if variant else \
        f"endpoint '{build}'"


def build_problems(endpoint: EndpointSpec, models: Mapping[str, ModelSpec], manifest: Manifest,
                   manifest_path: pathlib.Path, spec_root: pathlib.Path) -> list[str]:
    """What is wrong with the manifest's entry ``endpoint.name`` for what the spec serves there now: a model its
    archives lack, a model built from other sources or settings (paths relative to ``spec_root``, the spec's
    folder). An entry the manifest lacks is the callers' to refuse (each says why the build left it out)."""
    built = manifest.endpoints.get(endpoint.name)
    if built is None:
        return []
    packed = [name for artifact in built.artifacts for name in artifact.models]
    served = served_models(endpoint, models)
    expected = [name for model in served for name in model.triton_names()]
    others = [name for name in dict.fromkeys(packed) if name not in expected]
    held = (f" (its archives hold {', '.join(others)}, which the spec no longer serves there: a build made before "
            "the spec changed)") if others else ""
    out = [f"model '{name}' has no artifact in {manifest_path}{held}; {REBUILD}"
           for name in expected if name not in packed]
    for model in served:
        entry = next((manifest.models[n] for n in model.triton_names() if n in manifest.models and n in packed), None)
        if entry is None or not entry.sources:
            continue  # not packed (told above), or a manifest from before the sources were recorded
        changes = model_sources.changed(spec_root, model, model_sources.Sources(entry.sources, entry.source_stamps))
        if changes:
            what = ", and ".join(_change(model, key, spec_root) for key in changes)
            out.append(f"model '{model.name}' is stale: {what}, so its build serves the model as it was; {REBUILD} "
                       "to rebuild it")
    return out


def check_served(endpoint: EndpointSpec, models: Mapping[str, ModelSpec], manifest: Manifest,
                 manifest_path: pathlib.Path, spec_root: pathlib.Path) -> None:
    """``build_problems`` as a UserError, worded as synth words them (``SynthError``: the subject, a line each)."""
    problems = build_problems(endpoint, models, manifest, manifest_path, spec_root)
    if problems:
        raise UserError(f"{subject(endpoint.name)}:\n" + "\n".join(f"  - {p}" for p in problems))


def _change(model: ModelSpec, key: str, spec_root: pathlib.Path) -> str:
    """One changed source, in the spec's words."""
    where = f"models.{model.name}"
    if key == model_sources.SETTINGS:
        return f"its settings under {where} changed since the build"
    if key == model_sources.RECIPE:
        recipe = model.source.recipe if model.source and model.source.recipe else ""
        module = recipe.split(":", 1)[0]
        if recipe_sources.files(module, model_sources.search_path(spec_root)) is None:
            return (f"its recipe's module {module} is not found now (beside the spec, in the working directory or "
                    "on sys.path)")
        return f"its recipe's module {module}, or a module beside it that it imports, changed since the build"
    value = dict(model.local_files()).get(key)
    if value is None:
        return f"{where}.{key} is no longer given"
    if not (spec_root / value).exists():
        return f"{where}.{key} ({value}) no longer exists"
    return f"{where}.{key} ({value}) changed since the build"
