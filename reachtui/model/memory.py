"""Memory on the device: out-of-memory errors, GPU or CPU (the batch halves and is retried), and glibc's heap."""

from __future__ import annotations

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
