"""`--image`: encoded image files as one zero-padded UINT8 tensor, and what is refused."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

from local_endpoint.cli import invoke_main
from local_endpoint.client.request_inputs import image_bytes_tensor, image_tensor
from local_endpoint.errors import InvokeError
from model_build.backends.dali.check_images import jpeg


def test_images_of_different_sizes_travel_as_their_bytes_zero_padded(tmp_path: pathlib.Path):
    small, large = tmp_path / "small.jpg", tmp_path / "large.jpg"
    small.write_bytes(jpeg(64, 48))
    large.write_bytes(jpeg(640, 480))
    tensor = image_tensor([small, large], "IMAGE")
    # One row per file, as long as the longest; each row starts with the file's exact bytes.
    assert (tensor.name, tensor.datatype, tensor.array.dtype) == ("IMAGE", "UINT8", np.uint8)
    assert tensor.array.shape == (2, large.stat().st_size)
    assert tensor.array[0, :small.stat().st_size].tobytes() == small.read_bytes()
    assert not tensor.array[0, small.stat().st_size:].any()
    assert tensor.array[1].tobytes() == large.read_bytes()


def test_a_file_that_is_not_an_encoded_image_is_refused_by_name(tmp_path: pathlib.Path):
    array = tmp_path / "pixels.npy"
    np.save(array, np.zeros((2, 2), np.uint8))
    with pytest.raises(InvokeError) as caught:
        image_tensor([array], "IMAGE")
    assert str(caught.value) == (
        f"--image {array}: not an encoded image (first bytes b'\\x93NUMPY\\x01\\x00'); allowed: BMP, JPEG, "
        "JPEG 2000, PNG, TIFF, WebP files, which the endpoint decodes; fix: pass the image file "
        "itself, not a decoded array (that goes in --input)")


def test_without_an_input_name_each_file_is_one_bytes_row_of_image(tmp_path: pathlib.Path):
    # What an image task's ensemble takes (deployment_spec/sections/tasks.py): IMAGE, BYTES, the file unchanged per row.
    photo, other = tmp_path / "photo.jpg", tmp_path / "other.jpg"
    photo.write_bytes(jpeg(32, 32))
    other.write_bytes(jpeg(8, 16))
    tensor = image_bytes_tensor([photo, other], "IMAGE")
    assert (tensor.name, tensor.datatype, tensor.array.shape) == ("IMAGE", "BYTES", (2, 1))
    assert [row[0] for row in tensor.array] == [photo.read_bytes(), other.read_bytes()]


def test_a_dali_stand_in_for_a_release_without_a_dali_wheel_is_refused():
    from local_endpoint.errors import LocalEndpointError
    from local_endpoint.server.backends import ModelBackend
    from local_endpoint.stand_in.cpu_stand_in import prepare_runtime

    with pytest.raises(LocalEndpointError) as caught:
        prepare_runtime("25.09", [ModelBackend("preprocess", "dali", ())])
    assert str(caught.value) == (
        "--cpu-stand-in runs DALI models in Triton 25.09's DALI 1.51.2: PyPI holds only a wheel-stub sdist of it, "
        "which downloads the wheel from NVIDIA's own index at install time; serve a build for a triton_version "
        "whose DALI installs (23.12, 24.01, 24.03, 26.05)")
