"""pr.autograd.forward_ad (dual tensors by the double-vjp trick, pyrite/autograd_forward_ad.py)
against torch.autograd.forward_ad on fresh random inputs of awkward shapes: elementwise
chains, matmul, softmax, layer_norm, an MLP from pyrite.nn with a dual input, several duals,
outputs reaching some or none of them, in-place ops and views after make_dual, a primal that
requires grad (reverse mode through the dual), the level's context manager and torch's errors.

The oracle is torch's forward AD in float64, so the tolerance bounds pyrite's float32 rounding
alone: `ops` roundings of at most 16 u each (u = 2⁻²⁴; WGSL allows exp 3 + 2·|x| ULP, and
the tangent's two backward passes round again), relative to the largest magnitude involved,
or a dot product's K·u·Σ|aᵢbᵢ| where a matmul is in the chain.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import pyrite as pr
from pyrite.errors import ArgumentError, ArgumentTypeError, PyriteError, ShapeError
from pyrite.testing.tolerance import F32_U, assert_close

torch = pytest.importorskip("torch")
tA = torch.autograd.forward_ad
fA = pr.autograd.forward_ad
# (torch's make_dual loads its jvp decompositions through torch.jit.script, deprecated)
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")


def _tol(ops: int, scale) -> float:
    return ops * 16 * F32_U * float(np.max(np.abs(scale)))


def _arr(rng, shape, low=None):
    a = rng.standard_normal(shape)
    if low is not None:
        a = np.abs(a) + low
    return a.astype(np.float32)


def _t64(a):
    return torch.tensor(a, dtype=torch.float64)


def _both(fn, primals, tangents, consts=()):
    """fn(L, *duals, *consts) run under each library's forward AD: (pyrite's (primal, tangent)
    as numpy, torch float64's), the tangent None where the output has none."""
    with tA.dual_level():
        duals = [tA.make_dual(_t64(p), _t64(t)) for p, t in zip(primals, tangents)]
        want = tA.unpack_dual(fn(torch, *duals, *(_t64(c) for c in consts)))
        want = (
            want.primal.detach().numpy(),
            None if want.tangent is None else want.tangent.numpy(),
        )
    with fA.dual_level():
        duals = [fA.make_dual(pr.tensor(p), pr.tensor(t)) for p, t in zip(primals, tangents)]
        got = fA.unpack_dual(fn(pr, *duals, *(pr.tensor(c) for c in consts)))
        got = (got.primal.detach().numpy(), None if got.tangent is None else got.tangent.numpy())
    return got, want


@pytest.mark.parametrize("shape", [(1,), (7,), (3, 1, 5), (2, 13)])
def test_elementwise_chain(rng, shape):
    x, t = _arr(rng, shape), _arr(rng, shape)
    y = _arr(rng, shape[-1:], low=0.5)  # (a broadcast constant, kept away from 0: it divides)

    def f(L, a, c):  # (log1p of a positive sum: well conditioned, no cancellation to amplify)
        return (L.tanh(a) ** 2 * a.exp() / c + L.sigmoid(a * c)).log1p() * (a * a + 1.0).sqrt()

    got, want = _both(f, [x], [t], [y])
    assert_close(got[0], want[0], atol=_tol(8, want[0]))
    assert_close(got[1], want[1], atol=_tol(12, want[1]))


def test_non_contiguous_dual_and_views(rng):
    x, t = _arr(rng, (5, 3)), _arr(rng, (5, 3))

    def f(L, a):
        v = a.t()  # (3, 5) view of the dual
        return (v[1:, ::2] * v[:-1, :3].exp()).reshape(-1)

    got, want = _both(lambda L, a: f(L, a), [x], [t])
    assert_close(got[1], want[1], atol=_tol(4, want[1]))
    with tA.dual_level():
        w = tA.unpack_dual(tA.make_dual(torch.tensor(x).t(), torch.tensor(t).t()) * 2.0).tangent
    with fA.dual_level():  # (a dual made of a transposed primal and tangent)
        g = fA.unpack_dual(fA.make_dual(pr.tensor(x).t(), pr.tensor(t).t()) * 2.0).tangent
    assert_close(g.numpy(), w.numpy(), atol=_tol(1, w.numpy()))


def test_matmul_with_two_duals(rng):
    K = 17
    a, ta = _arr(rng, (4, K)), _arr(rng, (4, K))
    b, tb = _arr(rng, (K, 6)), _arr(rng, (K, 6))
    got, want = _both(lambda L, x, w: x @ w, [a, b], [ta, tb])
    absum = np.abs(ta) @ np.abs(b) + np.abs(a) @ np.abs(tb)  # (the tangent's two products)
    assert_close(got[0], want[0], atol=K * F32_U * (np.abs(a) @ np.abs(b)))
    assert_close(got[1], want[1], atol=4 * K * F32_U * absum)


@pytest.mark.parametrize("shape", [(1, 1), (3, 11), (2, 3, 7)])
def test_softmax_and_layer_norm(rng, shape):
    x, t = _arr(rng, shape), _arr(rng, shape)
    n = shape[-1]
    w, b = _arr(rng, (n,)), _arr(rng, (n,))

    def f(L, a, w, b):
        F = L.nn.functional
        return F.layer_norm(a.softmax(-1) * 3.0 + a, (n,), w, b, 1e-5)

    got, want = _both(f, [x], [t], [w, b])
    assert_close(got[0], want[0], atol=_tol(4 * n, want[0]))
    # (layer_norm divides by the spread σ: its tangent's error grows as 1/σ)
    assert_close(got[1], want[1], atol=_tol(4 * n, want[1]))


def _mlp_pair(rng, sizes):
    """The same Linear-Tanh-...-Linear in pyrite (float32) and torch (float64), weights drawn
    from rng."""
    mine, theirs = [], []
    for i, (k, m) in enumerate(zip(sizes[:-1], sizes[1:])):
        mine.append(pr.nn.Linear(k, m))
        theirs.append(torch.nn.Linear(k, m))
        if i < len(sizes) - 2:
            mine.append(pr.nn.Tanh())
            theirs.append(torch.nn.Tanh())
    net, tnet = pr.nn.Sequential(*mine), torch.nn.Sequential(*theirs).double()
    with pr.no_grad(), torch.no_grad():
        for p, q in zip(net.parameters(), tnet.parameters()):
            w = _arr(rng, tuple(p.shape)) / np.sqrt(p.shape[-1])
            p.copy_(pr.tensor(w))
            q.copy_(torch.tensor(w, dtype=torch.float64))
    return net, tnet


def test_mlp_with_a_dual_input(rng):
    sizes = (5, 11, 3)
    net, tnet = _mlp_pair(rng, sizes)
    x, t = _arr(rng, (7, 5)), _arr(rng, (7, 5))
    with tA.dual_level():
        out = tnet(tA.make_dual(_t64(x), _t64(t)))
        w_out, w_t = tA.unpack_dual(out)
        # the tangent is differentiable: d(Σ tangent²)/d(first weight)
        (w_gw,) = torch.autograd.grad((w_t**2).sum(), [tnet[0].weight])
    with fA.dual_level():
        out = net(fA.make_dual(pr.tensor(x), pr.tensor(t)))
        g_out, g_t = fA.unpack_dual(out)
        (g_gw,) = pr.autograd.grad((g_t**2).sum(), [net[0].weight])
    scale = 11 * np.abs(w_t.detach().numpy()).max() + 1.0
    assert_close(g_out.detach().numpy(), w_out.detach().numpy(), atol=_tol(2 * 11, scale))
    assert_close(g_t.detach().numpy(), w_t.detach().numpy(), atol=_tol(2 * 11, scale))
    gw = w_gw.numpy()
    assert_close(g_gw.numpy(), gw, atol=_tol(4 * 11, np.abs(gw).max() + scale))


def _outputs(a, b, c):  # (two duals, all three, two, none: a detached one)
    return a * b.exp(), c.tanh() + a, (b * c).sum(0), a.detach() * 2


def test_several_duals_some_outputs_reach_none(rng):
    shape = (3, 4)
    xs = [_arr(rng, shape) for _ in range(3)]
    ts = [_arr(rng, shape) for _ in range(3)]
    with tA.dual_level():
        a, b, c = (tA.make_dual(_t64(x), _t64(t)) for x, t in zip(xs, ts))
        want = [tA.unpack_dual(o).tangent for o in _outputs(a, b, c)]
    with fA.dual_level():
        a, b, c = (fA.make_dual(pr.tensor(x), pr.tensor(t)) for x, t in zip(xs, ts))
        plain = pr.tensor(xs[0])
        got = [fA.unpack_dual(o).tangent for o in _outputs(a, b, c)]
        assert fA.unpack_dual(plain).tangent is None  # (a non-dual tensor)
        assert fA.unpack_dual(plain * 3.0 + 1.0).tangent is None
        assert fA.unpack_dual(a > 0).tangent is None  # (not differentiable)
        lin = pr.nn.Linear(4, 2)
        assert fA.unpack_dual(lin(plain)).tangent is None  # (requires grad, reaches no dual)
        assert fA.unpack_dual(a).tangent.numpy().tolist() == ts[0].tolist()  # (as given)
    assert want[3] is None and got[3] is None
    for g, w in zip(got[:3], want[:3]):
        assert_close(g.numpy(), w.numpy(), atol=_tol(4, w.numpy()))


def test_inplace_ops_after_make_dual(rng):
    x, t, y = _arr(rng, (6,)), _arr(rng, (6,)), _arr(rng, (6,))

    def f(L, a, c):
        u = a * 2.0
        u.add_(1.0)
        u.mul_(a)  # (u = (2a + 1) a)
        z = c.clone()
        z.mul_(a)  # (a plain tensor written with a dual)
        v = a * 1.0
        v[1:4] = a[2:5] * 3.0  # (assigned through an index)
        v[0] = 0.0
        w = a.clone()
        w.exp_()  # (the dual's copy written in place)
        return u + z + v + w

    got, want = _both(f, [x], [t], [y])
    assert_close(got[1], want[1], atol=_tol(6, want[1]))


def test_inplace_op_into_a_view(rng):
    x, t = _arr(rng, (6,)), _arr(rng, (6,))

    def f(L, a):
        v = a * 1.0
        v[1:4].mul_(3.0)
        return v

    got, want = _both(f, [x], [t])
    assert_close(got[1], want[1], atol=_tol(2, want[1]))


def test_primal_that_requires_grad(rng):
    x, t = _arr(rng, (5,)), _arr(rng, (5,))
    tx = _t64(x).requires_grad_(True)
    px = pr.tensor(x, requires_grad=True)
    with tA.dual_level():
        out = (tA.make_dual(tx, _t64(t)) ** 3).exp()
        w_p, w_t = tA.unpack_dual(out)
        out.sum().backward(retain_graph=True)
        (w_gt,) = torch.autograd.grad(w_t.sum(), [tx])
    with fA.dual_level():
        d = fA.make_dual(px, pr.tensor(t))
        out = (d**3).exp()
        p_p, p_t = fA.unpack_dual(out)
        out.sum().backward(retain_graph=True)  # (reverse mode through the dual reaches px)
        (p_gt,) = pr.autograd.grad(p_t.sum(), [px])  # (the tangent's own gradient)
        assert p_p.requires_grad and fA.unpack_dual(p_p).tangent is None  # (primal: no tangent)
        assert fA.unpack_dual(p_p * 2.0).tangent is None
    for g, w in ((p_t, w_t), (px.grad, tx.grad), (p_gt, w_gt)):
        w = w.detach().numpy()
        assert_close(g.detach().numpy(), w, atol=_tol(8, w))


def test_backward_then_more_forward_ad(rng):
    """A backward without retain_graph inside the level frees the graph it ran through, the
    dual's node included; the dual still serves later ops, unpacks and backwards, as torch's."""
    x, t, w = _arr(rng, (4,)), _arr(rng, (4,)), _arr(rng, (4,))
    res = {}
    for A, L, cast in ((tA, torch, _t64), (fA, pr, pr.tensor)):
        wl = cast(w).requires_grad_(True)
        with A.dual_level():
            d = A.make_dual(cast(x), cast(t))
            y = (d * wl).exp()
            t1 = A.unpack_dual(y).tangent.detach()
            y.sum().backward()
            z = (d * 2.0).tanh() * wl
            t2 = A.unpack_dual(z).tangent.detach()
            z.sum().backward()
        res[A] = [v.detach().numpy() for v in (t1, t2, wl.grad)]
    for g, want in zip(res[fA], res[tA]):
        assert_close(g, want, atol=_tol(6, want))


def test_zero_dim_and_caching(rng):
    x, t = _arr(rng, ()), _arr(rng, ())
    got, want = _both(lambda L, a: a**2 * a.exp(), [x], [t])
    assert got[1].shape == ()
    assert_close(got[1], want[1], atol=_tol(4, want[1]))
    with fA.dual_level():
        d = fA.make_dual(pr.tensor(_arr(rng, (4,))), pr.tensor(_arr(rng, (4,))))
        y = d * d
        t1 = fA.unpack_dual(y).tangent
        assert fA.unpack_dual(y).tangent is t1  # (cached: no second pair of passes)
        y.mul_(d)  # (written in place: computed again)
        t2 = fA.unpack_dual(y).tangent
        tt, dd = fA.unpack_dual(d).tangent.numpy(), d.detach().numpy()
        assert_close(t2.numpy(), 3 * dd**2 * tt, atol=_tol(4, 3 * dd**2 * tt))


def test_level_context_manager():
    x = pr.tensor([1.0, 2.0, 3.0])
    with fA.dual_level() as level:
        assert level == 0
        d = fA.make_dual(x, pr.ones(3))
        y = d * 2.0
        assert fA.unpack_dual(y).tangent.numpy().tolist() == [2.0, 2.0, 2.0]
    assert fA.unpack_dual(y).tangent is None  # (the level's tangents are gone)
    assert fA.unpack_dual(d).tangent is None
    assert not d.requires_grad and d.grad_fn is None  # (the dual is plain again)
    assert d.numpy().tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ZeroDivisionError):  # (an error inside still closes the level)
        with fA.dual_level():
            1 / 0
    assert fA.enter_dual_level() == 0
    d = fA.make_dual(x, pr.ones(3))
    fA.exit_dual_level()
    assert fA.unpack_dual(d * 3.0).tangent is None

    @fA.dual_level()
    def inside():
        return fA.unpack_dual(fA.make_dual(x, x) ** 2).tangent.numpy().tolist()

    assert inside() == [2.0, 8.0, 18.0]
    assert isinstance(fA.unpack_dual(x), fA.UnpackedDualTensor)
    assert fA.unpack_dual(x).primal is x
    with pr.no_grad(), fA.dual_level():  # (make_dual and unpack_dual under no_grad)
        d = fA.make_dual(x, pr.ones(3))
        with pr.enable_grad():
            y = d * d
        assert fA.unpack_dual(y).tangent.numpy().tolist() == [2.0, 4.0, 6.0]
        assert fA.unpack_dual(d * d).tangent is None  # (recorded nothing: see the docstring)
    import pyrite.autograd.forward_ad as mod

    assert mod is fA and pr.autograd.forward_ad is fA


def test_exit_drops_the_tangents():
    """Leak check: once the level is closed, nothing of forward_ad holds a tangent."""
    t = pr.ones(3)
    ref = weakref.ref(t)
    with fA.dual_level():
        d = fA.make_dual(pr.tensor([1.0, 2.0, 3.0]), t)
        y = d.exp() * 2.0
        assert fA.unpack_dual(y).tangent is not None and fA.unpack_dual(d).tangent is t
    del t
    gc.collect()
    assert ref() is None
    assert fA.unpack_dual(y).tangent is None and not d.requires_grad


def _raises_like(call, cls):
    """call(A, L) with A torch's forward_ad and L torch, then pyrite's and pyrite: pyrite's
    error is a `cls` and an instance of torch's class, worded as torch's with "pyrite: "."""
    with pytest.raises(Exception) as t_err:
        call(tA, torch)
    with pytest.raises(cls) as p_err:
        call(fA, pr)
    assert isinstance(p_err.value, type(t_err.value)), (p_err.value, t_err.value)
    assert str(p_err.value) == "pyrite: " + str(t_err.value)


def _dual(A, L):
    return A.make_dual(L.ones(2), L.ones(2))


def test_errors_match_torch():
    _raises_like(lambda A, L: A.make_dual(L.ones(2), L.ones(2)), PyriteError)  # (no level)
    _raises_like(lambda A, L: A.exit_dual_level(), PyriteError)
    _raises_like(lambda A, L: A.make_dual(L.ones(2), L.ones(2), level=0), PyriteError)
    with tA.dual_level(), fA.dual_level():
        _raises_like(lambda A, L: A.enter_dual_level(), PyriteError)  # (nested)
        _raises_like(lambda A, L: A.make_dual(L.ones(2), L.ones(3)), ShapeError)
        _raises_like(lambda A, L: A.make_dual(L.ones(2, 3), L.ones(3)), ShapeError)
        _raises_like(lambda A, L: A.exit_dual_level(level=3), PyriteError)
        _raises_like(lambda A, L: A.make_dual(L.ones(2), L.ones(2), level=3), PyriteError)
        _raises_like(lambda A, L: A.unpack_dual(_dual(A, L) * 2, level=3), PyriteError)
        _raises_like(lambda A, L: A.make_dual(_dual(A, L), L.ones(2)), PyriteError)
        _raises_like(lambda A, L: A.make_dual(_dual(A, L).exp(), L.ones(2)), PyriteError)
        for A, L in ((tA, torch), (fA, pr)):  # (a tensor without a tangent: no error)
            assert A.unpack_dual(L.ones(2), level=3).tangent is None
        tx, px = torch.ones(2), pr.ones(2)
        ti, pi = torch.ones(2, dtype=torch.int64), pr.ones(2, dtype=pr.int32)
        for args, pargs in (((ti, tx), (pi, px)), ((tx, ti), (px, pi))):
            with pytest.raises(ValueError) as t_err:
                tA.make_dual(*args)
            with pytest.raises(ArgumentError) as p_err:  # (a ValueError, as torch's)
                fA.make_dual(*pargs)
            want = str(t_err.value).rsplit(":", 1)[0]  # (torch.int64 against pyrite.int32)
            assert str(p_err.value) == "pyrite: " + want + ": pyrite.int32"
        with pytest.raises(ArgumentTypeError, match="must be Tensor, not float"):
            fA.unpack_dual(3.0)
        with pytest.raises(ArgumentTypeError, match="must be Tensor, not float"):
            fA.make_dual(px, 1.0)
    assert fA.unpack_dual(px, level=0).tangent is None  # (no level open: as torch, no error)
