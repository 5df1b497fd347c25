"""``tritonsm build``: every spec model -> cached model directory -> endpoint tarballs -> manifest.

Order of work: hash the inputs of every model (cheap, no torch), rebuild only models whose hash
has no cached result, pack only tarballs whose models changed, and write the manifest only if
its content changed. A second build of an unchanged spec therefore imports no torch, writes no
file and takes well under two seconds.
"""
from __future__ import annotations

import dataclasses
import gc
import os
import pathlib
import sys
import time
from typing import Callable, Iterable, Optional

from deployment_spec import Spec
from deployment_spec.builds import model_sources
from deployment_spec.facts import serving_runtimes
from deployment_spec.rules import variant_plan
from deployment_spec.sections import task_models
from deployment_spec.builds.manifest import EndpointArtifacts, Manifest, ManifestError, ModelEntry, load_manifest
from deployment_spec.sections.model import Backend, ModelSpec
from model_build import archive, hashing, packaging, signing
from model_build.errors import BuildError, NotEnoughMemory, ToolUnavailable

MANIFEST = "manifest.json"


@dataclasses.dataclass
class Report:
    built: list[str] = dataclasses.field(default_factory=list)
    cached: list[str] = dataclasses.field(default_factory=list)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)      # model -> error
    unavailable: dict[str, str] = dataclasses.field(default_factory=dict)  # model -> why it cannot build here
    not_requested: list[str] = dataclasses.field(default_factory=list)
    endpoints_skipped: dict[str, str] = dataclasses.field(default_factory=dict)  # a model is missing
    endpoints_failed: dict[str, str] = dataclasses.field(default_factory=dict)   # repository checks failed
    written: list[str] = dataclasses.field(default_factory=list)          # files (re)written in out/
    requested: tuple[str, ...] = ()

    def exit_code(self) -> int:
        """1 when a model failed, or a model asked for by name could not be built here; else 0."""
        if self.failed or self.endpoints_failed or any(m in self.unavailable for m in self.requested):
            return 1
        return 0


def build_order(spec: Spec) -> list[ModelSpec]:
    """Ensemble steps before their ensembles; otherwise spec order."""
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        model = spec.models[name]
        for step in (model.ensemble.steps if model.ensemble else ()):
            visit(step.model)
        order.append(name)

    for name in spec.models:
        visit(name)
    return [spec.models[n] for n in order]


def build_hashes(spec: Spec, hasher: hashing.FileHasher, toolchain: Callable,
                 serving_torch: bool = False, python_env_for: str = "image",
                 sources: Optional[dict[str, model_sources.Sources]] = None) -> dict[str, str]:
    """Each model's cache key; ``sources`` (where given) gets what of it the manifest records, the model's sources
    (deployment_spec.builds.model_sources: synth and `tritonsm serve` compare them with the spec's now)."""
    code = hashing.code_version()
    tools = hashing.tool_versions()
    out: dict[str, str] = {}
    for model in build_order(spec):
        own = model_sources.sources(spec.root, model, hasher)
        if sources is not None:
            sources[model.name] = own
        parts = [("sources", own.hashes), ("triton_version", spec.triton_version), ("code", code), ("tools", tools),
                 ("serving_runtime", dataclasses.asdict(serving_runtimes.runtime(spec.triton_version)))]
        if model.ensemble:
            parts.append(("steps", {s.model: out[s.model] for s in model.ensemble.steps}))
        if model.source and model.source.recipe == "text-preprocess":
            # its output type follows the ensembles it feeds (int32 for TensorRT classifiers)
            parts.append(("consumers", sorted((m.name, m.backend.value) for m in spec.models.values())))
        window_step = task_models.window_model_step(model)
        if window_step:  # its window_model parameter names the model step's tensors: rebuilt when they change
            parts.append(("window_model", out[window_step]))
        if model.backend is Backend.PYTORCH and serving_torch:
            parts.append(("serving_torch", True))  # the opt-in check adds its record: rebuild to run it
        if model.backend is Backend.PYTHON:
            parts.append(("python_env_for", python_env_for))
        if model.backend is Backend.DALI:
            from model_build.build_context import serving_devices  # the placement follows the serving instances
            parts += [("dali", dataclasses.asdict(serving_runtimes.DALI_RELEASES[spec.triton_version])),
                      ("devices", sorted(serving_devices(spec, model)))]
        if model.backend is Backend.TENSORRT:
            tc = toolchain()
            parts.append(("gpu", tc.gpu.compute_capability if tc.gpu else None))
        out[model.name] = hashing.combine(parts)
    return out


def _user_recipes_importable(spec: Spec) -> None:
    """`recipe: module:function` modules live beside the spec or in the working directory; the
    console script's sys.path holds neither, so both go first (the spec's folder wins)."""
    for folder in (os.getcwd(), str(spec.root)):
        if folder not in sys.path:
            sys.path.insert(0, folder)


def run(spec: Spec, out_dir: pathlib.Path, work_dir: pathlib.Path, requested: Iterable[str] = (),
        force: bool = False, log: Callable[[str], None] = print, serving_torch: bool = False,
        python_env_for: str = "image", memory_check: bool = True,
        signing_key: Optional[signing.AnyKey] = None) -> Report:
    """Builds ``requested`` models (all by default) and packs the endpoints' tarballs, each model directory signed
    with ``signing_key`` where given (its public key must be the spec's signing.public_key where that is set)."""
    requested = tuple(requested)
    signing_key = _keeping_kms_signatures(signing_key, work_dir)
    signer = _signer(spec, signing_key)
    report = Report(requested=requested)
    _user_recipes_importable(spec)
    selected = _selected(spec, requested)
    out_dir.mkdir(parents=True, exist_ok=True)
    work_dir.mkdir(parents=True, exist_ok=True)
    toolchain = _lazy_toolchain()
    hasher = hashing.FileHasher(work_dir / "file-hashes.json")
    sources: dict[str, model_sources.Sources] = {}
    hashes = build_hashes(spec, hasher, toolchain, serving_torch, python_env_for, sources)
    hasher.save(archive.write_text_atomic)

    from model_build import dispatch  # no torch here; recipes import it when they run
    from model_build.build_context import BuildContext

    ctx = BuildContext(spec, work_dir, log, toolchain, serving_torch, python_env_for)
    dirs: dict[str, pathlib.Path] = {}
    entries: dict[str, ModelEntry] = {}
    order = build_order(spec)
    if memory_check:
        _check_memory(spec, [m for m in order if m.name in selected and (force or not dispatch.load_cached(
            work_dir, m.name, hashes[m.name]))], toolchain, log)
    for i, model in enumerate(order, 1):
        name = model.name
        cached = None if (force and name in selected) else dispatch.load_cached(work_dir, name, hashes[name])
        if cached:
            dirs[name], entries[name] = cached
            report.cached.append(name)
            continue
        if name not in selected:
            report.not_requested.append(name)
            continue
        missing_steps = [s.model for s in model.ensemble.steps if s.model not in entries] if model.ensemble else []
        if missing_steps:
            report.failed[name] = f"model {name}: not built because its step(s) {', '.join(missing_steps)} failed"
            log(f"[{i}/{len(order)}] {name}: skipped (steps {', '.join(missing_steps)} not built)")
            continue
        log(f"[{i}/{len(order)}] {name}: building ({model.backend.value})")
        start = time.monotonic()
        try:
            dirs[name], entries[name] = dispatch.build_model(ctx, model, hashes[name], entries)
        except ToolUnavailable as exc:
            report.unavailable[name] = str(exc)
            log(f"[{i}/{len(order)}] {name}: cannot be built on this machine: {exc}")
            continue
        except BuildError as exc:
            report.failed[name] = str(exc)
            log(f"[{i}/{len(order)}] {name}: FAILED: {exc}")
            continue
        except Exception as exc:  # a third-party library's fault fails this model only, never the whole build
            report.failed[name] = unexpected(name, ctx.steps.get(name, "prepare the build"), exc)
            log(f"[{i}/{len(order)}] {name}: FAILED: {report.failed[name]}")
            continue
        finally:
            gc.collect()  # the torch model of this step is garbage now; keep the peak at one model
        report.built.append(name)
        log(f"[{i}/{len(order)}] {name}: built in {time.monotonic() - start:.1f} s")

    provenance = _provenance(spec, entries, hasher)
    manifest = _package(spec, out_dir, dirs, _recording(entries, sources), report, log, signing_key, signer,
                        provenance)
    manifest = dataclasses.replace(manifest, not_built=_not_built(report),
                                   unavailable_here=tuple(sorted(report.unavailable)))
    # The signed statement that binds this manifest's tarballs to this build (model_build/statement.py), written
    # first: should the manifest's write fail, the old manifest disagrees with the new statement and is refused.
    from model_build import statement
    if statement.write(out_dir, manifest, signing_key):
        report.written.append(statement.STATEMENT_FILE)
    _write_manifest(out_dir, manifest, report)
    return report


def _recording(entries: dict[str, ModelEntry], sources: dict[str, model_sources.Sources]) -> dict[str, ModelEntry]:
    """Each entry with the sources it was built from: a cached entry's are today's too (they are part of its
    cache key)."""
    return {name: dataclasses.replace(entry, sources=sources[name].hashes, source_stamps=sources[name].stamps)
            for name, entry in entries.items()}


def unexpected(name: str, step: str, exc: Exception) -> str:
    """One model's failure from an error nothing anticipated (a library's IndexError, a recipe's AttributeError)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    first = lines[0] if lines else "(no message)"
    return (f"model {name}: step \"{step}\" failed with {type(exc).__name__}: {first}; no check of the build "
            "anticipated it: make sure the model loads and runs in PyTorch as given (its recipe, its weights "
            f"directory's config.json), rerun `tritonsm build --model {name}` to see it alone, and report it with "
            "the build log if it persists; the other models build regardless")


def _check_memory(spec: Spec, to_build: list[ModelSpec], toolchain: Callable, log: Callable[[str], None]) -> None:
    """Refuses, before anything is built, a build whose largest model will not fit in the memory available now."""
    from model_build import memory_budget

    largest = memory_budget.largest(spec, [m for m in to_build if memory_budget.buildable_here(m, toolchain)])
    if largest is None:
        return
    available = memory_budget.available_bytes()
    refused = memory_budget.refusal(largest, available)
    if refused:
        raise NotEnoughMemory(refused)
    log(f"memory: the largest model to build, {largest.model} ({largest.bytes / 1e9:.2f} GB of fp32 weights), needs "
        f"about {memory_budget.need_bytes(largest.bytes) / 1e9:.1f} GB; {available / 1e9:.1f} GB available")


def _not_built(report: Report) -> dict[str, str]:
    """Reasons by spec path, so the CDK app can say why an endpoint has no artifacts."""
    out = {f"models.{m}": why for m, why in {**report.unavailable, **report.failed}.items()}
    out.update({f"models.{m}": "not requested (--model) and not built before" for m in report.not_requested})
    out.update({f"endpoints.{e}": why for e, why in {**report.endpoints_skipped, **report.endpoints_failed}.items()})
    return dict(sorted(out.items()))


def _selected(spec: Spec, requested: tuple[str, ...]) -> set[str]:
    if not requested:
        return set(spec.models)
    unknown = [n for n in requested if n not in spec.models]
    if unknown:
        from deployment_spec.parsing.errors import UserError
        raise UserError(f"--model {', '.join(unknown)}: not in {spec.path.name} "
                        f"(models: {', '.join(spec.models)})")
    out: set[str] = set()
    for name in requested:
        out |= {name, *packaging._steps(spec, name)}
    return out


def _lazy_toolchain() -> Callable:
    def get():
        from model_build.backends.tensorrt import gpu
        return gpu.detect()
    return get


def _keeping_kms_signatures(key: Optional[signing.AnyKey], work_dir: pathlib.Path) -> Optional[signing.AnyKey]:
    """A KMS key keeps its signatures in the work folder, so that a rebuild gives the same bytes (kms_signing.py)."""
    from model_build.kms_signing import KmsSigningKey
    if isinstance(key, KmsSigningKey) and key.cache is None:
        return dataclasses.replace(key, cache=work_dir / "kms-signatures")
    return key


def _signer(spec: Spec, key: Optional[signing.AnyKey]) -> Optional[str]:
    """The key's identity, refused before anything is built if it is not the spec's signing.public_key."""
    if key is None and spec.signing.public_key is not None:
        raise signing.SignatureError(
            f"signing.public_key is set ({spec.signing.public_key}), so every tarball must be signed, and no signing "
            f"key was given; allowed: a build with the team's private key; fix: pass --signing-key KEY or set "
            f"{signing.KEY_VARIABLE} (to try a model without the key, build and serve a copy of the spec without "
            "signing.public_key)")
    if key is None:
        return None
    identity = key.identity
    if spec.signing.public_key is not None:
        expected = signing.public_key_identity(spec.root / spec.signing.public_key)
        signing.check_elliptic(spec.root / spec.signing.public_key)
        if identity != expected:
            raise signing.SignatureError(
                f"the signing key {key.name} is the key {identity}; allowed: the private key of "
                f"signing.public_key ({spec.signing.public_key}, {expected}); fix: give the team's key, or commit its "
                "public key as signing.public_key")
    return identity


def _provenance(spec: Spec, entries: dict[str, ModelEntry], hasher: hashing.FileHasher) -> packaging.Provenance:
    """What each tarball's bill of materials says a model came from: its source file, weights folder or recipe (with
    the hash of what is on disk), its execution environment's packages; the build tools; the serving release."""
    from model_build import sbom  # cyclonedx: only when packing

    sources: dict[str, sbom.SourceRecord] = {}
    for name in entries:
        model = spec.models[name]
        files = dict(model.local_files())
        given = next(((field, files[field]) for field in ("source.onnx", "source.torchscript", "source.python_dir",
                                                           "weights") if field in files), None)
        if given is not None:
            path = (spec.root / given[1]).resolve()
            sources[name] = sbom.SourceRecord("checkpoint" if given[0] == "weights" else "file", given[1],
                                              hasher.tree(path) if path.exists() else None)
        elif model.source is not None and model.source.recipe:
            sources[name] = sbom.SourceRecord("checkpoint", f"recipe {model.source.recipe}")
    packages = {name: dict(p.split("==", 1) for p in entry.execution_environment.packages if "==" in p)
                for name, entry in entries.items() if entry.execution_environment is not None}
    tools = {**hashing.tool_versions(), "triton-sagemaker-cdk": _own_version(),
             "model_build code (sha256)": hashing.code_version()[:16]}
    regions = tuple(dict.fromkeys(env.region for env in spec.environments.values() if env.region))
    return packaging.Provenance(sources, packages, tools, spec.triton_version, regions)


def _own_version() -> str:
    import importlib.metadata
    try:
        return importlib.metadata.version("triton-sagemaker-cdk")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "checkout"


def _package(spec: Spec, out_dir: pathlib.Path, dirs, entries, report: Report, log,
             key: Optional[signing.AnyKey] = None, signer: Optional[str] = None,
             provenance: Optional[packaging.Provenance] = None) -> Manifest:
    old = _old_manifest(out_dir)
    models: dict[str, ModelEntry] = {}
    for name, entry in entries.items():
        for triton_name in spec.models[name].triton_names():
            models[triton_name] = dataclasses.replace(entry, name=triton_name)
    endpoints: dict[str, EndpointArtifacts] = {}
    # The spec's endpoints and the own builds of their variants (deployment_spec.sections.variants: <endpoint>.<variant>).
    for ep_name, endpoint in variant_plan.endpoints_to_build(spec).items():
        planned = packaging.plan(spec, endpoint)
        missing = sorted({m for p in planned for _, m in p.members if m not in dirs})
        if missing:
            report.endpoints_skipped[ep_name] = f"models not built: {', '.join(missing)}"
            log(f"endpoint {ep_name}: not packed (models not built: {', '.join(missing)})")
            continue
        try:
            packaging.check_endpoint(endpoint, planned)
        except BuildError as exc:
            report.endpoints_failed[ep_name] = str(exc)
            continue
        default = packaging.default_model(spec, endpoint)
        artifacts = []
        for p in planned:
            old_ep = old.endpoints.get(ep_name) if old else None
            found = packaging.reusable(old_ep, endpoint, default, p, old.models if old else {}, models, out_dir,
                                       signer, provenance.triton_images if provenance else None)
            if found is None:
                start = time.monotonic()
                found = packaging.pack(out_dir, p, dirs, key, provenance)
                report.written += [found.file, *([found.sbom] if found.sbom else [])]
                log(f"endpoint {ep_name}: packed {found.file} ({found.size / 1e6:.1f} MB, "
                    f"{time.monotonic() - start:.1f} s)")
            artifacts.append(found)
        endpoints[ep_name] = EndpointArtifacts(endpoint.kind.value, tuple(artifacts), default)
    return Manifest(spec.triton_version, models, endpoints, root=out_dir)


def _old_manifest(out_dir: pathlib.Path) -> Optional[Manifest]:
    try:
        return load_manifest(out_dir / MANIFEST)
    except ManifestError:
        return None


def _write_manifest(out_dir: pathlib.Path, manifest: Manifest, report: Report) -> None:
    path = out_dir / MANIFEST
    text = manifest.to_json()
    old = _old_manifest(out_dir)  # read before it is replaced: it names the tarballs now superseded
    if not path.is_file() or path.read_text() != text:
        archive.write_text_atomic(path, text)
        report.written.append(MANIFEST)
    # Tarballs the previous manifest listed and this one does not: superseded content.
    keep = {a.file for ep in manifest.endpoints.values() for a in ep.artifacts}
    for ep in (old.endpoints.values() if old else ()):
        for artifact in ep.artifacts:
            if artifact.file in keep:
                continue
            for name in (artifact.file, artifact.sbom):
                stale = out_dir / name if name else None
                if stale is not None and stale.is_file() and stale.parent == out_dir:
                    stale.unlink()
