"""Which image `--image` runs: the endpoint's own `sagemaker-tritonserver`, or NGC's of the same release.

- `sagemaker`: `<account>.dkr.ecr.<region>.<domain>/sagemaker-tritonserver:<release>-py3`, the URI
  the CDK app gives the SageMaker Model (`deployment_spec.facts.images`, the SageMaker SDK's registry
  table). It lives in AWS's Deep Learning Containers registry and needs a `docker login` with an
  ECR token of the user's credentials (`registry_login`).
- `ngc`: `nvcr.io/nvidia/tritonserver:<release>-py3`, public, the NGC release the SageMaker image
  is built from, started with the release's own SageMaker serve script (`serve_script`).
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from deployment_spec.facts import images
from local_endpoint.errors import LocalEndpointError
from local_endpoint.image import serve_script

SAGEMAKER = "sagemaker"
NGC = "ngc"
CHOICES = (SAGEMAKER, NGC)
NGC_IMAGE = "nvcr.io/nvidia/tritonserver:{release}-py3"


@dataclasses.dataclass(frozen=True)
class ImageRef:
    uri: str
    kind: str                                   # SAGEMAKER or NGC
    registry: Optional[str] = None              # ECR host to log in to; None: public
    region: Optional[str] = None                # the ECR registry's region
    serve: Optional[serve_script.ServeScript] = None   # mounted over /usr/bin/serve (NGC)


def resolve(kind: str, release: str, region: Optional[str]) -> ImageRef:
    """The image of `kind` for `release`; `region` picks the ECR registry of the SageMaker image."""
    if kind == NGC:
        return ImageRef(NGC_IMAGE.format(release=release), NGC, serve=serve_script.script_for(release))
    if kind != SAGEMAKER:
        raise LocalEndpointError(f"--image {kind!r} is not an image kind; use one of {', '.join(CHOICES)}")
    if not region:
        raise LocalEndpointError(
            "--image sagemaker pulls from the SageMaker registry of a region, and none is known: set "
            "AWS_REGION (or a region in your AWS profile), give --region, or set the environment's region: "
            "in the spec; or use --image ngc, which needs no AWS account")
    if release not in images.versions():
        raise LocalEndpointError(f"sagemaker-tritonserver {release} is not in the SageMaker SDK's registry "
                                 f"(versions: {', '.join(images.versions())}); use --image ngc")
    if images.account(release, region) is None:
        raise LocalEndpointError(f"sagemaker-tritonserver {release} is not published in {region} (regions: "
                                 f"{', '.join(images.regions(release))}); give --region one of those, or use --image ngc")
    uri = images.image_uri(release, region)
    return ImageRef(uri, SAGEMAKER, registry=uri.split("/", 1)[0], region=region)
