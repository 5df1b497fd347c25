"""The vendored Triton image table equals the SageMaker SDK's registry map, URI for URI."""
import pytest

from deployment_spec.facts import images

image_uris = pytest.importorskip("sagemaker.core.image_uris")


@pytest.mark.parametrize("version", images.versions())
def test_every_region_and_version_matches_the_sdk(version):
    for region in images.regions(version):
        # Same account, domain (China, ISO partitions) and tag as the SDK would return.
        assert images.image_uri(version, region) == image_uris.retrieve(
            "sagemaker-tritonserver", region=region, version=version, instance_type="ml.g5.xlarge")


def test_the_sdk_knows_no_version_missing_from_the_table():
    import json, pathlib
    config = pathlib.Path(image_uris.__file__).parent / "image_uri_config" / "sagemaker-tritonserver.json"
    # A newer SDK with new tags fails here until scripts/gen_triton_images.py is rerun.
    assert sorted(json.loads(config.read_text())["versions"]) == images.versions()


def test_china_regions_use_their_own_domain():
    assert images.image_uri("25.04", "cn-north-1") == (
        "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/sagemaker-tritonserver:25.04-py3")
