"""What every artifact is verified on (cases.plan) and how a candidate is judged (verify.judge), on fixed data."""
import numpy as np
import pytest
import torch

from deployment_spec.sections.model import Backend, DynamicBatching, ModelSpec, Source, Tolerance
from deployment_spec.facts.serving_runtimes import runtime
from model_build.errors import BuildError
from model_build.recipes import ExportableModel
from model_build.verification import cases, verify

TEXT = ("input_ids", "attention_mask")


def _text_model(max_batch: int = 4, preferred=(2,)) -> ModelSpec:
    return ModelSpec(backend=Backend.ONNXRUNTIME, source=Source(recipe="tiny-bert"), max_batch_size=max_batch,
                     dynamic_batching=DynamicBatching(preferred_batch_sizes=preferred), name="m")


def _made(seq: int = 32) -> ExportableModel:
    def sample(batch, seed):
        gen = torch.Generator().manual_seed(seed)
        return {"input_ids": torch.randint(5, 100, (batch, seq), generator=gen),
                "attention_mask": torch.ones(batch, seq, dtype=torch.int64)}
    axes = {"input_ids": {0: "b", 1: "s"}, "attention_mask": {0: "b", 1: "s"}, "logits": {0: "b"}}
    return ExportableModel(torch.nn.Identity(), sample(1, 0), TEXT, ("logits",), axes, sample)


def test_plan_covers_batch_sizes_lengths_padding_and_the_two_mask_checks():
    plan = cases.plan(_made(), _text_model())
    # 1, the preferred size and max_batch_size; full and short length; then the two derived checks.
    assert [c.name for c in plan.cases] == [
        "batch 1 x 32 tokens", "batch 1 x 16 tokens", "batch 2 x 32 tokens", "batch 2 x 16 tokens",
        "batch 4 x 32 tokens", "batch 4 x 16 tokens", "batch 4 x 32 tokens, masked tokens changed",
        "row 0 of batch 4 x 32 tokens alone, 16 tokens", "row 2 of batch 4 x 32 tokens alone, 4 tokens"]
    widest = plan.cases[4]
    # Rows padded to half, full, an eighth, half: the mask says so row by row.
    assert widest.lengths == (16, 32, 4, 16)
    assert widest.inputs["attention_mask"].sum(1).tolist() == [16, 32, 4, 16]
    changed = plan.cases[6].inputs["input_ids"]
    hidden = widest.inputs["attention_mask"] == 0
    # Only ids under a 0 of the mask change; the visible ones stay.
    assert torch.equal(changed[~hidden], widest.inputs["input_ids"][~hidden])
    assert not torch.equal(changed[hidden], widest.inputs["input_ids"][hidden])
    assert [(i.what, i.rows, i.lengths) for i in plan.invariances] == [
        ("masked tokens changed", (0, 1, 2, 3), (16, 32, 4, 16)),
        ("padded vs unpadded", (0,), (16,)), ("padded vs unpadded", (2,), (4,))]


def test_plan_without_a_mask_varies_the_batch_only():
    made = ExportableModel(torch.nn.Identity(), {"x": torch.zeros(2, 3)}, ("x",), ("y",), {"x": {0: "b"}},
                           lambda batch, seed: {"x": torch.zeros(batch, 3)})
    plan = cases.plan(made, ModelSpec(backend=Backend.ONNXRUNTIME, source=Source(recipe="x:y"), max_batch_size=8,
                                      name="v"))
    assert [c.name for c in plan.cases] == ["batch 1", "batch 8"] and plan.invariances == ()


def _outputs(plan, value):
    return {c.name: [np.full((len(next(iter(c.inputs.values()))), 2), value, dtype=np.float32)]
            for c in plan.cases}


def test_judge_names_a_graph_that_ignores_the_mask():
    plan = cases.plan(_made(), _text_model())
    want = _outputs(plan, 0.5)
    got = _outputs(plan, 0.5)
    got["batch 4 x 32 tokens, masked tokens changed"][0][0, 1] += 0.04
    verdict = verify.judge("fused", got, want, plan, ("logits",), Tolerance(atol=0.1, rtol=0.0))
    # Within the eager tolerance, yet the runtime contradicts itself: the mask check catches it.
    assert [str(p) for p in verdict.problems] == [
        "ignores the attention mask (changing only the token ids at masked positions moves logits by 0.04)"]


def test_judge_names_a_padded_row_that_differs_from_the_same_row_unpadded():
    plan = cases.plan(_made(), _text_model())
    want, got = _outputs(plan, 0.5), _outputs(plan, 0.5)
    got["row 2 of batch 4 x 32 tokens alone, 4 tokens"][0][0, 0] = 0.51
    verdict = verify.judge("fused", got, want, plan, ("logits",), Tolerance())
    assert [p.reason for p in verdict.problems] == [
        "gives a padded row another answer than the same row unpadded", "differs from eager PyTorch beyond the tolerance"]
    assert str(verdict.problems[1]) == ("differs from eager PyTorch beyond the tolerance (case row 2 of batch 4 x 32 "
                                        "tokens alone, 4 tokens: logits off by 0.01, max rel 0.02)")


def test_judge_turns_a_runtime_failure_into_a_finding():
    plan = cases.plan(_made(), _text_model())
    verdict = verify.judge("fused", "load failed: Fail: [ONNXRuntimeError] bad opset", {}, plan, ("logits",),
                           Tolerance())
    assert [str(p) for p in verdict.problems] == ["does not load (Fail: [ONNXRuntimeError] bad opset)"]


def test_choose_ships_the_first_candidate_that_verified_and_says_why_the_others_were_not():
    lines = []
    bad = verify.Verdict("transformer-fused graph", (verify.Finding("ignores the attention mask", "by 0.04"),))
    good = verify.Verdict("graph with basic optimizations", ())
    found = [verify.Candidate(v.label, None) for v in (bad, good)]
    chosen = verify.choose("bert", runtime("25.04"), "ONNX Runtime 1.21.0", [bad, good], found, Tolerance(),
                           lines.append)
    assert chosen.label == "graph with basic optimizations"
    assert lines == ["  bert: the transformer-fused graph is wrong in ONNX Runtime 1.21.0: it ignores the attention "
                     "mask (by 0.04); shipping the graph with basic optimizations instead, which verifies"]


def test_choose_fails_the_build_when_no_candidate_verifies():
    bad = verify.Verdict("graph as exported", (verify.Finding("fails to run", "case batch 1: boom"),))
    with pytest.raises(BuildError) as caught:
        verify.choose("bert", runtime("24.09"), "ONNX Runtime 1.19.2", [bad], [verify.Candidate(bad.label, None)],
                      Tolerance(), lambda line: None)
    assert str(caught.value) == (
        "model bert: no graph of it serves the eager PyTorch answers in ONNX Runtime 1.19.2 (the runtime of Triton "
        "24.09; atol 0.001, rtol 0.001): the graph as exported fails to run (case batch 1: boom). If even the graph "
        "as exported differs, the export froze a data-dependent branch or a shape: serve the model with "
        "models.bert.backend: pytorch (the build traces it with torch.jit.trace and checks the trace on the same "
        "serving cases; a model that does not trace is refused there with the tracer's error), or change the "
        "recipe's forward(); else pick a triton_version whose runtime runs it. Raise models.bert.tolerance only if "
        "you accept the measured difference as the model's answer")


def test_a_token_budget_tries_every_batch_size_and_both_lengths_each_on_its_own():
    # The TorchScript check's plan: batches above 64 tokens at the full length (32) run short only,
    # and a batch of 3 padded rows runs at the full length; the mask checks run at both lengths.
    plan = cases.plan(_made(), _text_model(max_batch=8, preferred=(4,)), full_length_tokens=64)
    assert [c.name for c in plan.cases] == [
        "batch 1 x 32 tokens", "batch 1 x 16 tokens", "batch 4 x 16 tokens", "batch 8 x 16 tokens",
        "batch 3 x 32 tokens", "batch 8 x 16 tokens, masked tokens changed",
        "row 0 of batch 8 x 16 tokens alone, 8 tokens", "row 2 of batch 8 x 16 tokens alone, 2 tokens",
        "batch 3 x 32 tokens, masked tokens changed", "row 0 of batch 3 x 32 tokens alone, 16 tokens",
        "row 2 of batch 3 x 32 tokens alone, 4 tokens"]
    assert plan.cases[4].lengths == (16, 32, 4)
    assert [(i.what, i.base) for i in plan.invariances] == [
        ("masked tokens changed", "batch 8 x 16 tokens"), ("padded vs unpadded", "batch 8 x 16 tokens"),
        ("padded vs unpadded", "batch 8 x 16 tokens"), ("masked tokens changed", "batch 3 x 32 tokens"),
        ("padded vs unpadded", "batch 3 x 32 tokens"), ("padded vs unpadded", "batch 3 x 32 tokens")]
    # Within the budget nothing changes: the plan is the serving check's.
    assert [c.name for c in cases.plan(_made(), _text_model(), full_length_tokens=4 * 32).cases] == [
        c.name for c in cases.plan(_made(), _text_model()).cases]
