"""`tritonsm bench runtime` on a tiny model: JSON, markdown and PNG; no timing assertions."""
import json

from tritonsm.cli import main


def test_runtime_smoke_writes_json_markdown_and_png(tiny_spec, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["bench", "--spec", str(tiny_spec.path), "runtime", "tiny-text", "--batch-sizes", "1,2,64",
                 "--block-seconds", "0.02", "--build-ort", "--out", str(out), "--work", str(tmp_path / "work")])
    assert code == 0
    result = json.loads((out / "runtime.json").read_text())
    (model,) = result["models"]
    # precision: int8 in the spec adds the int8 engine; 64 is above max_batch_size 8 and skipped.
    engines = ("pytorch-eager", "onnxruntime-fp32", "onnxruntime-fp32-build-ort", "onnxruntime-int8")
    assert {(c["engine"], c["batch"]) for c in model["cells"]} == {(e, b) for e in engines for b in (1, 2)}
    # The file timed is the one the build ships for Triton 25.04, run in that image's ONNX Runtime.
    assert result["serving"] == {"triton_version": "25.04", "onnxruntime": "1.21.0"}
    assert model["shipped_graph"] in ("transformer-fused graph", "graph with basic optimizations")
    assert all(c["calls"] >= 5 and c["median_ms"] > 0 and c["peak_rss_mib"] > 0 for c in model["cells"])
    assert model["optimize"]["fused_ops"]["Attention"] == 2
    assert model["agreement"]["onnxruntime-int8"]["rows"] == 3  # batch 1 + batch 2
    assert result["settings"]["threads"] >= 1
    table = (out / "runtime.md").read_text()
    assert ("| model | engine | batch | median ms | p50 ms | p99 ms | samples/s | speedup vs eager | paired speedup "
            "| quieter-half speedup | load (1 min) | peak RSS MiB |") in table
    # The machine's load is recorded with every timed block, and the quieter half of the repeats gives a ratio.
    assert all(len(c["block_loads"]) == len(c["block_means_ms"]) == result["settings"]["repeats"]
               and c["quieter_half_speedup"] > 0 for c in model["cells"])
    assert table in capsys.readouterr().out
    assert (out / "runtime.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fewer_than_five_repeats_is_a_user_error(tiny_spec, capsys):
    assert main(["bench", "--spec", str(tiny_spec.path), "runtime", "--repeats", "3"]) == 2
    assert capsys.readouterr().err == ("error: --repeats 3: medians need at least 5 repeats; use --repeats 5 "
                                       "or more\n")


def test_a_model_without_an_exportable_recipe_is_refused(tiny_spec, capsys):
    assert main(["bench", "--spec", str(tiny_spec.path), "runtime", "tiny-proc"]) == 2
    assert capsys.readouterr().err == (f"error: cannot compare tiny-proc: bench runtime takes models of "
                                       f"{tiny_spec.path} built from a built-in exportable recipe "
                                       "(tiny-vision, tiny-text)\n")
