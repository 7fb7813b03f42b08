"""Which torch the tests' verdicts were calibrated on, and what to do under another one.

The test extra pins torch 2.13 (pyproject.toml); the GPU machine has an older CUDA build. Where
the two torches differ in something that is not a computed value (a module's repr, which ops have
a derivative, which calls are refused), the tests hold pyrite to 2.13's behaviour and only that.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

ORACLE_TORCH = "2.13."
IS_ORACLE = torch.__version__.startswith(ORACLE_TORCH)
# torch before the oracle: it lacks some of 2.13's API (F.linear_cross_entropy, BatchNorm's
# bias=, torch.load of .safetensors paths) or words and classes some errors otherwise
OLDER_TORCH = tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 13)


def older_torch_reason(what: str) -> str:
    """The skip reason for a case whose torch side needs torch >= 2.13: `what` says what the
    running torch lacks or does differently."""
    return f"torch {torch.__version__} (before {ORACLE_TORCH}x, the oracle) {what}"


def skip_older_torch(what: str) -> None:
    """Skip the running test under a torch older than the oracle (before calling torch where
    that torch would crash)."""
    if OLDER_TORCH:
        pytest.skip(older_torch_reason(what))


def older_torch_mark(what: str):
    """A pytest mark that skips a case (a parameter, a test) under a torch older than 2.13."""
    return pytest.mark.skipif(OLDER_TORCH, reason=older_torch_reason(what))


def assert_repr_matches(p, t):
    """pyrite's repr equals torch's; under another torch only the class name at its head."""
    if IS_ORACLE:
        assert repr(p) == repr(t)
    else:  # torch < 2.13 words some extra_repr fields differently (LayerNorm's bias=...)
        assert repr(p).split("(")[0] == repr(t).split("(")[0]


def same_error(fp, ft):
    """Both calls raise, pyrite's error an instance of the class torch raised (or of its
    builtin base, e.g. RuntimeError, for torch's own subclasses such as LinAlgError)."""
    with pytest.raises(Exception) as te:
        ft()
    want = type(te.value)
    if want.__module__.startswith("torch"):
        want = next(c for c in want.__mro__ if c.__module__ == "builtins")
    with pytest.raises(want):
        fp()


def crandn(rng, *shape):
    """A complex64 array of standard normal parts."""
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def numpy_of(x):
    """A pyrite or torch tensor's values as numpy (torch's lazy conjugate resolved)."""
    x = x.detach()
    if isinstance(x, torch.Tensor):
        x = x.resolve_conj()
    return x.numpy()


def flush_subnormals(a):
    """`a` (float32 or complex64, or float64/complex128 holding such values) with every value
    or part below float32's smallest normal made a zero of its sign, the rest unchanged: what a
    device that flushes them (backend.Device.flushes_subnormals: NVIDIA's Vulkan driver) reads
    from and writes to its buffers, so an oracle for such a device takes this input."""
    a = np.array(a, copy=True)
    if a.dtype.kind not in "fc":
        return a
    for p in _parts(a):  # (views: written in place)
        sub = _below_normal(p)
        p[sub] = np.copysign(0.0, p[sub])
    return a


def has_subnormal(a):
    """Per element, whether a value or a complex part is nonzero and below float32's smallest
    normal (in a float64 array, values past float32's subnormal range count too)."""
    return np.logical_or.reduce([_below_normal(p) for p in _parts(np.asarray(a))])


def _parts(a):
    """A real array itself, a complex one's real and imaginary parts (views)."""
    return [a] if a.dtype.kind == "f" else [a.real, a.imag]


def _below_normal(p):
    return (p != 0) & (np.abs(p) < np.finfo(np.float32).tiny)


def flushing() -> bool:
    """Whether the device the tests run on flushes f32 subnormals to zero
    (backend.Device.flushes_subnormals; lavapipe keeps them, NVIDIA's Vulkan driver does not)."""
    from pyrite import backend

    return backend.current().flushes_subnormals


def input_choices(*inputs):
    """The input tuples an oracle may judge pyrite's result by: `inputs` as given and, on a
    device that flushes subnormals where one of them holds a subnormal value, `inputs` flushed
    too. Such a device reads a subnormal input as 0 where a kernel does arithmetic on it
    (entr(1e-40) is entr(0) there) and whole where the kernel reads its bits (log's and pow's
    exponent split: 1e-40 ** 0.3 is 1e-12 there, as on lavapipe)."""
    choices = [inputs]
    if flushing() and any(has_subnormal(a).any() for a in inputs if _floating(a)):
        choices.append(tuple(flush_subnormals(a) if _floating(a) else a for a in inputs))
    return choices


def _floating(a):
    return np.asarray(a).dtype.kind in "fc"


def device_error(err_of, *inputs):
    """Per element, the error of pyrite's result as this device can be held to it. `err_of(*args)`
    gives (error, the oracle's result) at inputs `args`, the error an array of floats (or of
    bools: wrong or not). On a device that keeps subnormals: err_of(*inputs)'s error. On one that
    flushes them: the least error over input_choices(*inputs), each 0 where its oracle's result
    has a subnormal (or smaller, nonzero) part, which such a device writes as a zero."""
    errs = []
    for args in input_choices(*inputs):
        err, want = err_of(*args)
        if flushing():
            err = np.where(has_subnormal(want), 0, err)
        errs.append(np.asarray(err, np.float64))
    return np.fmin.reduce(errs)  # (a NaN error under one choice yields to the other's)


def assert_within(got, want, tol, what):
    """|got - want| <= tol elementwise (complex or real, in float64/complex128), naming `what`
    and the first offenders."""
    g, w = np.asarray(got, np.complex128), np.asarray(want, np.complex128)
    assert g.shape == w.shape, (what, g.shape, w.shape)
    err = np.abs(g - w)
    bad = ~(err <= tol)
    assert not bad.any(), (
        f"{what}: err {err[bad][:4]}, tol {np.broadcast_to(tol, err.shape)[bad][:4]}"
    )
