"""The signed build statement written beside ``manifest.json`` (its format: deployment_spec/builds/statement.py).

Signed with the key that signs the model directories (model_build.signing's ``AnyKey``): a key file with
deterministic ECDSA (RFC 6979), so a rebuild of the same models writes the same bytes; a KMS key through
``KmsPrivateKey``, which reuses the signature it kept for the same statement (kms_signing.py), so a rebuild on
the same work folder writes the same bytes too. An unsigned build has no statement: one left by an earlier signed
build is removed, since it binds tarballs this build replaced.
"""
from __future__ import annotations

import pathlib
from typing import Optional

from deployment_spec.builds import statement as build_statement
from deployment_spec.builds.manifest import Manifest
from model_build import archive, signing

STATEMENT_FILE = build_statement.STATEMENT_FILE


def signed_statement(key: signing.AnyKey, manifest: Manifest) -> bytes:
    """The DSSE envelope of ``manifest``'s statement, signed by ``key``."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    body = build_statement.payload(manifest)
    private = key.private()
    # The hash model-signing pairs with each curve (sign_ec_key.get_ec_key_hash), the one the verifier expects.
    algorithm = {256: hashes.SHA256(), 384: hashes.SHA384(), 521: hashes.SHA512()}[private.public_key().curve.key_size]
    signature = private.sign(build_statement.pae(build_statement.PAYLOAD_TYPE, body),
                             ec.ECDSA(algorithm, deterministic_signing=True))
    return build_statement.envelope(body, key.identity, signature)


def write(out_dir: pathlib.Path, manifest: Manifest, key: Optional[signing.AnyKey]) -> bool:
    """Writes (or, unsigned, removes) ``build-statement.dsse.json``; True when the file changed."""
    path = out_dir / STATEMENT_FILE
    if key is None:
        if path.is_file():
            path.unlink()
        return False
    data = signed_statement(key, manifest)
    if path.is_file() and path.read_bytes() == data:
        return False
    with archive.atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return True
