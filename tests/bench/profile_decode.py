"""Profile the decoding steps of the routes probe at GSM8K scale, by hand (never collected as a test).

    python tests/bench/profile_decode.py --rows 1319 --out DIR          # on a GPU (the 0.5B shape)
    python tests/bench/profile_decode.py --smoke --device cpu            # tiny, on a CPU

A random-weight model of Qwen2.5-0.5B's shape (bf16 on a GPU) decodes `--rows` prompts of GSM8K's length
under one route with a repeated layer, greedy, through `Runner.generate` (the public API, so the same script
profiles an older reachtui too: run it with that version first on the path). It prints, one plain line per
figure:

- per decoding step: wall time (from two runs of different lengths: the difference over the extra steps),
  and the GPU's busy time (the sum of CUDA kernel times / steps, from torch.profiler);
- host syncs per step (cudaStreamSynchronize / cudaEventSynchronize / cudaDeviceSynchronize / blocking
  device-to-host copies counted by the profiler), kernel launches per step;
- the top CUDA kernels by total time, and the top host operators by self CPU time.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

LINES: list[str] = []


def say(line: str = "") -> None:
    LINES.append(line)
    print(line, flush=True)


def model_and_tokenizer(smoke: bool, device: str):
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen2Config

    if smoke:
        cfg = Qwen2Config(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=6,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                          tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    else:
        cfg = Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                          num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                          rms_norm_eps=1e-6, tie_word_embeddings=True, use_sliding_window=False,
                          bos_token_id=1, eos_token_id=2, pad_token_id=0)
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    vocab.update({f"t{i}": i for i in range(4, cfg.vocab_size)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                        unk_token="<unk>")
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    return model.eval(), tokenizer


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--rows", type=int, default=1319)
    ap.add_argument("--prompt-len", type=int, default=80, help="words per prompt (GSM8K questions: ~46 words "
                                                              "plus the template)")
    ap.add_argument("--steps", type=int, default=24, help="decoding steps profiled")
    ap.add_argument("--label", default="")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    import reachtui
    from reachtui.generation import Decoding
    from reachtui.model.layers import discover
    from reachtui.model.load import LoadedModel
    from reachtui.model.run import Runner
    from reachtui.routes import Route

    rows = 8 if args.smoke else args.rows
    steps = 4 if args.smoke else args.steps
    model, tokenizer = model_and_tokenizer(args.smoke, args.device)
    lm = LoadedModel(name="qwen2-random", path=None, model=model, tokenizer=tokenizer, device=args.device,
                     dtype=str(next(model.parameters()).dtype).replace("torch.", ""), arch=discover(model))
    runner = Runner(lm)
    L = runner.num_layers
    route = Route(tuple(range(L // 2 + 1)) + (L // 2,) + tuple(range(L // 2 + 1, L)))
    rng = random.Random(0)
    prompts = [" ".join(f"t{rng.randrange(4, model.config.vocab_size)}" for _ in range(args.prompt_len))
               for _ in range(rows)]
    cuda = args.device.startswith("cuda")

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def run(n):
        sync()
        t = time.perf_counter()
        runner.generate(prompts, route=route, decoding=Decoding(max_new_tokens=n), batch_size=rows)
        sync()
        return time.perf_counter() - t

    version = getattr(reachtui, "__version__", "?")
    say(f"profile_decode {args.label}: reachtui {version} from {Path(reachtui.__file__).parent}; torch "
        f"{torch.__version__}; {rows} rows x {args.prompt_len} tokens, route {route.layers if args.smoke else len(route)}"
        f" positions of {L}, greedy, {args.device}")
    run(2)                                   # warm-up (CUDA context, kernels, allocator)
    short, long_ = 2, 2 + steps
    t_short = min(run(short) for _ in range(2))
    t_long = min(run(long_) for _ in range(2))
    per_step = (t_long - t_short) / steps
    say(f"wall per decoding step: {1e3 * per_step:.2f} ms ({t_short:.3f} s for {short} tokens, {t_long:.3f} s for "
        f"{long_}; the difference over {steps} steps)")
    stats = getattr(runner, "stats", None)
    if stats and stats.get("steps"):
        say(f"host time reading each step's tokens (eos, stop strings, bookkeeping): "
            f"{1e3 * stats['host_s'] / stats['steps']:.3f} ms per step; waiting for them "
            f"{1e3 * stats['wait_s'] / stats['steps']:.3f} ms per step ({stats['steps']} steps)")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        run(long_)
    events = prof.key_averages()
    sync_names = ("cudaStreamSynchronize", "cudaEventSynchronize", "cudaDeviceSynchronize")
    syncs = sum(e.count for e in events if e.key in sync_names)
    d2h = sum(e.count for e in events if e.key in ("cudaMemcpy",))
    launches = sum(e.count for e in events if e.key in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC",
                                                          "cudaGraphLaunch"))
    graphs = sum(e.count for e in events if e.key == "cudaGraphLaunch")
    if cuda:
        kernel_us = sum(e.self_device_time_total for e in events if e.device_type.name == "CUDA") \
            if hasattr(events[0], "self_device_time_total") else sum(e.self_cuda_time_total for e in events)
        say(f"GPU kernel time per decoding step (whole call / {long_} steps, prefill included): "
            f"{kernel_us / 1e3 / long_:.2f} ms")
    say(f"host syncs in the call: {syncs} ({syncs / long_:.1f} per step), blocking copies {d2h}; kernel launches "
        f"{launches} ({launches / long_:.0f} per step), CUDA graph launches {graphs}")
    key = "self_device_time_total" if cuda else "self_cpu_time_total"
    try:
        table = events.table(sort_by=key, row_limit=12, max_name_column_width=60)
    except Exception:  # noqa: BLE001 - older torch names the column differently
        table = events.table(sort_by="self_cuda_time_total" if cuda else "self_cpu_time_total", row_limit=12)
    say("top operators by " + ("GPU" if cuda else "CPU") + " time:")
    for line in table.splitlines():
        say("  " + line)
    if cuda:
        say("top operators by host (self CPU) time:")
        for line in events.table(sort_by="self_cpu_time_total", row_limit=10, max_name_column_width=60).splitlines():
            say("  " + line)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"profile{('_' + args.label) if args.label else ''}.txt").write_text("\n".join(LINES) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
