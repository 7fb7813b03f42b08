"""complex64 (ops/complex.py): views, arithmetic, autograd and refusals, against torch CPU.

Tolerances: every complex op here is a few float32 operations on each part, so a result is
within k·2⁻²⁴ of the magnitudes it was computed from (k: the number of roundings on the
longest path, stated beside each check), plus float32 rounding of the inputs themselves.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite.ops.complex import ComplexError

EPS = 2.0**-24


def crandn(rng, *shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def both(a):
    """The same array as a pyrite and a torch tensor."""
    return pr.tensor(a), torch.tensor(a)


def check(got, want, k, scale, what=""):
    """|got - want| <= 2·k·eps·scale elementwise (scale: the magnitudes the result came from;
    2: pyrite's and torch's results each carry up to k roundings, in their own order)."""
    got = got.numpy() if hasattr(got, "numpy") else np.asarray(got)
    want = want.detach().numpy() if hasattr(want, "detach") else np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    err = np.abs(got.astype(np.complex128) - want.astype(np.complex128))
    bound = 2 * k * EPS * np.broadcast_to(scale, err.shape) + 1e-30
    assert np.all(err <= bound), f"{what}: max err {err.max()}, ratio {np.max(err / bound)}"


# ---- layout: the two views ----------------------------------------------------------------------
def test_view_as_real_is_a_zero_copy_view(rng):
    a = crandn(rng, 3, 5)
    z = pr.tensor(a)
    r = pr.view_as_real(z)
    assert r.dtype is pr.float32 and tuple(r.shape) == (3, 5, 2) and r.stride() == (10, 2, 1)
    np.testing.assert_array_equal(r.numpy(), torch.view_as_real(torch.tensor(a)).numpy())
    r[1, 2, 1] = 7.0  # writes reach z
    assert z[1, 2].item() == complex(a[1, 2].real, 7.0)
    zt = z.T  # strides in complex elements, doubled in the real view
    assert zt.stride() == (1, 5) and pr.view_as_real(zt).stride() == (2, 10, 1)
    assert pr.view_as_real(z[1:, ::2]).storage_offset() == 10


def test_view_as_complex_rules_and_errors(rng):
    x = rng.standard_normal((4, 6, 2)).astype(np.float32)
    p, t = both(x)
    np.testing.assert_array_equal(pr.view_as_complex(p).numpy(), torch.view_as_complex(t).numpy())
    z = pr.view_as_complex(p)
    z[0, 0] = 1 + 2j  # writes reach x
    assert p[0, 0].tolist() == [1.0, 2.0]
    for bad, msg in [
        (p[..., :1], "last dimension of size 2"),
        (p.transpose(0, 2)[..., :2], "last dimension with stride 1"),
        (p.reshape(4, 12)[:, 1:11].reshape(4, 5, 2), "storage_offset divisible by 2"),
        (p.reshape(48)[1:47].reshape(23, 2), "storage_offset divisible by 2"),
        (pr.zeros(3, 3)[:, :2], "stride divisible by 2"),
        (pr.zeros(4, 2, dtype=pr.int32), "float32"),
        (pr.zeros(()), "one or more dimensions"),
    ]:
        with pytest.raises(RuntimeError, match=msg):
            pr.view_as_complex(bad)
    with pytest.raises(RuntimeError, match="only supported for complex"):
        pr.view_as_real(p)


def test_dtype_names_and_promotion():
    assert pr.complex64.is_complex and not pr.float32.is_complex
    assert pr.complex128 is pr.complex64 and pr.cfloat is pr.complex64  # (narrowed, as float64)
    assert pr.promote_types(pr.complex64, pr.float32) is pr.complex64
    assert pr.promote_types(torch.float16, torch.complex64) is pr.complex64
    z = pr.tensor(np.array([1 + 2j]))  # numpy's complex128: narrowed
    assert z.dtype is pr.complex64 and z.is_complex() and not z.is_floating_point()
    assert not pr.zeros(2).is_complex()
    assert pr.tensor([1.5 + 1j, 2]).dtype is pr.complex64
    assert (pr.ones(2, dtype=pr.float16) * pr.ones(2, dtype=pr.complex64)).dtype is pr.complex64


# ---- views through the view machinery -----------------------------------------------------------
VIEWS = [
    ("transpose", lambda x: x.transpose(0, 2)),
    ("permute", lambda x: x.permute(2, 0, 1)),
    ("mT", lambda x: x.mT),
    ("slice", lambda x: x[1:, ::2, -3:]),
    ("select", lambda x: x[:, 2]),
    ("ellipsis", lambda x: x[..., 1]),
    (
        "index_tensor",
        lambda x: x[
            torch.tensor([2, 0, 2]) if isinstance(x, torch.Tensor) else pr.tensor([2, 0, 2])
        ],
    ),
    ("mask", lambda x: x[x.real > 0]),
    ("unsqueeze", lambda x: x.unsqueeze(-1).unsqueeze(0)),
    ("squeeze", lambda x: x[:, :1].squeeze(1)),
    ("expand", lambda x: x[:, :1].expand(3, 4, 7)),
    ("flatten", lambda x: x.flatten(1)),
    ("reshape", lambda x: x.reshape(7, -1)),
    ("reshape_strided", lambda x: x.transpose(0, 1).reshape(-1, 7)),
    ("view", lambda x: x.view(3, 28)),
    ("narrow", lambda x: x.narrow(2, 1, 5)),
    ("chunk", lambda x: x.chunk(2, 1)[1]),
    ("split", lambda x: x.split([3, 4], -1)[0]),
    ("unbind", lambda x: x.unbind(1)[3]),
    ("movedim", lambda x: x.movedim(0, -1)),
    ("diagonal", lambda x: x.diagonal(0, 1, 2)),
    ("flip", lambda x: x.flip(1, 2)),
    ("roll", lambda x: x.roll(2, -1)),
    ("repeat", lambda x: x.repeat(2, 1, 1)),
    ("contiguous", lambda x: x.transpose(0, 1).contiguous()),
    ("clone", lambda x: x[:, 1].clone()),
]


@pytest.mark.parametrize("name,fn", VIEWS, ids=[v[0] for v in VIEWS])
def test_views_and_shape_ops(rng, name, fn):
    p, t = both(crandn(rng, 3, 4, 7))
    got, want = fn(p), fn(t)
    assert got.dtype is pr.complex64
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_cat_stack_and_materializing(rng):
    a, b = crandn(rng, 2, 5), crandn(rng, 3, 5)
    (pa, ta), (pb, tb) = both(a), both(b)
    np.testing.assert_array_equal(pr.cat([pa, pb]).numpy(), torch.cat([ta, tb]).numpy())
    np.testing.assert_array_equal(
        pr.stack([pa, pb[:2]], -1).numpy(), torch.stack([ta, tb[:2]], -1).numpy()
    )
    x = rng.standard_normal((3, 5)).astype(np.float32)  # real with complex: promoted
    np.testing.assert_array_equal(
        pr.cat([pb, pr.tensor(x)], 1).numpy(), torch.cat([tb, torch.tensor(x)], 1).numpy()
    )
    assert pb.tolist() == tb.tolist() and pb[1, 2].item() == tb[1, 2].item()
    c = pr.zeros(3, 5, dtype=pr.complex64)
    c[1:, ::2].copy_(pb[:2, ::2])
    c[0] = 2 - 1j
    want = torch.zeros(3, 5, dtype=torch.complex64)
    want[1:, ::2].copy_(tb[:2, ::2])
    want[0] = 2 - 1j
    np.testing.assert_array_equal(c.numpy(), want.numpy())
    c.real = pr.ones(3, 5)
    c.imag[0] = -3.0
    want.real = torch.ones(3, 5)
    want.imag[0] = -3.0
    np.testing.assert_array_equal(c.numpy(), want.numpy())
    # (torch names no dtype for complex64, float32's complex type; session 40)
    assert "+" in repr(pa) and "dtype" not in repr(pa) and "dtype" not in repr(ta)
    assert pr.tensor(pa).dtype is pr.complex64 and pa.numpy().dtype == np.complex64


def test_to_and_factories(rng):
    x = rng.standard_normal((4, 3)).astype(np.float32)
    p, t = both(x)
    np.testing.assert_array_equal(p.to(pr.complex64).numpy(), t.to(torch.complex64).numpy())
    np.testing.assert_array_equal(
        pr.tensor([1, 2], dtype=pr.int32).to(pr.complex64).numpy(), np.array([1, 2], np.complex64)
    )
    z = p.to(pr.complex64) * (1 + 2j)
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        np.testing.assert_array_equal(z.to(pr.float32).numpy(), (t * (1 + 2j)).real.numpy())
    assert (
        pr.ones(2, 3, dtype=pr.complex64).tolist()
        == torch.ones(2, 3, dtype=torch.complex64).tolist()
    )
    assert pr.zeros_like(z).tolist() == [[0j] * 3] * 4
    assert pr.full((2,), 1 - 2j).tolist() == [1 - 2j, 1 - 2j]
    assert pr.full_like(z, 3j).tolist() == [[3j] * 3] * 4
    r = pr.randn(4000, dtype=pr.complex64).numpy()
    # each part N(0, 1/2), as torch: E|z|^2 = 1 (4000 samples: within 5 sd of 1/sqrt(4000))
    assert abs(np.mean(np.abs(r) ** 2) - 1) < 5 * np.sqrt(1 / 4000)


# ---- arithmetic ------------------------------------------------------------------------------
def _operands(rng, shape):
    """complex, complex (non-contiguous view), real tensor, Python scalars."""
    a = crandn(rng, *shape)
    b = crandn(rng, *shape[::-1]).transpose(tuple(range(len(shape)))[::-1])
    r = rng.standard_normal(shape).astype(np.float32)
    return a, b, r


@pytest.mark.parametrize("shape", [(1,), (7,), (13, 5), (2, 3, 11)])
def test_arithmetic_parity(rng, shape):
    a, b, r = _operands(rng, shape)
    pa, ta = both(a)
    rev = tuple(range(len(shape)))[::-1]
    bt = np.ascontiguousarray(b.transpose(rev))
    pb, tb = pr.tensor(bt).permute(*rev), torch.tensor(bt).permute(*rev)
    pr_, tr = both(r)
    m = np.abs(a)[...] * np.abs(b) + 1  # |a||b|: the scale of products
    cases = [
        # (name, fn, roundings k, scale)
        ("add", lambda x, y, s: x + y, 1, np.abs(a) + np.abs(b)),
        ("sub", lambda x, y, s: x - y, 1, np.abs(a) + np.abs(b)),
        (
            "add_alpha",
            lambda x, y, s: (torch if isinstance(x, torch.Tensor) else pr).add(x, y, alpha=2.5),
            3,
            np.abs(a) + 3 * np.abs(b),
        ),
        ("mul", lambda x, y, s: x * y, 3, m),  # two products and a sum per part
        ("div", lambda x, y, s: x / y, 12, np.abs(a) / np.abs(b) + 1),
        ("rdiv_scalar", lambda x, y, s: 2.5 / y, 12, 2.5 / np.abs(b) + 1),
        ("mul_real", lambda x, y, s: x * s, 1, np.abs(a) * np.abs(r)),
        ("real_mul", lambda x, y, s: s * x, 1, np.abs(a) * np.abs(r)),
        ("add_real", lambda x, y, s: s + x - 1, 2, np.abs(a) + np.abs(r) + 1),
        ("rsub_real", lambda x, y, s: s - x, 1, np.abs(a) + np.abs(r)),
        ("div_real", lambda x, y, s: x / (s + 3), 3, np.abs(a)),
        ("real_div", lambda x, y, s: s / y, 12, np.abs(r) / np.abs(b) + 1),
        ("scalar_c", lambda x, y, s: x * (0.5 - 2j) + (1 + 1j), 4, 3 * np.abs(a) + 2),
        ("real_times_j", lambda x, y, s: s * 1j - 2j * s, 2, 3 * np.abs(r)),
        ("neg_conj", lambda x, y, s: -x.conj() + y.conj_physical(), 1, np.abs(a) + np.abs(b)),
        ("exp", lambda x, y, s: x.exp(), 8, np.exp(a.real) + 1),
        (
            "reciprocal",
            lambda x, y, s: x.reciprocal() + y.square(),
            12,
            1 / np.abs(a) + np.abs(b) ** 2,
        ),
        ("sgn", lambda x, y, s: x.sgn(), 6, 1),
    ]
    for name, fn, k, scale in cases:
        got, want = fn(pa, pb, pr_), fn(ta, tb, tr)
        check(got, want, k, scale, name)
    check(pa.abs(), ta.abs(), 2, np.abs(a))
    check(pa.angle(), ta.angle(), 4, np.pi)
    check(pa.real * 1, ta.real, 0, 1)
    check(pa.imag * 1, ta.imag, 0, 1)


def test_inplace_arithmetic(rng):
    a, b, r = _operands(rng, (5, 4))
    pa, ta = both(a)
    pb, tb = both(np.ascontiguousarray(b))
    pa.mul_(pb).add_(pr.tensor(r), alpha=2).div_(1 + 1j)
    pa += 1j
    pa *= 2
    ta.mul_(tb).add_(torch.tensor(r), alpha=2).div_(1 + 1j)
    ta += 1j
    ta *= 2
    check(pa, ta, 24, (np.abs(a) * np.abs(b) + 2 * np.abs(r) + 1) * 2)
    x = pr.zeros(3)
    with pytest.raises(ComplexError, match="can't be cast"):
        x.add_(pr.ones(3, dtype=pr.complex64))


def test_sum_mean_matmul(rng):
    a = crandn(rng, 6, 5, 3)
    p, t = both(a)
    s = np.abs(a).sum()
    for args in [(), (0,), (-1,), ((0, 2),), (1, True)]:
        # a sum of n terms in f32: within n·eps of the sum of magnitudes
        check(p.sum(*args), t.sum(*args), 90, s)
        check(p.mean(*args), t.mean(*args), 90, s)
    check(pr.sum(p, dim=[1]), torch.sum(t, dim=[1]), 90, s)
    b = crandn(rng, 3, 4)
    pb, tb = both(b)
    # (A + iB)(C + iD): each part two real dots of length 3 and a difference (7 roundings)
    check(p @ pb, t @ tb, 8, np.abs(a) @ np.abs(b))
    assert (p == p).all() and not (p != p).any() and (p[0] != p[1]).any()


# ---- autograd ---------------------------------------------------------------------------------
def _grad_pair(rng, fn, *arrays):
    """fn on both libraries; the leaves' gradients of a real loss, compared."""
    pt = [pr.tensor(x, requires_grad=True) for x in arrays]
    tt = [torch.tensor(x, requires_grad=True) for x in arrays]
    lp, lt = fn(pr, *pt), fn(torch, *tt)
    lp.backward()
    lt.backward()
    np.testing.assert_allclose(lp.item(), lt.item(), rtol=1e-5)
    for a, b in zip(pt, tt):
        if b.grad is None:
            assert a.grad is None
            continue
        assert a.grad.dtype is (pr.complex64 if b.grad.is_complex() else pr.float32)
        g, w = a.grad.numpy(), b.grad.numpy()
        # the gradients are a few dozen f32 operations deep: 1e-5 relative to their size
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * np.abs(w).max())


GRADS = {
    "arith": lambda L, z, w, x: ((z * w - z / (w + 2) + x * z.conj() * 0.5j) * (1 - 1j)).real.sum(),
    "abs_angle": lambda L, z, w, x: (z.abs() + (w * 1j).angle() * x).sum(),
    "exp": lambda L, z, w, x: (z.exp() * w).imag.mean(),
    "views": lambda L, z, w, x: (z.T[1:, ::2].reshape(-1) * w.flatten()[:4]).abs().sum(),
    "sum": lambda L, z, w, x: (z.sum(0) * w.mean(1)[:3]).real.sum() + z.sum().imag,
    "cat": lambda L, z, w, x: L.view_as_real(L.cat([z, w], 1) * 2).pow(2).sum(),
    "polar": lambda L, z, w, x: (L.polar(x.abs() + 1, x) * z).real.sum(),
    "complex": lambda L, z, w, x: (L.complex(x, x * 2) * w).imag.sum(),
    "matmul": lambda L, z, w, x: (z.T @ w).abs().sum(),
    "view_as": lambda L, z, w, x: L.view_as_real(L.view_as_complex(L.view_as_real(z) * 3)).sum(),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradients_match_torch(rng, name):
    z, w = crandn(rng, 4, 3), crandn(rng, 4, 3)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    _grad_pair(rng, GRADS[name], z, w, x)


# ---- the Llama reference code, written against torch's API -----------------------------------
def precompute_freqs_cis(L, dim: int, end: int, theta: float = 10000.0):
    freqs = 1.0 / (theta ** (L.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = L.arange(end, device=freqs.device, dtype=L.float32)
    freqs = L.outer(t, freqs)
    return L.polar(L.ones_like(freqs), freqs)  # complex64


def reshape_for_broadcast(freqs_cis, x):
    ndim = x.ndim
    assert freqs_cis.shape == (x.shape[1], x.shape[-1])
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_emb(L, xq, xk, freqs_cis):
    xq_ = L.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = L.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = L.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = L.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def test_llama_rotary_forward_backward(rng):
    B, T, H, D = 2, 7, 3, 10
    q = rng.standard_normal((B, T, H, D)).astype(np.float32)
    k = rng.standard_normal((B, T, H, D)).astype(np.float32)
    w = rng.standard_normal((B, T, H, D)).astype(np.float32)
    out = {}
    for L in (pr, torch):
        fc = precompute_freqs_cis(L, D, T)
        xq, xk = L.tensor(q, requires_grad=True), L.tensor(k, requires_grad=True)
        # (as in training: the projections' outputs, a non-leaf, possibly transposed view)
        yq, yk = apply_rotary_emb(L, xq * 1.0, (xk * 1.0).transpose(1, 2).transpose(1, 2), fc)
        loss = (yq * L.tensor(w)).sum() + (yk * yk).sum()
        loss.backward()
        out[L.__name__] = [fc, yq, yk, loss, xq.grad, xk.grad]
    for got, want in zip(out["pyrite"], out["torch"]):
        # the angles t·θ^(-2i/D) up to T=7 rad; cos/sin of them in f32 (a few ulp of 1), then a
        # complex product (3 roundings) of values of size ~|x|
        np.testing.assert_allclose(
            got.detach().numpy(),
            want.detach().numpy(),
            rtol=2e-5,
            atol=1e-5 * max(1, float(want.detach().abs().max())),
        )


# ---- refusals ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,fn",
    [
        ("erf", lambda z: z.erf()),
        ("softmax", lambda z: z.softmax(-1)),
        ("sort", lambda z: pr.sort(z)),
        ("lt", lambda z: z < z),
        ("mod", lambda z: z % 2),
        ("log_softmax", lambda z: pr.log_softmax(z, -1)),
        ("max", lambda z: z.max()),
        ("pinv", lambda z: pr.linalg.pinv(z)),
        ("cummax", lambda z: z.cummax(0)),
        ("view", lambda z: z.view(pr.float32)),
        ("det", lambda z: pr.linalg.det(z)),
    ],
)
def test_unsupported_ops_raise_naming_the_op(name, fn):
    z = pr.ones(3, 3, dtype=pr.complex64)
    with pytest.raises(ComplexError, match=f"pyrite: .*{name}.* does not support complex"):
        fn(z)
    with pytest.raises(RuntimeError):  # (a RuntimeError too, as torch's)
        fn(z)


def test_inplace_refused_under_autograd():
    z = pr.ones(3, dtype=pr.complex64).requires_grad_()
    y = z * 2
    with pytest.raises(ComplexError, match="requires grad"):
        y.mul_(2)
    with pytest.raises(ComplexError, match="requires grad"):
        y[0] = 1j
    with pr.no_grad():
        y.mul_(2)
    assert y.tolist() == [4 + 0j] * 3


def test_real_tensor_ops_untouched():
    x = pr.tensor([1.0, -2.0])
    assert x.real is x and x.conj() is x and x.angle().tolist() == [0.0, pytest.approx(np.pi)]
    with pytest.raises(RuntimeError, match="imag is not implemented"):
        x.imag
