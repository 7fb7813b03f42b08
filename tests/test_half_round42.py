"""`p_f16r` (kernels/common.py): an f32 rounded to the nearest float16 value without an f16
conversion, which the H100's compiler folded away (f32(f16(q)) gave q back, so
`div(rounding_mode="trunc")` of halves truncated the f32 quotient). Against numpy's f32 -> f16
cast on values across f16's range, its ties, its subnormals and its overflow."""

import numpy as np

import pyrite as pr
from pyrite import dtypes as D
from pyrite.ops.elementwise import _out, run_map


def test_f16_round_matches_numpy_cast(rng):
    n = 40_000
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-9, 6, n)
    h = rng.standard_normal(3_000).astype(np.float16).astype(np.float64)
    half_q = np.spacing(np.abs(h).astype(np.float16)).astype(np.float64) / 2
    special = [65504, 65519.99, 65520, 65536, 1e30, np.inf, -np.inf, np.nan, 0.0, -0.0]
    special += [2.0**-24, 2.0**-25, -(2.0**-25), 3 * 2.0**-26, 2.0**-14, 1.5 * 2.0**-24, 6e-8]
    x = np.concatenate([x, h + half_q, h - half_q, special]).astype(np.float32)  # ties: exact
    t = pr.tensor(x)
    got = run_map("p_f16r(x0)", (t,), ("f32",), _out(None, t._shape, D.float32), "f32").numpy()
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    assert (np.signbit(got) == np.signbit(want))[~np.isnan(want)].all()
