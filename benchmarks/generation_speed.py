#!/usr/bin/env python3
"""The generation engine (model_build/python_models/generation_engine.py) against ``model.generate``, in process.

    .venv/bin/python benchmarks/generation_speed.py [--quick] [--repeats 3] [--new-tokens 64]

On a machine other jobs load, run it with OMP_WAIT_POLICY=PASSIVE: OpenMP workers that spin while other processes
want the cores make every forward pass several times slower (ITL 360 ms instead of 57 ms at load 6 on 2 cores).

GPT-2's 124M configuration (transformers' GPT2Config() defaults) with random weights (seed 0), fp32, on this
machine's CPU or GPU; every run generates exactly ``--new-tokens`` tokens (EOS is taken away from the model's
generation config and from the engine). Prompts are random token ids (32 tokens; no hub access, so no GPT-2
tokenizer: a word-level tokenizer over the same 50,257 ids decodes the engine's text, one word per token).

(a) ``generate`` with its cache, one prompt: time to first token (generating 1 token) and mean inter-token latency
    ((time for N tokens - time for 1) / (N - 1)).
(b) the engine, one stream: time to first text and mean gap between texts; ratio to (a) (target at most 1.25).
(c) ``generate`` on a batch of 16 prompts: output tokens per second.
(d) the engine, 16 streams submitted together: output tokens per second; ratio to (c) (target at least 0.8) and to
    (b)'s one-stream tokens per second (target at least 4).
OpenMP (torch's CPU threads) gives every thread that runs a parallel region a pool of workers for the thread's
lifetime, and libgomp, once it counts more pooled threads than CPUs, makes workers sleep between regions instead of
spinning: a GPT-2 prefill then pays ~400 futex wake-ups (+60 ms at low load on 2 cores). Served, the engine's
scheduler is the only thread running the model; so here too: the main thread never runs a parallel region,
``generate`` runs on a short-lived thread while no engine exists, and each engine lives for one repeat.
(a) and (b) take turns repeat by repeat, and so do (c) and (d), so that load from other processes hits both alike;
each ratio is the median of the per-repeat ratios. Medians over the repetitions; the engine's own timings say where
its time went (prefill passes and the prompts they took, decoding forward passes, choosing tokens, text and
callbacks, joining/leaving the batch, the rest of the loop). Where (d) stays under 4x (b), the engine's decoding
steps say why: what a step of 16 rows costs against a step of one row bounds the gain of batching on this device,
and ``generate``'s own gain ((c) against (a)) is printed beside it.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import threading
import time
from typing import Any, Callable

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")

import torch  # noqa: E402
import transformers  # noqa: E402

from model_build.python_models import generation_engine as ge  # noqa: E402

PROMPT_TOKENS = 32
STREAMS = 16


def _model(quick: bool, device: str) -> Any:
    config = transformers.GPT2Config() if not quick else transformers.GPT2Config(n_layer=4, n_embd=256, n_head=4)
    torch.manual_seed(0)
    model: Any = transformers.GPT2LMHeadModel(config)
    model = model.to(device).eval()
    model.generation_config.eos_token_id = None  # exactly max_new_tokens every time
    model.generation_config.pad_token_id = 0
    return model


def _tokenizer(vocab: int) -> Any:
    """One word per id ("▁w17" decodes to " w17"): text of the engine's tokens without GPT-2's own files."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    words = {f"\u2581w{i}": i for i in range(vocab)}
    tok = Tokenizer(models.WordLevel(words, unk_token="\u2581w0"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    fast: Any = transformers.PreTrainedTokenizerFast
    return fast(tokenizer_object=tok)


def _prompts(count: int, vocab: int, device: str) -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    return torch.randint(0, vocab, (count, PROMPT_TOKENS), generator=generator).to(device)


def _timed(run: Callable[[], Any], device: str) -> float:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    started = time.perf_counter()
    run()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - started


def _generate(model: Any, prompts: torch.Tensor, new: int) -> None:
    with torch.inference_mode():
        model.generate(prompts, attention_mask=torch.ones_like(prompts), do_sample=False, max_new_tokens=new,
                       min_new_tokens=new)


class _Clock:
    """When each text piece of one stream arrived."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.arrivals: list[float] = []
        self.tokens = 0
        self.done = threading.Event()

    def text(self, _piece: str) -> None:
        self.arrivals.append(time.perf_counter())

    def token(self, _token: int) -> None:
        self.tokens += 1

    def finished(self, _reason: Any, _usage: dict[str, Any]) -> None:
        self.done.set()


def _off_main(run: Callable[[], Any]) -> Any:
    """``run()`` on a thread of its own that ends with it, taking its OpenMP pool along (see the docstring)."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(run()))
    thread.start()
    thread.join()
    return out[0]


def _generate_times(model: Any, prompts: torch.Tensor, news: tuple[int, ...], device: str) -> list[float]:
    """Seconds of generate for each count of new tokens, after a warm-up, on a short-lived thread."""
    def run() -> list[float]:
        _generate(model, prompts, 2)  # warm-up: this thread's first allocations and its OpenMP pool
        return [_timed(lambda: _generate(model, prompts, new), device) for new in news]

    return list(_off_main(run))


def _engine(model: Any, tokenizer: Any, new: int, device: str) -> Any:
    engine = ge.Engine(model, tokenizer, ge.Limits(max_new_tokens=new, default_max_new_tokens=new,
                                                   max_prompt_tokens=PROMPT_TOKENS, max_concurrent=STREAMS),
                       "text-generation", device=device, eos_token_ids=())
    _engine_run(engine, _prompts(1, model.config.vocab_size, device), 4)  # warm-up
    engine.timings = ge.Timings()
    return engine


def _engine_run(engine: Any, prompts: torch.Tensor, new: int) -> tuple[list[_Clock], float]:
    settings = ge.Settings(max_new_tokens=new)
    clocks = [_Clock() for _ in range(prompts.shape[0])]
    started = time.perf_counter()
    for clock, prompt in zip(clocks, prompts.tolist()):
        clock.started = time.perf_counter()
        engine.submit(prompt, settings, clock.text, clock.finished, lambda: False, on_token=clock.token)
    for clock in clocks:
        clock.done.wait()
    wall = time.perf_counter() - started
    time.sleep(0.05)  # on_done runs inside the scheduler's last loop; let it add that loop to its timings
    return clocks, wall


def _breakdown(timings: Any, wall: float) -> str:
    rest = timings.loop_s - timings.prefill_s - timings.forward_s - timings.choose_s - timings.emit_s - timings.batch_s
    return (f"wall {wall:.2f} s: prefill {timings.prefill_s:.2f} s ({timings.prefill_rows} prompts in "
            f"{timings.prefills} passes), decode forward {timings.forward_s:.2f} s ({timings.steps} steps, "
            f"{1000 * _step_s(timings):.1f} ms each, widest {timings.widest} rows), choose {timings.choose_s:.3f} s, "
            f"text+callbacks {timings.emit_s:.3f} s, join/leave {timings.batch_s:.3f} s, other loop {rest:.3f} s, "
            f"idle {wall - timings.loop_s:.3f} s")


def _step_s(timings: Any) -> float:
    return float(timings.forward_s / max(timings.steps, 1))


def _one_stream(model: Any, tokenizer: Any, new: int, repeats: int, device: str) -> dict[str, Any]:
    """(a) and (b), taking turns: TTFT and ITL of generate and of one engine stream, with per-repeat ratios."""
    one = _prompts(1, model.config.vocab_size, device)
    rows: list[dict[str, float]] = []
    for _ in range(repeats):
        first, whole = _generate_times(model, one, (1, new), device)
        engine = _engine(model, tokenizer, new, device)
        try:
            (clock,), wall = _engine_run(engine, one, new)
        finally:
            engine.close()
        rows.append(dict(ttft_a=first, itl_a=(whole - first) / (new - 1), rate_a=new / whole,
                         ttft_b=clock.arrivals[0] - clock.started,
                         itl_b=(clock.arrivals[-1] - clock.arrivals[0]) / (len(clock.arrivals) - 1),
                         rate_b=clock.tokens / wall, step_b=_step_s(engine.timings)))
    out: dict[str, Any] = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
    out["ttft_ratio"] = statistics.median(row["ttft_b"] / row["ttft_a"] for row in rows)
    out["itl_ratio"] = statistics.median(row["itl_b"] / row["itl_a"] for row in rows)
    out["breakdown"] = _breakdown(engine.timings, wall)
    return out


def _many_streams(model: Any, tokenizer: Any, new: int, repeats: int, device: str) -> dict[str, Any]:
    """(c) and (d), taking turns: generate's batch of 16 and 16 engine streams, output tokens per second."""
    many = _prompts(STREAMS, model.config.vocab_size, device)
    rows: list[dict[str, float]] = []
    for _ in range(repeats):
        (batch_s,) = _generate_times(model, many, (new,), device)
        engine = _engine(model, tokenizer, new, device)
        try:
            clocks, wall = _engine_run(engine, many, new)
        finally:
            engine.close()
        assert sum(clock.tokens for clock in clocks) == STREAMS * new
        rows.append(dict(rate_c=STREAMS * new / batch_s, rate_d=STREAMS * new / wall,
                         ttft_d=statistics.median(clock.arrivals[0] - clock.started for clock in clocks),
                         step_d=_step_s(engine.timings)))
    out: dict[str, Any] = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
    out["rate_ratio"] = statistics.median(row["rate_d"] / row["rate_c"] for row in rows)
    out["breakdown"] = _breakdown(engine.timings, wall)
    out["widest"] = engine.timings.widest
    return out


def _verdict(one: dict[str, Any], many: dict[str, Any]) -> list[str]:
    """Which of issue #59's targets this run meets, and for (3) the bound this device puts on it."""
    scaling = many["rate_d"] / one["rate_b"]
    lines = [f"targets: (1) TTFT {one['ttft_ratio']:.2f}x and ITL {one['itl_ratio']:.2f}x (a) <= 1.25x: "
             f"{'met' if max(one['ttft_ratio'], one['itl_ratio']) <= 1.25 else 'NOT met'}; (2) 16 streams "
             f"{many['rate_ratio']:.2f}x (c) >= 0.8x: {'met' if many['rate_ratio'] >= 0.8 else 'NOT met'}; "
             f"(3) {scaling:.2f}x one stream >= 4x: {'met' if scaling >= 4 else 'NOT met'}"]
    if scaling < 4:
        cost = many["step_d"] / one["step_b"]
        lines.append(f"    why (3) is out of reach here: a decoding step of {many['widest']} rows costs "
                     f"{1000 * many['step_d']:.1f} ms against {1000 * one['step_b']:.1f} ms for one row ({cost:.1f}x), "
                     f"so batching can give at most {STREAMS / cost:.1f}x one stream's tokens/s on this device (the "
                     f"forward pass is compute-bound, not weight-read-bound as on a GPU); generate itself gets "
                     f"{many['rate_c'] / one['rate_a']:.2f}x (batch of {STREAMS} against one prompt)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a 4-layer, 256-wide GPT-2 instead of the 124M one")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    new, device = args.new_tokens, args.device
    model = _off_main(lambda: _model(args.quick, device))
    tokenizer = _tokenizer(model.config.vocab_size)
    print(f"GPT-2 {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters, {device}, torch "
          f"{torch.__version__} on {torch.get_num_threads()} threads, transformers {transformers.__version__}; "
          f"{PROMPT_TOKENS}-token prompts, {new} new tokens, medians of {args.repeats}; 1-minute load average "
          f"{os.getloadavg()[0]:.2f} (other processes on the machine skew every number)")
    a = _one_stream(model, tokenizer, new, args.repeats, device)
    print(f"(a) generate, 1 prompt: TTFT {1000 * a['ttft_a']:.1f} ms, ITL {1000 * a['itl_a']:.1f} ms, "
          f"{a['rate_a']:.1f} tokens/s")
    print(f"(b) engine, 1 stream: TTFT {1000 * a['ttft_b']:.1f} ms ({a['ttft_ratio']:.2f}x (a)), ITL "
          f"{1000 * a['itl_b']:.1f} ms ({a['itl_ratio']:.2f}x (a); target <= 1.25x), {a['rate_b']:.1f} tokens/s")
    print(f"    last run: {a['breakdown']}")
    c = _many_streams(model, tokenizer, new, args.repeats, device)
    print(f"(c) generate, batch of {STREAMS}: {c['rate_c']:.1f} output tokens/s")
    print(f"(d) engine, {STREAMS} streams: {c['rate_d']:.1f} output tokens/s; {c['rate_ratio']:.2f}x (c) (target "
          f">= 0.8x), {c['rate_d'] / a['rate_b']:.2f}x (b) (target >= 4x); median TTFT {1000 * c['ttft_d']:.0f} ms")
    print(f"    last run: {c['breakdown']}")
    print("\n".join(_verdict(a, c)))
    print(f"1-minute load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
