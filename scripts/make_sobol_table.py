"""Regenerate pyrite/data/sobol_joe_kuo.npz: the Sobol direction numbers behind
pyrite.quasirandom.SobolEngine (Joe & Kuo's new-joe-kuo-6.21201 table, search criterion D(6),
https://web.maths.unsw.edu.au/~fkuo/sobol/ — the table torch.quasirandom uses).

The table is public data; this script reads it back out of the installed torch rather than
downloading it: `torch._sobol_engine_initialize_state_` (the op behind torch's unscrambled
SobolEngine) fills the 21201 x 30 direction numbers V[d, j] = m_j(d) * 2^(29 - j), and for each
dimension d >= 1 (dimension 0 is all m = 1) this script recovers

- s, the degree of its primitive polynomial: the smallest s whose recurrence
  m_j = m_{j-s} ^ (m_{j-s} << s) ^ XOR_{k=1}^{s-1} c_k (m_{j-k} << k)  (j >= s)
  reproduces all 30 columns. The c_k follow from column s alone: (m_{j-k} << k) has its lowest
  set bit at k (every m is odd), so bit k of m_s ^ m_0 ^ (m_0 << s), less the terms below k, is
  c_k;
- a, the polynomial's interior coefficients c_1 .. c_{s-1} as an (s-1)-bit integer, c_1 the
  most significant (Joe & Kuo's `a` column);
- m_0 .. m_{s-1}, its initial direction numbers (Joe & Kuo's m_1 .. m_s): m_j is odd and below
  2^(j+1), so j bits ((m_j - 1) / 2) hold it.

and checks that dimensions come in nondecreasing degree, phi(2^s - 1)/s of each complete
degree (every primitive polynomial of that degree, once), and that pyrite's own expansion
(pyrite.quasirandom.direction_numbers) gives torch's table back bit for bit.

Layout of the .npz (savez_compressed's format, fixed timestamps; pyrite/quasirandom.py reads it):
  degree  uint8 (21200,)       s of dimensions 1 .. 21200
  a_step  uint8 (21200,)       a of the same dimensions, as steps from the a before it of
                               the same degree (the first of a degree: from 0)
  m<s>    uint8 packed bits    for the n_s dimensions of degree s, in order: each row's fields
                               (m_j - 1) / 2 for j = 1 .. s-1, j bits each, most significant
                               bit first, rows concatenated (np.packbits, big-endian bits)

Run: .venv/bin/python scripts/make_sobol_table.py   (deterministic: same torch, same bytes)
"""

from __future__ import annotations

import io
import os
import sys
import zipfile

import numpy as np
import torch

MAXBIT, MAXDIM = 30, 21201
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "pyrite", "data", "sobol_joe_kuo.npz")


def torch_state() -> np.ndarray:
    """torch's direction numbers, (21201, 30) int64, V[d, j] = m_j(d) << (29 - j)."""
    state = torch.zeros(MAXDIM, MAXBIT, dtype=torch.long)
    torch._sobol_engine_initialize_state_(state, MAXDIM)
    return state.numpy().copy()


def expand(s: int, c: list[int], head: list[int]) -> list[int]:
    """m_0 .. m_29 from the first s by the degree-s recurrence with coefficients c[1 .. s-1]."""
    m = list(head[:s])
    for j in range(s, MAXBIT):
        v = m[j - s] ^ (m[j - s] << s)
        for k in range(1, s):
            if c[k]:
                v ^= m[j - k] << k
        m.append(v)
    return m


def solve(m: list[int], s: int) -> list[int] | None:
    """c[1 .. s-1] of a degree-s recurrence reproducing m, or None when none does."""
    if s >= MAXBIT:
        return None
    rest = m[s] ^ m[0] ^ (m[0] << s)
    c = [0] * s
    for k in range(1, s):
        c[k] = (rest >> k) & 1
        if c[k]:
            rest ^= m[s - k] << k
    if rest != 0 or expand(s, c, m) != m:
        return None
    return c


def phi(n: int) -> int:
    result, p, x = n, 2, n
    while p * p <= x:
        if x % p == 0:
            while x % p == 0:
                x //= p
            result -= result // p
        p += 1
    if x > 1:
        result -= result // x
    return result


def derive(state: np.ndarray):
    """(degree, a, m-heads) of dimensions 1 .. MAXDIM-1 from torch's direction numbers."""
    degrees, polys, heads = [], [], []
    s = 1
    for d in range(1, MAXDIM):
        m = [int(state[d, j]) >> (MAXBIT - 1 - j) for j in range(MAXBIT)]
        for j, v in enumerate(m):
            assert v << (MAXBIT - 1 - j) == state[d, j], (d, j)
            assert v & 1 and v < (1 << (j + 1)), (d, j, v)
        while (c := solve(m, s)) is None:  # (degrees never decrease: Joe & Kuo's order)
            s += 1
            assert s < MAXBIT, d
        a = 0
        for k in range(1, s):
            a = (a << 1) | c[k]
        degrees.append(s)
        polys.append(a)
        heads.append(m[:s])
    return np.array(degrees, np.uint8), np.array(polys, np.uint32), heads


def steps(degrees: np.ndarray, polys: np.ndarray) -> np.ndarray:
    """a as uint8 steps: within a degree the polynomials come in increasing order (every
    primitive polynomial of the degree, in order), each a step of at most 255 from the one
    before; the first of a degree steps from 0. (85 KB as uint32, 33 KB compressed; 11 KB so.)"""
    a = polys.astype(np.int64)
    prev = np.concatenate([[0], a[:-1]])
    prev[np.flatnonzero(np.diff(degrees.astype(np.int64), prepend=0))] = 0
    step = a - prev
    assert step.min() > 0 or (step.min() == 0 and a[0] == 0 and step[1:].min() > 0)
    assert step.max() < 256, step.max()
    return step.astype(np.uint8)


def pack(degrees: np.ndarray, heads: list[list[int]]) -> dict[str, np.ndarray]:
    arrays = {}
    for s in np.unique(degrees).tolist():
        width = s * (s - 1) // 2
        rows = [i for i in range(len(degrees)) if degrees[i] == s]
        bits = np.zeros((len(rows), width), np.uint8)
        for r, i in enumerate(rows):
            off = 0
            for j in range(1, s):
                field = (heads[i][j] - 1) >> 1
                for b in range(j):  # (most significant bit first)
                    bits[r, off + b] = (field >> (j - 1 - b)) & 1
                off += j
        arrays[f"m{s}"] = np.packbits(bits.reshape(-1))
    return arrays


def write_npz(path: str, arrays: dict[str, np.ndarray]):
    """np.savez_compressed's format (np.load reads it) with fixed timestamps, so the same
    table gives the same bytes."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, array in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(array), allow_pickle=False)
            zf.writestr(info, buf.getvalue(), compresslevel=9)


def main() -> int:
    state = torch_state()
    degrees, polys, heads = derive(state)
    counts = np.bincount(degrees)
    for s in range(1, int(degrees.max())):  # (the last degree is cut off at MAXDIM)
        assert counts[s] == phi((1 << s) - 1) // s, (s, counts[s])
    for s in np.unique(degrees).tolist():
        a = polys[degrees == s]
        assert len(np.unique(a)) == len(a), s
    arrays = {"degree": degrees, "a_step": steps(degrees, polys), **pack(degrees, heads)}
    write_npz(OUT, arrays)

    sys.path.insert(0, ROOT)
    from pyrite import quasirandom

    quasirandom._TABLE = None  # (read the file just written)
    mine = quasirandom.direction_numbers(MAXDIM)
    assert mine.dtype == np.int64 and np.array_equal(mine, state), "expansion differs from torch"
    per_degree = dict(enumerate(counts.tolist()))
    print(f"wrote {OUT}: {os.path.getsize(OUT)} bytes; dimensions per degree {per_degree}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
