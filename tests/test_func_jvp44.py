"""pyrite.func.jvp and linearize (the double-vjp trick) against torch.func's forward mode on
fresh random inputs: several primals and outputs (pytrees), has_aux, an output that does not
depend on an input (zero tangent out), a Hessian-vector product through grad, jvp inside grad
(the result keeps a graph), and torch's refusals."""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr

torch = pytest.importorskip("torch")
tf = torch.func


def _f(L, w):
    def f(a, b):
        h = L.tanh(a @ w) * b.sum()
        return {"h": h.sin(), "s": (a * a).sum(-1), "c": L.ones(2) * 3.0}

    return f


def _close(got, want, scale=1.0):
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=2e-5,
                               atol=2e-5 * scale)  # fmt: skip


def test_jvp_of_a_pytree_function(rng):
    a, b, w = (rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (5,), (4, 6)))
    ta, tb = (rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (5,)))
    want_out, want_t = tf.jvp(_f(torch, torch.tensor(w)), (torch.tensor(a), torch.tensor(b)),
                              (torch.tensor(ta), torch.tensor(tb)))  # fmt: skip
    got_out, got_t = pr.func.jvp(_f(pr, pr.tensor(w)), (pr.tensor(a), pr.tensor(b)),
                                 (pr.tensor(ta), pr.tensor(tb)))  # fmt: skip
    assert set(got_out) == set(want_out) == set(got_t)
    for k in want_out:
        _close(got_out[k], want_out[k])
        _close(got_t[k], want_t[k], scale=10.0)
    assert not got_t["h"].requires_grad
    np.testing.assert_array_equal(got_t["c"].numpy(), np.zeros(2))  # (no path from the inputs)


def test_has_aux_linearize_and_hvp(rng):
    x, v = (rng.standard_normal((6,)).astype(np.float32) for _ in range(2))

    def f(L):
        return lambda a: ((a.exp() * a).sum(), a.detach() * 2)

    o1, j1, aux1 = tf.jvp(f(torch), (torch.tensor(x),), (torch.tensor(v),), has_aux=True)
    o2, j2, aux2 = pr.func.jvp(f(pr), (pr.tensor(x),), (pr.tensor(v),), has_aux=True)
    _close(o2, o1)
    _close(j2, j1, scale=10.0)
    _close(aux2, aux1)
    out, fn = pr.func.linearize(lambda a: a.sin() * a, pr.tensor(x))
    t_out, t_fn = tf.linearize(lambda a: a.sin() * a, torch.tensor(x))
    _close(out, t_out)
    _close(fn(pr.tensor(v)), t_fn(torch.tensor(v)))
    _close(fn(pr.tensor(x)), t_fn(torch.tensor(x)))  # (called again, other tangents)

    def g(a):
        return (a**3).sum() + (a[:-1] * a[1:]).sum()

    want = tf.jvp(tf.grad(g), (torch.tensor(x),), (torch.tensor(v),))[1]
    got = pr.func.jvp(pr.func.grad(g), (pr.tensor(x),), (pr.tensor(v),))[1]
    _close(got, want, scale=10.0)


def test_jvp_inside_grad_keeps_the_graph(rng):
    x, v = (rng.standard_normal((5,)).astype(np.float32) for _ in range(2))

    def outer(L, func):
        def h(a):
            return (func.jvp(lambda y: (y.sin() * y).sum(), (a,), (L.tensor(v),))[1]) ** 2

        return h

    want = tf.grad(outer(torch, tf))(torch.tensor(x))
    got = pr.func.grad(outer(pr, pr.func))(pr.tensor(x))
    _close(got, want, scale=10.0)


def test_refusals():
    x = pr.ones(3)
    with pytest.raises(Exception, match="Expected primals to be a tuple"):
        pr.func.jvp(lambda a: a, x, (x,))
    with pytest.raises(Exception, match="same python structure"):
        pr.func.jvp(lambda a: a, (x,), (x, x))
    with pytest.raises(Exception, match="same shape"):
        pr.func.jvp(lambda a: a, (x,), (pr.ones(4),))
