"""Model tarballs: uploaded as CDK file assets, then copied under one prefix of the model bucket."""
from __future__ import annotations

import dataclasses
import pathlib
import re
from typing import Optional, Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam, aws_kms as kms, aws_s3 as s3, aws_s3_assets as s3_assets
from constructs import Construct

from triton_constructs.custom_resource import custom_resource_function
from triton_constructs.model_store import MODEL_WRITERS_PATH
from triton_constructs.network import FunctionPlacement
from triton_constructs.nag import acknowledge, acknowledge_wildcard

# Above this many tarballs the copy role reads the asset bucket by wildcard instead of one ARN per
# object: IAM caps a role's inline policies at 10,240 characters.
MAX_EXACT_SOURCES = 40
MAX_CONCURRENT_COPIES = 10
_VERSIONED = re.compile(r"(?P<stem>.+)-(?P<sha12>[0-9a-f]{12})\.tar\.gz")
DIGEST_FROM_MANIFEST = "the build manifest"  # copy_artifact.py's default, when no DigestFrom is given


@dataclasses.dataclass(frozen=True)
class ArtifactFile:
    """One built tarball: where it is and what it holds.

    Attributes:
        path: The local ``.tar.gz`` file.
        sha256: Its sha256 (from the build manifest); it becomes the CDK asset hash, so synth does
            not re-hash large files.
        size: Its size in bytes.
        object_name: The S3 object name, ``<name>-<sha12>.tar.gz``; for a multi-model endpoint also
            the ``TargetModel`` callers pass.
        digest_from: What ``sha256`` and ``size`` come from, as the copy function's messages name it: the build
            manifest, or the signed build statement synth verified (triton_constructs.build_signing).
    """

    path: pathlib.Path
    sha256: str
    size: int
    object_name: str
    digest_from: str = DIGEST_FROM_MANIFEST

    @property
    def stem(self) -> str:
        """The object name without its content hash: stable across rebuilds, used as construct ID."""
        match = _VERSIONED.fullmatch(self.object_name)
        return match.group("stem") if match else self.object_name.removesuffix(".tar.gz")


class ModelArtifacts(Construct):
    """Puts an endpoint's tarballs into the model bucket under one prefix, never overwriting.

    Each tarball is a CDK file asset (the CLI streams it to the bootstrap
    bucket, any size); a custom resource then copies it server-side to
    ``<prefix><object_name>`` with the bucket's KMS key. A BucketDeployment
    would need the file zipped and would unpack it inside its Lambda function
    (about 10 GB of ephemeral storage at most, 2 GB files failing in Node).

    Args:
        scope: Parent construct.
        id_: Construct ID.
        bucket: The model bucket.
        key: The bucket's KMS key (objects are written with it).
        prefix: Key prefix ending in '/', e.g. ``ModelStore.model_prefix(name)``.
        files: The tarballs, at least one.

    Attributes:
        prefix_url: ``s3://<bucket>/<prefix>``: a multi-model endpoint's ``ModelDataUrl``.
        object_urls: ``s3://`` URL of each object, by object name.
        function: The copy function.
    """

    def __init__(self, scope: Construct, id_: str, *, bucket: s3.IBucket, key: kms.IKey, prefix: str,
                 files: Sequence[ArtifactFile], placement: Optional[FunctionPlacement] = None) -> None:
        super().__init__(scope, id_)
        if not prefix.endswith("/") or not files:
            raise ValueError("ModelArtifacts needs a prefix ending in '/' and at least one file")
        self.prefix_url = f"s3://{bucket.bucket_name}/{prefix}"
        self.object_urls: dict[str, str] = {}
        self.function, role = custom_resource_function(
            self, id_prefix="Copy", handler="copy_artifact.handler", memory_size=256,
            role_description="Copies model tarballs from CDK assets into the model bucket",
            description="Server-side copy of one model tarball into the model bucket (never overwrites)",
            # One copy per tarball, which CloudFormation may start all at once.
            reserved_concurrency=min(len(files), MAX_CONCURRENT_COPIES),
            # The copy is server-side; the time limit, not memory, bounds it (~ tens of GB per artifact).
            timeout=cdk.Duration.minutes(15), log_key=key, placement=placement,
            # The model bucket's policy lets roles under this path alone write models (ModelStore).
            role_path=MODEL_WRITERS_PATH)
        objects = bucket.arn_for_objects(f"{prefix}*")
        role.add_to_policy(iam.PolicyStatement(
            actions=["s3:PutObject", "s3:AbortMultipartUpload", "s3:GetObject"], resources=[objects]))
        acknowledge_wildcard(role, self, objects,
                    f"The copy function writes only this endpoint's model prefix ({prefix}); the object names "
                    "change with every model build, and old versions must stay (instances cache by name).")
        # Multipart copies into an SSE-KMS bucket need both data-key generation and decryption.
        role.add_to_policy(iam.PolicyStatement(
            actions=["kms:GenerateDataKey", "kms:Decrypt"], resources=[key.key_arn],
            conditions={"StringEquals": {"kms:ViaService": f"s3.{cdk.Aws.REGION}.{cdk.Aws.URL_SUFFIX}"}}))
        sources = []
        stems: set[str] = set()
        for file in files:
            # The stem keeps an archive's ID across rebuilds; a second archive of that name (an instance pool's
            # build for its GPU) is told apart by its content.
            group = Construct(self, file.stem if file.stem not in stems else f"{file.stem}-{file.sha256[:12]}")
            stems.add(file.stem)
            asset = s3_assets.Asset(group, "Asset", path=str(file.path), asset_hash=file.sha256,
                                    asset_hash_type=cdk.AssetHashType.CUSTOM)
            sources.append((asset.bucket, asset.s3_object_key))
            object_key = f"{prefix}{file.object_name}"
            cdk.CustomResource(group, "Copy", service_token=self.function.function_arn,
                               resource_type="Custom::TritonModelArtifact",
                               # Fail within minutes of a stuck copy instead of CloudFormation's default hour.
                               service_timeout=cdk.Duration.minutes(16),
                               properties={"SourceBucket": asset.s3_bucket_name, "SourceKey": asset.s3_object_key,
                                           "DestinationBucket": bucket.bucket_name, "DestinationKey": object_key,
                                           "Size": str(file.size), "Sha256": file.sha256,
                                           "KmsKeyArn": key.key_arn,
                                           # Named only where it is not the default: unsigned builds' copies
                                           # keep their properties, so nothing is updated for it.
                                           **({"DigestFrom": file.digest_from}
                                              if file.digest_from != DIGEST_FROM_MANIFEST else {})})
            self.object_urls[file.object_name] = f"s3://{bucket.bucket_name}/{object_key}"
        if len(sources) <= MAX_EXACT_SOURCES:
            read = [b.arn_for_objects(k) for b, k in sources]
        else:
            read = [sources[0][0].arn_for_objects("*")]
            acknowledge_wildcard(role, self, read[0],
                        f"{len(sources)} tarballs exceed what one-ARN-per-object fits in IAM's inline policy size "
                        "limit; the copy function only reads CDK file assets, named by content hash.")
        role.add_to_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=read))

