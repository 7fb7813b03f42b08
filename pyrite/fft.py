"""torch.fft: discrete Fourier transforms as products with cos/sin matrices, through matmul.

A DFT of length n <= DIRECT_MAX is one product of the
signal's (re, im) pairs, flattened to (batch, 2n), with a (2n, 2n) matrix of cos/sin values
built on the host in float64 and rounded once to float32 (a real input: (n, 2n)). A longer one
is split four-step (Cooley-Tukey), n = n1·n2 with n2 the largest factor <= DIRECT_MAX: DFTs of
length n1 (recursively), a twiddle multiply, DFTs of length n2, and two transposes. Each output
is then a sum over a few short dot products rather than one of length n, so the float32 error
grows like O((n1 + n2)·eps) instead of O(n·eps); every op is a recorded pyrite op, so autograd
runs through the transforms (torch's gradients, the real view's). A length with no factor in
[2, DIRECT_MAX] (a prime past it) is Bluestein's chirp convolution through two four-step DFTs of
a power-of-two length m >= 2n - 1.

Measured against numpy's float64 FFT of the same float32 input (lavapipe, 2026-12-06, standard
normal complex input, 8 rows; relative l2 error ||y - y64|| / ||y64||, and the largest
elementwise error over max |y64|), `python -m pyrite.fft`:
    n = 4096 (64·64):   l2 2.8e-7, max 4.8e-7
    n = 1000 (50·20):   l2 2.1e-7, max 3.9e-7
    n = 61 (direct):    l2 2.1e-7, max 4.0e-7
    n = 1009 (prime, Bluestein, m = 2048): l2 3.5e-7, max 4.3e-7 (one 2018x2018 product: 8.1e-7)
    n = 4099 (prime, Bluestein, m = 8192): l2 3.3e-7, max 4.4e-7
    n = 2048: four-step l2 2.5e-7, one 4096x4096 product 1.15e-6 (~5x worse; at 4096 the one
              product's 256 MiB matrix no longer fits a storage binding)

hfft / ihfft (and their 2-D / n-D forms) are irfft / rfft with the input or output conjugated
and `norm` swapped, torch's definitions.

Inputs of float16 / bfloat16 (and integers, bools) are transformed in float32 into complex64 /
float32 results: torch CPU refuses the half types ("Unsupported dtype Half") and torch CUDA gives
complex32 for power-of-two lengths only; pyrite has no complex32 (`.chalf()` raises). `n` and
the entries of `s` are ints as torch parses them (a bool or a float n is a TypeError; an int s is
(s,)).
"""

from __future__ import annotations

import functools
import math
import numbers

import numpy as np

from . import dtypes as D
from .errors import ArgumentError, ShapeError
from .ops import complex as _cx
from .tensor import Tensor

# DFTs up to this length are one matrix product (a 128x128 matrix: one GEMM tile's width of K
# on the GPU); longer ones split four-step. The error figures above are with 64.
DIRECT_MAX = 64

_mats: dict = {}


def _angles(n: int, rows, cols, sign: int):
    """sign·2π·(j·k mod n)/n for j in rows, k in cols: float64, reduced exactly first."""
    jk = np.outer(np.asarray(rows, np.int64), np.asarray(cols, np.int64)) % n
    return sign * 2.0 * np.pi * jk / n


def _dft_matrix(n: int, sign: int, real_in: bool, scale: float) -> Tensor:
    """The float32 matrix M with pairs(x) @ M = pairs(scale · DFT_sign(x)): rows (j, re/im)
    of the input ((j) for a real input), columns (k, re/im) of the output."""
    key = ("dft", n, sign, real_in, scale)
    hit = _mats.get(key)
    if hit is not None:
        return hit
    from .ops.creation import tensor

    t = _angles(n, range(n), range(n), sign)
    c, s = np.cos(t) * scale, np.sin(t) * scale
    if real_in:
        m = np.stack([c, s], -1).reshape(n, 2 * n)
    else:
        # (a + ib)(c + is) = (ac - bs) + i(as + bc)
        m = np.empty((n, 2, n, 2))
        m[:, 0, :, 0], m[:, 1, :, 0] = c, -s
        m[:, 0, :, 1], m[:, 1, :, 1] = s, c
        m = m.reshape(2 * n, 2 * n)
    out = _mats[key] = tensor(m.astype(np.float32))
    return out


def _twiddles(n1: int, n2: int, sign: int):
    """(n2, n1, 2) constants P, Q with pairs(y·w) = y·P + swap(y)·Q, w[j2, k1] = e^(sign·2πi
    j2 k1 / n)."""
    key = ("tw", n1, n2, sign)
    hit = _mats.get(key)
    if hit is not None:
        return hit
    from .ops.creation import tensor

    t = _angles(n1 * n2, range(n2), range(n1), sign)
    c, s = np.cos(t), np.sin(t)
    p = np.stack([c, c], -1).astype(np.float32)
    q = np.stack([-s, s], -1).astype(np.float32)
    out = _mats[key] = (tensor(p), tensor(q))
    return out


def _factor(n: int) -> int:
    for f in range(min(DIRECT_MAX, n // 2), 1, -1):
        if n % f == 0:
            return f
    return 0


def _dft(x: Tensor, n: int, sign: int, real_in: bool, scale: float) -> Tensor:
    """DFT along the rows of x ((B, n) real or (B, n, 2) pairs): (B, n, 2) pairs."""
    B = x._shape[0]
    n2 = _factor(n) if n > DIRECT_MAX else 0
    if not n2:
        if n > DIRECT_MAX:
            return _bluestein(x, n, sign, real_in, scale)
        flat = x if real_in else x.reshape(B, 2 * n)
        return (flat @ _dft_matrix(n, sign, real_in, scale)).reshape(B, n, 2)
    n1 = n // n2
    # j = n2·j1 + j2, k = k1 + n1·k2
    if real_in:
        xa = x.reshape(B, n1, n2).transpose(1, 2).reshape(B * n2, n1)
    else:
        xa = x.reshape(B, n1, n2, 2).transpose(1, 2).reshape(B * n2, n1, 2)
    ya = _dft(xa, n1, sign, real_in, 1.0).reshape(B, n2, n1, 2)  # [B, j2, k1]
    p, q = _twiddles(n1, n2, sign)
    ya = ya * p + ya[..., 1::-1] * q
    yb = ya.transpose(1, 2).reshape(B * n1, n2, 2)  # rows [B, k1], along j2
    yc = _dft(yb, n2, sign, False, scale).reshape(B, n1, n2, 2)  # [B, k1, k2]
    return yc.transpose(1, 2).reshape(B, n, 2)


def _cmul_const(p: Tensor, w: np.ndarray, key) -> Tensor:
    """pairs(y · w) for pairs p (..., n, 2) and host complex constants w (n,), which are cached
    under `key` as (n, 2) float32 tensors P, Q: y·w = p·P + swap(p)·Q."""
    hit = _mats.get(key)
    if hit is None:
        from .ops.creation import tensor

        wr, wi = w.real, w.imag
        hit = _mats[key] = (
            tensor(np.stack([wr, wr], -1).astype(np.float32)),
            tensor(np.stack([-wi, wi], -1).astype(np.float32)),
        )
    pp, qq = hit
    return p * pp + p[..., 1::-1] * qq


def _bluestein(x: Tensor, n: int, sign: int, real_in: bool, scale: float) -> Tensor:
    """A length with no small factor (a prime past DIRECT_MAX) as a circular convolution of
    length m = 2^k >= 2n - 1 (Bluestein): jk = (j^2 + k^2 - (k - j)^2) / 2, so with the chirp
    c_t = e^(sign·πi t^2/n), Y_k = c_k · Σ_j (x_j c_j) · conj(c_(k-j)), done by two four-step
    DFTs of length m. The chirp (angles reduced mod 2n exactly) and the DFT of conj(c) are
    computed on the host in float64 and rounded once."""
    from .ops.combine import cat
    from .ops.creation import zeros

    B = x._shape[0]
    m = 1 << (2 * n - 2).bit_length()
    t = np.arange(n, dtype=np.int64)
    chirp = np.exp(sign * 1j * np.pi * ((t * t) % (2 * n)) / n)  # c_t, complex128
    if real_in:
        key = ("chirp_r", n, sign)
        pairs = _mats.get(key)
        if pairs is None:
            from .ops.creation import tensor

            c2 = np.stack([chirp.real, chirp.imag], -1).astype(np.float32)
            pairs = _mats[key] = tensor(c2)
        a = x.unsqueeze(-1) * pairs  # (B, n, 2): x_j c_j
    else:
        a = _cmul_const(x, chirp, ("chirp", n, sign))
    a = cat([a, zeros(B, m - n, 2)], 1)  # (B, m, 2)
    key = ("bluestein_bf", n, sign)
    bf = None
    if key not in _mats:
        b = np.zeros(m, np.complex128)  # conj(c_t) at t mod m, |t| < n
        b[:n] = np.conj(chirp)
        b[m - n + 1 :] = np.conj(chirp[1:])[::-1]
        bf = np.fft.fft(b)
    A = _dft(a, m, -1, False, 1.0)
    V = _cmul_const(A, bf, key)
    conv = _dft(V, m, 1, False, 1.0 / m)[:, :n]
    return _cmul_const(conv, chirp * scale, ("chirp_out", n, sign, scale))


# ---- argument handling ----------------------------------------------------------------------
def _scale(norm, n: int, inverse: bool) -> float:
    if norm is None or norm == "backward":
        return 1.0 / n if inverse else 1.0
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    if norm == "forward":
        return 1.0 if inverse else 1.0 / n
    raise ArgumentError(f'pyrite: Invalid normalization mode: "{norm}"')


def _check(input, name):
    if not isinstance(input, Tensor):
        raise TypeError(f"pyrite: fft.{name}(): expected a Tensor, got {type(input).__name__}")


def _int_n(n, name: str):
    """torch's parsing of `n`: None, or an int (numpy's too), never a bool or a float."""
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"pyrite: fft_{name}(): argument 'n' must be int, not {type(n).__name__}")
    return int(n)


def _int_s(s, name: str):
    """torch's parsing of `s`: None, an int (read as (s,)) or a sequence of ints (bools pass,
    as ints do in torch's int lists; floats are refused)."""
    if s is None:
        return None
    if isinstance(s, numbers.Integral):
        return (int(s),)
    if isinstance(s, Tensor) or not all(isinstance(k, numbers.Integral) for k in s):
        raise TypeError(
            f"pyrite: fft_{name}(): argument 's' must be tuple of ints, not {type(s).__name__}"
        )
    return tuple(int(k) for k in s)


def _resize(x: Tensor, n: int, axis: int) -> Tensor:
    """x trimmed or zero-padded to n along `axis` (a real tensor's dim)."""
    have = x._shape[axis]
    if have == n:
        return x
    if have > n:
        return x.narrow(axis, 0, n)
    from .ops.combine import cat
    from .ops.creation import zeros

    shape = list(x._shape)
    shape[axis] = n - have
    return cat([x, zeros(shape, dtype=x.dtype)], axis)


def _pairs_last(input: Tensor, dim: int, n, name: str):
    """input's signal along `dim` moved last, as (lead, (B, n[, 2]), real_in, n)."""
    _check(input, name)
    if input.ndim == 0:
        raise IndexError(
            f"pyrite: fft.{name}(): dimension specified as {dim} but tensor has no dimensions"
        )
    d = input._dim(dim)
    n = _int_n(n, name)
    n = input._shape[d] if n is None else n
    if n < 1:
        raise RuntimeError(f"pyrite: Invalid number of data points ({n}) specified")
    if input.dtype is D.complex64:
        x = _cx.view_as_real(input.movedim(d, -1))
        x = _resize(x, n, -2)
        real_in = False
    else:
        x = input if input.dtype is D.float32 else input.to(D.float32)
        x = _resize(x.movedim(d, -1), n, -1)
        real_in = True
    lead = tuple(x._shape[: -2 if not real_in else -1])
    B = math.prod(lead)
    x = x.reshape(B, n, 2) if not real_in else x.reshape(B, n)
    return lead, d, x, real_in, n


def _finish(y: Tensor, lead, d: int, keep: int | None = None) -> Tensor:
    """(B, n, 2) pairs back to a complex tensor with the transformed dim at `d`."""
    if keep is not None:
        y = y[:, :keep]
    z = _cx._C(y.reshape(*lead, y._shape[1], 2))
    return z.movedim(-1, d)


def _c2c(input, n, dim, norm, sign, name):
    lead, d, x, real_in, n = _pairs_last(input, dim, n, name)
    y = _dft(x, n, sign, real_in, _scale(norm, n, sign > 0))
    return _finish(y, lead, d)


def _with_out(fn):
    """fn with torch's out=: the transform computed, then written into `out` (resized as
    torch's, with its warning when out held elements). Its dtype must be of the result's kind,
    as torch's: complex for a complex result, floating (any width) for a real one."""
    name = fn.__name__

    @functools.wraps(fn)
    def wrapper(*args, out=None, **kwargs):
        res = fn(*args, **kwargs)
        if out is None:
            return res
        from .errors import DtypeError
        from .ops.outarg import _write

        want = "complex" if res.dtype is D.complex64 else "floating point"
        if isinstance(out, Tensor) and out.dtype.kind != ("c" if want == "complex" else "f"):
            raise DtypeError(
                f"pyrite: {name} expects a {want} output tensor, but got {out.dtype!r}"
            )
        return _write(out, res, f"fft.{name}")

    return wrapper


# ---- 1-D ------------------------------------------------------------------------------------
@_with_out
def fft(input, n=None, dim=-1, norm=None, *, out=None):
    """The DFT of `input` (real or complex) along `dim`, trimmed or zero-padded to `n`."""
    return _c2c(input, n, dim, norm, -1, "fft")


@_with_out
def ifft(input, n=None, dim=-1, norm=None, *, out=None):
    return _c2c(input, n, dim, norm, 1, "ifft")


@_with_out
def rfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The DFT of a real `input`: its n//2 + 1 non-negative frequencies."""
    _check(input, "rfft")
    if input.dtype is D.complex64:
        raise RuntimeError("pyrite: rfft expects a real input tensor, but got ComplexFloat")
    lead, d, x, _, n = _pairs_last(input, dim, n, "rfft")
    y = _dft(x, n, -1, True, _scale(norm, n, False))
    return _finish(y, lead, d, keep=n // 2 + 1)


@_with_out
def irfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The real signal of length n (default 2·(m - 1)) whose rfft is `input` (m frequencies):
    the imaginary parts of the zero (and, n even, the n/2) frequency are ignored, as torch's."""
    _check(input, "irfft")
    if input.ndim == 0:
        raise IndexError(
            f"pyrite: fft.irfft(): dimension specified as {dim} but tensor has no dimensions"
        )
    z = input if input.dtype is D.complex64 else _cx.as_complex(input)
    d = z._dim(dim)
    m_in = z._shape[d]
    n = _int_n(n, "irfft")
    n = 2 * (m_in - 1) if n is None else n
    if n < 1:
        raise RuntimeError(f"pyrite: Invalid number of data points ({n}) specified")
    m = n // 2 + 1
    lead, d, x, _, _ = _pairs_last(z, d, m, "irfft")  # (B, m, 2)
    from .ops.combine import cat

    # the Hermitian extension: X[n - k] = conj(X[k]) for k = 1 .. n - m
    tail = x[:, 1 : n - m + 1].flip(1) * _cx._const([1.0, -1.0])
    full = cat([x, tail], 1) if n - m > 0 else x
    y = _dft(full, n, 1, False, _scale(norm, n, True))[..., 0]  # (B, n): the real parts
    return y.reshape(*lead, n).movedim(-1, d)


# ---- n-D ------------------------------------------------------------------------------------
def _dims_sizes(input, s, dim, name, at_least_one=False):
    """torch's (s, dim) rules: dim None with s given means the last len(s) dims; both None,
    every dim; -1 in s, the input's size. The real transforms (at_least_one) refuse no dims."""
    _check(input, name)
    s = _int_s(s, name)
    nd = input.ndim
    if dim is None and s is not None and len(s) > nd:
        raise ShapeError(
            f"pyrite: fft.{name}(): Got shape with {len(s)} values but input tensor only has "
            f"{nd} dimensions."
        )
    if dim is None:
        dims = list(range(nd - len(s), nd)) if s is not None else list(range(nd))
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
        dims = [input._dim(x) for x in dims]
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"pyrite: fft.{name}(): dims must be unique")
    if s is None:
        sizes = [None] * len(dims)
    else:
        if len(s) != len(dims):
            raise RuntimeError(
                f"pyrite: fft.{name}(): When given, dim and shape arguments must have the same "
                f"length (got s={list(s)}, dim={dims})"
            )
        sizes = [None if k == -1 else int(k) for k in s]
    if not dims and at_least_one:
        raise RuntimeError(f"pyrite: {name} must transform at least one axis")
    return dims, sizes


@_with_out
def fftn(input, s=None, dim=None, norm=None, *, out=None):
    dims, sizes = _dims_sizes(input, s, dim, "fftn")
    y = input
    for d, n in zip(dims, sizes):
        y = _c2c(y, n, d, norm, -1, "fftn")
    return y if dims else _cx.as_complex(input).clone()


@_with_out
def ifftn(input, s=None, dim=None, norm=None, *, out=None):
    dims, sizes = _dims_sizes(input, s, dim, "ifftn")
    y = input
    for d, n in zip(dims, sizes):
        y = _c2c(y, n, d, norm, 1, "ifftn")
    return y if dims else _cx.as_complex(input).clone()


@_with_out
def rfftn(input, s=None, dim=None, norm=None, *, out=None):
    _real_only(input, "rfftn")
    dims, sizes = _dims_sizes(input, s, dim, "rfftn", at_least_one=True)
    y = rfft(input, sizes[-1], dims[-1], norm)
    for d, n in zip(dims[:-1], sizes[:-1]):
        y = _c2c(y, n, d, norm, -1, "rfftn")
    return y


@_with_out
def irfftn(input, s=None, dim=None, norm=None, *, out=None):
    dims, sizes = _dims_sizes(input, s, dim, "irfftn", at_least_one=True)
    y = input
    for d, n in zip(dims[:-1], sizes[:-1]):
        y = _c2c(y, n, d, norm, 1, "irfftn")
    return irfft(y, sizes[-1], dims[-1], norm)


@_with_out
def fft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return fftn(input, s, dim, norm, out=out)


@_with_out
def ifft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return ifftn(input, s, dim, norm, out=out)


@_with_out
def rfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return rfftn(input, s, dim, norm, out=out)


@_with_out
def irfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return irfftn(input, s, dim, norm, out=out)


# ---- Hermitian-input transforms ----------------------------------------------------------------
# hfft of a Hermitian-symmetric half-spectrum X is irfft(conj(X)) with the scaling of a forward
# transform, and ihfft its inverse, conj(rfft(x)) scaled as an inverse: torch's definitions, so
# each is the real transform with `norm` swapped (backward <-> forward; ortho stays) and the
# same float32 error as irfft / rfft (the conjugation is exact).
_SWAP = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}


def _swap(norm):
    if norm not in _SWAP:
        raise ArgumentError(f'pyrite: Invalid normalization mode: "{norm}"')
    return _SWAP[norm]


def _conj(z):
    return z.conj() if z.dtype is D.complex64 else z


def _real_only(input, name):
    _check(input, name)
    if input.dtype is D.complex64:
        raise RuntimeError(f"pyrite: {name} expects a real input tensor, but got ComplexFloat")


@_with_out
def hfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The real spectrum (length n, default 2·(m - 1)) of a signal whose first m samples are
    `input`, Hermitian-symmetric: irfft(conj(input)) with forward scaling."""
    _check(input, "hfft")
    return irfft(_conj(input), n, dim, _swap(norm))


@_with_out
def ihfft(input, n=None, dim=-1, norm=None, *, out=None):
    """hfft's inverse for a real `input`: its n//2 + 1 non-negative frequencies of the inverse
    DFT, conj(rfft(input)) with inverse scaling."""
    _real_only(input, "ihfft")
    return rfft(input, n, dim, _swap(norm)).conj()


@_with_out
def hfftn(input, s=None, dim=None, norm=None, *, out=None):
    """n-D hfft: the last of `dim` is the halved (Hermitian) one, as torch's."""
    _dims_sizes(input, s, dim, "hfftn", at_least_one=True)
    return irfftn(_conj(input), s, dim, _swap(norm))


@_with_out
def ihfftn(input, s=None, dim=None, norm=None, *, out=None):
    """n-D ihfft of a real `input`: the last of `dim` keeps n//2 + 1 frequencies."""
    _real_only(input, "ihfftn")
    _dims_sizes(input, s, dim, "ihfftn", at_least_one=True)
    return rfftn(input, s, dim, _swap(norm)).conj()


@_with_out
def hfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return hfftn(input, s, dim, norm, out=out)


@_with_out
def ihfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    return ihfftn(input, s, dim, norm, out=out)


# ---- frequencies and shifts -----------------------------------------------------------------
def _freq_tensor(k: np.ndarray, n: int, d, dtype, requires_grad, name):
    """k·(1/(n·d)) as torch computes it: 1/(n·d) in float64 (±inf when n·d is 0), then k and
    that scale held in the dtype and their product rounded once to it, so every bit is torch's
    (numpy's float64 product rounded afterwards differs in the last bit of ~10 % of them)."""
    from .ops.creation import tensor

    dt = D.float32 if dtype is None else D.from_any(dtype)
    if dt.kind != "f":
        raise TypeError(f"pyrite: fft.{name}(): dtype must be a floating point type, not {dt!r}")
    with np.errstate(divide="ignore"):
        scale = np.float64(1.0) / np.float64(n * float(d))
    if dt is D.float16:
        with np.errstate(over="ignore", invalid="ignore"):
            values = k.astype(np.float16) * np.float16(scale)
    elif dt is D.bfloat16:  # (k and the scale rounded to bf16: their product is exact in f32)
        kb = D.bf16_bits_to_f32(D.f32_to_bf16_bits(k.astype(np.float32)))
        with np.errstate(invalid="ignore"):
            values = kb * np.float32(D.round_scalar(float(scale), dt))
    else:
        with np.errstate(invalid="ignore"):
            values = k.astype(np.float32) * np.float32(scale)
    t = tensor(values).to(dt)
    if requires_grad:
        t.requires_grad_()
    return t


def _freq_n(n, name):
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(
            f"pyrite: fft_{name}(): argument 'n' (position 1) must be int, not {type(n).__name__}"
        )
    if n < 0:
        raise ArgumentError(f"pyrite: Trying to create tensor with negative dimension {n}: [{n}]")
    return int(n)


def fftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an n-point DFT: [0, 1, ..., -(n//2), ..., -1] / (d·n)."""
    n = _freq_n(n, "fftfreq")
    k = np.concatenate([np.arange((n + 1) // 2), np.arange(-(n // 2), 0)])
    return _freq_tensor(k, n, d, dtype, requires_grad, "fftfreq")


def rfftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The n//2 + 1 non-negative sample frequencies of an n-point rfft."""
    n = _freq_n(n, "rfftfreq")
    return _freq_tensor(np.arange(n // 2 + 1), n, d, dtype, requires_grad, "rfftfreq")


def _shift(input, dim, sign):
    _check(input, "fftshift")
    if dim is None:
        dims = list(range(input.ndim))
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
    if not dims:
        return input.clone()
    shifts = [
        (input._shape[input._dim(x)] // 2) if sign > 0 else -(input._shape[input._dim(x)] // 2)
        for x in dims
    ]
    return input.roll(shifts, dims)


def fftshift(input, dim=None):
    """The zero frequency moved to the middle: roll by n // 2 along each of `dim` (all)."""
    return _shift(input, dim, 1)


def ifftshift(input, dim=None):
    """fftshift's inverse: roll by -(n // 2)."""
    return _shift(input, dim, -1)


__all__ = [
    "fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn",
    "rfftn", "irfftn", "hfft", "ihfft", "hfft2", "ihfft2", "hfftn", "ihfftn", "fftfreq",
    "rfftfreq", "fftshift", "ifftshift",
]  # fmt: skip


def _measure(sizes=(4096, 1000, 61, 1009, 4099), rows=8, seed=0):
    """The docstring's error table: pyrite's fft against numpy's float64 FFT."""
    from .ops.creation import tensor

    rng = np.random.default_rng(seed)
    for n in sizes:
        x = (rng.standard_normal((rows, n)) + 1j * rng.standard_normal((rows, n))).astype(
            np.complex64
        )
        want = np.fft.fft(x.astype(np.complex128))
        got = fft(tensor(x)).numpy().astype(np.complex128)
        l2 = np.linalg.norm(got - want) / np.linalg.norm(want)
        mx = np.abs(got - want).max() / np.abs(want).max()
        print(f"n = {n}: l2 {l2:.2e}, max {mx:.2e}")


if __name__ == "__main__":
    _measure()
