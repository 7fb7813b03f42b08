"""Cases the big differential sweeps (tests/test_sweep.py --cases 200, tests/test_grad_sweep.py)
found wrong, pinned with their inputs: the suite's own sweep runs only the first few cases."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import pyrite as pr
from tests.sweep_ops import OPS
from tests.test_sweep import run_op

INF, NAN = math.inf, math.nan


def _same(p, t):
    np.testing.assert_array_equal(p.float().numpy(), t.float().numpy())


# ---- var_mean / std_mean: the mean of one element is that element, also when infinite --------
# (sweep: std_mean cases 78, 93, 136 and var_mean case 141: a reduced dim of size 1 holding ±inf
# gave a NaN mean; PyTorch's Welford starts at the first element)
@pytest.mark.parametrize(
    "vals",
    [[INF], [-INF], [NAN], [3.0], [1.0, INF], [INF, 1.0], [1.0, 2.0, INF], [INF, -INF], [NAN, 1.0]],
)
@pytest.mark.parametrize("op", ["var_mean", "std_mean"])
@pytest.mark.parametrize("correction", [0, 1])
def test_moments_with_infinities(op, vals, correction):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degrees of freedom <= 0
        t = getattr(torch, op)(torch.tensor([vals]), dim=1, correction=correction)
        p = getattr(pr, op)(pr.tensor([vals]), dim=1, correction=correction)
    _same(p[0], t[0])
    _same(p[1], t[1])


@pytest.mark.parametrize("name,cases", [("std_mean", (78, 93, 136)), ("var_mean", (141,))])
def test_moments_sweep_cases(name, cases):
    (op,) = [o for o in OPS if o.name == name]
    for i in cases:
        (o,) = run_op(op, 1, i)
        assert o.status != "FAIL", o.detail


# ---- x[mask] = one-element tensor: torch's masked_fill path checks the value's range -----------
# (sweep: "x[idx] = v" case 121: uint8[13][bool mask] = float64 tensor([-0.65]) returned a
# tensor where torch raises "value cannot be converted to type uint8_t without overflow")
def _masked_set(L, x, v):
    x[x > 1] = v
    return x


@pytest.mark.parametrize(
    "dtype,value,vdtype",
    [
        ("uint8", [-0.65], "float64"),
        ("uint8", 300, "int64"),
        ("int8", [200], "int32"),
        ("uint8", [7.5], "float32"),  # in range: truncated, as torch's masked_fill
        ("float16", [1e6], "float32"),
        ("float16", INF, "float32"),
    ],
)
def test_mask_setitem_one_element_value(dtype, value, vdtype):
    out = []
    for L in (torch, pr):
        x = L.tensor([1, 2, 3], dtype=getattr(L, dtype))
        try:
            out.append(_masked_set(L, x, L.tensor(value, dtype=getattr(L, vdtype))))
        except RuntimeError as e:
            out.append(e)
    t, p = out
    if isinstance(t, Exception):
        assert isinstance(p, RuntimeError) and "without overflow" in str(p), p
    else:
        _same(p, t)


def test_index_put_mask_and_masked_fill_check_the_value():
    for L in (torch, pr):
        mask = L.tensor([True, False, True])
        with pytest.raises(RuntimeError, match="without overflow"):
            L.ones(3, dtype=L.uint8).index_put_((mask,), L.tensor([300]))
        with pytest.raises(RuntimeError, match="without overflow"):
            L.ones(3, dtype=L.float16).masked_fill(mask, L.tensor(1e6))


def test_mask_setitem_sweep_case():
    (op,) = [o for o in OPS if o.name == "x[idx] = v"]
    (o,) = run_op(op, 1, 121)
    assert o.status != "FAIL", o.detail


# ---- div(rounding_mode="trunc") of a half type by one value: the f32 quotient truncated ----------
# (sweep: "div(rounding_mode)" case 361: bf16 17.125 / f32 0-d 5.7183 gave 3, torch 2: torch's
# reduced-float kernel divides by a scalar divisor's original value in f32 and truncates that;
# with a divisor of many values it truncates the quotient rounded to the half type)
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize(
    "divisor",
    [
        lambda L, dt: 5.718324184417725,
        lambda L, dt: L.tensor(5.718324184417725),
        lambda L, dt: L.tensor([5.718324184417725], dtype=dt),
        lambda L, dt: L.tensor([[5.718324184417725]], dtype=dt).expand(2, 2),
        lambda L, dt: L.full((2,), 5.718324184417725, dtype=dt),  # many values: rounded first
        lambda L, dt: L.tensor([0.15], dtype=dt),  # -9 / f16 0.15: -59 (the f16 quotient: -60)
    ],
)
def test_div_trunc_half_by_one_value(dtype, divisor):
    out = []
    for L in (torch, pr):
        dt = getattr(L, dtype)
        x = L.tensor([[17.125, -9.0], [-17.125, 9.0]], dtype=dt)
        d = divisor(L, dt)
        out.append((L.div(x, d, rounding_mode="trunc"), x.clone().div_(d, rounding_mode="trunc")))
    for p, t in zip(out[1], out[0]):
        assert str(p.dtype) == str(t.dtype).replace("torch", "pyrite")
        _same(p, t)


def test_div_trunc_sweep_case():
    (op,) = [o for o in OPS if o.name == "div(rounding_mode)"]
    (o,) = run_op(op, 1, 361)
    assert o.status != "FAIL", o.detail


# ---- an empty slice keeps torch's storage offset (start clamped to [0, size]) ------------------
# (sweep: "stride/is_contiguous" case 280: x[:, 2:2:3] of a (17, 3) tensor had offset 0, torch 2)
def test_empty_slice_storage_offset():
    for idx in [(slice(None), slice(2, 2, 3)), (slice(None), slice(9, None)), (slice(20, None),)]:
        t = torch.zeros(17, 7)[idx]
        p = pr.zeros(17, 7)[idx]
        assert (p.shape, p.stride(), p.storage_offset()) == (
            t.shape,
            t.stride(),
            t.storage_offset(),
        )
        assert p.clone().shape == t.shape and p.sum(0).shape == t.sum(0).shape
    (op,) = [o for o in OPS if o.name == "stride/is_contiguous"]
    (o,) = run_op(op, 1, 280)
    assert o.status != "FAIL", o.detail
