"""A numpy reference of the counter-based hash the fused attention's dropout draws from
(kernels/common.py `p_pcg4d`; Jarzynski & Olano 2020, "Hash Functions for GPU Rendering"), and of
the keep mask it gives (kernels/attention.py `dropout_keep`), written independently of both."""

from __future__ import annotations

import numpy as np


def pcg4d(v: np.ndarray) -> np.ndarray:
    """pcg4d over the last axis (4 uint32 lanes), wrapping 32-bit arithmetic."""
    v = v.astype(np.uint64) * 1664525 + 1013904223
    v &= 0xFFFFFFFF

    def mix(v):
        x, y, z, w = (v[..., i].copy() for i in range(4))
        x = (x + y * w) & 0xFFFFFFFF
        y = (y + z * x) & 0xFFFFFFFF
        z = (z + x * y) & 0xFFFFFFFF
        w = (w + y * z) & 0xFFFFFFFF
        return np.stack([x, y, z, w], axis=-1)

    v = mix(v)
    v ^= v >> 16
    return mix(v).astype(np.uint32)


def dropout_keep_mask(rows: int, cols: int, key, p: float) -> np.ndarray:
    """(rows, cols) bool: pair (r, j) kept iff component j % 4 of pcg4d(r, j // 4, key) >=
    round(p·2^32)."""
    r, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    v = np.stack([r, j // 4, np.full_like(r, key[0]), np.full_like(r, key[1])], axis=-1)
    h = pcg4d(v.astype(np.uint64))
    bits = np.take_along_axis(h, (j % 4)[..., None], axis=-1)[..., 0]
    thr = min(round(p * 2.0**32), 2**32 - 1)
    return bits >= thr
