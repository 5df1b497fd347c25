"""Unpacking model tarballs the way SageMaker does, and checking their layout.

SME: the one `ModelDataUrl` archive is extracted to /opt/ml/model/, which must
hold one directory per model; a bare `config.pbtxt` at the top makes the
container stop ("Incorrect directory structure"). MME: each archive may hold
either one `<model>/` directory (several for an ensemble) or a bare
`config.pbtxt` with its version directories (https://docs.aws.amazon.com/sagemaker/latest/dg/multi-model-endpoints.html and Triton's src/sagemaker_server.cc).
"""

from __future__ import annotations

import pathlib
import tarfile

from local_endpoint.errors import TarballError
from local_endpoint.server.backends import TOP_LEVEL, ModelFiles
from model_build import disk_space


def check_tarball_path(tarball: pathlib.Path) -> None:
    """Refuse a path that is not an existing .tar.gz file."""
    if not tarball.name.endswith(".tar.gz"):
        raise TarballError(
            f"model archive {tarball} is not a .tar.gz; SageMaker takes gzipped tar files "
            "named <name>.tar.gz"
        )
    if not tarball.is_file():
        raise TarballError(
            f"model archive {tarball} does not exist; build it first (tritonsm build) "
            "or pass the path of an existing .tar.gz"
        )


def target_models(tarballs: list[pathlib.Path]) -> dict[str, pathlib.Path]:
    """A multi-model endpoint's archives by TargetModel (their file name), each checked and unique."""
    if not tarballs:
        raise TarballError("a multi-model endpoint needs at least one model archive (.tar.gz)")
    archives: dict[str, pathlib.Path] = {}
    for tarball in tarballs:
        check_tarball_path(tarball)
        if tarball.name in archives:
            raise TarballError(
                f"model archives {archives[tarball.name]} and {tarball} share the name "
                f"{tarball.name!r}, the target model clients use; rename one of them"
            )
        archives[tarball.name] = tarball
    return archives


def extract_tarball(tarball: pathlib.Path, destination: pathlib.Path) -> None:
    """Extract a .tar.gz into `destination`, refusing unsafe members."""
    destination.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(tarball, "r:gz") as archive:
            # The "data" filter rejects absolute paths, '..', device files and
            # links leaving the destination.
            archive.extractall(destination, filter="data")
    except tarfile.FilterError as error:
        raise TarballError(
            f"model archive {tarball} has an unsafe member ({error}); repack it with paths "
            "relative to the model repository"
        ) from None
    except (tarfile.TarError, OSError, EOFError) as error:
        if disk_space.is_full(error):
            raise  # not the archive's fault: the caller's disk_space.told_when_full names the disk and the fix
        raise TarballError(
            f"model archive {tarball} cannot be read as a gzipped tar file ({error}); "
            "rebuild it (tritonsm build)"
        ) from None


def check_single_model_layout(tarball: pathlib.Path, listing: dict[str, ModelFiles]) -> None:
    """Refuse what the SageMaker serve script refuses in /opt/ml/model/."""
    if TOP_LEVEL in listing:
        found = ", ".join(sorted({path.split("/")[0] for path in listing[TOP_LEVEL].files}))
        raise TarballError(
            f"model archive {tarball} has config.pbtxt at its top level (found: {found}); "
            "a single-model endpoint needs one directory per model at the top, e.g. "
            "'<model>/config.pbtxt' and '<model>/1/...', or the SageMaker container stops with "
            "'Incorrect directory structure'; repack it from the repository directory: "
            "tar -C <repository> -czf <name>.tar.gz <model>"
        )


def choose_default_model(
    tarball: pathlib.Path, listing: dict[str, ModelFiles], default_model: str | None
) -> str:
    """The model SME `/invocations` serves, chosen as the serve script does."""
    directories = sorted(listing)
    if default_model is not None:
        if default_model not in directories:
            raise TarballError(
                f"default model {default_model!r} (SAGEMAKER_TRITON_DEFAULT_MODEL_NAME) has no "
                f"directory in {tarball} (directories: {', '.join(directories) or 'none'}); "
                "set it to one of those directory names"
            )
        return default_model
    if len(directories) == 1:
        return directories[0]
    if not directories:
        raise TarballError(
            f"model archive {tarball} contains no model directory; it needs "
            "'<model>/config.pbtxt' and '<model>/1/...' at its top level"
        )
    raise TarballError(
        f"model archive {tarball} contains {len(directories)} model directories "
        f"({', '.join(directories)}) and no default model is set; set the default model "
        "(SAGEMAKER_TRITON_DEFAULT_MODEL_NAME, e.g. the ensemble) to one of them"
    )
