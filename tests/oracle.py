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
    """`a` (float32 or complex64) with every subnormal value or part made a zero of its sign:
    what a device that flushes them (backend.Device.flushes_subnormals: NVIDIA's Vulkan driver)
    reads from and writes to its buffers, so an oracle for such a device takes this input."""
    a = np.array(a, copy=True)
    parts = [a] if a.dtype.kind == "f" else [a.real, a.imag]
    tiny = np.finfo(np.float32).tiny
    out = []
    for p in parts:
        p = np.array(p, np.float32)
        sub = (p != 0) & (np.abs(p) < tiny)
        p[sub] = np.copysign(np.float32(0), p[sub])
        out.append(p)
    if a.dtype.kind == "f":
        return out[0].astype(a.dtype)
    return _complex(out[0], out[1], a.dtype)


def _complex(re, im, dtype):
    """re + i·im with the signs of zero parts kept (re + 1j * im loses -0.0 imaginary parts)."""
    z = np.empty(re.shape, dtype)
    z.real, z.imag = re, im
    return z


def has_subnormal(a):
    """Per element, whether a float32 value or a complex64 part is subnormal."""
    a = np.asarray(a)
    tiny = np.finfo(np.float32).tiny
    parts = [a] if a.dtype.kind == "f" else [a.real, a.imag]
    return np.logical_or.reduce([(p != 0) & (np.abs(p) < tiny) for p in parts])


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
