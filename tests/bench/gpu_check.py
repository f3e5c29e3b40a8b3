"""One-shot GPU check of the engine, by hand (never collected as a test). On a lent GPU machine:

    PYTHONPATH=. python3 tests/bench/gpu_check.py --wheels .gpu-wheels --out $OUT

and on a CPU, end to end at tiny sizes (what tests/test_gpu_check.py runs):

    python tests/bench/gpu_check.py --smoke --device cpu [--out DIR]

Nothing is downloaded. A ~0.5B-class Qwen2 (Qwen2.5-0.5B's shape: 24 layers, hidden 896, vocab 151936) is
built from a config with random weights, in bf16 on the device, with a word-level tokenizer of one token per
id (prompts are random token ids). It measures and prints, one plain line per figure:

1. identity route: `Runner.generate` vs the model's own `model.generate` (greedy, the same prompts in the
   same batches, the same max_new_tokens): time ratio (target <= 1.15) and whether the tokens agree;
2. routes (a layer skipped, a layer repeated, a block repeated) vs the identity route: time ratio, with
   the route's length / L beside it;
3. device map: the same model loaded through `load_model(device_map=...)`, half of its layers offloaded
   to the CPU (accelerate moves them in per call): identity and repeated-layer routes give the tokens of
   the model held whole on the GPU;
4. batch-size backoff on a real out-of-memory: a batch far too large for the memory left free (a ballast
   tensor holds the rest, so the check takes seconds, not minutes) halves until it fits, and completes;
5. the demo model's audit (realized, sample, routes; `--limit`, budget `--budget`) on the device in
   float32 and on the CPU, into two temporary stores: agreement of greedy attempts (realized, routes:
   identical text), of sampled attempts (CUDA and CPU random generators differ, so these are not expected
   to agree; their realized/reachable rates are), and the realized/reachable numbers of each.

Section 5 writes audit stores, which needs sqlite-utils (the GPU image lacks it): `--wheels DIR` puts every
pure-Python wheel in DIR on sys.path. Make DIR here with

    pip download --no-deps -d .gpu-wheels sqlite-utils==4.2.1 sqlite-fts4 pluggy python-dateutil six

and carry it to the device (`run(..., carry=[".gpu-wheels"])`). Without it, section 5 is skipped with a
line that says so. Every figure also goes to DIR/gpu_check.json with `--out DIR`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

LINES: list[str] = []
RESULTS: dict = {}
T0 = time.perf_counter()


def say(line: str = "") -> None:
    LINES.append(line)
    print(line, flush=True)


def elapsed() -> float:
    return time.perf_counter() - T0


# ------------------------------------------------------------------------------------------ set-up

def add_wheels(folder: str | None) -> list[str]:
    if not folder:
        return []
    d = Path(folder)
    if not d.is_dir():
        say(f"note: --wheels {folder}: no such folder (nothing added)")
        return []
    wheels = sorted(str(w) for w in d.glob("*.whl"))
    for w in wheels:
        if w not in sys.path:
            sys.path.append(w)          # after the image's own packages: they win
    return [Path(w).name for w in wheels]


def word_tokenizer(vocab_size: int):
    """One token per id: '<pad>' 0, '<s>' 1, '</s>' 2, then 't3' ... : a prompt 't17 t5 t900' is those ids."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    for i in range(4, vocab_size):
        vocab[f"t{i}"] = i
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")


def qwen2_config(smoke: bool):
    from transformers import Qwen2Config

    if smoke:
        return Qwen2Config(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=6,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                           tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    # Qwen2.5-0.5B's shape (494M parameters), random weights
    return Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                       num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                       rms_norm_eps=1e-6, tie_word_embeddings=True, use_sliding_window=False,
                       bos_token_id=1, eos_token_id=2, pad_token_id=0)


def build_loaded(cfg, device: str, dtype_name: str, tokenizer):
    import torch
    from transformers import AutoModelForCausalLM

    from reachtui.model.layers import discover
    from reachtui.model.load import LoadedModel

    torch.manual_seed(0)
    dtype = getattr(torch, dtype_name)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    model.eval()
    return LoadedModel(name="qwen2-random", path=None, model=model, tokenizer=tokenizer, device=device,
                       dtype=dtype_name, arch=discover(model))


def random_prompts(n: int, length: int, vocab: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(f"t{rng.randrange(4, vocab)}" for _ in range(length)) for _ in range(n)]


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(device: str, fn):
    sync(device)
    t = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t, out


def hf_generate(lm, prompts: list[str], batch: int, new: int) -> list[list[int]]:
    """The model's own greedy generate, batch by batch (left padding), rows cut after their first EOS."""
    import torch

    out_rows: list[list[int]] = []
    dev = lm.model.device
    with torch.inference_mode():
        for s in range(0, len(prompts), batch):
            enc = lm.tokenizer(prompts[s:s + batch], return_tensors="pt", padding=True, padding_side="left")
            enc = {k: v.to(dev) for k, v in enc.items() if k in ("input_ids", "attention_mask")}
            seq = lm.model.generate(**enc, max_new_tokens=new, do_sample=False, pad_token_id=0, eos_token_id=2)
            for row in seq[:, enc["input_ids"].shape[1]:].tolist():
                out_rows.append(row[: row.index(2) + 1] if 2 in row else row)
    return out_rows


# ------------------------------------------------------------------------------------------ sections

def section_identity(lm, args, sizes) -> None:
    from reachtui.generation import Decoding
    from reachtui.model.run import Runner

    say("")
    say("== 1. identity route: Runner.generate vs model.generate ==")
    runner = Runner(lm)
    prompts = random_prompts(sizes["n"], sizes["prompt_len"], lm.model.config.vocab_size, seed=1)
    dec = Decoding(max_new_tokens=sizes["new"])
    bs = sizes["batch"]
    # Both stop a row at EOS (id 2; with random weights one id in the vocab, rarely drawn); generate pads
    # a finished row until its batch is done, the Runner drops it: the rows are compared up to their EOS.
    warm = random_prompts(bs, sizes["prompt_len"], lm.model.config.vocab_size, seed=99)
    runner.generate(warm, decoding=Decoding(max_new_tokens=4), batch_size=bs)
    hf_generate(lm, warm, bs, 4)
    t_run, t_hf = [], []
    gens = ref = None
    for _ in range(sizes["repeats"]):
        t, gens = timed(args.device, lambda: runner.generate(prompts, decoding=dec, batch_size=bs))
        t_run.append(t)
        t, ref = timed(args.device, lambda: hf_generate(lm, prompts, bs, sizes["new"]))
        t_hf.append(t)
    got = [g.token_ids for g in gens]
    agree = sum(1 for a, b in zip(got, ref) if a == b)
    tokens = sum(len(g) for g in got)
    best_run, best_hf = min(t_run), min(t_hf)
    ratio = best_run / best_hf
    say(f"prompts {len(prompts)} x {sizes['prompt_len']} tokens, batch {bs}, greedy, max_new_tokens "
        f"{sizes['new']}, best of {sizes['repeats']}")
    say(f"identity Runner.generate: {best_run:.3f} s, {tokens / best_run:.0f} new tokens/s")
    say(f"identity model.generate:  {best_hf:.3f} s, {tokens / best_hf:.0f} new tokens/s")
    say(f"identity time ratio Runner/generate: {ratio:.3f} (target <= 1.15: {'PASS' if ratio <= 1.15 else 'FAIL'})")
    say(f"identity tokens agree: {agree}/{len(prompts)} prompts")
    RESULTS["identity"] = dict(prompts=len(prompts), prompt_len=sizes["prompt_len"], batch=bs,
                               max_new_tokens=sizes["new"], runner_s=best_run, generate_s=best_hf,
                               runner_tokens_per_s=tokens / best_run, generate_tokens_per_s=tokens / best_hf,
                               ratio=ratio, target=1.15, ratio_ok=ratio <= 1.15, tokens_agree=agree,
                               all_runner_s=t_run, all_generate_s=t_hf)
    section_routes(lm, runner, prompts, dec, bs, best_run, args, sizes)


def section_routes(lm, runner, prompts, dec, bs, t_ident, args, sizes) -> None:
    from reachtui.routes import Route, format_route

    say("")
    say("== 2. routes vs the identity route (Runner.generate, same prompts) ==")
    L = runner.num_layers
    mid, a, b = L // 2, L // 3, (2 * L) // 3
    routes = {
        "skip one layer": tuple(i for i in range(L) if i != mid),
        "repeat one layer": tuple(range(mid + 1)) + (mid,) + tuple(range(mid + 1, L)),
        "repeat a block": tuple(range(b)) + tuple(range(a, b)) + tuple(range(b, L)),
    }
    RESULTS["routes"] = []
    for name, layers in routes.items():
        route = Route(layers)
        runner.generate(prompts[:bs], route=route, decoding=dec, batch_size=bs)   # warm
        best = min(timed(args.device, lambda: runner.generate(prompts, route=route, decoding=dec,
                                                              batch_size=bs))[0]
                   for _ in range(sizes["route_repeats"]))
        ratio = best / t_ident
        say(f"route {name:<16} {format_route(route):<18} length/L {len(route)}/{L} = {len(route) / L:.3f}   "
            f"time/identity {ratio:.3f}")
        RESULTS["routes"].append(dict(name=name, route=format_route(route), length=len(route), L=L,
                                      length_ratio=len(route) / L, time_s=best, time_ratio=ratio))
    # the audit's shared-pool routes and MLP scan: all routes over the same prompts in one call, the identity
    # prefix of each route replayed from one recorded prefill (must be bit-identical to separate calls)
    plans = [(Route(layers), frozenset()) for layers in routes.values()] + [(None, frozenset({mid}))]
    t_many, many = timed(args.device, lambda: runner.generate_many(prompts, plans, decoding=dec, batch_size=bs))
    t_each, each = timed(args.device, lambda: [runner.generate(prompts, route=r, silenced=s, decoding=dec,
                                                               batch_size=bs) for r, s in plans])
    same = sum(1 for a, b in zip(many, each) for x, y in zip(a, b)
               if x.token_ids == y.token_ids and x.mean_logprob == y.mean_logprob)
    total = len(plans) * len(prompts)
    say(f"generate_many over {len(plans)} interventions: {t_many:.3f} s vs {t_each:.3f} s one call each "
        f"(ratio {t_many / t_each:.3f}); bit-identical {same}/{total}")
    RESULTS["generate_many"] = dict(interventions=len(plans), many_s=t_many, each_s=t_each,
                                    ratio=t_many / t_each, identical=same, total=total)


def section_device_map(lm, args, sizes, workdir: Path) -> None:
    import torch

    from reachtui.model.load import load_model
    from reachtui.routes import Route
    from reachtui.generation import Decoding
    from reachtui.model.run import Runner

    say("")
    say("== 3. device map: half the layers offloaded (accelerate hooks) vs the model whole on the device ==")
    try:
        import accelerate
    except ImportError:
        say("device map: SKIPPED (accelerate is not installed)")
        RESULTS["device_map"] = dict(skipped="accelerate not installed")
        return
    L = lm.arch.num_layers
    path = workdir / "qwen2-random"
    lm.model.save_pretrained(path)
    lm.tokenizer.save_pretrained(path)
    on = 0 if args.device.startswith("cuda") else "cpu"
    off = "cpu" if args.device.startswith("cuda") else "disk"
    dmap = {"model.embed_tokens": on, "model.rotary_emb": on, "model.norm": on, "lm_head": on}
    dmap.update({f"model.layers.{i}": (on if i < L // 2 else off) for i in range(L)})
    t, mapped = timed(args.device, lambda: load_model(str(path), dtype=lm.dtype, device_map=dmap,
                                                      offload_folder=str(workdir / "offload")))
    # transformers reloads a saved word-level tokenizer of a qwen2 model as Qwen2Tokenizer (another
    # pre-tokenizer): use the one the prompts were made for, the model is what is checked here
    mapped.tokenizer = lm.tokenizer
    hooked = sum(1 for m in mapped.model.modules() if "_hf_hook" in m.__dict__)
    say(f"device map loaded in {t:.1f} s: {mapped.device}, layers {L // 2}-{L - 1} on {off}, "
        f"{hooked} modules hooked (accelerate {accelerate.__version__})")
    whole, split = Runner(lm), Runner(mapped)
    prompts = random_prompts(sizes["dm_n"], 32, lm.model.config.vocab_size, seed=3)
    dec = Decoding(max_new_tokens=sizes["dm_new"])
    mid = L // 2 + 1           # an offloaded layer, repeated; and a block across the split, repeated
    routes = {"identity": None,
              "repeat offloaded layer": Route(tuple(range(mid + 1)) + (mid,) + tuple(range(mid + 1, L))),
              "repeat block across split": Route(tuple(range(L // 2 + 2)) + tuple(range(L // 2 - 2, L)))}
    RESULTS["device_map"] = dict(devices=mapped.device, hooked_modules=hooked, load_s=t, checks=[])
    all_ok = True
    for name, route in routes.items():
        tw, want = timed(args.device, lambda: whole.generate(prompts, route=route, decoding=dec, batch_size=16))
        ts, got = timed(args.device, lambda: split.generate(prompts, route=route, decoding=dec, batch_size=16))
        agree = sum(a.token_ids == b.token_ids for a, b in zip(got, want))
        all_ok &= agree == len(prompts)
        say(f"device map {name:<26} tokens agree {agree}/{len(prompts)}   time split/whole {ts / tw:.2f}")
        RESULTS["device_map"]["checks"].append(dict(route=name, agree=agree, n=len(prompts), split_s=ts,
                                                    whole_s=tw))
    RESULTS["device_map"]["all_agree"] = all_ok
    say(f"device map exact: {'PASS' if all_ok else 'FAIL'}")
    del split, mapped
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()


def section_oom(lm, args, sizes) -> None:
    import torch

    from reachtui.generation import Decoding

    from reachtui.model.run import Runner

    say("")
    say("== 4. batch-size backoff on a real out-of-memory error ==")
    runner = Runner(lm)
    n, length = sizes["oom_n"], sizes["oom_len"]
    prompts = random_prompts(n, length, lm.model.config.vocab_size, seed=4)
    sizes_tried: list[int] = []
    real = runner._generate_batch
    simulated = not args.device.startswith("cuda")

    def spy(ids, *a, **k):
        sizes_tried.append(len(ids))
        if simulated and len(ids) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(ids, *a, **k)

    runner._generate_batch = spy
    ballast = None
    if not simulated:
        torch.cuda.empty_cache()
        free, total = torch.cuda.mem_get_info()
        keep = int(args.oom_free_gib * 2**30)
        if free > keep:
            ballast = torch.empty(free - keep, dtype=torch.uint8, device=args.device)
        free_now = torch.cuda.mem_get_info()[0]
        say(f"GPU {total / 2**30:.0f} GiB; a ballast tensor leaves {free_now / 2**30:.1f} GiB free "
            f"(--oom-free-gib {args.oom_free_gib}) so that an absurd batch fails in seconds")
    else:
        say("no CUDA here: the out-of-memory error is SIMULATED (batches above 2 prompts raise "
            "torch.OutOfMemoryError); only the reporting is checked")
    suggested, why = runner.suggest_batch_size(prompts, 2, runner.num_layers)
    say(f"memory estimate for these prompts: batch size {suggested} ({why})")
    try:
        t, gens = timed(args.device, lambda: runner.generate(prompts, decoding=Decoding(max_new_tokens=2),
                                                             batch_size=n))
        ok = len(gens) == n and all(g.new_tokens >= 1 for g in gens)
        err = None
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        t, ok, err = float("nan"), False, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    finally:
        del ballast
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    halvings = sum(1 for x, y in zip(sizes_tried, sizes_tried[1:]) if y < x)
    say(f"asked batch_size {n} of {n} prompts x {length} tokens: batch sizes tried "
        f"{sorted(set(sizes_tried), reverse=True)}, final batch_size_hint {runner.batch_size_hint}")
    if err:
        say(f"backoff: FAIL ({err})")
    elif runner.batch_size_hint is None:
        say("backoff: NOT EXERCISED (the first batch fitted; lower --oom-free-gib)")
    else:
        say(f"backoff: {'PASS' if ok else 'FAIL'}: halved {halvings} time(s) to {runner.batch_size_hint}, "
            f"completed all {n} prompts in {t:.1f} s" + (" (simulated OOM)" if simulated else ""))
    RESULTS["oom"] = dict(prompts=n, prompt_len=length, asked_batch=n, tried=sizes_tried, suggested=suggested,
                          final_batch_size=runner.batch_size_hint, completed=ok, error=err, seconds=t,
                          simulated=simulated)


def section_demo_audit(args, sizes, workdir: Path) -> None:
    import torch

    say("")
    say(f"== 5. demo audit on {args.device} (float32) vs on the CPU ==")
    try:
        import sqlite_utils  # noqa: F401
    except ImportError:
        say("demo audit: SKIPPED: sqlite-utils is not importable (audit stores need it). Carry its wheels: "
            "pip download --no-deps -d .gpu-wheels sqlite-utils==4.2.1 sqlite-fts4 pluggy python-dateutil six; "
            "then pass --wheels .gpu-wheels (and carry .gpu-wheels to the device)")
        RESULTS["demo_audit"] = dict(skipped="sqlite-utils not importable")
        return
    from reachtui.engine.audit import run_audit
    from reachtui.model.load import load_model
    from reachtui.model.run import Runner
    from reachtui.protocol import Protocol, protocol_from_options
    from reachtui.store import Store
    from reachtui.tables import summary_rows as summarize
    from reachtui.tasks import load_task

    task = load_task("demo")
    protocol = protocol_from_options(Protocol(), probes="realized,sample,routes", budget=sizes["budget"])
    out = {}
    for side, device in (("device", args.device), ("cpu", "cpu")):
        lm = load_model("demo", device=device, dtype="float32")
        store = Store(workdir / f"audit-{side}.sqlite")
        # a side that runs past its limit stops (cancelled; said below): --audit-side-limit, and no later
        # than 120 s after --time-limit for both sides together
        limit = max(30.0, min(args.audit_side_limit, (args.time_limit + 120 - elapsed()) / (2 if side == "device"
                                                                                               else 1)))
        cancel = threading.Event()
        timer = threading.Timer(limit, cancel.set)
        timer.start()
        try:
            t, res = timed(device, lambda: run_audit(
                store, Runner(lm), model_name="demo", model_path=str(lm.path), model_class=lm.arch.model_class,
                task=task, protocol=protocol, limit=sizes["limit"], batch_size=64, cancel=cancel,
                versions={"device": lm.device, "dtype": lm.dtype}))
        finally:
            timer.cancel()
        rows = summarize(store, res.run_id)
        attempts = {(a["question_id"], a["probe"], a["attempt"]): a for a in store.attempts(res.run_id)}
        qids = {q["question_id"]: q["qid"] for q in store.run_questions(res.run_id)}
        out[side] = dict(seconds=t, rows=rows, attempts=attempts, qids=qids, status=res.status)
        say(f"{side} ({device}): {res.status} in {t:.1f} s, {len(attempts)} attempts, threads "
            f"{torch.get_num_threads() if device == 'cpu' else '-'}")
        del lm
    dev, cpu = out["device"], out["cpu"]

    def key(side, k):               # the task's own question id, not the store's row id
        return (side["qids"][k[0]], k[1], k[2])

    a = {key(dev, k): v for k, v in dev["attempts"].items()}
    b = {key(cpu, k): v for k, v in cpu["attempts"].items()}
    if dev["status"] != "complete" or cpu["status"] != "complete":
        say("note: a side stopped at its time limit (--audit-side-limit, --time-limit): only the attempts both "
            "sides have are compared, and the rates below are of unfinished runs")
    greedy = [k for k in a if k[1] in ("realized", "routes") and k in b]
    sampled = [k for k in a if k[1] == "sample" and k in b]
    same_g = sum(1 for k in greedy if a[k]["text"] == b[k]["text"])
    same_s = sum(1 for k in sampled if a[k]["text"] == b[k]["text"])
    ok_g = sum(1 for k in greedy if a[k]["correct"] == b[k]["correct"])
    say(f"questions {sizes['limit']}, probes realized,sample,routes, budget {sizes['budget']}")
    say(f"greedy attempts (realized, routes) identical text: {same_g}/{len(greedy)} = "
        f"{same_g / max(1, len(greedy)):.3f}; same correctness {ok_g}/{len(greedy)}")
    say(f"sampled attempts identical text: {same_s}/{len(sampled)} = {same_s / max(1, len(sampled)):.3f}"
        + (" (CUDA and CPU generators draw different numbers: agreement is not expected here; compare the "
           "sample rates below)" if args.device != "cpu" else ""))
    figures = {}
    for side in ("device", "cpu"):
        for r in out[side]["rows"]:
            if r["probe"] == "realized":
                say(f"{side:<6} realized {100 * r['realized']:.1f}% ({sizes['limit']} questions)")
            else:
                say(f"{side:<6} {r['probe']:<8} reachable {100 * r['reachable']:.1f}% (K = {r['budget']}, "
                    f"failure set {r['failure']})")
            figures.setdefault(side, {})[r["probe"]] = dict(realized=r["realized"], reachable=r["reachable"],
                                                            failure=r["failure"])
    RESULTS["demo_audit"] = dict(device=args.device, limit=sizes["limit"], budget=sizes["budget"],
                                 device_s=dev["seconds"], cpu_s=cpu["seconds"], device_status=dev["status"],
                                 cpu_status=cpu["status"], greedy_n=len(greedy),
                                 greedy_identical=same_g, greedy_same_correct=ok_g, sampled_n=len(sampled),
                                 sampled_identical=same_s, figures=figures)


# ------------------------------------------------------------------------------------------ main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu (with --smoke)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: the whole script in seconds on a CPU")
    ap.add_argument("--out", default=None, help="write gpu_check.json (and gpu_check.txt) into this folder")
    ap.add_argument("--wheels", default=None, help="a folder of pure-Python wheels to import from (sqlite-utils)")
    ap.add_argument("--skip", default="", help="comma list of sections to skip: identity,device_map,oom,audit")
    ap.add_argument("--limit", type=int, default=None, help="demo audit: questions [default 128; smoke 6]")
    ap.add_argument("--budget", type=int, default=None, help="demo audit: K per probe [default 4; smoke 2]")
    ap.add_argument("--oom-free-gib", type=float, default=16.0,
                    help="GPU memory left free by the ballast in the out-of-memory check")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch CPU threads [default: 1 with --smoke (a shared CPU), else torch's own]")
    ap.add_argument("--audit-side-limit", type=float, default=150.0,
                    help="seconds: each side of the demo audit stops (cancelled, compared as far as it got) after this")
    ap.add_argument("--time-limit", type=float, default=360.0,
                    help="seconds: sections that would start after this are skipped (said so); the demo audit "
                         "stops 120 s after it at the latest")
    args = ap.parse_args()
    added = add_wheels(args.wheels)

    import torch
    import transformers

    from reachtui.model.load import quiet_transformers

    quiet_transformers()
    threads = args.threads or (1 if args.smoke else None)
    if threads:
        torch.set_num_threads(threads)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        say("error: --device cuda but CUDA is not available (use --smoke --device cpu on a CPU)")
        return 2
    smoke = args.smoke
    sizes = dict(n=256, prompt_len=128, new=64, batch=64, repeats=2, route_repeats=1, dm_n=16, dm_new=16,
                 oom_n=1024, oom_len=1024, limit=128, budget=4)
    if smoke:
        sizes = dict(n=8, prompt_len=12, new=6, batch=4, repeats=1, route_repeats=1, dm_n=4, dm_new=5,
                     oom_n=6, oom_len=8, limit=6, budget=2)
    if args.limit:
        sizes["limit"] = args.limit
    if args.budget:
        sizes["budget"] = args.budget
    try:
        import accelerate

        acc = accelerate.__version__
    except ImportError:
        acc = None
    gpu = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "none"
    say(f"gpu_check: device {args.device} ({gpu}); python {sys.version.split()[0]}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}, accelerate {acc}; {'smoke sizes' if smoke else 'full sizes'}"
        + (f"; wheels added: {', '.join(added)}" if added else ""))
    RESULTS["env"] = dict(device=args.device, gpu=gpu, python=sys.version.split()[0], torch=torch.__version__,
                          transformers=transformers.__version__, accelerate=acc, smoke=smoke, sizes=sizes)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gpu_check-") as tmp:
        workdir = Path(tmp)
        lm = None
        if not {"identity", "device_map", "oom"} <= skip:
            cfg = qwen2_config(smoke)
            t, tok = timed("cpu", lambda: word_tokenizer(cfg.vocab_size))
            dtype = "bfloat16" if args.device.startswith("cuda") else "float32"
            t2, lm = timed(args.device, lambda: build_loaded(cfg, args.device, dtype, tok))
            params = sum(p.numel() for p in lm.model.parameters())
            say(f"model: Qwen2 random weights, {cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}, vocab "
                f"{cfg.vocab_size}, {params / 1e6:.1f}M parameters, {dtype} on {args.device} "
                f"(tokenizer {t:.1f} s, model {t2:.1f} s)")
            RESULTS["model"] = dict(layers=cfg.num_hidden_layers, hidden=cfg.hidden_size, vocab=cfg.vocab_size,
                                    params=params, dtype=dtype)
        sections = [("identity", lambda: section_identity(lm, args, sizes)),
                    ("device_map", lambda: section_device_map(lm, args, sizes, workdir)),
                    ("oom", lambda: section_oom(lm, args, sizes)),
                    ("audit", lambda: section_demo_audit(args, sizes, workdir))]
        for name, fn in sections:
            if name in skip:
                say("")
                say(f"== {name}: SKIPPED (--skip) ==")
                continue
            if elapsed() > args.time_limit:
                say("")
                say(f"== {name}: SKIPPED (past --time-limit {args.time_limit:.0f} s at {elapsed():.0f} s) ==")
                RESULTS.setdefault("skipped", []).append(name)
                continue
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - one section failing must not lose the others' figures
                failures.append(name)
                say(f"{name}: ERROR {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
                traceback.print_exc()
                RESULTS.setdefault("errors", {})[name] = f"{type(exc).__name__}: {exc}"
            say(f"[{elapsed():.0f} s elapsed]")
    RESULTS["seconds"] = elapsed()
    say("")
    say(f"gpu_check done in {elapsed():.0f} s" + (f"; sections with errors: {', '.join(failures)}" if failures else ""))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "gpu_check.json").write_text(json.dumps(RESULTS, indent=1, default=str) + "\n")
        (out / "gpu_check.txt").write_text("\n".join(LINES) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
