"""Model directories signed in the OpenSSF Model Signing format, and tarballs verified against them.

Each top-level model directory of a tarball carries ``<model>/model.sig``: a Sigstore bundle (DSSE envelope, in-toto
statement) whose payload lists every file of the directory with its SHA-256, made by the ``model-signing`` package
(https://github.com/sigstore/model-transparency, v1.1.1) with an elliptic-curve key the team controls. The bundle is
the one ``model_signing verify key`` reads, so a security team can check an unpacked directory with the upstream
command alone (``model_signing verify key --signature <model>/model.sig --public_key KEY.pub <model>``).

Two deliberate departures from ``model_signing.signing.Config().sign(directory)``, both invisible to a verifier:

* the file digests come from the files as they go into the tarball (a renamed copy's rewritten ``config.pbtxt``
  included), so nothing is staged on disk and hashed twice;
* the signature is deterministic: the statement's JSON with sorted keys (model-signing's key order changes from one
  process to the next) and an RFC 6979 ECDSA nonce (``cryptography``'s ``deterministic_signing``), so two builds
  with the same key give the same bytes and the content-named tarball keeps its name; otherwise every build would
  rename every tarball and redeploy unchanged models.

Verification reads the tarball as a stream (nothing unpacked), checks each bundle with the public key through
``model-signing``'s own verifier, and compares the signed file list with the digests of the members.
"""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import pathlib
import tarfile
import tempfile
from typing import Any, Mapping, Optional, Protocol

from deployment_spec.parsing.errors import UserError
from deployment_spec.sections.signing import key_identity, public_key_identity

SIGNATURE_FILE = "model.sig"
KEY_VARIABLE = "TRITONSM_SIGNING_KEY"   # the private key's path, for CI (a secret file), instead of --signing-key
PASSWORD_VARIABLE = "TRITONSM_SIGNING_KEY_PASSWORD"
HASH_CHUNK = 8 * 1024 * 1024


class SignatureError(UserError):
    """A model tarball whose signatures are missing, made by another key, or do not match its files."""


@dataclasses.dataclass(frozen=True)
class SigningKey:
    """A PEM private key on disk (an EC key: P-256, P-384 or P-521, what model-signing's key signer takes)."""

    path: pathlib.Path
    password: Optional[str] = None

    @property
    def name(self) -> str:
        """How messages name the key: its path."""
        return repr(str(self.path))

    @property
    def identity(self) -> str:
        from cryptography.hazmat.primitives import serialization
        return key_identity(_load_private(self).public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo))

    def private(self) -> Any:
        """What model-signing's signer signs with: a ``cryptography`` EC private key."""
        return _load_private(self)


def check_elliptic(path: pathlib.Path) -> None:
    """The public key is one model-signing's key verifier takes (P-256, P-384, P-521)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    key = serialization.load_pem_public_key(path.read_bytes())
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise SignatureError(f"signing.public_key: got a {type(key).__name__} in {str(path)!r}; allowed: an "
                             "elliptic-curve key (P-256, P-384, P-521); fix: make the key pair with "
                             "`openssl ecparam -name prime256v1 -genkey -noout`")


class AnyKey(Protocol):
    """What signs: a key file (``SigningKey``) or a key held elsewhere (kms_signing.KmsSigningKey)."""

    @property
    def name(self) -> str: ...

    @property
    def identity(self) -> str: ...

    def private(self) -> Any:
        """An object with ``public_key()`` and ``sign(data, ec.ECDSA(hash))``, as a ``cryptography`` EC key has."""


def _load_private(key: SigningKey) -> Any:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    where = f"the signing key {str(key.path)!r} (--signing-key or {KEY_VARIABLE})"
    try:
        data = key.path.read_bytes()
    except OSError as error:
        raise SignatureError(f"{where}: cannot be read ({error.strerror}); fix: give the path of the team's PEM "
                             "private key") from None
    try:
        private = serialization.load_pem_private_key(data, key.password.encode() if key.password else None)
    except (ValueError, TypeError) as error:
        raise SignatureError(f"{where}: not a PEM private key this password opens ({error}); fix: give the private "
                             f"key file, and its password in {PASSWORD_VARIABLE} if it has one") from None
    if not isinstance(private, ec.EllipticCurvePrivateKey):
        raise SignatureError(f"{where}: a {type(private).__name__}; allowed: an elliptic-curve key (P-256, P-384, "
                             "P-521), the kind model-signing signs with; fix: `openssl ecparam -name prime256v1 "
                             "-genkey -noout -out KEY.pem`")
    return private


def _canonical(payload: bytes) -> bytes:
    """The in-toto statement as JSON with sorted keys: model-signing writes it from a protobuf Struct, whose key order
    varies from one process to the next (the upb backend's map order), so the same statement would be signed as other
    bytes on every build. Verifiers parse the payload, so any key order verifies; this one is the same everywhere."""
    return json.dumps(json.loads(payload), sort_keys=True, indent=2).encode()


def _signer(key: AnyKey) -> Any:
    """model-signing's EC key signer, made deterministic: the statement canonical (``_canonical``) and, for a key
    file, the ECDSA nonce derived from the key and the message (RFC 6979, ``cryptography``'s
    ``deterministic_signing``). A KMS key signs with a random nonce; kms_signing.py keeps its signatures instead."""
    from cryptography.hazmat.primitives.asymmetric import ec
    from google.protobuf import json_format
    from model_signing._signing import sign_ec_key, sign_sigstore_pb, signing
    from sigstore_models import intoto
    from sigstore_models.bundle import v1 as bundle

    class Deterministic(sign_ec_key.Signer):  # type: ignore[misc]  # the library's classes are untyped
        def sign(self, payload: Any) -> Any:
            # The library's own bundle (sign_ec_key.Signer.sign), over the canonical statement.
            canonical = _canonical(json_format.MessageToJson(payload.statement.pb).encode())
            algorithm = sign_ec_key.get_ec_key_hash(self._private_key.public_key())
            signature = self._private_key.sign(sign_sigstore_pb.pae(canonical),
                                               ec.ECDSA(algorithm, deterministic_signing=True))
            envelope = intoto.Envelope(payload=base64.b64encode(canonical),
                                       payload_type=signing._IN_TOTO_JSON_PAYLOAD_TYPE,
                                       signatures=[intoto.Signature(sig=base64.b64encode(signature), keyid="")])
            return sign_sigstore_pb.Signature(bundle.Bundle(
                media_type=sign_sigstore_pb._BUNDLE_MEDIA_TYPE,
                verification_material=self._get_verification_material(), dsse_envelope=envelope))

    signer = Deterministic.__new__(Deterministic)
    signer._private_key = key.private()
    return signer


def sign_model(key: AnyKey, model: str, digests: Mapping[str, str]) -> bytes:
    """The bundle (``model.sig``'s bytes) over ``digests`` (path inside the model directory -> sha256 hex)."""
    from model_signing import manifest
    from model_signing._hashing import hashing as digest_types
    from model_signing._signing import signing

    # The serialization model-signing records for a directory hashed file by file (its "files" method), with the
    # signature itself left out, so that ``model_signing verify`` hashes the unpacked directory the same way.
    items = [manifest.FileManifestItem(path=pathlib.PurePosixPath(name),
                                       digest=digest_types.Digest("sha256", bytes.fromhex(digest)))
             for name, digest in sorted(digests.items())]
    kind = manifest._FileSerialization("sha256", allow_symlinks=False,
                                       ignore_paths=[pathlib.Path(SIGNATURE_FILE)])
    signature = _signer(key).sign(signing.Payload(manifest.Manifest(model, items, kind)))
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / SIGNATURE_FILE
        signature.write(path)
        return path.read_bytes()


# --- verification ------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Verified:
    """What a verified tarball held: its models, each signed by ``signer``."""

    tarball: str
    models: tuple[str, ...]
    signer: str


@dataclasses.dataclass(frozen=True)
class Members:
    """What one read of a tarball found: per top-level model directory, {path inside it: sha256} of its regular
    files but the signature, and the signature's bytes where there is one; and the sha256 of the whole file (what
    the build manifest records) and its size, so a check against the manifest or the build statement needs no
    second read."""

    tarball: str
    digests: dict[str, dict[str, str]]
    signatures: dict[str, bytes]
    sha256: str
    size: int = 0


class _Hashing:
    """A file read through once, hashed as it goes (tarfile's stream mode reads forward only)."""

    def __init__(self, handle: Any) -> None:
        self._handle, self.digest, self.size = handle, hashlib.sha256(), 0

    def read(self, size: int = -1) -> bytes:
        data: bytes = self._handle.read(size)
        self.digest.update(data)
        self.size += len(data)
        return data


def tarball_members(tarball: pathlib.Path) -> Members:
    """The tarball read once as a stream, nothing unpacked."""
    digests: dict[str, dict[str, str]] = {}
    signatures: dict[str, bytes] = {}
    try:
        with open(tarball, "rb") as raw, tarfile.open(fileobj=(hashing := _Hashing(raw)), mode="r|gz") as archive:
            for member in archive:
                model, _, inside = member.name.partition("/")
                if not inside:
                    if member.isdir():
                        digests.setdefault(model, {})
                    continue
                digests.setdefault(model, {})
                if not member.isfile():
                    continue
                handle = archive.extractfile(member)
                assert handle is not None  # a regular file has contents
                if inside == SIGNATURE_FILE:
                    signatures[model] = handle.read()
                    continue
                digest = hashlib.sha256()
                while chunk := handle.read(HASH_CHUNK):
                    digest.update(chunk)
                digests[model][inside] = digest.hexdigest()
            while hashing.read(HASH_CHUNK):  # what tarfile left unread (end-of-archive padding, gzip trailer)
                pass
    except (tarfile.TarError, OSError, EOFError) as error:
        raise SignatureError(f"{tarball.name}: cannot be read as a gzipped tar file ({error}); fix: rebuild it "
                             "(tritonsm build)") from None
    return Members(tarball.name, digests, signatures, hashing.digest.hexdigest(), hashing.size)


def verify_tarball(tarball: pathlib.Path, public_key: pathlib.Path) -> Verified:
    """Every model directory of ``tarball`` signed by ``public_key``'s key over exactly the files it holds;
    SignatureError naming the tarball, the model and what is wrong otherwise."""
    return verify_members(tarball_members(tarball), public_key)


def verify_members(members: Members, public_key: pathlib.Path) -> Verified:
    """``verify_tarball`` on a tarball already read (``tarball_members``)."""
    expected_signer = public_key_identity(public_key)
    check_elliptic(public_key)
    name = members.tarball
    if not members.digests:
        raise SignatureError(f"{name}: holds no model directory; fix: rebuild it (tritonsm build)")
    for model in sorted(members.digests):
        if model not in members.signatures:
            raise SignatureError(
                f"{name}: model {model!r} has no signature ({model}/{SIGNATURE_FILE}); allowed: model "
                f"directories signed by the key {expected_signer} (signing.public_key); fix: rebuild with the team's "
                f"signing key (tritonsm build --signing-key KEY, or {KEY_VARIABLE}): this tarball was built without "
                "it, or its signature was removed")
        signed = _signed_files(name, model, members.signatures[model], public_key, expected_signer)
        _compare(name, model, signed, members.digests[model])
    return Verified(name, tuple(sorted(members.digests)), expected_signer)


def _signed_files(tarball: str, model: str, bundle: bytes, public_key: pathlib.Path,
                  expected_signer: str) -> dict[str, str]:
    """The file list the bundle signs, once the bundle's signature is checked with ``public_key``."""
    from model_signing._signing import sign_ec_key, sign_sigstore_pb

    where = f"{tarball}: model {model!r}: its signature ({model}/{SIGNATURE_FILE})"
    try:
        hint = json.loads(bundle)["verificationMaterial"]["publicKey"]["hint"]
    except (ValueError, KeyError, TypeError):
        raise SignatureError(f"{where} is not a model-signing bundle of a key signature; fix: rebuild the tarball "
                             "(tritonsm build --signing-key KEY)") from None
    if f"sha256:{hint}" != expected_signer:
        raise SignatureError(f"{where} names the key sha256:{hint}; allowed: the key {expected_signer} "
                             "(signing.public_key); fix: build with the team's key, or, if the team changed its key, "
                             "commit the new public key as signing.public_key")
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / SIGNATURE_FILE
        path.write_bytes(bundle)
        try:
            signed = sign_ec_key.Verifier(public_key).verify(sign_sigstore_pb.Signature.read(path))
        except Exception as error:  # the library raises ValueError and cryptography's InvalidSignature alike
            raise SignatureError(f"{where} does not verify with the key {expected_signer} "
                                 f"({type(error).__name__}: {str(error) or 'bad signature'}); the bundle was changed "
                                 "after signing; fix: rebuild the tarball (tritonsm build) and use the one it wrote"
                                 ) from None
    return {str(d.identifier): d.digest.digest_hex for d in signed.resource_descriptors()}


def _compare(tarball: str, model: str, signed: dict[str, str], found: dict[str, str]) -> None:
    changed = sorted(n for n in signed.keys() & found.keys() if signed[n] != found[n])
    missing = sorted(signed.keys() - found.keys())
    extra = sorted(found.keys() - signed.keys())
    if not (changed or missing or extra):
        return
    parts = ([f"changed since signing: {', '.join(f'{model}/{n}' for n in changed)}"] if changed else []) + (
        [f"missing: {', '.join(f'{model}/{n}' for n in missing)}"] if missing else []) + (
        [f"not signed: {', '.join(f'{model}/{n}' for n in extra)}"] if extra else [])
    raise SignatureError(f"{tarball}: model {model!r} differs from what was signed ({'; '.join(parts)}); "
                         "allowed: the files exactly as the build signed them; fix: rebuild the tarball (tritonsm "
                         "build) and find out who changed this copy")
