"""A detector's raw-image check (model_build/backends/ensemble/image_check.py) names the cause where its model
step fails only on the images of another size than the one it was exported at (Deformable DETR's graph holds
its multi-scale spatial shapes fixed), with the fix."""
from model_build.backends.ensemble.image_check import frozen_size_text

EXPORTED = (3, 128, 170)
SIZES = [EXPORTED, (3, 256, 128), (3, 128, 173), EXPORTED]


def test_failing_only_on_other_sizes_names_the_fixed_size_and_the_fix():
    assert frozen_size_text("det_deformable_detr", "DeformableDetrImageProcessorPil", EXPORTED, SIZES, {1, 2}) == (
        "the images it fails on are those whose pixel_values are not [3, 128, 170], the size its model step was "
        "exported and traced at ([3, 128, 173], [3, 256, 128]): its graph holds that size fixed (a multi-scale "
        "detector's spatial shapes: Deformable DETR's), while the image processor (DeformableDetrImageProcessorPil) "
        "keeps each image's aspect ratio, so pixel_values follow the image; backend pytorch traces the same fixed "
        "size. Fix: if the model was trained so, save a processor that resizes every image to one size "
        '(preprocessor_config.json of models.det_deformable_detr.weights: size {"height": 128, "width": 170}), else '
        "use another architecture")


def test_other_failures_are_left_to_the_general_message():
    name, processor = "det_x", "DetrImageProcessorPil"
    assert frozen_size_text(name, processor, EXPORTED, SIZES, {0, 1}) == ""  # an image of the export size fails too
    assert frozen_size_text(name, processor, EXPORTED, SIZES, set()) == ""
    assert frozen_size_text(name, processor, (3, 64, 64), SIZES, {1}) == ""  # no image of the export size passed
