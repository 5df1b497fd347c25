"""scripts/overlapping_dists.py: after uv's parallel install, the distributions that share a file are reinstalled
dependencies first, so the dependent's copy stays, as pip leaves it (aws-cdk-lib over aws-cdk.cloud-assembly-schema)."""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("overlapping_dists", ROOT / "scripts" / "overlapping_dists.py")
assert spec is not None and spec.loader is not None
overlaps = importlib.util.module_from_spec(spec)
spec.loader.exec_module(overlaps)


def test_the_distributions_sharing_a_file_come_out_dependencies_first():
    files = {"aws-cdk-lib": ["aws_cdk/cloud_assembly_schema/__init__.py", "aws_cdk/aws_s3/__init__.py",
                             "aws_cdk_lib-2.dist-info/RECORD"],
             "aws-cdk-cloud-assembly-schema": ["aws_cdk/cloud_assembly_schema/__init__.py",
                                               "aws_cdk_cloud_assembly_schema-55.dist-info/RECORD"],
             "requests": ["requests/__init__.py", "requests-2.dist-info/RECORD"]}
    requires = {"aws-cdk-lib": {"constructs", "aws-cdk-cloud-assembly-schema"}, "constructs": {"jsii"},
                "aws-cdk-cloud-assembly-schema": {"jsii"}, "jsii": {"constructs"}}  # a cycle, cut where met
    shared = overlaps.overlapping(files)
    assert shared == {"aws-cdk-lib", "aws-cdk-cloud-assembly-schema"}  # dist-info files never count
    assert overlaps.dependencies_first(shared, requires) == ["aws-cdk-cloud-assembly-schema", "aws-cdk-lib"]


def test_this_environment_lists_the_aws_cdk_pair_and_holds_aws_cdk_lib_s_copy():
    # The planted case of the guard above, in the real environment: both wheels are installed and the file on disk
    # is aws-cdk-lib's (its jsii type names), whichever installer made the environment.
    import importlib.metadata as metadata

    files = {overlaps.normalized(d.metadata["Name"]): [str(f) for f in (d.files or [])]
             for d in metadata.distributions()}
    assert {"aws-cdk-lib", "aws-cdk-cloud-assembly-schema"} <= overlaps.overlapping(files)
    import aws_cdk.cloud_assembly_schema as schema
    assert schema.MetadataEntry.__jsii_type__ == "aws-cdk-lib.cloud_assembly_schema.MetadataEntry"  # type: ignore[attr-defined]
