"""The deployment spec: one YAML file, one typed loader, shared by model_build and app.py."""
from __future__ import annotations

import dataclasses
import pathlib
import re
from typing import Any, Mapping

import yaml

from deployment_spec.cost import figures as cost, pricing
from deployment_spec.facts import serving_runtimes
from deployment_spec.rules import component_endpoint, cross_section as rules, sagemaker as sagemaker_rules, streaming, variant_plan
from deployment_spec.sections import task_models
from deployment_spec.rules.container_env import endpoint_name
from deployment_spec.sections.endpoint import EndpointSpec
from deployment_spec.sections.environment import EnvironmentSpec
from deployment_spec.parsing.errors import Problem, SpecError, describe
from deployment_spec.sections.model import NAME_HELP, NAME_PATTERN, ModelSpec
from deployment_spec.parsing.parse import check_keys, meta, parse_dataclass, parse_value
from deployment_spec.sections.pipeline import PipelineSpec, stage_rules
from deployment_spec.sections.signing import SigningSpec, signing_rules

DEFAULT_SPEC = "triton.yaml"
TOP_KEYS = ["project", "triton_version", "models", "endpoints", "environments", "pipeline", "signing"]
ENV_NAME = r"[A-Za-z][A-Za-z0-9]{0,30}"
ENV_NAME_HELP = "letters and digits, starting with a letter (it names a CDK stage)"
DEFAULT_PROJECT = "Triton"
# `project:` is read like a field with this metadata; deployment_spec/json_schema.py describes it from the same.
PROJECT_META = meta(help="the project's name: the first part of each stage ID (<project><Environment>) and "
                         "SageMaker endpoint name (<project>-<environment>-<endpoint>)",
                    pattern=ENV_NAME, pattern_help="letters and digits, starting with a letter")
# The key of an environment taken out before the rest is parsed as an EnvironmentSpec, and what it may hold.
OVERRIDES = "overrides"
OVERRIDE_KEYS = ("endpoints",)
RESERVED_STACK = "Storage"  # each stage's storage stack; stacks/stage.py names endpoint stacks by endpoint
REQUIRED_TOP = {
    "triton_version": 'a sagemaker-tritonserver tag in quotes, e.g. "25.09"',
    "models": "a mapping of model name: settings",
    "endpoints": "a mapping of endpoint name: settings",
    "environments": "a mapping of environment name: settings",
}


@dataclasses.dataclass(frozen=True)
class Spec:
    project: str
    triton_version: str
    models: Mapping[str, ModelSpec]
    endpoints: Mapping[str, EndpointSpec]
    environments: Mapping[str, EnvironmentSpec]
    path: pathlib.Path
    pipeline: PipelineSpec | None = None  # optional: the CDK Pipelines delivery pipeline (stacks/pipeline_stack.py)
    signing: SigningSpec = SigningSpec()  # optional: the key model tarballs are signed with (deployment_spec.sections.signing)

    @property
    def root(self) -> pathlib.Path:
        """Relative paths in the spec (weights, onnx files, ...) are relative to the spec's folder."""
        return self.path.parent

    def served_models(self, endpoint: EndpointSpec) -> list[ModelSpec]:
        return rules.served_models(endpoint, self.models)


def load_spec(path: str | pathlib.Path = DEFAULT_SPEC) -> Spec:
    """Reads and validates a spec; raises SpecError listing every problem."""
    path = pathlib.Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise SpecError(str(path), [Problem("(file)", "no such file", "a path to an existing YAML spec",
                                            "pass --spec PATH or create triton.yaml")]) from None
    except UnicodeDecodeError:
        raise SpecError(str(path), [Problem("(file)", "a file that is not UTF-8 text", "a YAML text file",
                                            "pass the path of the spec (.yaml)")]) from None
    except OSError as exc:
        raise SpecError(str(path), [Problem("(file)", f"unreadable file ({exc.strerror})", "a readable YAML file",
                                            "check the path and its permissions")]) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        raise SpecError(str(path), [Problem("(file)", f"invalid YAML at {where} ({getattr(exc, 'problem', exc)})",
                                            "a YAML document", "fix the syntax at that position")]) from None
    return parse_spec(raw, path)


def parse_spec(raw: Any, path: pathlib.Path) -> Spec:
    problems: list[Problem] = []
    if not isinstance(raw, dict):
        raise SpecError(str(path), [Problem("(top level)", describe(raw), "a mapping with " + ", ".join(TOP_KEYS),
                                            "start from examples/ or the README")])
    check_keys(raw, TOP_KEYS, "", problems)
    for key, allowed in REQUIRED_TOP.items():
        if key not in raw:
            problems.append(Problem(key, "nothing (the key is missing)", allowed, f"add '{key}:' at the top level"))
    project = parse_value(str, raw.get("project", DEFAULT_PROJECT), "project", problems, PROJECT_META)
    version = parse_value(str, raw.get("triton_version", serving_runtimes.DEFAULT_TRITON_VERSION), "triton_version", problems, {})
    version = version if isinstance(version, str) else ""  # unparsable: reported above; rules skip it
    if version:
        problems += sagemaker_rules.triton_version_known(version)
    models = _named(raw.get("models", {}), "models", ModelSpec, problems)
    # Names written under models: even if their body is invalid; with no models: at all,
    # references are not checked (one "missing models" problem says it all).
    models_raw = raw.get("models")
    declared = set(models_raw) if isinstance(models_raw, dict) else None
    models, task_problems = task_models.expand(models, declared or set(), path.parent)
    problems += task_problems
    if declared is not None:
        declared |= set(models)  # a task's steps and ensemble
    parsed: list[Problem] = []  # the endpoints' own parse problems, which an override's merged copy repeats
    endpoints = {name: streaming.derived(ep, models)
                 for name, ep in _named(raw.get("endpoints", {}), "endpoints", EndpointSpec, parsed).items()}
    problems += parsed
    if declared is not None:
        problems += rules.model_rules(models, declared)
    problems += rules.dali_release_rules(models, version)
    base: list[Problem] = []
    for name, ep in endpoints.items():
        base += rules.endpoint_rules(f"endpoints.{name}", ep, models, version, declared or set(ep.models))
    problems += base
    environments = _environments(raw, endpoints, models, version, problems, base + parsed, declared)
    problems += variant_plan.build_conflicts(endpoints, {n: e.endpoints for n, e in environments.items()})
    problems += _budget_problems(environments, path.parent)
    if isinstance(project, str):
        problems += _endpoint_name_problems(project, environments)
        problems += component_endpoint.name_problems(project, environments)
        problems += _construct_id_problems(project, endpoints, envs_raw=raw.get("environments"))
    pipeline = _pipeline(raw, envs_raw=raw.get("environments"), environments=environments, problems=problems)
    signing = parse_dataclass(SigningSpec, raw.get("signing", {}), "signing", problems) or SigningSpec()
    problems += signing_rules(signing, path.parent)
    if problems:
        raise SpecError(str(path), _dedupe(problems))
    return Spec(project, version, models, endpoints, environments, path.resolve(), pipeline, signing)


def _pipeline(raw: dict[str, Any], envs_raw: Any, environments: dict[str, EnvironmentSpec],
              problems: list[Problem]) -> PipelineSpec | None:
    if "pipeline" not in raw:
        return None
    pipeline: PipelineSpec | None = parse_dataclass(PipelineSpec, raw["pipeline"], "pipeline", problems)
    if pipeline is not None:
        problems += stage_rules("pipeline", pipeline, set(envs_raw) if isinstance(envs_raw, dict) else set(),
                                environments)
    return pipeline


def _named(raw: Any, section: str, cls: type, problems: list[Problem]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        problems.append(Problem(section, describe(raw), f"a mapping of name: settings", f"write {section} as a mapping"))
        return {}
    out = {}
    for name, body in raw.items():
        if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN, name):
            problems.append(Problem(f"{section}.{name}", f"the name {describe(name)}", NAME_HELP, "rename it"))
            continue
        obj = parse_dataclass(cls, body, f"{section}.{name}", problems)
        if obj is not None:
            out[name] = dataclasses.replace(obj, name=name)
    return out


def _environments(raw: dict[str, Any], endpoints: dict[str, EndpointSpec], models: dict[str, ModelSpec], version: str,
                  problems: list[Problem], base: list[Problem], declared: set[str] | None
                  ) -> dict[str, EnvironmentSpec]:
    envs_raw = raw.get("environments", {})
    if not isinstance(envs_raw, dict) or not envs_raw:
        problems.append(Problem("environments", describe(envs_raw), "a mapping with at least one environment",
                                "add e.g. dev: {region: us-east-1}"))
        return {}
    base_text = {str(p) for p in base}
    out = {}
    for env_name, body in envs_raw.items():
        path = f"environments.{env_name}"
        if not isinstance(env_name, str) or not re.fullmatch(ENV_NAME, env_name):
            problems.append(Problem(path, f"the name {describe(env_name)}", ENV_NAME_HELP, "rename the environment"))
            continue
        body = dict(body) if isinstance(body, dict) else body
        overrides = body.pop(OVERRIDES, {}) if isinstance(body, dict) else {}
        env = parse_dataclass(EnvironmentSpec, body, path, problems)
        if env is None:
            continue
        problems += rules.environment_rules(path, env, version)
        known = len(problems)
        resolved = _apply_overrides(path, overrides, raw.get("endpoints", {}), endpoints, models, version,
                                    problems, base_text, declared)
        out[env_name] = dataclasses.replace(env, name=env_name, endpoints=resolved)
        if len(problems) == known and not base:
            # Whole-environment rules only on endpoints that resolved cleanly: one root cause, one message.
            problems += rules.deployment_rules(out[env_name]) + rules.production_rules(out[env_name])
    return out


def _budget_problems(environments: Mapping[str, EnvironmentSpec], root: pathlib.Path) -> list[Problem]:
    """Each ``budget:`` against its environment's monthly ceiling, priced from the refresh cache under the spec's
    folder, then the shipped snapshot (deployment_spec.cost.pricing)."""
    budgeted = {name: env for name, env in environments.items() if env.budget is not None}
    if not budgeted:
        return []
    try:
        prices = pricing.load_prices(root)
    except pricing.PricesError as exc:
        return [Problem(f"environments.{name}.budget", "prices that cannot be read", "a readable price file",
                        str(exc)) for name in budgeted]
    out: list[Problem] = []
    for name, env in budgeted.items():
        out += cost.budget_problems(f"environments.{name}", env, prices)
    return out


def _construct_id_problems(project: str, endpoints: Mapping[str, EndpointSpec], envs_raw: Any) -> list[Problem]:
    """Names that would collide as CDK construct IDs: an endpoint called like the storage stack, two
    environments that give the same stage ID (dev and Dev both make <project>Dev)."""
    out = []
    for name in endpoints:
        if name.lower() == RESERVED_STACK.lower():
            out.append(Problem(f"endpoints.{name}", f"the name '{name}'", f"any name but '{RESERVED_STACK}' (the "
                               "storage stack of each stage has it)", "rename the endpoint"))
    seen: dict[str, str] = {}
    for env in envs_raw if isinstance(envs_raw, dict) else {}:
        stage = f"{project}{str(env)[:1].upper()}{str(env)[1:]}"
        if stage in seen:
            out.append(Problem(f"environments.{env}", f"the stage ID '{stage}', also made by environment "
                               f"'{seen[stage]}'", "environment names that differ beyond their first letter's case",
                               "rename one of the two environments"))
        seen.setdefault(stage, str(env))
    return out


def _endpoint_name_problems(project: str, environments: dict[str, EnvironmentSpec]) -> list[Problem]:
    """Each endpoint's SageMaker name, <project>-<environment>-<endpoint>, must be valid in every environment."""
    out: list[Problem] = []
    reported: set[str] = set()
    for env_name, env in environments.items():
        for ep_name in env.endpoints:
            full = endpoint_name(project, env_name, ep_name)
            found = [] if ep_name in reported else sagemaker_rules.endpoint_name_valid(
                full, f"endpoints.{ep_name}",
                f"the SageMaker endpoint name '{full}' (<project>-<environment>-<endpoint>, environment {env_name})",
                "rename the endpoint (no '_') or shorten the project or environment name")
            reported.update(ep_name for _ in found)
            out += found
    return out


def _apply_overrides(path: str, overrides: Any, endpoints_raw: Any, endpoints: dict[str, EndpointSpec],
                     models: dict[str, ModelSpec], version: str, problems: list[Problem],
                     base_text: set[str], declared: set[str] | None) -> dict[str, EndpointSpec]:
    opath = f"{path}.{OVERRIDES}"
    if not isinstance(overrides, dict):
        problems.append(Problem(opath, describe(overrides), "a mapping with endpoints:", "write overrides: {endpoints: {...}}"))
        return dict(endpoints)
    check_keys(overrides, list(OVERRIDE_KEYS), opath, problems)
    per_endpoint = overrides.get("endpoints", {}) or {}
    if not isinstance(per_endpoint, dict):
        problems.append(Problem(f"{opath}.endpoints", describe(per_endpoint), "a mapping of endpoint name: settings",
                                "write one entry per endpoint"))
        return dict(endpoints)
    resolved = dict(endpoints)
    for ep_name, patch in per_endpoint.items():
        epath = f"{opath}.endpoints.{ep_name}"
        if ep_name not in endpoints:
            if isinstance(endpoints_raw, dict) and ep_name not in endpoints_raw:
                problems.append(rules.unknown_name(epath, str(ep_name), endpoints, "endpoints"))
            continue
        merged_raw = _deep_merge(endpoints_raw[ep_name], patch)
        found: list[Problem] = []
        ep = parse_dataclass(EndpointSpec, merged_raw, f"endpoints.{ep_name}", found)
        if ep is not None:
            ep = streaming.derived(dataclasses.replace(ep, name=ep_name), models)
            found += rules.endpoint_rules(f"endpoints.{ep_name}", ep, models, version, declared or set(ep.models))
            resolved[ep_name] = ep
        for p in found:
            if str(p) not in base_text:  # only what this environment's override causes
                problems.append(dataclasses.replace(p, path=p.path.replace(f"endpoints.{ep_name}", epath, 1)))
    return resolved


def _deep_merge(base: Any, patch: Any) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            out[key] = _deep_merge(base.get(key), value) if key in base else value
        return out
    return patch


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        if str(p) not in seen:
            seen.add(str(p))
            out.append(p)
    return out
