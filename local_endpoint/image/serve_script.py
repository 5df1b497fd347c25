"""Triton's SageMaker `serve` script of each release, as shipped here for the NGC image.

`docker run IMAGE serve` is how SageMaker starts an inference container
(https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html,
"How SageMaker Runs Your Inference Image"); in Triton's images `serve` is
`docker/sagemaker/serve` of the server repository, copied to `/usr/bin/serve` only when the
image is built with the sagemaker endpoint (triton-inference-server/server `build.py`,
r25.09, lines 1251-1256). Whether the NGC `tritonserver:<release>-py3` image carries it could not
be checked from a machine without a Docker engine, so `--image ngc` always bind-mounts the
project's copy of that release's script over `/usr/bin/serve`: the container then runs exactly
the script of its release, whether or not the image had one.

The copies in `serve_scripts/` are byte for byte the file at the named commit (the last one that
changed it on those release branches); the sha256 below is checked by the tests.
"""
from __future__ import annotations

import dataclasses
import hashlib
import pathlib

from local_endpoint.errors import LocalEndpointError

CONTAINER_PATH = "/usr/bin/serve"
SOURCE = "https://github.com/triton-inference-server/server/blob/{branch}/docker/sagemaker/serve"
_FOLDER = pathlib.Path(__file__).parent / "serve_scripts"


@dataclasses.dataclass(frozen=True)
class ServeScript:
    file: str          # in serve_scripts/
    commit: str        # triton-inference-server/server commit that last changed it
    sha256: str
    releases: tuple[str, ...]

    @property
    def path(self) -> pathlib.Path:
        return _FOLDER / self.file

    def source(self, release: str) -> str:
        return SOURCE.format(branch=f"r{release}")


# r23.12-r24.09: identical files; r25.04-r26.05: the same plus the SAGEMAKER_TRITON_INFERENCE_TYPE check.
SCRIPTS = (
    ServeScript("serve.r23.12", "2847211c9", "7bb168eac6c48d1011d4a3ee78e3030dacce37811f9918c16b10e3e6c9ac6324",
                ("23.12", "24.01", "24.03", "24.05", "24.09")),
    ServeScript("serve.r25.04", "96e7cb5b4", "2033aa35062aa7a16c00f5c034c920f8d625bb05dc0ae7349f6f928d54e775e8",
                ("25.04", "25.09", "26.05")),
)


def script_for(release: str) -> ServeScript:
    """The serve script of `release`, checked against its recorded sha256."""
    script = next((s for s in SCRIPTS if release in s.releases), None)
    if script is None:
        known = ", ".join(r for s in SCRIPTS for r in s.releases)
        raise LocalEndpointError(f"no copy of Triton's SageMaker serve script for release {release} here "
                                 f"(releases with one: {known}); use --image sagemaker, or add the script of "
                                 f"branch r{release} to local_endpoint/image/serve_scripts/")
    digest = hashlib.sha256(script.path.read_bytes()).hexdigest()
    if digest != script.sha256:
        raise LocalEndpointError(f"{script.path} has sha256 {digest}, not {script.sha256} (the file of "
                                 f"{script.source(release)}); restore it with git checkout")
    return script
