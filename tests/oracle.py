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
