"""Where an endpoint's model archives live, one recipe for every endpoint construct: your bucket and key,
or new secure ones; local archives copied under one prefix, S3 archives read where they are."""
from __future__ import annotations

import dataclasses
from typing import Optional

import aws_cdk as cdk
from aws_cdk import aws_kms as kms, aws_s3 as s3
from constructs import Construct

from triton_constructs import control_tower
from triton_constructs.artifacts import DIGEST_FROM_MANIFEST, ArtifactFile, ModelArtifacts
from triton_constructs.build_signing import DIGEST_FROM_STATEMENT
from triton_constructs.model_repositories import ModelRepositories
from triton_constructs.model_store import ModelStore
from triton_constructs.network import FunctionPlacement


@dataclasses.dataclass(frozen=True)
class ModelData:
    """The archives as the endpoint reads them.

    Attributes:
        bucket, prefix: What the execution role may read (``prefix`` ends in '/').
        prefix_url: ``s3://bucket/prefix``: a multi-model endpoint's ``ModelDataUrl``.
        urls: Each archive's ``s3://`` URL, by its object name.
        artifacts: The copy of the local archives (the model must depend on it), or None.
    """

    bucket: s3.IBucket
    prefix: str
    prefix_url: str
    urls: dict[str, str]
    artifacts: Optional[ModelArtifacts]


def storage(scope: Construct, bucket: Optional[s3.IBucket], key: Optional[kms.IKey],
            removal_policy: cdk.RemovalPolicy, *, needed: bool) -> tuple[Optional[s3.IBucket], kms.IKey]:
    """The bucket and key to use: yours, or new secure ones (a bucket only when something goes in it)."""
    if bucket is None and needed:
        store = ModelStore(scope, "ModelStore", removal_policy=removal_policy, key=key)
        return store.bucket, store.key
    given = key or (bucket.encryption_key if bucket is not None else None)
    if given is not None:
        return bucket, given
    new = kms.Key(scope, "Key", enable_key_rotation=True, removal_policy=removal_policy,
                  description="Triton endpoint: storage volume, logs and model data")
    control_tower.deny_grants_for_non_aws_resources(new)
    return bucket, new


def model_data(scope: Construct, models: ModelRepositories, bucket: Optional[s3.IBucket], key: kms.IKey,
               storage_name: str, placement: Optional[FunctionPlacement] = None) -> ModelData:
    """The archives in S3: local files copied under ``models/<storage_name>/`` of ``bucket``, or the S3
    objects you gave, under their one prefix (``ModelRepositories.problems`` refuses a mix)."""
    first = models.archives[0]
    if first.s3_url is not None:
        bucket_name, prefix = first.s3_prefix or ("", "")
        source = s3.Bucket.from_bucket_name(scope, "SourceBucket", bucket_name)
        urls = {a.object_name: a.s3_url for a in models.archives if a.s3_url is not None}
        return ModelData(source, prefix, f"s3://{bucket_name}/{prefix}", urls, None)
    if bucket is None:
        raise AssertionError("storage() creates a bucket whenever an archive is local")
    prefix = ModelStore.model_prefix(storage_name)
    artifacts = ModelArtifacts(scope, "Artifacts", bucket=bucket, key=key, prefix=prefix, placement=placement, files=[
        ArtifactFile(a.path, a.sha256 or "", a.size or 0, a.object_name,
                     DIGEST_FROM_STATEMENT if a.signed_by else DIGEST_FROM_MANIFEST)
        for a in models.archives if a.path])
    return ModelData(bucket, prefix, artifacts.prefix_url, dict(artifacts.object_urls), artifacts)
