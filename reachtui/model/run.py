"""Batched generation under (route, silenced MLPs, decoding): the engine every probe runs on.

`Runner.generate` takes many prompts and one intervention, left-pads them into batches (prompts sorted by
length so batches carry little padding), and decodes with a hand-written incremental loop over the
model's own forward and a KV cache sized for the route (see routing.py for how a route is installed).
Greedy or temperature sampling with top-p; one torch.Generator per prompt seeded with seeds[i], so a row's
output does not depend on its batch companions. A row stops at EOS or at any stop string (cut from the
text); the loop ends when every row has stopped or after max_new_tokens. On out-of-memory (CUDA, or the
CPU allocator) the batch size halves and the batch is retried; one prompt that does not fit is an error.
A prompt whose tokens plus max_new_tokens exceed the model's position limit is refused before any work.

Per prompt: text (special tokens dropped, cut at the first stop string), token ids (every generated
token, the EOS or stop-completing token included), mean log-prob of those tokens under the un-tempered
distribution, new_tokens = len(token_ids), layers_executed = len(route), compute = layers_executed x
(prompt tokens + new tokens).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence

import torch

from reachtui.errors import EnvironmentFault, ReachError
from reachtui.model import lens
from reachtui.model import mixed as mixed_batch
from reachtui.model import prefill, routing
from reachtui.model.prefix import PrefixStore
from reachtui.model.decode import decode, eos_ids, pad_id
from reachtui.model.memory import Backoff, keep_freed_memory
from reachtui.model.steppers import FullStepper, GrowingStepper
from reachtui.model.stops import suspect_table
from reachtui.generation import Decoding, Generation, LensRow, RunnerDefaults, Traced, prompt_ids, prompt_token_counts
from reachtui.intervention import Intervention
from reachtui.routes import Route


class Runner(RunnerDefaults):
    """Runs generations on one loaded model (`reachtui.generation.Runner`); one owner at a time (`lock`).

    `prefill_tokens`: the most (padded) prompt tokens one prefill forward takes; a decode batch's prompts
    are prefilled in sub-batches of that size, sorted by length and each padded only to its own longest
    prompt (a CPU runs small sub-batches much faster: they stay in cache). `share_bytes`: the memory a
    decode batch may spend on a recorded identity prefill shared by several interventions. `prefixes`: the
    prompts' identity prefills that mixed calls keep across calls (`reachtui.model.prefix`; emptied by
    `forget_prefixes`)."""

    def __init__(self, loaded):
        self.loaded = loaded
        self.model = loaded.model
        self.tokenizer = loaded.tokenizer
        self.arch = loaded.arch
        self.num_layers = self.arch.num_layers
        self.lock = threading.RLock()
        from reachtui.model.load import input_device   # where input ids go (also under a device map)

        self.device = input_device(self.model)
        self.eos_ids = eos_ids(self.model, self.tokenizer)
        self.pad_id = pad_id(self.model, self.tokenizer)
        from reachtui.model.load import position_limit

        #: prompt + generated tokens the model has positions for (None: its config gives no limit)
        self.max_positions: int | None = position_limit(self.model.config) or position_limit(self.arch.config)
        on_gpu = self.device.type != "cpu"
        if not on_gpu:
            keep_freed_memory()
        self.prefill_tokens = 32768 if on_gpu else 1536
        total = torch.cuda.get_device_properties(self.device).total_memory if on_gpu else 0
        self.share_bytes = total // 8 if on_gpu else 1 << 30
        self.prefixes = PrefixStore(total // 16 if on_gpu else 1 << 30)
        with routing.installed(self.arch):
            identity_cache = routing.new_cache(self.arch, capacity=1)
        self.plain = routing.all_growing(identity_cache)          # every layer a full-attention cache layer
        # interventions over different prompts decode as one batch (mixed.MixedCache): plain models
        # without a device map; on a CPU up to `backoff.cpu_bytes` of KV cache per batch
        self.mixing = self.plain and not getattr(self.model, "hf_device_map", None)
        #: out-of-memory errors: the batches halve, and the runner remembers the sizes that fitted
        self.backoff = Backoff(cpu_bytes=2 << 30)
        self.plain_prefix = routing.plain_positions(identity_cache)
        #: how decoding steps run (`reachtui.model.steppers`): "full" (full-capacity cache, captured as a
        #: CUDA graph on a GPU) for plain models held whole on a GPU, else "growing" (eager); tests set
        #: "full" on a CPU to run the capturable step eagerly
        self.step_mode = "full" if on_gpu and self.mixing else "growing"
        self.capture = on_gpu                   # cleared for good when a capture fails
        self.notes: list[str] = []              # said once to the run (`take_notes`)
        #: several interventions over the same prompts decode as one batch (`_decode_packs`): on a GPU, where
        #: a batch of thousands of rows still gains from more; a CPU is busy with one
        self.packing = on_gpu
        self._stop_tables: dict[tuple, object] = {}
        #: decoding so far (benchmarks read it): eager steps, CUDA graphs captured, graph replays, steps of the
        #: decoding loop and the host's seconds reading their tokens (`host_s`) and waiting for them (`wait_s`)
        self.stats = {"eager": 0, "captures": 0, "replays": 0, "steps": 0, "host_s": 0.0, "wait_s": 0.0}
        self.traces = lens.Traces()             # the last traced generations (`inspect`), for ranks and lens

    # ------------------------------------------------------------------ public

    @property
    def batch_size_hint(self) -> int | None:
        """The most prompts a decode batch holds since an out-of-memory error halved them (None: none did)."""
        return self.backoff.rows

    @batch_size_hint.setter
    def batch_size_hint(self, rows: int | None) -> None:
        self.backoff.rows = rows

    def take_notes(self) -> list[str]:
        """What the runner has to tell the run since it was last asked (e.g. that capture fell back)."""
        notes, self.notes = self.notes, []
        return notes

    @property
    def info(self) -> dict:
        """What a run records of where it ran: the model's name, path and class, device, dtype, versions and
        load report."""
        loaded = self.loaded
        return dict(name=loaded.name, path=str(loaded.path), model_class=loaded.arch.model_class,
                    load_report=loaded.load_report, **versions(loaded))

    @functools.cached_property
    def lens_head(self) -> lens.LensHead:
        """The model's way from a residual stream to logits (the logit lens; made on first use)."""
        return lens.LensHead(self.model, self.arch)

    def _capture_failed(self, why: str) -> None:
        if self.capture:
            self.capture = False
            self.notes.append(f"decoding steps run eagerly: a CUDA graph could not be captured ({why})")

    def _stop_table(self, stops: tuple[str, ...]):
        stops = tuple(s for s in stops if s)
        if stops and stops not in self._stop_tables:
            self._stop_tables[stops] = suspect_table(self.tokenizer, stops)
        return self._stop_tables.get(stops)

    def _full(self, record) -> bool:
        """Whether a decode runs on the full-capacity stepper: asked for, not recording, every layer plain."""
        return self.step_mode == "full" and record is None and self.plain

    def _capacity(self, width: int, dec: Decoding, full: bool) -> int:
        """KV positions a decode batch needs; a full-capacity cache rounds up to 16 (aligned masks)."""
        need = width + dec.max_new_tokens
        return -(-need // 16) * 16 if full else need

    def _decode(self, cache, attention, logits, ids, seeds, dec: Decoding, route_lens, record, full: bool):
        """Decode a prefilled batch with the stepper `full` asks for (see `reachtui.model.steppers`)."""
        capacity = self._capacity(attention.shape[1], dec, full)
        if full and self.device.type == "cuda" and "decode_attention" not in self.stats:
            # how one-token steps attend on this GPU: measured once, the fastest kept (a few milliseconds)
            times = routing.choose_decode_attention(self.arch, min(attention.shape[0], 4096), capacity,
                                                    self.device, next(self.model.parameters()).dtype)
            self.stats["decode_attention"] = {k: round(v, 3) for k, v in times.items()}
        if full:
            stepper = FullStepper(self.model, self.arch, cache, attention, capacity,
                                  capture=self.capture, on_fallback=self._capture_failed)
        else:
            stepper = GrowingStepper(self.model, cache, attention, capacity)
        try:
            return decode(stepper, self.tokenizer, self.eos_ids, ids, logits, seeds, dec, route_lens, record,
                          self._stop_table(dec.stop), self.stats)
        finally:
            for key, value in (("eager", stepper.eager), ("captures", stepper.captures), ("replays", stepper.replays)):
                self.stats[key] += value

    def forget_prefixes(self) -> None:
        """Drop the identity prefills kept for mixed calls (the engine does, after a phase of them)."""
        self.prefixes.clear()

    def encode(self, prompt: str) -> list[int]:
        """The prompt's token ids, with the tokenizer's defaults (as `tokenizer(prompt)` gives them) —
        except that a prompt already starting with the BOS token (a rendered chat template) gets no
        second one (`reachtui.generation.prompt_ids`, the rule the length checks count by)."""
        return prompt_ids(self.tokenizer, prompt)

    def prompt_lengths(self, prompts: list[str]) -> list[int]:
        """Tokens of each prompt, as `encode` gives them (what counts against `max_positions`)."""
        return prompt_token_counts(self.tokenizer, prompts)

    def _check_fits(self, encoded: list[list[int]], max_new_tokens: int) -> None:
        """ReachError, before any work, if the longest prompt plus max_new_tokens exceeds max_positions."""
        limit = self.max_positions
        if limit is None or not encoded:
            return
        longest = max(len(e) for e in encoded)
        if longest + max_new_tokens > limit:
            raise ReachError(f"a prompt of {longest} tokens with max_new_tokens {max_new_tokens} needs {longest + max_new_tokens} "
                             f"positions, more than the model's position limit of {limit}")

    def _no_room(self, tokens: int, max_new_tokens: int, exc: BaseException) -> EnvironmentFault:
        return EnvironmentFault(f"out of memory on {self.device} even for one prompt ({tokens} tokens + "
                                f"{max_new_tokens} new tokens; {type(exc).__name__}): lower --max-new-tokens, "
                                f"or use a device with more memory")

    def resolve(self, intervention) -> Intervention:
        """The intervention (or a (route, silenced) pair) checked against the model, its route written out
        (the identity route when it has none): what every generation runs."""
        return Intervention.of(intervention).checked(self.num_layers)

    def suggest_batch_size(self, prompts: list[str], max_new_tokens: int, route_len: int) -> tuple[int, str]:
        """Prompts per generation job, and why. A CPU gains nothing from batches beyond 64 (they stop
        fitting in its caches); a GPU takes as many prompts as 80% of its free memory holds (`_rows_that_fit`;
        no fixed cap). An out-of-memory error still halves the batch at run time."""
        if self.device.type == "cpu":
            return 64, "cpu"
        longest = max((len(self.encode(p)) for p in prompts), default=1) + max_new_tokens
        return self._rows_that_fit(longest, route_len)

    def _rows_that_fit(self, tokens: int, positions: int) -> tuple[int, str]:
        """Decode rows of `tokens` KV positions at `positions` route positions that 80% of the GPU's free
        memory holds, after room for one prefill sub-batch and the shared prefill: per row its KV cache
        plus the logits and the sampler's float32 copies of them; and why."""
        free, _ = torch.cuda.mem_get_info(self.device)
        p = next(self.model.parameters())
        vocab = int(getattr(self.model.config, "vocab_size", 0) or getattr(self.arch.config, "vocab_size", 0) or 0)
        per_row = tokens * positions * self.kv_bytes_per_token() + 3 * 4 * vocab
        hidden = self.hidden_bytes() // p.element_size()
        inter = int(getattr(self.arch.config, "intermediate_size", 0) or 4 * hidden)
        reserve = self.prefill_tokens * (4 * hidden + 3 * inter) * p.element_size() + self.share_bytes
        fits = int((0.8 * free - reserve) // max(per_row, 1))
        return max(1, fits), (f"{free / 2**30:.1f} GiB free, {per_row / 2**20:.1f} MiB per prompt "
                              f"({tokens} tokens x {positions} layers)")

    def kv_bytes_per_token(self) -> int:
        """Bytes of KV cache one token takes at one route position (measured with a one-token forward)."""
        if getattr(self, "_kv_bytes", None) is None:
            ids = torch.tensor([[self.pad_id]], device=self.device)
            with self.lock, routing.installed(self.arch), torch.inference_mode():
                cache = routing.new_cache(self.arch, capacity=1)
                routing.forward_last_logits(self.model, ids, torch.ones_like(ids), torch.zeros_like(ids), cache)
                sizes = [layer.keys.numel() * layer.keys.element_size() + layer.values.numel()
                         * layer.values.element_size() for layer in cache.layers if layer.keys is not None]
            self._kv_bytes = max(sizes) if sizes else self.hidden_bytes() * 2
        return self._kv_bytes

    def generate(
        self,
        prompts: list[str],
        intervention: Intervention | None = None,
        *,
        decoding: Decoding = Decoding(),
        seeds: list[int] | None = None,
        batch_size: int = 64,
        route: Route | None = None,
        silenced: frozenset[int] = frozenset(),
    ) -> list[Generation]:
        """Every prompt under one intervention (None: the model as deployed). `route` and `silenced` give an
        intervention by its parts instead (a call by hand)."""
        iv = intervention if intervention is not None else Intervention(route, frozenset(silenced))
        return self.generate_many(prompts, [iv], decoding=decoding,
                                  seeds=None if seeds is None else [seeds], batch_size=batch_size)[0]

    def generate_many(
        self,
        prompts: list[str],
        interventions: Sequence[Intervention | tuple | None],
        *,
        decoding: Decoding = Decoding(),
        seeds: list[list[int]] | None = None,
        batch_size: int = 64,
        on_done: Callable[[int, list[Generation]], None] | None = None,
        rows: list[list[int]] | None = None,
    ) -> list[list[Generation]]:
        """Every prompt under every intervention (an `Intervention`, or a (route, silenced) pair): result[i][j]
        is prompt j under
        intervention i. Cheaper than one call per intervention: each batch's prompts are encoded and
        prefilled once for the positions the interventions share with the identity (see routing.py),
        and identical prompts share one prefill. `seeds[i][j]` seeds prompt j under intervention i.
        `on_done(i, generations)` is called as soon as intervention i is finished for every prompt.

        With `rows`, intervention i runs only on the prompts rows[i] (result[i][j] and seeds[i][j] are
        prompt rows[i][j]'s): many interventions over a few prompts each, as an MCTS round proposes them.
        They decode together, as one batch (`mixed.MixedCache`), where the model allows it: a forward
        per step for all of them instead of one per intervention. The log-probs then depend (in the last
        bits) on which interventions share the batch; the same call gives the same numbers."""
        plans = [self.resolve(iv) for iv in interventions]
        if decoding.max_new_tokens < 1:
            raise ReachError("max_new_tokens must be at least 1")
        seeds = _checked_seeds(len(prompts), len(plans), rows, seeds)
        if rows is None and (not prompts or not plans):
            return [[] for _ in plans]
        with self.lock:
            used = sorted({j for r in rows for j in r}) if rows is not None else range(len(prompts))
            encoded: list[list[int]] = [[] for _ in prompts]
            for j in used:
                encoded[j] = self.encode(prompts[j])
                if not encoded[j]:
                    raise ReachError("a prompt encodes to no tokens")
            self._check_fits([encoded[j] for j in used], decoding.max_new_tokens)
            if rows is None:
                return self._batches(encoded, plans, seeds, decoding, batch_size, on_done)
            return self._own_rows(encoded, plans, rows, seeds, decoding, batch_size, on_done)

    def _batches(self, encoded: list[list[int]], plans: list[Intervention], seeds: list[list[int]], dec: Decoding,
                 batch_size: int, on_done=None, which: list[int] | None = None) -> list[list[Generation]]:
        """Every plan over the prompts `which` (default all; result[i][p] is prompt which[p]'s), in decode batches
        of at most `batch_size` prompts of similar length (`_generate_batch`); halved on out-of-memory."""
        which = which if which is not None else list(range(len(encoded)))
        order = sorted(range(len(which)), key=lambda p: len(encoded[which[p]]))
        results: list[list[Generation | None]] = [[None] * len(which) for _ in plans]
        reported: set[int] = set()

        def run(chunk: list[int]) -> None:
            todo = [i for i in range(len(plans)) if any(results[i][p] is None for p in chunk)]
            for i, gens in self._generate_batch([encoded[which[p]] for p in chunk], [plans[i] for i in todo],
                                                [[int(seeds[i][p]) for p in chunk] for i in todo], dec, ids_of=todo):
                for p, g in zip(chunk, gens):
                    results[i][p] = g
                if on_done is not None and i not in reported and all(g is not None for g in results[i]):
                    reported.add(i)
                    on_done(i, results[i])

        def alone(p: int, exc: BaseException):
            raise self._no_room(len(encoded[which[p]]), dec.max_new_tokens, exc) from None

        for _ in self.backoff.packs(order, lambda p: 1, max(1, int(batch_size)), "rows", run, alone):
            pass
        return results  # type: ignore[return-value]

    def _own_rows(self, encoded: list[list[int]], plans: list[Intervention], rows: list[list[int]],
                  seeds: list[list[int]], dec: Decoding, batch_size: int, on_done) -> list[list[Generation]]:
        """generate_many with `rows` (see there): interventions packed into mixed decode batches, in order, as
        many as the memory allows (on a CPU `backoff.cpu_bytes` of KV cache, on a GPU `batch_size` rows); one
        intervention at a time (`_batches`) where the model cannot mix, or one alone does not fit."""
        results: list[list[Generation]] = [[] for _ in plans]
        live = [k for k in range(len(plans)) if rows[k]]
        for k in range(len(plans)):
            if not rows[k] and on_done is not None:
                on_done(k, [])
        if not live:
            return results

        def one(k: int, exc: BaseException | None = None) -> list[list[Generation]]:
            return self._batches(encoded, [plans[k]], [seeds[k]], dec, batch_size, which=rows[k])

        if not self.mixing:
            done = ((k, one(k)[0]) for k in live)
        else:
            capacity = max(len(encoded[j]) for k in live for j in rows[k]) + dec.max_new_tokens
            per_token = self.kv_bytes_per_token()
            cpu = self.device.type == "cpu"

            def cost(k: int) -> int:      # a pack's KV bytes on a CPU, its rows on a GPU
                return len(rows[k]) * capacity * len(plans[k].route) * per_token if cpu else len(rows[k])

            def run(pack: list[int]) -> list[list[Generation]]:
                orders = [sorted(range(len(rows[k])), key=lambda r, k=k: len(encoded[rows[k][r]])) for k in pack]
                gens = self._decode_mixed([(plans[k], [encoded[rows[k][r]] for r in o], [seeds[k][r] for r in o])
                                           for k, o in zip(pack, orders)], dec)
                return [_unsorted(o, g) for o, g in zip(orders, gens)]

            asked = self.backoff.cpu_bytes if cpu else max(1, batch_size)
            packs = self.backoff.packs(live, cost, asked, "cpu_bytes" if cpu else "rows", run, one,
                                       rows_of=(lambda k: len(rows[k])) if cpu else None)
            done = ((k, g) for pack, gens in packs for k, g in zip(pack, gens))
        for k, gens in done:
            results[k] = gens
            if on_done is not None:
                on_done(k, gens)
        return results

    def _decode_mixed(self, jobs: list[tuple[Intervention, list[list[int]], list[int]]], dec: Decoding, *,
                      shared: tuple | None = None, record: list | None = None, watch=None) -> list[list[Generation]]:
        """Several interventions in one decode batch (`mixed.py`): job j = (plan, its prompts' ids sorted by
        length, their seeds); each plan's prompts prefilled under its own installation straight into the
        batch's cache, the positions it shares with the identity replayed (`_replay_of`), then every row
        decoded together; per job its generations. `record` and `watch` (a `lens.PairTap`: each plan's
        prefill, then the batch's steps) read a traced call (`lens.inspect`)."""
        plans = [iv for iv, _, _ in jobs]
        counts = [len(ids) for _, ids, _ in jobs]
        width = max(len(x) for _, ids, _ in jobs for x in ids)
        full = self._full(record)
        mixed = mixed_batch.MixedCache(self.arch, plans, counts, self._capacity(width, dec, full), full=full)
        logits, masks = [], []
        with torch.inference_mode():
            for j, (iv, ids, _) in enumerate(jobs):
                prompts, tap, records, depth = self._replay_of(j, iv, ids, width, shared)
                with routing.installed(self.arch, iv.route.layers, iv.silenced, tap=tap,
                                       watch=None if watch is None else watch.prefills[j]):
                    attention, first = prefill.prefill(self, prompts, mixed.plan_cache(j), tap, records, depth)
                logits.append(first)
                masks.append(attention)
            mixed.close(width)
            with mixed_batch.installed_mixed(self.arch, mixed, watch=None if watch is None else watch.steps):
                gens = self._decode(mixed, torch.cat(masks), torch.cat(logits),
                                    [x for _, ids, _ in jobs for x in ids], [s for _, _, ss in jobs for s in ss], dec,
                                    [len(iv.route) for iv, n in zip(plans, counts) for _ in range(n)], record, full)
        out, at = [], 0
        for n in counts:
            out.append(gens[at: at + n])
            at += n
        return out

    def _replay_of(self, j: int, iv: Intervention, ids: list[list[int]], width: int, shared: tuple | None):
        """Job j's prefill in a mixed batch of `width`: (prefill.Prompts, tap, records, depth replayed). From
        `shared` = (prompts, tap, records, depth of each job), a recording of the prompts every job shares;
        else each prompt's own recording (`prefill.own_recordings`)."""
        if shared is not None:
            prompts, tap, records, depths = shared
            return prompts, tap if depths[j] else None, records, depths[j]
        prompts = prefill.Prompts.of(self, ids, width)
        depth = prefill.shared_depth(iv.route.layers, iv.silenced, self.plain_prefix)
        records = prefill.own_recordings(self, prompts, depth) if depth else None
        return prompts, prefill.PrefillTap() if records else None, records, depth if records else 0

    def trace(
        self,
        prompt: str,
        *,
        route: Route | None = None,
        silenced: frozenset[int] = frozenset(),
        decoding: Decoding = Decoding(),
        seed: int = 0,
        force: bool = False,
    ):
        """One prompt: (Generation, logits of every decoding step as a [steps, vocab] float32 tensor).

        `force` installs the identity route through the routing machinery too (tests use it)."""
        iv = self.resolve(Intervention(route, frozenset(silenced)))
        record: list = []
        with self.lock:
            ids = self.encode(prompt)
            [(_, [gen])] = list(self._generate_batch([ids], [iv], [[seed]], decoding, record=record, force=force))
        return gen, torch.cat(record, dim=0)

    # ------------------------------------------------- one generation read token by token (`lens.py`)

    def inspect(self, prompt: str, interventions, *, decoding: Decoding = Decoding(), seed: int = 0,
                top: int = 5) -> list[Traced]:
        """`prompt` under each intervention as `generate` decodes it, with every step's logits and the residual
        stream after every route position kept (`Traced.key`), and each step's `top` tokens; several
        interventions decode as one batch where the model allows it."""
        return lens.inspect(self, prompt, interventions, decoding, seed, top)

    def ranks(self, key: int, step: int, ids) -> list[tuple[int, float]]:
        return lens.ranks(self, key, step, ids)

    def lens(self, key: int, step: int, ids) -> list[LensRow]:
        return lens.lens(self, key, step, ids)

    def continuation(self, prompt: str, text: str) -> list[int]:
        return lens.continuation(self, prompt, text)

    def token_texts(self, ids) -> list[str]:
        return lens.token_texts(self, ids)

    # ------------------------------------------------------------------ internals

    def _generate_batch(self, ids: list[list[int]], plans: list[Intervention], seeds: list[list[int]], dec: Decoding,
                        *, ids_of: list[int] | None = None, record: list | None = None, force: bool = False,
                        watch=None):
        """One decode batch (rows sorted by length) under each plan (route, silenced) in turn; yields
        (plan id, generations). The prompts' unique token sequences are prefilled once per plan, in
        sub-batches, from a shared identity prefill where the plan starts like the identity. `watch`: a
        `lens.ResidualTap` on every route position (a traced call of one plan)."""
        ids_of = ids_of if ids_of is not None else list(range(len(plans)))
        uniq: dict[tuple, int] = {}
        row_of = [uniq.setdefault(tuple(x), len(uniq)) for x in ids]
        prompts = prefill.Prompts.of(self, [list(x) for x in uniq])
        n, width = len(prompts.rows), prompts.width

        depths = [prefill.shared_depth(iv.route.layers, iv.silenced, self.plain_prefix) for iv in plans]
        share = max(depths) if len(plans) > 1 else 0
        if share and sum(depths) > share:
            per_layer = n * width * 3 * self.hidden_bytes()
            share = min(share, int(self.share_bytes // max(per_layer, 1)))
        else:
            share = 0
        tap = prefill.PrefillTap()
        records = prefill.record(self, prompts, share, tap) if share else None

        full = self._full(record)
        packed = full and self.packing and self.mixing and len(plans) > 1 and n == len(ids) and not force
        if packed:
            yield from self._decode_packs(ids, plans, seeds, dec, ids_of, depths, share, tap, records, prompts)
            return
        for pid, iv, row_seeds, d in zip(ids_of, plans, seeds, depths):
            route, silenced = iv.route, iv.silenced
            d = min(d, share)
            with routing.installed(self.arch, route.layers, silenced, force=force, tap=tap if d else None,
                                   watch=watch), torch.inference_mode():
                cache = routing.new_cache(self.arch, capacity=self._capacity(width, dec, full), batch=n, full=full)
                attention, logits = prefill.prefill(self, prompts, cache, tap if d else None, records, d)
                if n < len(ids):   # identical prompts: one prefill, copied to every row
                    index = torch.tensor(row_of, device=self.device)
                    routing.select_rows(cache, index)
                    attention, logits = attention[index], logits[index]
                gens = self._decode(cache, attention, logits, ids, row_seeds, dec, [len(route)] * len(ids), record,
                                    full)
            yield pid, gens

    def _decode_packs(self, ids, plans, seeds, dec: Decoding, ids_of, depths, share, tap, records, prompts):
        """On a GPU: several plans over the same (distinct) prompts decode as one mixed batch (`_decode_mixed`),
        as many as the memory holds (`_rows_that_fit`, or what `backoff` learnt); each plan is prefilled
        straight into the batch's cache, replaying the shared identity prefill. Yields (plan id, generations)
        as `_generate_batch` does."""
        n = len(ids)
        fit, _ = self._rows_that_fit(prompts.width + dec.max_new_tokens, max(len(iv.route) for iv in plans))
        fit = min(fit, self.backoff.rows or fit)        # a smaller decode batch an out-of-memory error taught

        def run(pack: list[int]) -> list[list[Generation]]:
            shared = (prompts, tap, records, [min(depths[k], share) for k in pack])
            return self._decode_mixed([(plans[k], ids, seeds[k]) for k in pack], dec, shared=shared)

        def alone(k: int, exc: BaseException):
            raise exc

        for pack, gens in self.backoff.packs(list(range(len(plans))), lambda k: n, fit, "pack_rows", run, alone):
            for k, g in zip(pack, gens):
                yield ids_of[k], g

    def hidden_bytes(self) -> int:
        """Bytes of one position's hidden state for one token."""
        p = next(self.model.parameters())
        return int(getattr(self.arch.config, "hidden_size", 0) or p.shape[-1]) * p.element_size()


def _checked_seeds(prompts: int, plans: int, rows: list[list[int]] | None, seeds: list[list[int]] | None):
    """generate_many's seeds (zeros if None), ReachError where they or `rows` do not match its prompts and
    interventions."""
    if rows is not None:
        if len(rows) != plans or any(not 0 <= j < prompts for r in rows for j in r):
            raise ReachError(f"rows do not match {plans} intervention(s) over {prompts} prompts")
        seeds = seeds if seeds is not None else [[0] * len(r) for r in rows]
        if len(seeds) != plans or any(len(s) != len(r) for s, r in zip(seeds, rows)):
            raise ReachError("seeds do not match the rows of each intervention")
        return seeds
    seeds = seeds if seeds is not None else [[0] * prompts for _ in range(plans)]
    if len(seeds) != plans or any(len(s) != prompts for s in seeds):
        raise ReachError(f"seeds do not match {plans} intervention(s) x {prompts} prompts")
    return seeds


def _unsorted(order: list[int], gens: list[Generation]) -> list[Generation]:
    """Generations made in `order` (row order[i] as gens[i]) back in row order."""
    back: list = [None] * len(order)
    for r, gen in zip(order, gens):
        back[r] = gen
    return back


def load_runner(spec: str, *, threads: int | None = None, **load) -> Runner:
    """Load model `spec` (`reachtui.model.load.load_model` options) into a Runner, with torch on `threads`
    CPU threads: what a worker process (`reachtui.cluster`) does once."""
    from reachtui.model.load import load_model

    if threads:
        torch.set_num_threads(int(threads))
    return Runner(load_model(spec, **load))


def runtime_info() -> dict:
    """The versions and thread count this process generates with (recorded with a run)."""
    from importlib.metadata import version

    return dict(torch=version("torch"), transformers=version("transformers"), threads=torch.get_num_threads())


def versions(loaded) -> dict:
    """What a run records about where it ran: device, dtype, the torch and transformers versions."""
    return dict(device=str(loaded.device), dtype=str(loaded.dtype), **runtime_info())
