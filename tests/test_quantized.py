"""Weight-only int8 / int4 linear layers (ops/quantized.py, kernels/quant.py, quantization.py).

The reference weight is built in numpy from the integer values, scales and offsets the test drew
(W = q·scale (+ offset), group by group), independent of the packing and of the kernels; the
products are compared with float64 numpy within a dot product's rounding bound. Quantization
itself is checked against its definition: every element within half a step of the weight, the
integers in range, and torch's own int8 weight-only product (`torch._weight_int8pack_mm`) agrees.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import pyrite as pr
from pyrite import backend
from pyrite.ops import core
from pyrite.ops import quantized as Q
from pyrite.quantization import (
    Int4WeightOnlyConfig,
    Int8WeightOnlyConfig,
    QuantizedLinear,
    QuantizedWeight,
    int4_weight_only,
    qlinear,
    quantize_,
    quantize_weight,
)
from pyrite.testing.tolerance import F32_U, assert_close, matmul_tol


def _draw(rng, bits, N, K, gs):
    """Random integer values, scales (and offsets) and the float64 weight they stand for."""
    groups = 1 if gs is None else -(-K // gs)
    if bits == 8:
        q = rng.integers(-128, 128, (N, K))
        off = None
    else:
        q = rng.integers(0, 16, (N, K))
        off = rng.standard_normal((N, groups)).astype(np.float32)
    sc = (rng.random((N, groups)) * 0.2 + 0.01).astype(np.float32)
    col_group = np.arange(K) // (K if gs is None else gs)
    w = q * sc[:, col_group].astype(np.float64)
    if off is not None:
        w = w + off[:, col_group]
    return q, sc, off, w


def _deq_tol(q, sc, off, gs):
    """One rounding of q·scale (+ offset, fused): 2u of the terms' magnitudes."""
    col_group = np.arange(q.shape[1]) // (q.shape[1] if gs is None else gs)
    mag = np.abs(q * sc[:, col_group].astype(np.float64))
    if off is not None:
        mag = mag + np.abs(off[:, col_group])
    return 2 * F32_U * mag + 1e-30


def _ref(x, w, b=None):
    y = x.astype(np.float64) @ w.T
    tol = matmul_tol(x, w.T) + 4 * F32_U * np.abs(y)
    if b is not None:
        y = y + b
        tol = tol + 2 * F32_U * (np.abs(y) + np.abs(b))
    return y, tol


# shapes: K below, at and past a unit (int8 16 values, int4 32), primes; N below and past a
# workgroup's columns (8)
CASES = [
    (8, None, 1, 1),
    (8, None, 5, 37),
    (8, 4, 13, 16),
    (8, 12, 9, 97),
    (8, 32, 33, 256),
    (4, 8, 7, 5),
    (4, 8, 9, 33),
    (4, 24, 17, 100),
    (4, 32, 40, 64),
    (4, None, 11, 77),
    (4, 128, 3, 300),
]


@pytest.mark.parametrize("bits,gs,N,K", CASES)
@pytest.mark.parametrize("M", [1, 3, 11])  # baked row counts 1, 4 and 8 (+ 4: 11 = 8 + 3)
def test_qlinear_matches_the_dequantized_weight(rng, bits, gs, N, K, M):
    q, sc, off, w = _draw(rng, bits, N, K, gs)
    qw = QuantizedWeight.from_values(q, sc, off, bits=bits, group_size=gs)
    x = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    y, tol = _ref(x, w, b)
    assert_close(qlinear(pr.tensor(x), qw, pr.tensor(b)), y, atol=tol, msg="with bias")
    y0, tol0 = _ref(x, w)
    assert_close(qlinear(pr.tensor(x), qw), y0, atol=tol0, msg="no bias")
    assert_close(qw.dequantize(), w, atol=_deq_tol(q, sc, off, gs), msg="dequantize")


@pytest.mark.parametrize("bits,gs", [(8, None), (4, 32)])
def test_many_rows_take_the_dequantized_gemm_and_agree(rng, bits, gs, monkeypatch):
    """Past QGEMV_MAX_M rows the weight is dequantized and multiplied by the GEMM; forcing
    each path on the same rows gives the same product within the rounding bound."""
    N, K, M = 45, 200, 21
    q, sc, off, w = _draw(rng, bits, N, K, gs)
    qw = QuantizedWeight.from_values(q, sc, off, bits=bits, group_size=gs)
    x = rng.standard_normal((M, K)).astype(np.float32)
    y, tol = _ref(x, w)
    dev = backend.current()
    monkeypatch.setattr(core, "POISON", False)  # (count the product's own dispatches)
    for max_m, gemv in ((0, False), (64, True)):
        monkeypatch.setattr(Q, "QGEMV_MAX_M", max_m)
        monkeypatch.setattr(dev, "adapter_type", "DiscreteGPU")  # (lavapipe caps it at 8 rows)
        xt = pr.tensor(x)
        d0 = dev.dispatches
        out = qlinear(xt, qw)
        n = dev.dispatches - d0
        assert (n == -(-M // Q.QGEMV_ROWS)) if gemv else (n >= 2), (max_m, n)
        assert_close(out, y, atol=tol, msg=f"gemv={gemv}")


@pytest.mark.parametrize("bits,gs,K", [(8, None, 203), (8, 64, 160), (4, 32, 141), (4, 128, 256)])
def test_every_gemv_shape_agrees(rng, bits, gs, K, monkeypatch):
    """The GEMV's shape knobs (lanes a column, words a lane's step, columns a lane group, steps
    an iteration) and every conversion of the packed values (QGEMV_UNPACK: I2F, the exponent
    trick after a shift, the exponent trick in place with the scale once a step), scales staged
    in workgroup memory or not, all give the product within the rounding bound, K's tail
    included."""
    N = 23
    q, sc, off, w = _draw(rng, bits, N, K, gs)
    qw = QuantizedWeight.from_values(q, sc, off, bits=bits, group_size=gs)
    b = rng.standard_normal(N).astype(np.float32)
    x = rng.standard_normal((6, K)).astype(np.float32)
    # (rows, lanes, words, columns, steps an iteration, unpack, staged scales): each row count
    # another shape
    knobs = [
        (1, 64, 1, 4, 4, "magic", False),
        (1, 32, 2, 2, 2, "inplace", False),
        (2, 16, 2, 2, 2, "convert", True),
        (2, 16, 4, 1, 1, "inplace", True),
        (4, 32, 4, 4, 1, "magic", True),
        (4, 8, 1, 2, 2, "inplace", False),
        (6, 8, 1, 2, 2, "convert", False),
        (6, 32, 2, 4, 4, "inplace", False),
    ]
    monkeypatch.setattr(Q, "QGEMV_SHAPE_INT4", {})  # (int4's own shapes and unpacks: the knobs
    monkeypatch.setattr(Q, "QGEMV_UNPACK_INT4", {})  # rule)
    for (M, lanes, wpl, cols, unroll, unpack, stage), sg in itertools.product(knobs, (True, False)):
        rm = 8 if M > 4 else M
        monkeypatch.setitem(Q.QGEMV_SHAPE, rm, (lanes, wpl, cols, unroll))
        monkeypatch.setattr(Q, "QGEMV_UNPACK", unpack)
        monkeypatch.setattr(Q, "QGEMV_STAGE", stage)
        monkeypatch.setattr(Q, "QGEMV_SUBGROUPS", sg)  # (the lanes' sums: subgroups or tree)
        y, tol = _ref(x[:M], w, b)
        out = qlinear(pr.tensor(x[:M]), qw, pr.tensor(b))
        assert_close(
            out,
            y,
            atol=tol,
            msg=f"{lanes} lanes, {wpl} words, {cols} cols, x{unroll}, {unpack}, M={M}, "
            f"subgroups {sg}",
        )


def test_strided_and_batched_inputs_and_other_float_dtypes(rng):
    N, K = 19, 72
    q, sc, off, w = _draw(rng, 4, N, K, 8)
    qw = QuantizedWeight.from_values(q, sc, off, bits=4, group_size=8)
    x = rng.standard_normal((2, 3, K)).astype(np.float32)
    y, tol = _ref(x.reshape(-1, K), w)
    out = qlinear(pr.tensor(x), qw)
    assert out.shape == (2, 3, N)
    assert_close(out.reshape(-1, N), y, atol=tol, msg="3-d input")
    # a transposed view (unit stride along rows, not K) and an offset view of a wider tensor
    xt = pr.tensor(np.ascontiguousarray(x.reshape(-1, K).T)).T
    assert_close(qlinear(xt, qw), y, atol=tol, msg="transposed input")
    wide = rng.standard_normal((6, K + 3)).astype(np.float32)
    yw, tolw = _ref(wide[:, 1 : K + 1], w)
    assert_close(qlinear(pr.tensor(wide)[:, 1 : K + 1], qw), yw, atol=tolw, msg="offset view")
    # bfloat16 in, bfloat16 out (computed in f32, rounded once)
    xb = pr.tensor(x[0]).to(pr.bfloat16)
    ob = qlinear(xb, qw)
    assert ob.dtype is pr.bfloat16
    yb, tolb = _ref(xb.float().numpy(), w)
    assert_close(ob.float(), yb, atol=tolb, rtol=2.0**-8, msg="bfloat16")
    assert qlinear(pr.zeros(0, K), qw).shape == (0, N)


@pytest.mark.parametrize("bits,gs", [(8, None), (8, 16), (4, 8), (4, 64), (4, None)])
def test_quantize_weight_is_within_half_a_step(rng, bits, gs):
    N, K = 23, 101
    w = (rng.standard_normal((N, K)) * rng.random((N, 1)) * 3).astype(np.float32)
    w[0] = 0.0  # an all-zero row
    w[1] = 0.75  # a constant row
    qw = quantize_weight(pr.tensor(w), bits=bits, group_size=gs)
    g = K if gs is None else gs
    groups = -(-K // g)
    sc = qw.scales.numpy()
    assert sc.shape == (N, groups)
    step = sc[:, np.arange(K) // g].astype(np.float64)
    deq = qw.dequantize().numpy().astype(np.float64)
    assert_close(deq, w, atol=step / 2 * (1 + 1e-5) + 1e-7, msg="half a step")
    assert_close(deq[0], np.zeros(K), msg="zero row")
    assert_close(deq[1], w[1], rtol=1e-6, msg="constant row")
    if bits == 8:  # symmetric: the group's largest magnitude is exactly ±127 steps
        blocks = np.abs(np.pad(w, ((0, 0), (0, groups * g - K)))).reshape(N, groups, g).max(2)
        assert_close(sc[2:], blocks[2:] / 127.0, rtol=2 * F32_U)


def test_int8_per_row_matches_torch_weight_int8pack_mm(rng):
    torch = pytest.importorskip("torch")
    N, K, M = 37, 96, 3
    q = rng.integers(-128, 128, (N, K)).astype(np.int8)
    sc = (rng.random(N) * 0.1 + 0.01).astype(np.float32)
    x = rng.standard_normal((M, K)).astype(np.float32)
    ref = torch._weight_int8pack_mm(torch.from_numpy(x), torch.from_numpy(q), torch.from_numpy(sc))
    qw = QuantizedWeight.from_values(q, sc, bits=8)
    w = q.astype(np.float64) * sc[:, None]
    _, tol = _ref(x, w)
    assert_close(qlinear(pr.tensor(x), qw), ref.numpy(), atol=2 * tol, msg="torch oracle")


def test_gradient_flows_to_the_input_and_bias_not_the_weight(rng):
    torch = pytest.importorskip("torch")
    N, K = 14, 40
    w = rng.standard_normal((N, K)).astype(np.float32)
    qw = quantize_weight(pr.tensor(w), bits=4, group_size=8)
    wd = qw.dequantize().numpy()
    x = rng.standard_normal((2, 3, K)).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    g = rng.standard_normal((2, 3, N)).astype(np.float32)
    xp = pr.tensor(x, requires_grad=True)
    bp = pr.tensor(b, requires_grad=True)
    qlinear(xp, qw, bp).backward(pr.tensor(g))
    xt = torch.tensor(x, requires_grad=True)
    bt = torch.tensor(b, requires_grad=True)
    torch.nn.functional.linear(xt, torch.tensor(wd), bt).backward(torch.tensor(g))
    assert_close(xp.grad, xt.grad, atol=matmul_tol(g.reshape(-1, N), wd).reshape(x.shape) * 2)
    gsum = np.abs(g).reshape(-1, N).sum(0)
    assert_close(bp.grad, bt.grad, atol=8 * F32_U * gsum)


def test_quantize_model_state_dict_and_compile(rng, tmp_path):
    pr.manual_seed(int(rng.integers(1 << 30)))
    nn = pr.nn
    model = nn.Sequential(nn.Linear(48, 64), nn.GELU(), nn.Linear(64, 10, bias=False))
    model.add_module("head", nn.Linear(10, 5))
    x = pr.tensor(rng.standard_normal((3, 48)).astype(np.float32))
    quantize_(model, int4_weight_only(group_size=16), filter_fn=lambda m, fqn: fqn != "head")
    assert isinstance(model[0], QuantizedLinear) and isinstance(model[2], QuantizedLinear)
    assert isinstance(model.head, nn.Linear)
    assert "int4" in repr(model[0]) and model[2].bias is None
    assert not any(p.ndim == 2 and p.shape == (64, 48) for p in model.parameters())
    y = model(x).numpy()
    # the reference: the same layers over the dequantized weights, composed from plain ops
    h = pr.nn.functional.linear(x, model[0].weight.dequantize(), model[0].bias)
    h = pr.nn.functional.gelu(h) @ model[2].weight.dequantize().T
    ref = model.head(h).numpy()
    assert_close(y, ref, atol=1e-4 * (1 + np.abs(ref)))
    # state_dict into a fresh quantized model of the same structure
    path = tmp_path / "q.pt"
    pr.save(model.state_dict(), path)
    other = nn.Sequential(nn.Linear(48, 64), nn.GELU(), nn.Linear(64, 10, bias=False))
    other.add_module("head", nn.Linear(10, 5))
    quantize_(other, Int4WeightOnlyConfig(group_size=16), filter_fn=lambda m, fqn: fqn != "head")
    other.load_state_dict(pr.load(path))
    assert_close(other(x), y, atol=0.0)
    f = pr.compile(model)
    assert_close(f(x), y, atol=0.0)
    assert_close(f(x), y, atol=0.0)


def test_bad_input_gets_clear_errors(rng):
    w = pr.tensor(rng.standard_normal((4, 16)).astype(np.float32))
    with pytest.raises(ValueError, match="int8 or int4"):
        quantize_weight(w, bits=3)
    with pytest.raises(ValueError, match="multiple of 8"):
        quantize_weight(w, bits=4, group_size=12)
    with pytest.raises(ValueError, match="NaN"):
        quantize_weight(pr.tensor([[1.0, float("nan")]]), bits=8)
    with pytest.raises(pr.ShapeError, match="2-D"):
        quantize_weight(pr.randn(3), bits=8)
    with pytest.raises(ValueError, match=r"\[0, 15\]"):
        QuantizedWeight.from_values(np.full((2, 8), 16), np.ones(2), np.zeros(2), bits=4)
    with pytest.raises(ValueError, match="offsets"):
        QuantizedWeight.from_values(np.zeros((2, 8), int), np.ones(2), bits=4)
    with pytest.raises(pr.ShapeError, match=r"\(2, 1\)"):
        QuantizedWeight.from_values(np.zeros((2, 8), int), np.ones(3), bits=8)
    qw = quantize_weight(w, bits=8)
    with pytest.raises(pr.ShapeError, match="in_features 16"):
        qlinear(pr.randn(2, 15), qw)
    with pytest.raises(pr.ShapeError, match=r"\(4,\)"):
        qlinear(pr.randn(2, 16), qw, pr.randn(5))
    with pytest.raises(TypeError, match="floating point"):
        qlinear(pr.ones(2, 16, dtype=pr.int32), qw)
    with pytest.raises(TypeError, match="Int8WeightOnlyConfig"):
        quantize_(pr.nn.Sequential(pr.nn.Linear(2, 2)), "int8")
    with pytest.raises(TypeError, match="from_float"):
        quantize_(pr.nn.Linear(2, 2), Int8WeightOnlyConfig())


def test_loop_budget_sends_long_rows_to_the_gemm(rng, loop_budget):
    """A row longer than one invocation may loop over (lavapipe's budget) takes the
    dequantized GEMM, which splits K itself."""
    N, K = 9, 2048
    q, sc, off, w = _draw(rng, 8, N, K, 64)
    qw = QuantizedWeight.from_values(q, sc, bits=8, group_size=64)
    loop_budget(8)
    x = rng.standard_normal((1, K)).astype(np.float32)
    y, tol = _ref(x, w)
    assert_close(qlinear(pr.tensor(x), qw), y, atol=tol)
