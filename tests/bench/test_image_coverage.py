"""The image coverage benchmark's pieces (benchmarks/hf_image_coverage.py): how served answers are judged
(benchmarks/tooling/image_answers.py), the tiny detectors' sub-configs, waiting out a reinstall, on fixed inputs."""
import json

import pytest

from benchmarks.tooling import image_answers, tiny_checkpoints
from benchmarks.tooling.image_answers import match_detections, threshold_between


def box(xmin, ymin, xmax, ymax):
    return {"xmin": xmin, "ymin": ymin, "xmax": xmax, "ymax": ymax}


def found(label, score, corners):
    return {"label": label, "score": score, "box": box(*corners)}


PIPELINE = [found("cat", 0.61, (10, 10, 110, 90)), found("dog", 0.72, (200, 40, 300, 160)),
            found("cat", 0.55, (400, 300, 500, 420))]


def test_served_detections_in_another_order_match():
    served = list(reversed(PIPELINE))
    assert match_detections(served, PIPELINE) == (None, 0.0, 1.0)


def test_a_corner_one_pixel_off_matches_and_two_pixels_on_a_small_box_does_not():
    near = [dict(PIPELINE[0], box=box(11, 10, 110, 91)), *PIPELINE[1:]]
    problem, _, overlap = match_detections(near, PIPELINE)
    assert problem is None and overlap < 1.0
    small = [found("cat", 0.61, (10, 10, 30, 30))]
    problem, _, _ = match_detections([found("cat", 0.61, (12, 10, 32, 30))], small)
    assert problem == "'cat' served at {'xmin': 12, 'ymin': 10, 'xmax': 32, 'ymax': 30}, the pipeline's at " \
                      "{'xmin': 10, 'ymin': 10, 'xmax': 30, 'ymax': 30} (IoU 0.818)"


def test_another_label_another_count_and_another_score_are_named():
    relabelled = [dict(PIPELINE[1], label="cat"), *PIPELINE[:1], PIPELINE[2]]
    assert match_detections(relabelled, PIPELINE)[0] == \
        "no served 'dog' for the pipeline's at {'xmin': 200, 'ymin': 40, 'xmax': 300, 'ymax': 160}"
    assert match_detections(PIPELINE[:2], PIPELINE)[0] == "2 detections, the pipeline 3"
    rescored = [dict(PIPELINE[0], score=0.6115), *PIPELINE[1:]]
    assert match_detections(rescored, PIPELINE)[0] == \
        "'cat' at {'xmin': 10, 'ymin': 10, 'xmax': 110, 'ymax': 90} scores 0.6115, the pipeline 0.6100"


def test_the_threshold_sits_in_the_widest_gap_of_the_best_scores():
    # Best six: 0.9, 0.8, 0.4, 0.39, 0.38, 0.37: the widest gap is 0.8 -> 0.4, so two detections are kept.
    assert threshold_between([0.37, 0.9, 0.4, 0.1, 0.8, 0.39, 0.38, 0.36]) == 0.6
    assert threshold_between([0.3]) == 0.15
    assert threshold_between([]) == 0.5  # the pipeline's default where it gave nothing


def test_iou_of_disjoint_and_empty_boxes():
    assert image_answers.iou(box(0, 0, 10, 10), box(20, 20, 30, 30)) == 0.0
    assert image_answers.iou(box(5, 5, 5, 5), box(5, 5, 5, 5)) == 1.0
    assert image_answers.iou(box(0, 0, 10, 10), box(5, 0, 15, 10)) == pytest.approx(1 / 3)


def test_a_detection_answer_that_is_not_json_is_named(tmp_path):
    document = {"outputs": [{"name": "detections", "data": ["not json"]}]}
    ok, said = image_answers.check_detection(document, tmp_path, tmp_path / "none.jpg", 0.5)
    assert not ok and said.startswith("the detections are not JSON: ")
    ok, said = image_answers.check_detection({"outputs": [{"name": "labels", "data": []}]}, tmp_path,
                                             tmp_path / "none.jpg", 0.5)
    assert (ok, said) == (False, "the answer has outputs labels, not one detections row")


def test_a_detr_sub_config_keeps_its_backbone_widths_and_stages():
    # RT-DETR's encoder takes its backbone's last three stages at their widths (encoder_in_channels): a tiny
    # backbone keeps both and shrinks its depth only; the timm backbone of DETR becomes transformers' ResNet with
    # the same stages.
    config = tiny_checkpoints.shrunk_config("rt_detr")
    backbone = config.backbone_config
    assert (backbone.model_type, backbone.out_features, list(backbone.hidden_sizes), list(backbone.depths)) == (
        "rt_detr_resnet", ["stage2", "stage3", "stage4"], [256, 512, 1024, 2048], [1, 1, 1, 1])
    assert (config.d_model, config.num_queries) == (32, 10)
    detr = tiny_checkpoints.shrunk_config("detr").backbone_config
    assert (detr.model_type, detr.out_features) == ("resnet", ["stage1", "stage2", "stage3", "stage4"])
    deformable = tiny_checkpoints.shrunk_config("deformable_detr").backbone_config
    assert (deformable.model_type, deformable.out_features) == ("resnet", ["stage2", "stage3", "stage4"])


def test_embedding_answers_are_judged_by_cosine(tmp_path, monkeypatch):
    # The mirrored image embeds alike too: the served answer agrees, and the check is named weak.
    monkeypatch.setattr(image_answers, "pooled", lambda folder, picture: [1.0, 2.0, 3.0])
    from PIL import Image

    image = tmp_path / "a.png"
    Image.new("RGB", (8, 8)).save(image)
    served = lambda values: {"outputs": [{"name": "image_embedding", "data": values}]}  # noqa: E731
    ok, said = image_answers.check_embedding(served([2.0, 4.0, 6.0]), tmp_path, image)
    assert ok and said.startswith("3 values, cosine 1.0000000 with the pipeline's; "
                                  + image_answers.SAME_EMBEDDING_NOTE)
    assert image_answers.check_embedding(served([3.0, 2.0, 1.0]), tmp_path, image) == (
        False, "cosine 0.714286 with the pipeline's embedding (at least 0.9999 wanted)")
    assert image_answers.check_embedding(served([1.0, 2.0]), tmp_path, image) == (
        False, "served 2 values (finite: True), the pipeline 3")
    assert json.dumps(image_answers.outputs(served([1.0]))) == '{"image_embedding": [1.0]}'
    monkeypatch.setattr(image_answers, "pooled", lambda folder, picture: [0.0, 0.0, 0.0])
    assert image_answers.check_embedding(served([0.0, 0.0, 0.0]), tmp_path, image) == (
        True, "all 3 values zero, as the pipeline's; " + image_answers.SAME_EMBEDDING_NOTE)


def test_a_command_missing_for_a_moment_is_waited_for(tmp_path, monkeypatch):
    # A reinstall of the checkout removes .venv/bin/tritonsm for seconds: the run waits instead of stopping.
    from benchmarks.tooling import run_log

    script = tmp_path / "tool"
    calls = []

    def appears(seconds):
        calls.append(seconds)
        script.write_text("#!/bin/sh\necho back\n")
        script.chmod(0o755)

    monkeypatch.setattr(run_log.time, "sleep", appears)
    status, lines = run_log.run_logged([str(script)], tmp_path / "log", tmp_path)
    assert (status, [line for _, line in lines], calls) == (0, ["back"], [run_log.MISSING_POLL_S])
    monkeypatch.setattr(run_log, "MISSING_WAIT_S", 0)
    with pytest.raises(FileNotFoundError):
        run_log.run_logged([str(tmp_path / "never")], tmp_path / "log", tmp_path)


def test_again_forgets_only_the_rows_named(tmp_path):
    import argparse

    from benchmarks.tooling import coverage_runs

    parser = argparse.ArgumentParser()
    coverage_runs.add_arguments(parser, str(tmp_path / "work"), only="", limit="", build_size="")
    args = parser.parse_args(["--out", str(tmp_path / "out")])
    progress = coverage_runs.Progress.load(args)
    progress.results = {"vit": {"outcome": "refused"}, "bit": {"outcome": "refused"}}
    progress.save()
    again = coverage_runs.Progress.load(parser.parse_args(["--out", str(tmp_path / "out"), "--again", "vit"]))
    assert (sorted(again.results), again.started) == (["bit"], progress.started)
