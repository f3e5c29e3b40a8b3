"""Memory on the device: out-of-memory errors, GPU or CPU (the batch halves and is retried), and glibc's heap."""

from __future__ import annotations

from collections.abc import Callable

import torch


#: What torch's allocators say when an allocation fails: CUDA's "out of memory", the CPU allocator's
#: "DefaultCPUAllocator: can't allocate memory" (errno 12, ENOMEM).
_OOM_TEXTS = ("out of memory", "can't allocate memory", "cannot allocate memory")


def is_oom(exc: BaseException) -> bool:
    """An allocation failure, on the GPU or on the CPU (a MemoryError too): the batch halves and is retried."""
    if isinstance(exc, MemoryError):
        return True
    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(exc, oom):
        return True
    return isinstance(exc, RuntimeError) and any(t in str(exc).lower() for t in _OOM_TEXTS)


def keep_freed_memory() -> bool:
    """Ask glibc to keep freed blocks of up to 32 MiB in the heap instead of returning them to the system.
    Every generation allocates its KV-cache buffers afresh; memory handed back and mapped again costs a page
    fault per 4 KiB on first touch (about 10% of a CPU audit's time on the demo model). Linux/glibc only;
    elsewhere nothing changes. Returns whether it took effect."""
    import ctypes
    import ctypes.util
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3
        return bool(libc.mallopt(m_mmap_threshold, 32 << 20)) and bool(libc.mallopt(m_trim_threshold, 1 << 30))
    except (OSError, AttributeError):
        return False


class Backoff:
    """The one out-of-memory policy: work runs in packs as large as what the runner has learnt allows; a pack
    that runs out of memory lowers that limit (halved, and below the pack that failed) and is taken again,
    smaller. What was learnt stays for later calls (one runner, one device):

    - `rows`: the most prompts in one decode batch (`Runner.batch_size_hint`; the engine reports it);
    - `pack_rows`: the most rows of one mixed batch of several interventions over the same prompts (a GPU);
    - `cpu_bytes`: the KV-cache bytes of one mixed batch of interventions over their own prompts (a CPU)."""

    def __init__(self, cpu_bytes: int) -> None:
        self.rows: int | None = None
        self.pack_rows: int | None = None
        self.cpu_bytes: int = cpu_bytes

    def packs(self, items: list, cost: Callable, asked: int, key: str, run: Callable, alone: Callable,
              rows_of: Callable | None = None):
        """Run `items` in order, in packs of consecutive items whose `cost(item)`s add up to at most the limit
        (`asked`, or the smaller one learnt under `key`; at least one item): yields (pack, run(pack)). When a
        pack of several items runs out of memory, the limit halves and the rest is packed again (a limit in
        bytes also notes half the pack's `rows_of` in `rows`); a single item that does not fit is
        `alone(item, error)`'s (its result, or its error)."""
        start = 0
        while start < len(items):
            limit = min(asked, getattr(self, key) or asked)
            pack, used = [], 0
            for item in items[start:]:
                if pack and used + cost(item) > limit:
                    break
                pack.append(item)
                used += cost(item)
            try:
                result = run(pack)
            except Exception as exc:  # noqa: BLE001 - only OOM is handled here
                if not is_oom(exc):
                    raise
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
                if len(pack) > 1:
                    self.learn(key, limit, used)
                    if rows_of is not None:
                        self.rows = max(1, sum(rows_of(item) for item in pack) // 2)
                    continue
                result = alone(pack[0], exc)
            start += len(pack)
            yield pack, result

    def learn(self, key: str, limit: int, used: int) -> None:
        """A pack of `used` (under `limit`) ran out of memory: half the limit, or half the pack if it would
        still fit under that."""
        setattr(self, key, max(1, limit // 2 if used > limit // 2 else used // 2))
