"""The SageMaker Triton image of one release, resolved for the stack's region."""
from __future__ import annotations

from typing import Optional

import aws_cdk as cdk
from aws_cdk import aws_ecr as ecr
from constructs import Construct

from deployment_spec.facts import images, serving_runtimes, triton_images
from deployment_spec.rules import sagemaker as sagemaker_rules
from deployment_spec.parsing.errors import Problem, raise_problems


class TritonImage(Construct):
    """The ``sagemaker-tritonserver`` GPU image URI and its ECR repository, for one release.

    The table is the SageMaker SDK's registry map, vendored in
    ``deployment_spec/facts/triton_images.py`` (a test proves it equals the SDK), so
    synth never imports the SDK. In an environment-agnostic stack the region
    is only known at deploy time: the URI then comes from a CloudFormation
    mapping keyed by region, holding exactly the regions where the image is
    published (deploying elsewhere fails before any resource is created).

    Args:
        scope: Parent construct.
        id_: Construct ID.
        version: The image tag's release, e.g. ``"25.04"``; must be in the SDK's registry.
        repository: Serve the image from this ECR repository of yours instead: a copy of AWS's image under the
            same tag (``docker pull`` the AWS URI, ``docker push`` it here), for accounts whose policy allows
            only their own registries. Defaults to AWS's ``sagemaker-tritonserver`` repository.
        tag: The tag to pull from ``repository`` instead of AWS's (e.g. NVIDIA's ``25.09-vllm-python-py3``
            mirrored there, for a model a GPU engine decodes: ``deployment_spec.sections.generation.engine_image_tag``).
            Defaults to AWS's tag for ``version``; needs ``repository``.

    Attributes:
        image_uri: The image URI (a literal, or a token in an environment-agnostic stack).
        repository_arn: ARN of the repository the URI points into (AWS's ``sagemaker-tritonserver``, or yours).
        own_repository: True when the image comes from your repository.
        runtime: The runtimes inside the image (``deployment_spec.facts.serving_runtimes``).
        inference_ami_version: The ``InferenceAmiVersion`` whose driver meets the image's minimum driver
            (the hosts' default driver, 470 on ml.g4dn/g5, is too old for every supported release).

    Raises:
        PropsError: the version is not in the registry, or the stack's region has no such image.
    """

    def __init__(self, scope: Construct, id_: str, *, version: str, repository: Optional[ecr.IRepository] = None,
                 tag: Optional[str] = None) -> None:
        super().__init__(scope, id_)
        stack = cdk.Stack.of(self)
        own = repository is not None
        untagged = [] if tag is None or own else [Problem(
            "tag", repr(tag), "a tag only with repository (AWS's repository holds its own tags only)",
            "give repository, the ECR repository of yours the tagged image was pushed to")]
        raise_problems("Triton image", sagemaker_rules.triton_version_known(version) + untagged + (
            [] if own or cdk.Token.is_unresolved(stack.region) else sagemaker_rules.image_in_region(version, stack.region)))
        regions = images.regions(version)
        self.own_repository = own
        if repository is not None:
            # The same tag as AWS's image, so the runtime facts below hold for the copy too.
            self.image_uri: str = repository.repository_uri_for_tag(tag or triton_images.TAG_PREFIX[version])
            self.repository_arn: str = repository.repository_arn
        elif cdk.Token.is_unresolved(stack.region):
            registry = cdk.CfnMapping(self, "Registry", mapping={
                region: {"Uri": images.image_uri(version, region), "Account": images.account(version, region)}
                for region in regions})
            self.image_uri = registry.find_in_map(cdk.Aws.REGION, "Uri")
            self.repository_arn = self._aws_repository(registry.find_in_map(cdk.Aws.REGION, "Account"))
        else:
            self.image_uri = images.image_uri(version, stack.region)
            # present: image_in_region checked it above
            self.repository_arn = self._aws_repository(images.account(version, stack.region) or "")
        self.version = version
        self.runtime = serving_runtimes.runtime(version)
        ami = serving_runtimes.inference_ami(self.runtime)
        self.inference_ami_version: str = ami.name
        # Why this host AMI, in words: visible in the template (and so in `cdk diff`) next to the endpoint.
        self.inference_ami_reason: str = (
            f"sagemaker-tritonserver:{version} is built on CUDA {self.runtime.cuda}, which needs NVIDIA driver "
            f">= {self.runtime.min_driver}; {ami.name} has driver {ami.driver} (the instances' default AMI has 470)")

    def _aws_repository(self, account: str) -> str:
        return cdk.Stack.of(self).format_arn(service="ecr", account=account, resource="repository",
                                             resource_name=triton_images.REPOSITORY)
