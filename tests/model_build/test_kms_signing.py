"""Signing with an AWS KMS key (model_build/kms_signing.py), against moto's KMS in this process: moto 5.2.5 makes
real ECDSA keys and signs with them, so the bundles below are verified by model-signing's own verifier with the
public key KMS hands out. No AWS; the KMS calls and their parameters are botocore's, checked against its model.

moto 5.2.5 does not implement Sign's ``MessageType='DIGEST'`` (it hashes the digest again, as for RAW: its
models.py says so), which the product uses for statements over 4,096 bytes. The fixture answers those requests
as the KMS API reference describes them ("the message digest": signed as it is, not hashed again) with the key
moto made; RAW requests go to moto untouched."""
from __future__ import annotations

import base64
import dataclasses
import json
import pathlib

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
from moto import mock_aws

from deployment_spec.builds.statement import STATEMENT_FILE, read_statement
from deployment_spec.builds.manifest import load_manifest
from deployment_spec.sections.signing import SigningSpec
from model_build import build, signing
from model_build.kms_signing import KmsSigningKey, named_key


def _sign_digest(model, params, **_):
    """KMS Sign with MessageType DIGEST, which moto lacks: the digest signed as it is (Prehashed). ``params`` is
    the serialized request: KMS's JSON body, the message in base64."""
    request = json.loads(params["body"])
    if model.name != "Sign" or request.get("MessageType") != "DIGEST":
        return None
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.kms.models import kms_backends
    key = kms_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].describe_key(request["KeyId"])
    algorithm = {"ECDSA_SHA_256": hashes.SHA256(), "ECDSA_SHA_384": hashes.SHA384(),
                 "ECDSA_SHA_512": hashes.SHA512()}[request["SigningAlgorithm"]]
    signature = key.private_key.private_key.sign(base64.b64decode(request["Message"]), ec.ECDSA(Prehashed(algorithm)))
    return AWSResponse("https://kms.invalid", 200, {}, None), {
        "KeyId": key.arn, "Signature": signature, "SigningAlgorithm": request["SigningAlgorithm"],
        "ResponseMetadata": {"HTTPStatusCode": 200}}


@pytest.fixture
def kms():
    with mock_aws():
        client = boto3.client("kms", region_name="us-east-1")
        client.signs = []
        client.meta.events.register("provide-client-params.kms.Sign",
                                    lambda params, **_: client.signs.append(params["MessageType"]))
        client.meta.events.register("before-call.kms.Sign", _sign_digest)
        yield client


def _kms_key(kms, spec: str = "ECC_NIST_P256", usage: str = "SIGN_VERIFY") -> str:
    key = kms.create_key(KeySpec=spec, KeyUsage=usage)["KeyMetadata"]
    kms.create_alias(AliasName=f"alias/team-{key['KeyId'][:8]}", TargetKeyId=key["KeyId"])
    return key["Arn"]


def _public_pem(kms, arn: str, folder) -> str:
    der = kms.get_public_key(KeyId=arn)["PublicKey"]
    path = folder / "kms.pub"
    path.write_bytes(serialization.load_der_public_key(der).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return str(path)


def _build(signed, kms, arn: str, folder, public: str, cache=None):
    spec = dataclasses.replace(signed.spec, signing=SigningSpec(public_key=public))
    key = KmsSigningKey(f"awskms:///{arn}", cache=cache, client=kms)
    report = build.run(spec, folder, signed.work, log=lambda line: None, signing_key=key)
    assert report.exit_code() == 0 and not report.built
    return load_manifest(folder / "manifest.json"), key


def test_a_kms_signed_build_verifies_and_rebuilds_to_the_same_bytes(signed, kms, tmp_path):
    arn = _kms_key(kms)
    public = _public_pem(kms, arn, tmp_path)
    first, key = _build(signed, kms, arn, tmp_path / "one", public)
    for artifact in (a for ep in first.endpoints.values() for a in ep.artifacts):
        verified = signing.verify_tarball(tmp_path / "one" / artifact.file, tmp_path / "kms.pub")
        assert verified.signer == artifact.signer == signing.public_key_identity(tmp_path / "kms.pub")
    # The signed build statement beside the manifest, signed by the same KMS key (deployment_spec.builds.statement).
    assert read_statement(tmp_path / "one" / STATEMENT_FILE, tmp_path / "kms.pub").signer == artifact.signer
    signs = len(kms.signs)
    # The tiny models' statements are under KMS's 4,096 bytes; the build statement, naming every tarball, is not.
    assert signs > 0 and kms.signs.count("DIGEST") == 1 and set(kms.signs) == {"RAW", "DIGEST"}
    # Rebuilt with the same work folder: every signature was kept, none asked of KMS, the same tarballs and statement.
    again, _ = _build(signed, kms, arn, tmp_path / "two", public)
    assert len(kms.signs) == signs
    assert [a.sha256 for ep in again.endpoints.values() for a in ep.artifacts] == [
        a.sha256 for ep in first.endpoints.values() for a in ep.artifacts]
    assert (tmp_path / "two" / STATEMENT_FILE).read_bytes() == (tmp_path / "one" / STATEMENT_FILE).read_bytes()
    # Without the kept signatures KMS signs again, with a random nonce: other bytes, still valid.
    fresh, _ = _build(signed, kms, arn, tmp_path / "three", public, cache=tmp_path / "empty-cache")
    assert len(kms.signs) == 2 * signs
    assert {a.sha256 for ep in fresh.endpoints.values() for a in ep.artifacts}.isdisjoint(
        a.sha256 for ep in first.endpoints.values() for a in ep.artifacts)
    artifact = fresh.endpoints["single"].artifacts[0]
    assert signing.verify_tarball(tmp_path / "three" / artifact.file, tmp_path / "kms.pub").models


def test_a_statement_over_kms_s_limit_is_signed_as_its_digest_and_verifies_upstream(kms, tmp_path):
    from model_signing._signing import sign_ec_key, sign_sigstore_pb
    arn = _kms_key(kms, "ECC_NIST_P384")
    key = KmsSigningKey(f"awskms:///{arn}", client=kms)
    files = {f"env/lib/python3.12/site-packages/pkg/module_{i}.py": f"{i:064x}" for i in range(60)}
    bundle = tmp_path / "model.sig"
    bundle.write_bytes(signing.sign_model(key, "text", files))
    assert kms.signs == ["DIGEST"]
    verified = sign_ec_key.Verifier(pathlib.Path(_public_pem(kms, arn, tmp_path))).verify(
        sign_sigstore_pb.Signature.read(bundle))
    assert {str(d.identifier): d.digest.digest_hex for d in verified.resource_descriptors()} == files


def test_a_kept_signature_that_does_not_verify_is_replaced(kms, tmp_path):
    key = KmsSigningKey(f"awskms:///{_kms_key(kms)}", cache=tmp_path, client=kms)
    signature = key.sign_message(b"statement")
    kept, = tmp_path.rglob("*.sig")
    assert key._verifies(signature, b"statement") and key.sign_message(b"statement") == signature
    assert len(kms.signs) == 1  # the second came from the kept signature
    kept.write_bytes(signature[:-1] + bytes([signature[-1] ^ 1]))
    again = key.sign_message(b"statement")
    assert len(kms.signs) == 2 and key._verifies(again, b"statement") and kept.read_bytes() == again


def test_the_key_is_named_by_alias_as_cosign_names_it(kms):
    arn = _kms_key(kms)
    alias, = [a["AliasName"] for a in kms.list_aliases()["Aliases"] if a.get("TargetKeyId") == arn.split("/")[-1]]
    key = named_key(f"awskms:///{alias}")
    assert isinstance(key, KmsSigningKey) and key.key_id == alias
    assert dataclasses.replace(key, client=kms).identity == KmsSigningKey(f"awskms:///{arn}", client=kms).identity
    assert isinstance(named_key("team.pem"), signing.SigningKey)


def test_a_missing_key_is_refused_with_the_kms_error(kms):
    key = KmsSigningKey("awskms:///alias/nobody", client=kms)
    with pytest.raises(signing.SignatureError) as caught:
        key.identity
    assert str(caught.value) == (
        "the signing key awskms:///alias/nobody: KMS GetPublicKey failed (NotFoundException: Alias "
        "arn:aws:kms:us-east-1:123456789012:alias/nobody is not found.); fix: check the key exists in this account "
        "and region, and that these credentials may kms:GetPublicKey and kms:Sign it")


@pytest.mark.parametrize("spec, usage", [("RSA_2048", "SIGN_VERIFY"), ("SYMMETRIC_DEFAULT", "ENCRYPT_DECRYPT")])
def test_a_key_model_signing_cannot_verify_is_refused(kms, spec, usage):
    arn = _kms_key(kms, spec, usage)
    key = KmsSigningKey(f"awskms:///{arn}", client=kms)
    with pytest.raises(signing.SignatureError) as caught:
        key.identity
    if usage == "SIGN_VERIFY":
        assert str(caught.value) == (
            f"the signing key awskms:///{arn}: a RSA_2048 key for SIGN_VERIFY; allowed: an asymmetric ECC_NIST_P256, "
            "ECC_NIST_P384 or ECC_NIST_P521 key for SIGN_VERIFY, the kind model-signing verifies; fix: aws kms "
            "create-key --key-spec ECC_NIST_P256 --key-usage SIGN_VERIFY")
    else:  # moto hands out a public key for a symmetric key, so the key usage refuses it
        assert str(caught.value).startswith(f"the signing key awskms:///{arn}: a SYMMETRIC_DEFAULT key for "
                                            "ENCRYPT_DECRYPT; allowed: an asymmetric ECC_NIST_P256")


def test_an_empty_key_name_is_refused(kms):
    with pytest.raises(signing.SignatureError) as caught:
        KmsSigningKey("awskms:///", client=kms).identity
    assert str(caught.value) == (
        "the signing key 'awskms:///' (TRITONSM_SIGNING_KEY or --signing-key) names no KMS key; allowed: "
        "awskms:///KEY with a key ID, key ARN, alias/NAME or alias ARN; fix: e.g. awskms:///alias/team-models")


def test_a_kms_key_that_is_not_the_spec_s_is_refused_before_building(signed, kms, tmp_path):
    arn = _kms_key(kms)
    spec = dataclasses.replace(signed.spec, signing=SigningSpec(public_key=str(signed.public)))
    key = KmsSigningKey(f"awskms:///{arn}", client=kms)
    with pytest.raises(signing.SignatureError) as caught:
        build.run(spec, tmp_path / "out", signed.work, log=lambda line: None, signing_key=key)
    assert str(caught.value) == (
        f"the signing key awskms:///{arn} is the key {key.identity}; allowed: the private key of signing.public_key "
        f"({signed.public}, {signing.public_key_identity(signed.public)}); fix: give the team's key, or commit its "
        "public key as signing.public_key")
    assert not (tmp_path / "out").exists() and kms.signs == []


@pytest.mark.parametrize("name, cause", [
    ("awskms:///alias/team-models", "You must specify a region."),
    ("awskms:///arn:aws:kms:eu-west-1:111122223333:key/abc", "Unable to locate credentials"),
], ids=["no region", "no credentials"])
def test_tritonsm_build_without_aws_set_up_says_what_is_missing(name, cause, tmp_path):
    import os
    import subprocess
    import sys
    from mb_support import TINY_SPEC
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
               AWS_EC2_METADATA_DISABLED="true")
    done = subprocess.run([sys.executable, "-m", "tritonsm", "build", "--spec", str(TINY_SPEC), "--signing-key", name,
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=300, cwd=pathlib.Path(__file__).resolve().parents[2])
    assert done.returncode != 0 and not (tmp_path / "out").exists()
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: the signing key {name}: KMS GetPublicKey could not be called ({cause}); fix: give AWS credentials "
        "and a region (AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_DEFAULT_REGION), or the key's ARN, which names its "
        "region")
