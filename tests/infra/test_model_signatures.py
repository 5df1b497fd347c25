"""At synth (stacks/model_signatures.py): unsigned tarballs warned about, refused in a production environment
unless the spec gives a reason, and a spec with a public key refusing tarballs signed by another key or none (the
signed build statement's checks: tests/model_build/test_build_statement_synth.py)."""
import dataclasses
import pathlib

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from deployment_spec import load_spec
from deployment_spec.builds.manifest import Artifact, EndpointArtifacts, Manifest
from deployment_spec.sections.signing import SigningSpec, public_key_identity
from stacks import model_signatures
from triton_constructs.errors import SynthError

ROOT = pathlib.Path(__file__).resolve().parents[2]
UNSIGNED = Artifact("classifier-0123456789ab.tar.gz", "0" * 64, 10, ("text",))


def _spec(signing: SigningSpec):
    return dataclasses.replace(load_spec(ROOT / "triton.yaml"), signing=signing)


def _check(stack: cdk.Stack, spec, environment: str, artifacts: list[Artifact],
           root: pathlib.Path = pathlib.Path("assets")) -> None:
    """The check every endpoint stack runs first, on a manifest whose endpoint 'classifier' holds ``artifacts``."""
    manifest = Manifest("25.04", {}, {"classifier": EndpointArtifacts("single-model", tuple(artifacts))}, root=root)
    model_signatures.check(stack, spec, spec.environments[environment], "classifier", manifest,
                           root / "manifest.json")


def _warnings(stack: cdk.Stack) -> list[str]:
    return [w.entry.data for w in Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp(
        "unsignedModels"))]


def test_an_unsigned_build_is_warned_about_outside_production():
    spec = _spec(SigningSpec())
    stack = cdk.Stack(cdk.App(), "Dev")
    _check(stack, spec, "dev", [UNSIGNED])
    assert _warnings(stack) == [
        "unsigned model tarballs: classifier-0123456789ab.tar.gz; nothing proves they are what the build verified "
        "(set signing.public_key and build with --signing-key, or give signing.unsigned_reason: "
        "docs/howto/signing.md) [ack: tritonsm:unsignedModels]"]


def test_an_unsigned_build_is_refused_in_production_without_a_reason():
    # The spec's rule (production_signing), the one tritonsm validate and verify --signatures refuse it with
    # (test_production_signing.py): a build signed by a key the spec does not name proves nothing either.
    spec = _spec(SigningSpec())
    signed_by_someone = dataclasses.replace(UNSIGNED, signer="sha256:" + "1" * 64)
    for artifacts in ([UNSIGNED], [signed_by_someone]):
        with pytest.raises(SynthError) as caught:
            _check(cdk.Stack(cdk.App(), "Prod"), spec, "prod", artifacts)
        assert str(caught.value) == (
            "endpoints.classifier (environment prod):\n  - signing: got neither signing.public_key nor "
            "signing.unsigned_reason, with environment prod marked production: true; allowed: in a production "
            "environment, model tarballs signed by the team's key (signing.public_key), or unsigned ones with the "
            "reason in the spec (signing.unsigned_reason); fix: set signing.public_key and build with the key "
            "(tritonsm build --signing-key KEY), or give signing.unsigned_reason (docs/howto/signing.md)")


def test_a_reason_lets_an_unsigned_build_into_production_with_an_info():
    spec = _spec(SigningSpec(unsigned_reason="demo"))
    stack = cdk.Stack(cdk.App(), "Prod")
    _check(stack, spec, "prod", [UNSIGNED])
    assert _warnings(stack) == []
    assert [i.entry.data for i in Annotations.from_stack(stack).find_info("*", Match.any_value())] == [
        "unsigned model tarballs: classifier-0123456789ab.tar.gz (signing.unsigned_reason: demo)"]


def test_with_a_public_key_only_its_signatures_pass(tmp_path):
    from model_build.signing import SigningKey
    from model_build.statement import write
    private = ec.generate_private_key(ec.SECP256R1())
    public, key = tmp_path / "team.pub", tmp_path / "team.pem"
    public.write_bytes(private.public_key().public_bytes(serialization.Encoding.PEM,
                                                        serialization.PublicFormat.SubjectPublicKeyInfo))
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    team = public_key_identity(public)
    spec = _spec(SigningSpec(public_key=str(public)))
    good = dataclasses.replace(UNSIGNED, signer=team)
    # Its manifest and the build statement the build writes beside it (the tarball's own bytes: the statement tests).
    write(tmp_path, Manifest("25.04", {}, {"classifier": EndpointArtifacts("single-model", (good,))}, root=tmp_path),
          SigningKey(key))
    _check(cdk.Stack(cdk.App(), "Dev"), spec, "dev", [good], root=tmp_path)
    other = dataclasses.replace(UNSIGNED, file="classifier-ba9876543210.tar.gz", signer="sha256:" + "1" * 64)
    with pytest.raises(SynthError) as caught:
        _check(cdk.Stack(cdk.App(), "Dev"), spec, "dev", [good, other, UNSIGNED], root=tmp_path)
    allowed = f"allowed: tarballs signed by signing.public_key ({public}, {team}); fix: build with the team's key " \
              "(tritonsm build --signing-key KEY, or TRITONSM_SIGNING_KEY)"
    assert str(caught.value) == (
        "endpoints.classifier (environment dev):\n"
        f"  - classifier-ba9876543210.tar.gz: got a build signed by sha256:{'1' * 64}; {allowed}\n"
        f"  - classifier-0123456789ab.tar.gz: got an unsigned build; {allowed}")


def test_the_spec_s_public_key_must_exist(tmp_path):
    spec_file = tmp_path / "triton.yaml"
    spec_file.write_text((ROOT / "triton.yaml").read_text().replace(
        'unsigned_reason: "a reference spec that builds on any fresh clone, where no team signing key exists"',
        "public_key: keys/none.pub"))
    from deployment_spec.parsing.errors import SpecError
    with pytest.raises(SpecError) as caught:
        load_spec(spec_file)
    assert "signing.public_key: got 'keys/none.pub'; allowed: a PEM public key file relative to the spec's " \
           "folder; fix: commit the team's public key there (openssl ec -in KEY.pem -pubout -out " \
           "keys/model-signing.pub), or fix the path" in str(caught.value)
