"""Random tensors on the device: the Philox generator (seed and counter offset), rand, randn,
randint, normal, bernoulli, randperm, the *_like forms and the in-place fills (uniform_,
normal_, random_, bernoulli_). Split out of ops/creation.py, which re-exports every name.
"""

from __future__ import annotations

import contextlib

from .. import backend
from .. import dtypes as D
from ..autograd import zero_gradient
from ..errors import DtypeError
from ..kernels.common import grid_for
from ..kernels.random import random_kernel
from ..tensor import Tensor
from ..tensor import device as _device
from .core import empty as _empty
from .core import f32_bits, note_bounds
from .creation import (
    _ignored,
    _like_dtype,
    _size,
    _size_args,
    as_tensor,
    checks_device,
    full,
    tensor,
)


class Generator:
    """Seed and counter offset of the Philox stream; each draw advances the offset. `device`
    is kept as given (torch's default "cpu"), as a ported check reads it
    (`generator.device.type`); every generator draws on pyrite's one device."""

    def __init__(self, device=None):
        self.device = _device("cpu" if device is None else device)
        self._seed = 0x5EED
        self.offset = 0

    def manual_seed(self, seed):
        self._seed = int(seed) & 0xFFFFFFFFFFFFFFFF
        self.offset = 0
        return self

    def seed(self):
        import random as _random

        return self.manual_seed(_random.getrandbits(63))._seed

    def initial_seed(self):
        return self._seed

    def get_state(self):
        """(seed low, seed high, offset low, offset high) as an int32 tensor."""
        s, o = self._seed, self.offset
        words = [_i32(s & 0xFFFFFFFF), _i32(s >> 32), _i32(o & 0xFFFFFFFF), _i32(o >> 32)]
        return tensor(words, dtype=D.int32)

    def set_state(self, new_state):
        w = [int(v) & 0xFFFFFFFF for v in as_tensor(new_state).tolist()]
        if len(w) != 4:
            raise RuntimeError(
                f"pyrite: Generator.set_state: expected a state of 4 words (from get_state), "
                f"got {len(w)}"
            )
        self._seed = w[0] | (w[1] << 32)
        self.offset = w[2] | (w[3] << 32)
        return self

    def take(self, n):
        off = self.offset
        self.offset += (n + 3) // 4
        return off


default_generator = Generator()


@contextlib.contextmanager
def drawing_from(generator):
    """Every draw inside takes `generator` (None: the default generator): for samplers built
    from several draws (distributions' poisson and binomial) that torch gives a `generator=`."""
    global default_generator
    if generator is None:
        yield
        return
    saved = default_generator
    default_generator = generator
    try:
        yield
    finally:
        default_generator = saved


def manual_seed(seed):
    return default_generator.manual_seed(seed)


def seed():
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def _fill_random(out: Tensor, dist: str, a, b, generator=None):
    gen = generator or default_generator
    n = out.numel()
    if n == 0:
        return out
    from ..autograd import mark_written

    mark_written(out)  # (normal_ on a tensor saved for a backward: that backward must refuse)
    target = out if out.is_contiguous() else _empty(out._shape, out.dtype)
    if out.dtype is D.bfloat16 or out.dtype.is_small_int:
        # bf16 (packed) and the small ints (wrapped): the random kernel writes f32 / i32
        target = _empty(out._shape, D.float32 if out.dtype.is_floating_point else D.int32)
    tail = [int(a), int(b)] if dist == "randint" else [f32_bits(a), f32_bits(b)]
    offset = target._offset

    def words():  # (a compiled function's replay draws a new counter from the generator)
        off = gen.take(n)
        s = gen._seed
        return [
            n,
            offset,
            _i32(s & 0xFFFFFFFF),
            _i32(s >> 32),
            _i32(off & 0xFFFFFFFF),
            _i32(off >> 32),
            *tail,
        ]

    stype = target.dtype.wgsl if dist != "randint" or target.dtype.kind == "i" else "i32"
    dev = backend.current()
    if dev._tape is not None and dev._tape.recording:
        dev._tape.dynamic_next(words)
    dev.dispatch(
        random_kernel(dist, stype), (target._storage.buffer,), words(), grid_for(-(-n // 4))
    )
    if target is not out:
        out.copy_(target)
    return out


def _i32(x):
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


def _float_dtype(dtype, name):
    dt = D.from_any(dtype)
    if dt.kind != "f":
        raise DtypeError(f"pyrite: {name}: a floating-point dtype is needed, not {dt!r}")
    return dt


def _standard(name, dist, size, kw, generator, dtype, requires_grad) -> Tensor:
    """rand/randn: a new float tensor of `dist` on [0, 1) or N(0, 1)."""
    shape = _size_args(size, kw.pop("size", None), name)
    _ignored(kw, name)
    dt = _float_dtype(dtype, name)
    out = _fill_random(_empty(shape, dt), dist, 0.0, 1.0, generator)
    out.requires_grad = requires_grad
    return out


@checks_device
def rand(*size, generator=None, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    return _standard("rand", "uniform", size, kw, generator, dtype, requires_grad)


@checks_device
def randn(*size, generator=None, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    return _standard("randn", "normal", size, kw, generator, dtype, requires_grad)


@checks_device
def randint(low=None, high=None, size=None, *, generator=None, dtype=None, device=None, **kw):
    _ignored({k: v for k, v in kw.items() if k != "requires_grad"}, "randint")
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    elif high is None:  # randint(high, size=...)
        low, high = 0, low
    elif low is None:  # randint(high=..., size=...)
        low = 0
    if low is None or high is None or size is None:
        raise TypeError("pyrite: randint() missing required arguments: high and size")
    low, high = (int(v.item()) if isinstance(v, Tensor) else v for v in (low, high))
    if high <= low:
        raise RuntimeError(
            f"pyrite: random_ expects 'from' to be less than 'to', but got from={low} >= "
            f"to={high} (randint)"
        )
    if low < D.INT32_MIN or high - 1 > D.INT32_MAX:
        raise OverflowError(
            f"pyrite: randint: the range [{low}, {high}) does not fit in int32, pyrite's "
            "integer storage (WebGPU has no 64-bit integers)"
        )
    if high - low > 2**31:
        raise OverflowError(
            f"pyrite: randint: the range [{low}, {high}) is wider than 2^31 (the generator "
            "draws 31-bit integers)"
        )
    dt = D.from_any(dtype) if dtype is not None else D.int32
    if dt.is_small_int and (low < dt.min or high - 1 > dt.max):
        which, v = ("from", low) if low < dt.min else ("to - 1", high - 1)
        raise RuntimeError(
            f"pyrite: randint: {which} is out of bounds for {dt.name} ({v} outside "
            f"[{dt.min}, {dt.max}])"
        )
    out = _empty(_size((size,), "randint"), D.int32)
    _fill_random(out, "randint", low, high, generator)
    note_bounds(out, low, high - 1)
    return out if dt is D.int32 else out.to(dt)


@checks_device
def rand_like(input, *, dtype=None, device=None, requires_grad=False, **kw):
    _ignored(kw, "rand_like")
    t = rand(input._shape, dtype=_like_dtype(input, dtype))
    t.requires_grad = requires_grad
    return t


@checks_device
def randn_like(input, *, dtype=None, device=None, requires_grad=False, **kw):
    _ignored(kw, "randn_like")
    t = randn(input._shape, dtype=_like_dtype(input, dtype))
    t.requires_grad = requires_grad
    return t


@checks_device
def randint_like(input, low=0, high=None, *, dtype=None, device=None, generator=None, **kw):
    _ignored({k: v for k, v in kw.items() if k != "requires_grad"}, "randint_like")
    if high is None:  # randint_like(x, high)
        low, high = 0, low
    return randint(low, high, input._shape, dtype=_like_dtype(input, dtype), generator=generator)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, **kw):
    _ignored(
        {k: v for k, v in kw.items() if k not in ("dtype", "device", "requires_grad")}, "normal"
    )
    if not isinstance(std, Tensor) and std < 0:
        raise RuntimeError(f"pyrite: normal expects std >= 0.0, but found std {std}")
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        shape = (mean if isinstance(mean, Tensor) else std)._shape
        return randn(shape, generator=generator) * std + mean
    if size is None:
        raise TypeError("pyrite: normal() with float mean and std needs a size")
    return _fill_random(_empty(_size((size,), "normal"), D.float32), "normal", mean, std, generator)


def bernoulli(input, p=None, *, generator=None):
    if p is not None and not isinstance(p, Tensor) and not 0 <= p <= 1:
        raise RuntimeError(f"pyrite: bernoulli_ expects p to be in [0, 1], but got p={p}")
    probs = input if p is None else full(input._shape, p)
    out = (rand(probs._shape, generator=generator) < probs).to(input.dtype)
    return zero_gradient("bernoulli", input, out, defined=p is None)


def randperm(n, *, generator=None, dtype=None, **kw):
    from .sorting import argsort

    _ignored({k: v for k, v in kw.items() if k not in ("device", "requires_grad")}, "randperm")
    n = _size((n,), "randperm")[0]

    keys = rand(n, generator=generator)
    perm = argsort(keys)
    if n:
        note_bounds(perm, 0, n - 1)
    return perm.to(D.from_any(dtype) if dtype is not None else D.int32)


def _uniform_(self, a=0.0, b=1.0, *, generator=None):
    if a > b:
        raise RuntimeError(
            f"pyrite: uniform_ expects to return a [from, to) range, but found from={a} > to={b}"
        )
    return _fill_random(self, "uniform", a, b, generator)


def _normal_(self, mean=0.0, std=1.0, *, generator=None):
    if std < 0:
        raise RuntimeError(f"pyrite: normal expects std >= 0.0, but found std {std}")
    return _fill_random(self, "normal", mean, std, generator)


def _random_(self, from_=0, to=None, *, generator=None):
    return self.copy_(randint(from_, to if to is not None else 2**31 - 1, self._shape))


def _bernoulli_(self, p=0.5, *, generator=None):
    if not isinstance(p, Tensor) and not 0 <= p <= 1:
        raise RuntimeError(f"pyrite: bernoulli_ expects p to be in [0, 1], but got p={p}")
    return self.copy_(rand(self._shape, generator=generator) < p)
