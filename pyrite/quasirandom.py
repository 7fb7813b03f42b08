"""torch.quasirandom: `SobolEngine`, Sobol' low-discrepancy sequences of up to 21201 dimensions
(Joe & Kuo's direction numbers, search criterion D(6): pyrite/data/sobol_joe_kuo.npz, written by
scripts/make_sobol_table.py), points in Gray-code order from the all-zero point, as torch's.

The points are computed on the host in numpy, as torch's engine runs on the CPU, and come back
as pyrite tensors. Each coordinate is a 30-bit integer times 2^-30; torch rounds it once to the
dtype asked for, and pyrite's float64 is stored as float32, so pyrite rounds it once to float32:
every value equals torch's float32 draw, and torch's float64 draw rounded to float32.

Scrambling is torch's: Owen's random linear matrix scramble of the direction numbers (a lower
unit-triangular 30x30 bit matrix per dimension) and a random digital shift, both drawn from an
MT19937 seeded with `seed`. torch's CPU generator is MT19937 seeded as numpy's legacy
RandomState is (Matsumoto and Nishimura's init_genrand on the seed's low 32 bits), and its
`randint(2, ...)` takes each 32-bit output modulo 2 in row-major order, so a seeded scrambled
engine draws torch's points bit for bit. With `seed=None` the seed is drawn from pyrite's
default generator (reproducible under `pr.manual_seed`, not torch's points).

Where torch differs: `draw(0)` on a fresh engine returns an empty (0, dimension) tensor (torch
raises "negative dimension -1"); a negative `n` or a draw past the sequence's 2^30 points raises
(torch makes a negative-size tensor or reads past its table); a non-float dtype raises on every
draw (torch returns the first point of a fresh engine in any dtype).
"""

from __future__ import annotations

import os

import numpy as np

from . import dtypes as D
from .errors import ArgumentError, DtypeError

__all__ = ["SobolEngine"]

_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "sobol_joe_kuo.npz")
_TABLE = None  # {"degree", "a", "m<s>"} from _DATA, read by the first engine

# the element counts past which a draw is split, so n x dimension int64 temporaries stay small
_BLOCK = 1 << 22

# torch's names for the dtypes its "_sobol_engine_draw" refuses (pyrite's int32 stands for
# torch's int64 too: pr.long is pr.int32)
_TORCH_NAMES = {
    "float16": "Half",
    "bfloat16": "BFloat16",
    "int32": "Long",
    "int16": "Short",
    "int8": "Char",
    "uint8": "Byte",
    "bool": "Bool",
    "complex64": "ComplexFloat",
}


def _table():
    """The direction-number table: its arrays, with `a` summed back from its steps (each
    degree's polynomials in increasing order, the first stepping from 0)."""
    global _TABLE
    if _TABLE is None:
        with np.load(_DATA) as z:
            table = {k: z[k] for k in z.files}
        degree, a = table["degree"].astype(np.int64), table.pop("a_step").astype(np.int64)
        total = np.cumsum(a)
        first = np.flatnonzero(np.diff(degree, prepend=0))  # (each degree's first row)
        before = np.concatenate([[0], total])[first]  # (the sums up to each degree's start)
        table["a"] = total - np.repeat(before, np.diff(np.append(first, len(a))))
        _TABLE = table
    return _TABLE


def _heads(bits: np.ndarray, n: int, s: int) -> np.ndarray:
    """(n, s) int64 initial direction numbers m_0 .. m_{s-1} of n rows of degree s, from their
    packed (m_j - 1) / 2 fields (j bits each, j = 1 .. s-1, most significant bit first)."""
    width = s * (s - 1) // 2
    flat = np.unpackbits(bits, count=n * width).reshape(n, width).astype(np.int64)
    m = np.ones((n, s), np.int64)
    off = 0
    for j in range(1, s):
        weights = np.left_shift(1, np.arange(j - 1, -1, -1, dtype=np.int64))
        m[:, j] = 2 * (flat[:, off : off + j] @ weights) + 1
        off += j
    return m


def direction_numbers(dimension: int) -> np.ndarray:
    """(dimension, 30) int64 V[d, j] = m_j(d) * 2^(29 - j): torch's unscrambled sobolstate.
    Column j of dimension d >= 1 past its degree s follows Bratley and Fox's recurrence
    m_j = m_{j-s} ^ (m_{j-s} << s) ^ XOR_{k<s} a_k (m_{j-k} << k) (a_1 the top bit of a)."""
    maxbit = SobolEngine.MAXBIT
    table = _table()
    m = np.ones((dimension, maxbit), np.int64)  # (dimension 0: every m_j = 1)
    degree, poly = table["degree"][: dimension - 1], table["a"][: dimension - 1]
    start = 0
    for s in np.unique(table["degree"]).tolist():
        total = int(np.count_nonzero(table["degree"] == s))  # (degrees are in order)
        n = int(np.count_nonzero(degree == s))
        if n:
            rows = m[1 + start : 1 + start + n]  # (n, 30), a view
            rows[:, :s] = _heads(table[f"m{s}"], total, s)[:n]
            a = poly[start : start + n]
            coef = [None] + [((a >> (s - 1 - k)) & 1).astype(bool) for k in range(1, s)]
            for j in range(s, maxbit):
                v = rows[:, j - s] ^ (rows[:, j - s] << s)
                for k in range(1, s):
                    v ^= np.where(coef[k], rows[:, j - k] << k, 0)
                rows[:, j] = v
        start += total
    return m << np.arange(maxbit - 1, -1, -1, dtype=np.int64)


def _scramble(state: np.ndarray, seed: int):
    """torch's SobolEngine._scramble: (scrambled direction numbers, shift) from an MT19937
    seeded with `seed`. First the shift's bits, (dimension, 30), bit i worth 2^i; then the
    (dimension, 30, 30) matrices, whose lower triangle (diagonal set to 1) maps each V[d, j]:
    digit p of the result (p = 0 the most significant, bit 29) is the parity of row p of
    matrix d (entry i standing for bit 29 - i) against V[d, j]'s bits."""
    dimension, maxbit = state.shape
    rs = np.random.RandomState(seed % 2**32)

    def bits(*shape):  # torch.randint(2, shape, generator=g): each 32-bit output mod 2
        return (rs.randint(0, 2**32, size=shape, dtype=np.uint32) & 1).astype(np.uint8)

    shift = bits(dimension, maxbit).astype(np.int64) @ (1 << np.arange(maxbit, dtype=np.int64))
    ltm = np.tril(bits(dimension, maxbit, maxbit))
    ltm[:, np.arange(maxbit), np.arange(maxbit)] = 1
    # row p as a mask: packbits puts entry i at bit 31 - i of a big-endian word
    rows = np.packbits(ltm, axis=-1).view(">u4")[..., 0].astype(np.uint32) >> (32 - maxbit)
    x = rows[:, None, :] & state.astype(np.uint32)[:, :, None]  # (dimension, j, p)
    for fold in (16, 8, 4, 2, 1):  # (the parity of x's bits ends in bit 0)
        x ^= x >> fold
    top_first = np.arange(maxbit - 1, -1, -1, dtype=np.uint32)  # (digit p is bit 29 - p)
    scrambled = np.bitwise_or.reduce((x & 1) << top_first, axis=-1)
    return scrambled.astype(np.int64), shift


def _float_dtype(dtype):
    """The float32 tensor dtype a draw returns (float64 is stored as float32), or torch's
    refusal of any other dtype."""
    dt = D.float32 if dtype is None else D.from_any(dtype)
    if dt is not D.float32:
        name = _TORCH_NAMES.get(dt.name, dt.name)
        raise DtypeError(f"pyrite: \"_sobol_engine_draw\" not implemented for '{name}'")
    return dt


class SobolEngine:
    r"""torch.quasirandom.SobolEngine: (scrambled) Sobol' sequences of `dimension` (1 to
    21201) coordinates. `draw(n)` returns the next n points as an (n, dimension) tensor,
    `draw_base2(m)` the next 2^m (keeping the count a power of 2), `fast_forward(n)` skips n,
    `reset()` returns to the first point.

    Args:
        dimension (int): the dimensionality of the points
        scramble (bool): Owen's linear matrix scramble plus a digital shift. Default: False
        seed (int, optional): the seed of the scramble's generator; None draws one from
            pyrite's default generator. Default: None
    """

    MAXBIT = 30
    MAXDIM = 21201

    def __init__(self, dimension, scramble=False, seed=None):
        if dimension > self.MAXDIM or dimension < 1:
            raise ArgumentError(
                f"pyrite: Supported range of dimensionality for SobolEngine is [1, {self.MAXDIM}]"
            )
        self.seed = seed
        self.scramble = scramble
        self.dimension = dimension

        state = direction_numbers(dimension)  # (dimension, 30) int64
        if not self.scramble:
            self._shift = np.zeros(dimension, np.int64)
        else:
            state, self._shift = _scramble(state, self._scramble_seed())
        self._state = state
        self._quasi = self._shift.copy()  # the last point drawn (the first while none is)
        self.num_generated = 0

    def _scramble_seed(self) -> int:
        if self.seed is not None:
            return int(self.seed)
        from .ops.random import randint

        return int(randint(0, 2**31 - 1, (1,)).item())

    def _points(self, counter: int, n: int) -> np.ndarray:
        """(n, dimension) int64: the n points after self._quasi, whose Gray-code counter is
        `counter`; point k+1 is point k ^ V[:, l], l the lowest zero bit of k. Leaves
        self._quasi at the last of them."""
        out = np.empty((n, self.dimension), np.int64)
        step = max(1, _BLOCK // self.dimension)
        for lo in range(0, n, step):
            k = np.arange(counter + lo, counter + min(n, lo + step), dtype=np.int64)
            low_zero = ~k & (k + 1)  # (the lowest zero bit of k, alone)
            cols = np.log2(low_zero.astype(np.float64)).astype(np.int64)  # (exact: 2^l)
            block = np.bitwise_xor.accumulate(self._state[:, cols].T, axis=0)  # (rows, dim)
            block ^= self._quasi
            out[lo : lo + len(k)] = block
            self._quasi = block[-1].copy()
        return out

    def _check_count(self, n: int, what: str):
        if n < 0:
            raise ArgumentError(f"pyrite: SobolEngine.{what} expects n >= 0, got n={n}")
        if self.num_generated + n > 2**self.MAXBIT:
            raise ArgumentError(
                f"pyrite: SobolEngine.{what}: a {self.MAXBIT}-bit Sobol sequence has "
                f"2**{self.MAXBIT} points; {self.num_generated} generated, {n} more asked"
            )

    def draw(self, n: int = 1, out=None, dtype=None):
        """The next `n` points, an (n, dimension) tensor (float32; float64 is stored as
        float32). With `out`, resized to (n, dimension) and filled, as torch's."""
        _float_dtype(dtype)
        n = int(n)
        self._check_count(n, "draw")
        if self.num_generated == 0:
            first = self._quasi[None, :]  # (1, dim): the shift, the first point
            ints = np.concatenate([first, self._points(0, max(n - 1, 0))])[:n]
        else:
            ints = self._points(self.num_generated - 1, n)
        self.num_generated += n
        # (int64 -> float32 rounds once to nearest, as torch's; the scale is exact)
        values = ints.astype(np.float32) * np.float32(2.0**-self.MAXBIT)
        from .ops.creation import tensor

        result = tensor(values)
        if out is not None:
            out.resize_(result.shape).copy_(result)
            return out
        return result

    def draw_base2(self, m: int, out=None, dtype=None):
        """The next 2^m points; refused unless the count drawn stays a power of 2 (the
        balance properties of Sobol' points need it)."""
        n = 2**m
        total_n = self.num_generated + n
        if not (total_n & (total_n - 1) == 0):
            raise ArgumentError(
                "pyrite: The balance properties of Sobol' points require "
                f"n to be a power of 2. {self.num_generated} points have been "
                f"previously generated, then: n={self.num_generated}+2**{m}={total_n}. "
                "If you still want to do this, please use "
                "'SobolEngine.draw()' instead."
            )
        return self.draw(n=n, out=out, dtype=dtype)

    def reset(self):
        """Back to the first point."""
        self._quasi = self._shift.copy()
        self.num_generated = 0
        return self

    def fast_forward(self, n):
        """Skip `n` points, as drawing them would: point k is the shift XOR the direction
        numbers of the set bits of k's Gray code k ^ (k >> 1)."""
        n = int(n)
        self._check_count(n, "fast_forward")
        self.num_generated += n
        last = max(self.num_generated - 1, 0)  # (the point self._quasi holds)
        gray = last ^ (last >> 1)
        quasi = self._shift.copy()
        for bit in range(self.MAXBIT):
            if gray >> bit & 1:
                quasi ^= self._state[:, bit]
        self._quasi = quasi
        return self

    def __repr__(self):
        fmt_string = [f"dimension={self.dimension}"]
        if self.scramble:
            fmt_string += ["scramble=True"]
        if self.seed is not None:
            fmt_string += [f"seed={self.seed}"]
        return self.__class__.__name__ + "(" + ", ".join(fmt_string) + ")"
