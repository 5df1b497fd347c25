"""At synth: the tarballs a stack deploys against the spec's signing block (model_build.signing).

With ``signing.public_key`` every tarball must be signed by that key according to the build manifest, and the
manifest is not trusted for more than that: the build's signed statement beside it must verify with the key, each
tarball the stack deploys is read here and must be the one the statement binds (sha256, size, models, each
``model.sig``'s digest), and the manifest must say what the statement says (triton_constructs.build_signing), so a
``cdk deploy`` from a workstation checks what the pipeline's ``tritonsm verify --signatures`` checks, but each model
directory's own signature (which needs model-signing). Without a key an unsigned build deploys with a warning (an
info where the spec gives ``signing.unsigned_reason``), and an environment marked ``production: true`` is refused
unless the spec gives that reason (``production_signing``, the rule ``tritonsm validate`` and ``tritonsm verify
--signatures`` apply too). On deploy the copy function checks the bytes against the same sha256.
"""
from __future__ import annotations

import pathlib
from typing import Optional, Sequence

import aws_cdk as cdk
from constructs import Construct

from deployment_spec import Spec
from deployment_spec.sections.environment import EnvironmentSpec
from deployment_spec.builds.manifest import Artifact, Manifest
from deployment_spec.rules.cross_section import production_signing
from deployment_spec.sections.signing import public_key_identity
from triton_constructs import build_signing
from triton_constructs.errors import SynthError

UNSIGNED = "tritonsm:unsignedModels"


def public_key(spec: Spec) -> Optional[pathlib.Path]:
    """The spec's ``signing.public_key`` as a path: what ``ModelRepositories.from_built`` holds each build to."""
    return spec.root / spec.signing.public_key if spec.signing.public_key is not None else None


def check(scope: Construct, spec: Spec, environment: EnvironmentSpec, endpoint: str, manifest: Manifest,
          manifest_path: pathlib.Path) -> None:
    """The signing block against the manifest's tarballs of ``endpoint`` (a build name: a variant's own is
    ``<endpoint>.<variant>``); run before the build's other checks, so a signed build is held to its statement
    before anything else is read from its manifest. A build missing from the manifest is left to those checks."""
    subject = f"endpoints.{endpoint} (environment {environment.name})"
    built = manifest.endpoints.get(endpoint)
    artifacts: Sequence[Artifact] = built.artifacts if built is not None else ()
    if spec.signing.public_key is not None:
        expected = public_key_identity(spec.root / spec.signing.public_key)
        wrong = [a for a in artifacts if a.signer != expected]
        if wrong:
            raise SynthError(subject, [
                f"{a.file}: got {'an unsigned build' if a.signer is None else f'a build signed by {a.signer}'}; "
                f"allowed: tarballs signed by signing.public_key ({spec.signing.public_key}, {expected}); fix: "
                "build with the team's key (tritonsm build --signing-key KEY, or TRITONSM_SIGNING_KEY)"
                for a in wrong])
        _, problems = build_signing.built_problems(manifest, manifest_path, artifacts,
                                                   spec.root / spec.signing.public_key)
        if problems:
            raise SynthError(subject, [str(p) for p in problems])
        return
    # Without a key nothing is checked, signed or not: a production environment needs the spec's reason (the rule
    # tritonsm validate and verify --signatures apply too).
    refused = production_signing(spec.signing, environment)
    if refused is not None:
        raise SynthError(subject, [str(refused)])
    unsigned = [a.file for a in artifacts if a.signer is None]
    if not unsigned:
        return
    if spec.signing.unsigned_reason:  # said and explained in the spec: an info, no warning to acknowledge
        cdk.Annotations.of(scope).add_info(
            f"unsigned model tarballs: {', '.join(unsigned)} (signing.unsigned_reason: {spec.signing.unsigned_reason})")
        return
    cdk.Annotations.of(scope).add_warning_v2(UNSIGNED, (
        f"unsigned model tarballs: {', '.join(unsigned)}; nothing proves they are what the build verified (set "
        "signing.public_key and build with --signing-key, or give signing.unsigned_reason: docs/howto/signing.md)"))
