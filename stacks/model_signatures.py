"""At synth: the tarballs a stack deploys against the spec's signing block (model_build.signing).

With ``signing.public_key`` every tarball must be signed by that key according to the build manifest; without it an
unsigned build deploys with a warning (an info where the spec gives ``signing.unsigned_reason``), and an environment
marked ``production: true`` is refused unless the spec gives that reason (``production_signing``, the rule
``tritonsm validate`` and ``tritonsm verify --signatures`` apply too). What synth checks is the manifest's record;
the bytes are checked by ``tritonsm verify --signatures`` (the pipeline, before each stage) and by the copy function
(sha256, on deploy).
"""
from __future__ import annotations

from typing import Sequence

import aws_cdk as cdk
from constructs import Construct

from deployment_spec import Spec
from deployment_spec.sections.environment import EnvironmentSpec
from deployment_spec.manifest import Artifact
from deployment_spec.rules.cross_section import production_signing
from deployment_spec.sections.signing import public_key_identity
from triton_constructs.errors import SynthError

UNSIGNED = "tritonsm:unsignedModels"


def check(scope: Construct, spec: Spec, environment: EnvironmentSpec, endpoint: str,
          artifacts: Sequence[Artifact]) -> None:
    subject = f"endpoints.{endpoint} (environment {environment.name})"
    if spec.signing.public_key is not None:
        expected = public_key_identity(spec.root / spec.signing.public_key)
        wrong = [a for a in artifacts if a.signer != expected]
        if wrong:
            raise SynthError(subject, [
                f"{a.file}: got {'an unsigned build' if a.signer is None else f'a build signed by {a.signer}'}; "
                f"allowed: tarballs signed by signing.public_key ({spec.signing.public_key}, {expected}); fix: "
                "build with the team's key (tritonsm build --signing-key KEY, or TRITONSM_SIGNING_KEY)"
                for a in wrong])
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
