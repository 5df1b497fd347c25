"""Signing model directories with an AWS KMS key: the private key never leaves KMS.

``--signing-key awskms:///KEY`` (or ``TRITONSM_SIGNING_KEY``), KEY a key ID, key ARN, alias name
(``alias/team-models``) or alias ARN: the form cosign and Sigstore use for KMS keys
(https://docs.sigstore.dev/cosign/key_management/overview/). The key must be asymmetric, ``SIGN_VERIFY``, on one of
the curves model-signing's key verifier takes (ECC_NIST_P256, P384, P521). Its public key (KMS ``GetPublicKey``,
exported once as PEM and committed as ``signing.public_key``) verifies what it signs exactly as a key file's would:
the bundle is the same model-signing bundle, the signer's hint the SHA-256 of that PEM.

KMS signs the message itself where it is at most 4,096 bytes (``MessageType='RAW'``, KMS's limit) and its digest
above that (``'DIGEST'``: a statement listing a Python environment's files is longer), with a random ECDSA nonce, so signing the same files twice gives
two different signatures; and a tarball is named by its content, so every build would rename every tarball and
redeploy unchanged models. A signature is therefore kept, under the build's work folder (``kms-signatures/``), by
the SHA-256 of what it signs and reused when the same key signs the same bytes again, after checking it with the
public key. A build on a machine without that folder (a fresh CI runner) signs again: keep the folder between runs
(a CI cache) to keep tarball names stable, or sign in CI with a key file.

Credentials and region are boto3's usual chain; the region of an ARN wins. The caller needs ``kms:GetPublicKey``
and ``kms:Sign`` on the key. A PKCS#11 token (an HSM) would plug in the same way, as an object with
``public_key()`` and ``sign(data, algorithm)``; none is built, for want of a token to test it against.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import pathlib
from typing import Any, Optional

from deployment_spec.sections.signing import key_identity
from model_build.signing import KEY_VARIABLE, AnyKey, SignatureError, SigningKey

SCHEME = "awskms:///"
RAW_LIMIT = 4096  # the longest message KMS Sign takes as it is (Sign, Message: "up to 4096 bytes")
# KMS's signing algorithm and the hash model-signing pairs with each curve (sign_ec_key.get_ec_key_hash).
_ALGORITHMS = {256: "ECDSA_SHA_256", 384: "ECDSA_SHA_384", 521: "ECDSA_SHA_512"}
_HASHES = {256: hashlib.sha256, 384: hashlib.sha384, 521: hashlib.sha512}


def named_key(given: str, password: Optional[str] = None) -> AnyKey:
    """The key ``--signing-key`` or ``TRITONSM_SIGNING_KEY`` names: ``awskms:///KEY`` for an AWS KMS key,
    otherwise the path of a PEM private key (``password`` opens it)."""
    return KmsSigningKey(given) if given.startswith(SCHEME) else SigningKey(pathlib.Path(given), password)


@dataclasses.dataclass(frozen=True)
class KmsSigningKey:
    """An asymmetric AWS KMS key named ``awskms:///KEY``; ``cache``: where signatures are kept (see the module)."""

    uri: str
    cache: Optional[pathlib.Path] = None
    client: Any = dataclasses.field(default=None, compare=False, repr=False)  # a boto3 KMS client; made if None

    @property
    def key_id(self) -> str:
        return self.uri[len(SCHEME):]

    @property
    def name(self) -> str:
        """How messages name the key."""
        return self.uri

    @functools.cached_property
    def _kms(self) -> Any:
        if self.client is not None:
            return self.client
        import boto3
        parts = self.key_id.split(":")
        region = parts[3] if self.key_id.startswith("arn:") and len(parts) > 3 else None
        return boto3.client("kms", region_name=region)

    @functools.cached_property
    def public_key(self) -> Any:
        """The key's public half (a ``cryptography`` EC public key), refused unless model-signing can verify it."""
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        if not self.key_id:
            raise SignatureError(f"the signing key {self.uri!r} ({KEY_VARIABLE} or --signing-key) names no KMS key; "
                                 f"allowed: {SCHEME}KEY with a key ID, key ARN, alias/NAME or alias ARN; fix: e.g. "
                                 f"{SCHEME}alias/team-models")
        answer = self._call("GetPublicKey", KeyId=self.key_id)
        public = serialization.load_der_public_key(answer["PublicKey"])
        if answer.get("KeyUsage") != "SIGN_VERIFY" or not isinstance(public, ec.EllipticCurvePublicKey) \
                or public.curve.key_size not in _ALGORITHMS:
            kind = answer.get("KeySpec") or answer.get("CustomerMasterKeySpec")
            raise SignatureError(
                f"the signing key {self.uri}: a {kind} key for {answer.get('KeyUsage')}; allowed: an asymmetric "
                "ECC_NIST_P256, ECC_NIST_P384 or ECC_NIST_P521 key for SIGN_VERIFY, the kind model-signing verifies; "
                "fix: aws kms create-key --key-spec ECC_NIST_P256 --key-usage SIGN_VERIFY")
        return public

    @property
    def identity(self) -> str:
        from cryptography.hazmat.primitives import serialization
        return key_identity(self.public_key.public_bytes(serialization.Encoding.DER,
                                                         serialization.PublicFormat.SubjectPublicKeyInfo))

    def private(self) -> "KmsPrivateKey":
        return KmsPrivateKey(self)

    def sign_message(self, message: bytes) -> bytes:
        """A DER ECDSA signature of ``message``: a kept one that still verifies, or a new one from KMS (then kept)."""
        bits = self.public_key.curve.key_size
        kept = self._kept(message)
        if kept is not None and kept.exists() and self._verifies(kept.read_bytes(), message):
            return kept.read_bytes()
        raw = len(message) <= RAW_LIMIT
        signature: bytes = self._call("Sign", KeyId=self.key_id, SigningAlgorithm=_ALGORITHMS[bits],
                                      Message=message if raw else _HASHES[bits](message).digest(),
                                      MessageType="RAW" if raw else "DIGEST")["Signature"]
        if kept is not None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            partial = kept.with_suffix(".partial")
            partial.write_bytes(signature)
            partial.replace(kept)  # whole or absent
        return signature

    def _kept(self, message: bytes) -> Optional[pathlib.Path]:
        if self.cache is None:
            return None
        return self.cache / self.identity.removeprefix("sha256:") / f"{hashlib.sha256(message).hexdigest()}.sig"

    def _verifies(self, signature: bytes, message: bytes) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        algorithm = {256: hashes.SHA256(), 384: hashes.SHA384(), 521: hashes.SHA512()}[self.public_key.curve.key_size]
        try:
            self.public_key.verify(signature, message, ec.ECDSA(algorithm))
        except InvalidSignature:
            return False
        return True

    def _call(self, operation: str, **params: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError
        try:  # the client is made here too: a missing region fails as it is made
            return getattr(self._kms, "get_public_key" if operation == "GetPublicKey" else "sign")(**params)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            raise SignatureError(
                f"the signing key {self.uri}: KMS {operation} failed ({code}: "
                f"{error.response.get('Error', {}).get('Message', '')}); fix: check the key exists in this account "
                f"and region, and that these credentials may kms:GetPublicKey and kms:Sign it") from None
        except BotoCoreError as error:
            raise SignatureError(f"the signing key {self.uri}: KMS {operation} could not be called ({error}); fix: "
                                 "give AWS credentials and a region (AWS_PROFILE, or AWS_ACCESS_KEY_ID and "
                                 "AWS_DEFAULT_REGION), "
                                 "or the key's ARN, which names its region") from None


@dataclasses.dataclass(frozen=True)
class KmsPrivateKey:
    """What model-signing's EC signer needs of a private key (``public_key()``, ``sign(data, ECDSA(hash))``),
    with KMS doing the signing."""

    key: KmsSigningKey

    def public_key(self) -> Any:
        return self.key.public_key

    def sign(self, data: bytes, *_: Any) -> bytes:
        # The algorithm asked for is ignored: the hash is the curve's (the one model-signing chose), and KMS's nonce
        # is random even where a deterministic one is asked for.
        return self.key.sign_message(data)
