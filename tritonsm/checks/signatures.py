"""Model tarballs checked against the spec's signing key before they serve: by `tritonsm serve` before it starts
Triton, and by `tritonsm verify --signatures` (the delivery pipeline's verify step) before a stage deploys.

With ``signing.public_key`` every model directory must carry a valid signature by that key (model_build.signing);
anything else stops the command with its own message. Without it nothing can be verified: `tritonsm verify
--signatures` names each tarball as unsigned, or as signed but unchecked; `tritonsm serve` serves as before.
"""
from __future__ import annotations

import pathlib
from typing import Iterable, Mapping, Optional

from model_build import signing


def check(tarballs: Iterable[pathlib.Path], public_key: Optional[pathlib.Path],
          recorded: Optional[Mapping[pathlib.Path, str]] = None) -> list[str]:
    """One line per tarball saying what was verified; SignatureError on the first that fails. With ``recorded``
    (tarball -> the build manifest's sha256) each is first held to its sha256, from the same single read."""
    lines = []
    for tarball in tarballs:
        members = signing.tarball_members(tarball)
        if recorded is not None and members.sha256 != recorded.get(tarball):
            raise signing.SignatureError(
                f"{tarball.name}: sha256 {members.sha256}; allowed: the manifest's {recorded.get(tarball)}; fix: "
                "rebuild (tritonsm build) and deploy the tarballs it wrote")
        if public_key is not None:
            verified = signing.verify_members(members, public_key)
            lines.append(f"verified: {tarball.name} ({', '.join(verified.models)}) signed by {verified.signer}")
            continue
        lines.append(f"not verified: {tarball.name} is " + (
            "signed, but the spec names no signing.public_key to check it with" if members.signatures else
            "unsigned (the spec has no signing.public_key; docs/howto/signing.md)"))
    return lines


def check_before_serving(tarballs: Iterable[pathlib.Path], public_key: Optional[pathlib.Path]) -> None:
    """Verifies where the spec has a key; without one there is nothing to verify with and serving goes on as before
    (synth warns about unsigned builds; ``tritonsm verify --signatures`` names each)."""
    if public_key is None:
        return
    # Before the server's own lines on stdout: stderr carries errors only, which scripts read.
    for line in check(tarballs, public_key):
        print(f"tritonsm: {line}", flush=True)
