"""The optional ``signing:`` section: which key the team's model tarballs are signed with, or why they are not.

The private key never appears in the spec: ``tritonsm build --signing-key KEY`` (or ``TRITONSM_SIGNING_KEY``) signs,
and ``public_key`` is what ``tritonsm serve``, ``tritonsm verify`` (the pipeline's verify step) and synth check
signatures and the manifest's signer against (model_build/signing.py; docs/howto/signing.md).
"""
from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import pathlib
import re
from typing import Optional

from deployment_spec.parsing.errors import Problem, UserError
from deployment_spec.parsing.parse import meta


@dataclasses.dataclass(frozen=True)
class SigningSpec:
    # A PEM elliptic-curve public key, relative to the spec: tarballs must be signed by its private key.
    public_key: Optional[str] = dataclasses.field(default=None, metadata=meta(
        help="the team's PEM public key file, relative to the spec (e.g. keys/model-signing.pub)"))
    # Why unsigned tarballs may deploy to environments marked production: true (refused there without it).
    unsigned_reason: Optional[str] = dataclasses.field(default=None, metadata=meta(
        help="why unsigned model tarballs may serve in production environments"))


def signing_rules(signing: SigningSpec, root: pathlib.Path) -> list[Problem]:
    out = []
    if signing.public_key is not None and not (root / signing.public_key).is_file():
        out.append(Problem("signing.public_key", repr(signing.public_key), "a PEM public key file relative to the "
                           "spec's folder", "commit the team's public key there (openssl ec -in KEY.pem -pubout "
                           "-out keys/model-signing.pub), or fix the path"))
    elif signing.public_key is not None:
        try:
            public_key_identity(root / signing.public_key)
        except UserError:
            out.append(Problem("signing.public_key", repr(signing.public_key), "a PEM public key (a '-----BEGIN "
                               "PUBLIC KEY-----' block, the output of `openssl ec -in KEY.pem -pubout`)",
                               "name the public key file, never the private key"))
    if signing.public_key is not None and signing.unsigned_reason is not None:
        out.append(Problem("signing.unsigned_reason", repr(signing.unsigned_reason), "unsigned_reason only without "
                           "public_key (with a public key every tarball must carry its signature)",
                           "remove one of the two"))
    return out


_PEM = re.compile(r"-----BEGIN PUBLIC KEY-----\s*([A-Za-z0-9+/=\s]+?)\s*-----END PUBLIC KEY-----")


def key_identity(der: bytes) -> str:
    """``sha256:<hex>`` of a public key's PEM as ``cryptography`` writes it (SubjectPublicKeyInfo, 64-character
    lines): the hint model-signing puts into every bundle (its sign_ec_key.Signer), so the manifest's signer and a
    signature's key compare as text. Made with the standard library: synth needs no cryptography package."""
    body = base64.b64encode(der).decode()
    pem = "-----BEGIN PUBLIC KEY-----\n" + "".join(body[i:i + 64] + "\n" for i in range(0, len(body), 64)) + \
        "-----END PUBLIC KEY-----\n"
    return "sha256:" + hashlib.sha256(pem.encode()).hexdigest()


def public_key_identity(path: pathlib.Path) -> str:
    """The identity (``key_identity``) of a PEM public key file; UserError naming the file if it holds none."""
    return key_identity(public_key_der(path))


def public_key_der(path: pathlib.Path) -> bytes:
    """The DER SubjectPublicKeyInfo of a PEM public key file; UserError naming the file if it holds none."""
    try:
        found = _PEM.search(path.read_text())
    except FileNotFoundError:
        raise UserError(f"signing.public_key: got {str(path)!r}, which does not exist; allowed: a PEM public key "
                        "file; fix: commit the team's public key and name it relative to the spec") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"signing.public_key: got {str(path)!r}, which cannot be read as text ({error}); allowed: a "
                        "PEM public key file; fix: name the public key file") from None
    try:
        der = base64.b64decode("".join(found.group(1).split()), validate=True) if found else b""
    except binascii.Error:
        der = b""
    if not der:
        raise UserError(f"signing.public_key: got {str(path)!r}, which holds no '-----BEGIN PUBLIC KEY-----' block; "
                        "allowed: a PEM public key, the output of `openssl ec -in KEY.pem -pubout`; fix: name that "
                        "file (never the private key)")
    return der
