#!/usr/bin/env python3
"""The generation engine (model_build/python_models/generation_engine.py) against ``model.generate``, in process.

    .venv/bin/python benchmarks/generation_speed.py [--quick] [--repeats 3] [--new-tokens 64]

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
Medians over the repetitions; the engine's own timings say where its time went (prefill, decoding forward passes,
choosing tokens, text and callbacks, joining/leaving the batch, the rest of the loop).
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
    per_step = 1000 * timings.forward_s / max(timings.steps, 1)
    return (f"wall {wall:.2f} s: prefill {timings.prefill_s:.2f} s ({timings.prefills}), decode forward "
            f"{timings.forward_s:.2f} s ({timings.steps} steps, {per_step:.1f} ms each, widest {timings.widest} rows), "
            f"choose {timings.choose_s:.3f} s, text+callbacks {timings.emit_s:.3f} s, join/leave "
            f"{timings.batch_s:.3f} s, other loop {rest:.3f} s, idle {wall - timings.loop_s:.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a 4-layer, 256-wide GPT-2 instead of the 124M one")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    new, device = args.new_tokens, args.device
    model = _model(args.quick, device)
    vocab = model.config.vocab_size
    one, many = _prompts(1, vocab, device), _prompts(STREAMS, vocab, device)
    print(f"GPT-2 {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters, {device}, torch "
          f"{torch.__version__} on {torch.get_num_threads()} threads, transformers {transformers.__version__}; "
          f"{PROMPT_TOKENS}-token prompts, {new} new tokens, medians of {args.repeats}; 1-minute load average "
          f"{os.getloadavg()[0]:.2f} (other processes on the machine skew every number)")
    _generate(model, one, 2)  # warm-up: first-call allocations and kernel choices

    # (a) generate, one prompt
    first = statistics.median(_timed(lambda: _generate(model, one, 1), device) for _ in range(args.repeats))
    whole = statistics.median(_timed(lambda: _generate(model, one, new), device) for _ in range(args.repeats))
    itl_a = (whole - first) / (new - 1)
    print(f"(a) generate, 1 prompt: TTFT {1000 * first:.1f} ms, ITL {1000 * itl_a:.1f} ms, "
          f"{new / whole:.1f} tokens/s")

    engine = ge.Engine(model, _tokenizer(vocab), ge.Limits(max_new_tokens=new, default_max_new_tokens=new,
                                                           max_prompt_tokens=PROMPT_TOKENS,
                                                           max_concurrent=STREAMS),
                       "text-generation", device=device, eos_token_ids=())
    try:
        _engine_run(engine, one, 4)  # warm-up
        # (b) the engine, one stream
        ttfts, itls, rates = [], [], []
        for _ in range(args.repeats):
            engine.timings = ge.Timings()
            (clock,), wall = _engine_run(engine, one, new)
            ttfts.append(clock.arrivals[0] - clock.started)
            itls.append((clock.arrivals[-1] - clock.arrivals[0]) / (len(clock.arrivals) - 1))
            rates.append(clock.tokens / wall)
        ttft_b, itl_b, rate_b = statistics.median(ttfts), statistics.median(itls), statistics.median(rates)
        print(f"(b) engine, 1 stream: TTFT {1000 * ttft_b:.1f} ms ({ttft_b / first:.2f}x (a)), ITL "
              f"{1000 * itl_b:.1f} ms ({itl_b / itl_a:.2f}x (a); target <= 1.25x), {rate_b:.1f} tokens/s")
        print(f"    last run: {_breakdown(engine.timings, wall)}")

        # (c) generate, a batch of 16
        batch_s = statistics.median(_timed(lambda: _generate(model, many, new), device) for _ in range(args.repeats))
        rate_c = STREAMS * new / batch_s
        print(f"(c) generate, batch of {STREAMS}: {rate_c:.1f} output tokens/s ({batch_s:.2f} s)")

        # (d) the engine, 16 streams at once
        walls, firsts = [], []
        for _ in range(args.repeats):
            engine.timings = ge.Timings()
            clocks, wall = _engine_run(engine, many, new)
            assert sum(clock.tokens for clock in clocks) == STREAMS * new
            walls.append(wall)
            firsts.append(statistics.median(clock.arrivals[0] - clock.started for clock in clocks))
        wall_d = statistics.median(walls)
        rate_d = STREAMS * new / wall_d
        print(f"(d) engine, {STREAMS} streams: {rate_d:.1f} output tokens/s ({wall_d:.2f} s); {rate_d / rate_c:.2f}x "
              f"(c) (target >= 0.8x), {rate_d / rate_b:.2f}x (b) (target >= 4x); median TTFT "
              f"{1000 * statistics.median(firsts):.0f} ms")
        print(f"    last run: {_breakdown(engine.timings, wall)}")
    finally:
        engine.close()
    print(f"1-minute load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
