"""One-shot GPU check of the engine, by hand (never collected as a test). On a lent GPU machine, as one
command (a folder `.gpu-wheels` carried to the device, holding reachtui's own wheel and the wheels the image
lacks; a copy of ../shared/data/gsm8k/test.jsonl carried in `.gpu-data`; the script copied outside the
checkout, so that the installed reachtui is imported):

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu-wheels/*.whl
    cp tests/bench/gpu_check.py /tmp/ && PYTHONPATH=/tmp/site python3 /tmp/gpu_check.py \
        --gsm8k .gpu-data/gsm8k.jsonl --out $OUT

Make `.gpu-wheels` here with `pip wheel --no-deps --no-build-isolation -w .gpu-wheels .` and
`pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --platform
manylinux_2_17_x86_64 -d .gpu-wheels sqlite-utils sqlite-fts4 click-default-group platformdirs math-verify
latex2sympy2_extended antlr4-python3-runtime==4.13.2` (with the versions of pyproject.toml). On a CPU, end
to end at tiny sizes (what tests/test_gpu_check.py runs):

    python tests/bench/gpu_check.py --smoke --device cpu [--out DIR]

Nothing is downloaded. A ~0.5B-class Qwen2 (Qwen2.5-0.5B's shape: 24 layers, hidden 896, vocab 151936) is
built from a config with random weights, in bf16 on the device, with a word-level tokenizer. Sections, one
plain line per figure (`--only`/`--skip` pick them; a section that would start after `--time-limit` seconds
is skipped and said so, so that the whole runs in about 6 minutes):

6. exact: captured decoding steps against eager ones, a growing cache, full recomputation and the model's
   own generate (float32 on the device); a mixture-of-experts model falls back to eager steps, said once;
7. live: a live run as the app makes one on a 7B shape (Qwen2.5-7B's config): one question, an edited
   route, 48 new tokens; each call's time, captured and eager;
8. gsm8k: the GSM8K test questions (`--gsm8k`, else synthetic prompts of their length), 256 new tokens:
   realized, routes K = 32 and sample K = 32 through the audit engine (each probe stopped after
   `--probe-limit` seconds, its rate then projecting the whole phase), the model's own generate on the same
   prompts in one batch, attempts/s, new tokens/s, the GPU's utilization (nvidia-smi) and the roofline;
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
   identical text), of sampled attempts, and the realized/reachable numbers of each.

Every figure also goes to DIR/gpu_check.json with `--out DIR` (written after each section).
`tests/bench/gpu_results_h200.md` keeps what it printed on an H200.
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


def lacks(module: str, section: str, line: str) -> bool:
    """True (the section is skipped, said and recorded) when `module` cannot be imported here."""
    import importlib

    try:
        importlib.import_module(module)
        return False
    except ImportError:
        say(f"{section}: SKIPPED ({line})")
        RESULTS[section.replace(" ", "_")] = dict(skipped=f"{module} not importable")
        return True


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
    if lacks("accelerate", "device map", "accelerate is not installed"):
        return
    import accelerate
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
    if lacks("sqlite_utils", "demo audit",
             "sqlite-utils is not importable: audit stores need it. Carry its wheels: pip download --no-deps -d "
             ".gpu-wheels sqlite-utils==4.2.1 sqlite-fts4 pluggy python-dateutil six; then pass --wheels "
             ".gpu-wheels (and carry .gpu-wheels to the device)"):
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



# ------------------------------------------------------------------------------------------ GPU engine

class GpuMeter:
    """nvidia-smi sampled in the background (every 500 ms): the GPU's utilization and memory between two
    marks. Nothing when nvidia-smi is not there (a CPU)."""

    def __init__(self, workdir: Path) -> None:
        import shutil
        import subprocess

        self.path = workdir / "smi.csv"
        self.proc = None
        if shutil.which("nvidia-smi"):
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=timestamp,utilization.gpu,memory.used", "--format=csv,noheader,nounits",
                 "-lms", "500"], stdout=open(self.path, "w"), stderr=subprocess.DEVNULL)

    def samples(self) -> list[tuple[float, float, float]]:
        from datetime import datetime

        out = []
        if not self.path.exists():
            return out
        for line in self.path.read_text().splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 3:
                continue
            try:
                t = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                out.append((t, float(parts[1]), float(parts[2])))
            except ValueError:
                continue
        return out

    def between(self, t0: float, t1: float) -> dict | None:
        """Mean and share of samples >= 80% utilization, and peak memory (MiB), between wall times t0, t1."""
        xs = [(u, m) for t, u, m in self.samples() if t0 <= t <= t1]
        if not xs:
            return None
        return dict(util_mean=sum(u for u, _ in xs) / len(xs), util_ge80=sum(u >= 80 for u, _ in xs) / len(xs),
                    mem_peak_mib=max(m for _, m in xs), samples=len(xs))

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()


def word_tokenizer_for(texts: list[str], vocab_size: int):
    """A word-level tokenizer (whitespace split) holding every word of `texts`, filled up to vocab_size."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    for text in texts:
        for w in text.split():
            if w not in vocab and len(vocab) < vocab_size:
                vocab[w] = len(vocab)
    i = 0
    while len(vocab) < vocab_size:
        vocab.setdefault(f"t{i}", len(vocab))
        i += 1
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")


def gsm8k_items(path: str | None, n: int, smoke: bool) -> tuple[list[dict], str]:
    """GSM8K test questions from `path` (a copy of ../shared/data/gsm8k/test.jsonl), else synthetic ones of
    GSM8K's length (about 46 words)."""
    if path and Path(path).is_file():
        items = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
        return items[:n], f"GSM8K test set ({path})"
    rng = random.Random(7)
    words = "Janet ducks lay eggs per day She eats three for breakfast every morning and bakes muffins".split()
    items = [dict(question=" ".join(rng.choice(words) for _ in range(rng.randrange(20, 80))) + " ?",
                  answer=f"#### {rng.randrange(100)}") for _ in range(n)]
    return items, "synthetic prompts of GSM8K's length"


def roofline_s(lm, rows: int, prompt: int, steps: int, positions: int) -> float:
    """The physical floor of decoding `rows` rows for `steps` steps at `positions` route positions: per step
    the larger of (FLOPs / 800 TFLOP/s) and (weights + KV cache read / 4.8 TB/s) on an H200."""
    cfg = lm.model.config
    params = sum(p.numel() for p in lm.model.parameters())
    embed = cfg.vocab_size * cfg.hidden_size
    body = (params - embed) * positions / cfg.num_hidden_layers
    kv_token = 2 * cfg.num_key_value_heads * (cfg.hidden_size // cfg.num_attention_heads) * 2 * positions
    total = 0.0
    for t in range(steps):
        flops = 2 * rows * (body + embed)
        bytes_ = 2 * (body + embed) + rows * (prompt + t) * kv_token
        total += max(flops / 800e12, bytes_ / 4.8e12)
    return total


def section_exact(args, sizes) -> None:
    """Captured steps give the tokens of eager ones, of a growing cache and of the model's own generate
    (fp32 on the device); a repeated layer captured equals full recomputation; sampled rows captured equal
    eager ones; a model whose step cannot be captured (MoE routing syncs) falls back, says so once, and
    gives the same tokens."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2MoeConfig

    from reachtui.generation import Decoding
    from reachtui.model import routing
    from reachtui.model.layers import discover
    from reachtui.model.load import LoadedModel
    from reachtui.model.run import Runner
    from reachtui.routes import Route

    say("")
    say("== 6. exactness of captured decoding steps (float32 on the device) ==")
    common = dict(vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=4096, tie_word_embeddings=False, bos_token_id=1,
                  eos_token_id=2, pad_token_id=0)
    tok = word_tokenizer(1000)
    prompts = [" ".join(f"t{(7 * i + 3 * k) % 990 + 4}" for k in range(5 + 3 * i)) for i in range(8)]
    out = {}
    for name, cfg in (("qwen2", Qwen2Config(**common)),
                      ("qwen2_moe", Qwen2MoeConfig(**common, num_experts=4, num_experts_per_tok=2,
                                                   moe_intermediate_size=64, shared_expert_intermediate_size=128))):
        torch.manual_seed(0)
        with torch.device(args.device):
            model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
        lm = LoadedModel(name=name, path=None, model=model, tokenizer=tok, device=args.device, dtype="float32",
                         arch=discover(model))
        dec = Decoding(max_new_tokens=sizes["exact_new"])
        ref = hf_generate(lm, prompts, len(prompts), sizes["exact_new"])
        captured, eager, growing = Runner(lm), Runner(lm), Runner(lm)
        eager.capture = False
        growing.step_mode = "growing"
        route = Route((0, 1, 2, 2, 3))
        res = {}
        for label, r in (("captured", captured), ("eager", eager), ("growing", growing)):
            res[label] = dict(
                identity=[g.token_ids for g in r.generate(prompts, decoding=dec)],
                route=[g.token_ids for g in r.generate(prompts, route=route, decoding=dec)],
                silenced=[g.token_ids for g in r.generate(prompts, silenced=frozenset({1}), decoding=dec)],
                sampled=[g.token_ids for g in r.generate(prompts, decoding=Decoding(max_new_tokens=sizes["exact_new"],
                                                                                 temperature=1.0),
                                                         seeds=list(range(len(prompts))))])
        # full recomputation of the routed tokens (no cache at all)
        recomputed = []
        for p in prompts:
            ids = tok(p, return_tensors="pt").input_ids.to(args.device)
            seq = ids
            with routing.installed(lm.arch, route.layers, force=True), torch.inference_mode():
                for _ in range(sizes["exact_new"]):
                    nxt = routing.forward_full_logits(model, seq)[:, -1].argmax(-1, keepdim=True)
                    seq = torch.cat([seq, nxt], dim=1)
                    if nxt.item() == 2:
                        break
            recomputed.append(seq[0, ids.shape[1]:].tolist())
        agree = lambda a, b: sum(x == y for x, y in zip(a, b))  # noqa: E731
        n = len(prompts)
        line = dict(identity_vs_generate=agree(res["captured"]["identity"], ref),
                    captured_vs_eager={k: agree(res["captured"][k], res["eager"][k]) for k in res["captured"]},
                    captured_vs_growing={k: agree(res["captured"][k], res["growing"][k]) for k in res["captured"]},
                    route_vs_recomputed=agree(res["captured"]["route"], recomputed),
                    captures=captured.stats["captures"], replays=captured.stats["replays"],
                    notes=captured.notes[:], capture_on=captured.capture)
        out[name] = line
        say(f"{name}: identity == model.generate {line['identity_vs_generate']}/{n}; captured == eager "
            f"{line['captured_vs_eager']}; captured == growing {line['captured_vs_growing']}; routed == recomputed "
            f"{line['route_vs_recomputed']}/{n}; graphs captured {line['captures']}, replays {line['replays']}"
            + (f"; fell back: {line['notes'][0]}" if line["notes"] else ""))
        del model, lm, captured, eager, growing
    RESULTS["exact"] = out


def _audit_timed(store, runner, task, protocol, limit_s: float, label: str, meter: GpuMeter, lm, rows: int,
                 prompt_tokens: float, positions: int) -> dict:
    """One audit of `task` under `protocol`, stopped after `limit_s` (its rate then projects the whole);
    per phase: wall time, attempts, new tokens, their rates and the GPU's utilization."""
    from reachtui.engine.audit import run_audit

    phases: dict[str, dict] = {}

    def on_event(ev) -> None:
        now, wall = time.perf_counter(), time.time()
        ph = phases.setdefault(ev.phase, dict(t0=now, w0=wall, total=ev.total))
        ph.update(t1=now, w1=wall, done=ev.done)

    cancel = threading.Event()
    timer = threading.Timer(limit_s, cancel.set)
    timer.start()
    t0 = time.perf_counter()
    try:
        res = run_audit(store, runner, model_name=lm.name, task=task, protocol=protocol, on_event=on_event,
                        cancel=cancel, versions={"device": lm.device, "dtype": lm.dtype})
        status = res.status
        run_id = res.run_id
    finally:
        timer.cancel()
    wall = time.perf_counter() - t0
    out = dict(status=status, wall_s=wall, phases={})
    for name, ph in phases.items():
        if name not in ("realized", "routes", "sample"):
            continue
        sql = ("SELECT count(*), coalesce(sum(new_tokens), 0) FROM attempts WHERE run_id = ? AND probe = ?")
        n, tokens = store.conn.execute(sql, (run_id, name)).fetchone()
        secs = max(1e-9, ph["t1"] - ph["t0"])
        projected = secs * ph["total"] / max(1, n)
        gpu = meter.between(ph["w0"], ph["w1"])
        floor = roofline_s(lm, rows * max(1, ph["total"] // rows), prompt_tokens, 256, positions if name == "routes"
                           else lm.arch.num_layers) if name != "realized" else roofline_s(lm, rows, prompt_tokens,
                                                                                            256, lm.arch.num_layers)
        out["phases"][name] = dict(seconds=secs, attempts=n, total=ph["total"], new_tokens=tokens,
                                   attempts_per_s=n / secs, tokens_per_s=tokens / secs, projected_s=projected,
                                   gpu=gpu, roofline_s=floor)
        util = f", GPU busy {gpu['util_mean']:.0f}% (>= 80% in {100 * gpu['util_ge80']:.0f}% of samples), peak " \
               f"{gpu['mem_peak_mib'] / 1024:.1f} GiB" if gpu else ""
        say(f"{label} {name}: {n}/{ph['total']} attempts in {secs:.1f} s ({n / secs:.0f} attempts/s, "
            f"{tokens / secs:.0f} new tokens/s); whole phase {'measured' if n == ph['total'] else 'projected'} "
            f"{projected:.1f} s; roofline {floor:.1f} s{util}")
    return out


def section_gsm8k(args, sizes, workdir: Path, meter: GpuMeter) -> None:
    """The GSM8K test set on Qwen2.5-0.5B's shape (random weights, bf16), 256 new tokens: realized, routes
    K = 32 and sample K = 32 through the audit engine, and the model's own generate on the same prompts."""
    import torch

    from reachtui.model.run import Runner
    from reachtui.protocol import Protocol, protocol_from_options
    from reachtui.store import Store
    from reachtui.tasks import load_task

    say("")
    say("== 7. GSM8K scale: realized, routes K = 32, sample K = 32, 256 new tokens ==")
    if lacks("sqlite_utils", "gsm8k", "sqlite-utils is not importable: pass --wheels"):
        return
    items, source = gsm8k_items(args.gsm8k, sizes["gsm8k_n"], args.smoke)
    protocol0 = Protocol(max_new_tokens=sizes["gsm8k_new"])
    texts = [protocol0.render_prompt(it["question"]) for it in items]
    cfg = qwen2_config(args.smoke)
    tok = word_tokenizer_for(texts, cfg.vocab_size)
    dtype = "bfloat16" if args.device.startswith("cuda") else "float32"
    lm = build_loaded(cfg, args.device, dtype, tok)
    task_path = workdir / "gsm8k.jsonl"
    task_path.write_text("".join(json.dumps(dict(question=it["question"], answer=it["answer"])) + "\n"
                                 for it in items))
    task = load_task(str(task_path), name="gsm8k")
    lengths = [len(tok(t)["input_ids"]) for t in texts]
    mean_len = sum(lengths) / len(lengths)
    say(f"{len(items)} questions from the {source}: prompts {min(lengths)}-{max(lengths)} tokens (mean "
        f"{mean_len:.0f}), word-level tokenizer; model {cfg.num_hidden_layers} layers, vocab {cfg.vocab_size}, "
        f"{dtype}")
    new = sizes["gsm8k_new"]
    result = dict(questions=len(items), source=source, prompt_tokens_mean=mean_len, new_tokens=new)
    runner = Runner(lm)
    # the model's own generate on the same prompts, one batch of all of them (as reachtui's realized batch)
    runner.generate(texts[:8], decoding=__import__("reachtui.generation", fromlist=["Decoding"]).Decoding(
        max_new_tokens=4))
    hf_generate(lm, texts[:8], 8, 4)
    w0 = time.time()
    t_hf, _ = timed(args.device, lambda: hf_generate(lm, texts, len(texts), new))
    gpu = meter.between(w0, time.time())
    say(f"model.generate: {len(texts)} prompts in one batch, {new} new tokens: {t_hf:.1f} s"
        + (f", GPU busy {gpu['util_mean']:.0f}%" if gpu else ""))
    result["generate_s"] = t_hf
    result["generate_gpu"] = gpu
    torch.cuda.empty_cache() if args.device.startswith("cuda") else None
    L = cfg.num_hidden_layers
    for label, probes, limit in (("realized", "realized", sizes["gsm8k_limit_realized"]),
                                 ("routes", "routes", sizes["gsm8k_limit_probe"]),
                                 ("sample", "sample", sizes["gsm8k_limit_probe"])):
        if elapsed() > args.time_limit:
            say(f"gsm8k {label}: SKIPPED (past --time-limit)")
            continue
        budget = None if label == "realized" else sizes["gsm8k_k"]
        protocol = protocol_from_options(protocol0, probes=probes, budget=budget)
        store = Store(workdir / f"gsm8k-{label}.sqlite")
        res = _audit_timed(store, runner, task, protocol, limit, f"gsm8k {label}", meter, lm, len(items), mean_len,
                           round(1.0 * L))
        result[label] = res
        if label == "realized":
            ph = res["phases"].get("realized")
            if ph:
                ratio = ph["seconds"] / t_hf
                say(f"realized / model.generate: {ratio:.2f} (part 1 target <= 1.0, part 2 <= 0.5)")
                result["realized_over_generate"] = ratio
        store.close()
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    result["runner_stats"] = dict(runner.stats)
    result["runner_notes"] = runner.notes[:]
    say(f"decoding steps: {runner.stats['eager']} eager, {runner.stats['captures']} CUDA graphs captured, "
        f"{runner.stats['replays']} replays; one-token attention (ms per call, fastest kept): "
        f"{runner.stats.get('decode_attention')}" + (f"; notes: {runner.notes}" if runner.notes else ""))
    RESULTS["gsm8k"] = result


def section_live(args, sizes) -> None:
    """A live run as the app makes one: one question, an edited route, 48 new tokens, on a model of a 7B
    shape (Qwen2.5-7B's config, random weights, bf16): each call's time, captured and eager."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    from reachtui.generation import Decoding
    from reachtui.model.layers import discover
    from reachtui.model.load import LoadedModel
    from reachtui.model.run import Runner
    from reachtui.routes import Route

    say("")
    say("== 8. a live run on a 7B shape: one question, an edited route, 48 new tokens ==")
    if args.smoke:
        cfg = qwen2_config(True)
    else:
        cfg = Qwen2Config(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                          num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=32768,
                          rms_norm_eps=1e-6, tie_word_embeddings=False, use_sliding_window=False, bos_token_id=1,
                          eos_token_id=2, pad_token_id=0)
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    torch.manual_seed(0)
    t0 = time.perf_counter()
    with torch.device(args.device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype).eval()
    tok = word_tokenizer(cfg.vocab_size)
    lm = LoadedModel(name="qwen2-7b-random", path=None, model=model, tokenizer=tok, device=args.device,
                     dtype=str(dtype).replace("torch.", ""), arch=discover(model))
    say(f"model: {sum(p.numel() for p in model.parameters()) / 1e9:.2f}B parameters, built in "
        f"{time.perf_counter() - t0:.1f} s")
    L = cfg.num_hidden_layers
    route = Route(tuple(range(L // 2)) + (L // 2 - 1,) + tuple(range(L // 2, L)))
    prompt = " ".join(f"t{i * 37 % 5000 + 4}" for i in range(60))
    dec = Decoding(max_new_tokens=48)
    out = {}
    for label, capture in (("captured", True), ("eager", False)):
        runner = Runner(lm)
        runner.capture = capture and args.device.startswith("cuda")
        times = []
        for _ in range(sizes["live_repeats"]):
            t, gens = timed(args.device, lambda: runner.generate([prompt], route=route, decoding=dec))
            times.append(t)
        out[label] = dict(seconds=times, tokens=gens[0].new_tokens, stats=dict(runner.stats))
        say(f"live run {label}: " + ", ".join(f"{t:.3f}" for t in times) + f" s ({gens[0].new_tokens} tokens; "
            f"target <= 0.3 s after the first capture)")
    RESULTS["live"] = out
    del model, lm


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
    ap.add_argument("--gsm8k", default=None, help="a copy of ../shared/data/gsm8k/test.jsonl (else synthetic prompts)")
    ap.add_argument("--probe-limit", type=float, default=90.0,
                    help="seconds: each GSM8K probe audit stops after this (its rate projects the whole)")
    ap.add_argument("--only", default="", help="comma list: run only these sections")
    ap.add_argument("--time-limit", type=float, default=300.0,
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
                 oom_n=1024, oom_len=1024, limit=128, budget=4, exact_new=24, gsm8k_n=1319, gsm8k_new=256,
                 gsm8k_k=32, gsm8k_limit_realized=120.0, gsm8k_limit_probe=args.probe_limit, live_repeats=4)
    if smoke:
        sizes = dict(n=8, prompt_len=12, new=6, batch=4, repeats=1, route_repeats=1, dm_n=4, dm_new=5,
                     oom_n=6, oom_len=8, limit=6, budget=2, exact_new=6, gsm8k_n=6, gsm8k_new=5, gsm8k_k=2,
                     gsm8k_limit_realized=60.0, gsm8k_limit_probe=60.0, live_repeats=2)
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
        only = {x.strip() for x in args.only.split(",") if x.strip()}
        runs = lambda name: name not in skip and (not only or name in only)  # noqa: E731
        if any(runs(name) for name in ("identity", "device_map", "oom")):
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
        meter = GpuMeter(workdir)
        sections = [("exact", lambda: section_exact(args, sizes)),
                    ("live", lambda: section_live(args, sizes)),
                    ("gsm8k", lambda: section_gsm8k(args, sizes, workdir, meter)),
                    ("identity", lambda: section_identity(lm, args, sizes)),
                    ("device_map", lambda: section_device_map(lm, args, sizes, workdir)),
                    ("oom", lambda: section_oom(lm, args, sizes)),
                    ("audit", lambda: section_demo_audit(args, sizes, workdir))]
        for name, fn in sections:
            if only and name not in only:
                continue
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
            if args.out:            # what is measured so far survives a kill
                write_out(args.out)
        meter.stop()
    RESULTS["seconds"] = elapsed()
    say("")
    say(f"gpu_check done in {elapsed():.0f} s" + (f"; sections with errors: {', '.join(failures)}" if failures else ""))
    if args.out:
        write_out(args.out)
    return 1 if failures else 0


def write_out(folder: str) -> None:
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(RESULTS, indent=1, default=str) + "\n")
    (out / "gpu_check.txt").write_text("\n".join(LINES) + "\n")


if __name__ == "__main__":
    sys.exit(main())
