"""Cases tests/test_fuzz_nn.py found wrong, minimised and pinned against torch (CPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
import pyrite.nn.functional as F


def _np(t):
    return t.detach().double().numpy()


# ---- conv_transpose with an output size of exactly 0 raised; torch returns an empty tensor ----
def test_conv_transpose_empty_output():
    x = pr.randn(2, 6, 1, 1, requires_grad=True)
    w = pr.randn(6, 2, 4, 4, requires_grad=True)
    y = F.conv_transpose2d(x, w, None, (1, 3), (2, 1), 0, 3)  # H: (1-1) - 4 + 3 + 1 = 0
    assert tuple(y.shape) == (2, 6, 0, 2)
    y.sum().backward()
    assert not x.grad.numpy().any() and not w.grad.numpy().any()
    assert tuple(F.conv_transpose1d(pr.randn(2, 6, 1), pr.randn(6, 2, 4), None, 1, 2).shape) == (
        2,
        2,
        0,
    )
    with pytest.raises(ValueError):  # (a negative size is refused, as torch)
        F.conv_transpose1d(pr.randn(2, 6, 1), pr.randn(6, 2, 4), None, 1, 3)


# ---- f16 conv_transpose (col2im path) rounded each kernel tap's sum into f16 -----------------
# A bias cancelling the sum left the f16 rounding of the sum: -0.00708 for -0.006775 (80 ulp;
# torch -0.006836). The columns are f32 now and the result is rounded once.
def test_conv_transpose_f16_rounds_once(rng):
    def q(a):
        return torch.tensor(a.astype(np.float32)).half().double()

    x, w = q(rng.standard_normal((3, 6, 5, 1))), q(rng.standard_normal((6, 2, 3, 3)))
    no_bias = torch.nn.functional.conv_transpose2d(x, w, None, 1, (2, 1), 0, 3)
    b = q(-no_bias[0, :, 0, 0].numpy() + 0.001)  # output (0, :, 0, 0) cancels to ~0.001
    want = torch.nn.functional.conv_transpose2d(x, w, b, 1, (2, 1), 0, 3).numpy()
    got = F.conv_transpose2d(
        pr.tensor(x.float().numpy()).half(),
        pr.tensor(w.float().numpy()).half(),
        pr.tensor(b.float().numpy()).half(),
        1,
        (2, 1),
        0,
        3,
    )
    # once rounded from f32: within an f16 ulp of each value plus f32's sum error
    tol = 2.0**-11 * np.abs(want) + 1e-6 * np.abs(want).max()
    assert (np.abs(_np(got) - want) <= tol).all()
