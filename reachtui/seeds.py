"""Stable seed derivation (pure Python): the same parts give the same seed on every machine and process.

Python's `hash()` is salted per process, so seeds are derived from SHA-256 of a canonical text instead.
"""

from __future__ import annotations

import hashlib


def _seed_of(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") >> 1


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from parts such as (protocol seed, "sample", question index, attempt)."""
    return _seed_of("\x1f".join(map(repr, parts)))


def seed_deriver(*head: object):
    """`derive_seed` with its first parts fixed: seed_deriver(a, b)(c, d) == derive_seed(a, b, c, d) (the
    rest not empty). Cheaper when many seeds share a head: an export recomputes one per attempt."""
    prefix = "".join(repr(p) + "\x1f" for p in head)
    return lambda *rest: _seed_of(prefix + "\x1f".join(map(repr, rest)))


def attempt_seed(protocol_seed: int, stream: str, task_index: int, attempt: int, temperature: float) -> int | None:
    """The seed of attempt `attempt` of the question with task index `task_index` in seed stream `stream`
    (a probe's name, `reachtui.intervention.Intervention.seed_stream`); None when greedy (no seed plays a part). The
    engine seeds with this; an export recomputes it (`Protocol.attempt_seeder`), so the store does not keep it."""
    if temperature <= 0:
        return None
    return derive_seed(protocol_seed, stream, task_index, attempt)
