"""tanhshrink(x) = x - tanh(x) by its odd series below |x| = 0.6 (kernels/common.py
p_tanhshrink), where the subtraction cancels: against mpmath, within 3 ulp of the result there
(the subtraction was 60 ulp off near 0.25 and 0.3 % relative at 0.01; torch CPU's is as far off
near 0), within 12 ulp past it (tanh's own error, magnified by x / (x - tanh x) <= 5.9)."""

from __future__ import annotations

import mpmath as mp
import numpy as np

import pyrite as pr


def test_tanhshrink_accuracy(rng):
    x = np.concatenate(
        [
            rng.uniform(-3, 3, 3000),
            np.geomspace(1e-7, 0.6, 1500) * rng.choice([-1, 1], 1500),
            [0.5999999, 0.6, -0.6, 1e-30, -1e-30],
        ]
    ).astype(np.float32)
    got = pr.nn.functional.tanhshrink(pr.tensor(x)).numpy().astype(np.float64)
    with mp.workdps(30):
        want = np.array([float(mp.mpf(float(v)) - mp.tanh(mp.mpf(float(v)))) for v in x])
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    ulp = np.maximum(ulp, np.float64(2.0**-149))
    err = np.abs(got - want) / ulp
    small = np.abs(x) < 0.6
    assert err[small].max() <= 3, err[small].max()
    assert err[~small].max() <= 12, err[~small].max()


def test_tanhshrink_specials():
    x = pr.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan")])
    got = pr.nn.functional.tanhshrink(x).numpy()
    assert got[0] == 0 and not np.signbit(got[1])  # (+0 as x - tanh(x), as torch)
    assert got[2] == np.inf and got[3] == -np.inf and np.isnan(got[4])
