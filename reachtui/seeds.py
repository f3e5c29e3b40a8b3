"""Stable seed derivation (pure Python): the same parts give the same seed on every machine and process.

Python's `hash()` is salted per process, so seeds are derived from SHA-256 of a canonical text instead.
"""

from __future__ import annotations

import hashlib


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from parts such as (protocol seed, "sample", question index, attempt)."""
    text = "\x1f".join(repr(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") >> 1
