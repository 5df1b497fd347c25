"""The signed build statement: one authenticated record of everything a signed build deploys.

A model's ``model.sig`` proves "signed by our key", not "this build": another build's model directory, signed with
the same key, verifies just as well. ``tritonsm build --signing-key`` therefore also writes, beside
``manifest.json``, ``build-statement.dsse.json``: a DSSE envelope
(https://github.com/secure-systems-lab/dsse/blob/master/envelope.md) whose payload is an in-toto Statement v1
(https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md). Its subjects are the tarballs (name,
sha256); its predicate is the part of the manifest that decides what serves: per endpoint its kind, default model
and tarballs (file, sha256, size, models, signer, each ``model.sig``'s sha256), per Triton model its spec model,
backend, build hash and sources (the hashes of what it was built from: deployment_spec.builds.model_sources), and the
Triton release. It is signed with the key
that signs the models, over DSSE's pre-authentication encoding; the signature's ``keyid`` is the key's identity
(``sha256:`` of its PEM, as in every ``model.sig``).

What reads it (``tritonsm serve``, ``tritonsm verify --signatures``, synth, the construct library) verifies it
with ``signing.public_key`` here, with the standard library (ecdsa_verify), and then trusts it, not the manifest:
each tarball's digest, models and signatures against it (statement_checks). Nothing here imports cryptography,
model_build or aws_cdk.
"""
from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import pathlib
from typing import Any, Mapping, Optional

from deployment_spec.builds import ecdsa_verify
from deployment_spec.builds.manifest import Manifest
from deployment_spec.parsing.errors import Problem, UserError
from deployment_spec.sections.signing import key_identity, public_key_der

STATEMENT_FILE = "build-statement.dsse.json"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "urn:triton-sagemaker-cdk:build-statement:v1"
REBUILD = ("rebuild with the team's key (tritonsm build --signing-key KEY) and keep manifest.json, the tarballs and "
           f"{STATEMENT_FILE} it writes together")


class StatementError(UserError):
    """The build statement is missing, unsigned, signed by another key, changed, or not one this tool reads."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        super().__init__(str(problem))


# --- what is signed ------------------------------------------------------------------------------------------------

def predicate(manifest: Manifest) -> dict[str, Any]:
    """The manifest's fields that decide what serves, in the shape ``bound_fields`` compares."""
    return {
        "triton_version": manifest.triton_version,
        "endpoints": {name: {"kind": ep.kind, "default_model": ep.default_model,
                             "artifacts": [{"file": a.file, "sha256": a.sha256, "size": a.size,
                                            "models": list(a.models), "signer": a.signer,
                                            "signatures": dict(sorted(a.signatures.items()))}
                                           for a in ep.artifacts]}
                      for name, ep in sorted(manifest.endpoints.items())},
        "models": {name: {"spec_model": m.spec_model, "backend": m.backend, "build_hash": m.build_hash,
                          "sources": dict(sorted(m.sources.items()))}
                   for name, m in sorted(manifest.models.items())},
    }


def payload(manifest: Manifest) -> bytes:
    """The in-toto statement the build signs: sorted keys, so the same build gives the same bytes."""
    subjects = {a.file: a.sha256 for ep in manifest.endpoints.values() for a in ep.artifacts}
    statement = {"_type": STATEMENT_TYPE, "predicateType": PREDICATE_TYPE, "predicate": predicate(manifest),
                 "subject": [{"name": name, "digest": {"sha256": digest}} for name, digest in sorted(subjects.items())]}
    return (json.dumps(statement, sort_keys=True, indent=1) + "\n").encode()


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what the signature is over, type and body both bound."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(body), body)


def envelope(body: bytes, keyid: str, signature: bytes) -> bytes:
    """The DSSE envelope as written to ``STATEMENT_FILE``."""
    return (json.dumps({"payload": base64.b64encode(body).decode(), "payloadType": PAYLOAD_TYPE,
                        "signatures": [{"keyid": keyid, "sig": base64.b64encode(signature).decode()}]},
                       sort_keys=True, indent=2) + "\n").encode()


# --- what is read --------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class BoundTarball:
    """One tarball as the signed statement binds it."""

    endpoint: str
    file: str
    sha256: str
    size: int
    models: tuple[str, ...]
    signatures: Mapping[str, str]  # model -> sha256 of its model.sig


@dataclasses.dataclass(frozen=True)
class BuildStatement:
    """A verified statement: signed by ``signer`` (the spec's key)."""

    path: pathlib.Path
    signer: str
    predicate: Mapping[str, Any]

    def tarball(self, file: str) -> Optional[BoundTarball]:
        """The tarball named ``file`` (a name, no folder), None if the statement does not bind it."""
        for endpoint, entry in sorted(self.predicate["endpoints"].items()):
            for artifact in entry["artifacts"]:
                if artifact["file"] == file:
                    return BoundTarball(endpoint, artifact["file"], artifact["sha256"], artifact["size"],
                                        tuple(artifact["models"]), dict(artifact["signatures"]))
        return None

    def tarball_names(self) -> list[str]:
        return sorted(a["file"] for entry in self.predicate["endpoints"].values() for a in entry["artifacts"])


def read_statement(path: pathlib.Path, public_key: pathlib.Path) -> BuildStatement:
    """The statement at ``path``, verified with ``public_key`` (a PEM file); StatementError naming what is wrong."""
    expected, key = _key(public_key)
    by = f"the key {expected} (signing.public_key)"
    try:
        raw = json.loads(path.read_bytes())
        body = base64.b64decode(raw["payload"], validate=True)
        kind, signatures = raw["payloadType"], list(raw["signatures"])
    except FileNotFoundError:
        raise StatementError(Problem(str(path), "no build statement", f"the statement tritonsm build writes beside "
                                     f"manifest.json when it signs, signed by {by}", REBUILD)) from None
    except (OSError, ValueError, KeyError, TypeError, binascii.Error) as error:
        raise StatementError(Problem(str(path), f"no DSSE envelope ({type(error).__name__}: {error})",
                                     "the DSSE envelope tritonsm build writes (payload, payloadType, signatures)",
                                     REBUILD)) from None
    if not signatures:
        raise StatementError(Problem(str(path), "a statement without a signature", f"a signature by {by}",
                                     f"{REBUILD}: the signature was removed, or tritonsm build did not write it"))
    ours = [s for s in signatures if isinstance(s, dict) and s.get("keyid") == expected]
    if not ours:
        others = ", ".join(str(s.get("keyid") if isinstance(s, dict) else s) for s in signatures)
        raise StatementError(Problem(str(path), f"a signature by the key {others}", f"a signature by {by}",
                                     "build with the team's key, or, if the team changed its key, commit the new "
                                     "public key as signing.public_key"))
    if not any(_verifies(key, s.get("sig"), pae(str(kind), body)) for s in ours):
        raise StatementError(Problem(str(path), f"a signature that does not verify with {by}",
                                     "the statement exactly as the build signed it",
                                     f"{REBUILD}, and find out who changed this copy: its statement or its "
                                     "signature was replaced after signing"))
    return BuildStatement(path, expected, _predicate(path, kind, body))


def _key(public_key: pathlib.Path) -> tuple[str, ecdsa_verify.PublicKey]:
    der = public_key_der(public_key)
    try:
        return key_identity(der), ecdsa_verify.public_key(der)
    except ecdsa_verify.KeyFormatError as error:
        raise StatementError(Problem("signing.public_key", f"{str(public_key)!r} ({error})", "an elliptic-curve "
                                     "public key on P-256, P-384 or P-521", "make the key pair with `openssl ecparam "
                                     "-name prime256v1 -genkey -noout`")) from None


def _verifies(key: ecdsa_verify.PublicKey, sig: object, message: bytes) -> bool:
    try:
        der = base64.b64decode(str(sig), validate=True)
    except (binascii.Error, ValueError):
        return False
    return ecdsa_verify.verify(key, der, message)


def _predicate(path: pathlib.Path, kind: object, body: bytes) -> Mapping[str, Any]:
    """The verified payload's predicate; a signed payload of another kind is refused, never guessed at."""
    try:
        statement = json.loads(body)
        found = (kind, statement["_type"], statement["predicateType"])
        bound = statement["predicate"]
        shaped = all(isinstance(bound.get(k), dict) for k in ("endpoints", "models"))
    except (ValueError, KeyError, TypeError, AttributeError):
        found, shaped = (kind, None, None), False
    if found != (PAYLOAD_TYPE, STATEMENT_TYPE, PREDICATE_TYPE) or not shaped:
        raise StatementError(Problem(str(path), f"a signed payload of type {found[0]} / {found[2]}",
                                     f"{PAYLOAD_TYPE} / {PREDICATE_TYPE}, the build statement this release writes",
                                     REBUILD))
    result: Mapping[str, Any] = bound
    return result
