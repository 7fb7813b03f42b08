"""pyrite.autograd.functional against torch.autograd.functional on fresh random inputs:
jacobian (one and several inputs and outputs, nested as torch nests them), hessian, vjp, jvp,
hvp, vhp; create_graph (the result differentiable again), strict, and `from ... import`.
Each entry is a few f32 operations deep: compared to 1e-5 relative to the largest."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.autograd.functional as TAF

import pyrite as pr

PAF = pr.autograd.functional


def _cmp(p, t):
    if isinstance(t, (tuple, list)):
        assert isinstance(p, (tuple, list)) and len(p) == len(t)
        for a, b in zip(p, t):
            _cmp(a, b)
        return
    assert tuple(p.shape) == tuple(t.shape)
    t = t.detach().numpy()
    np.testing.assert_allclose(p.detach().numpy(), t, rtol=0, atol=1e-5 * max(1, np.abs(t).max()))


def _fns(lib):
    return {
        "one_one": lambda x: (x * x).tanh() * x.sum(),
        "two_two": lambda x, w: ((w @ x).sin() * x[0], (x * x).sum()),
        "scalar": lambda x: (x**3).sum() + (x[0] * x[1]).cos() * x.exp().sum(),
    }


def _args(rng, lib):
    a = rng.standard_normal(4).astype(np.float32)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    return lib.tensor(a), lib.tensor(w)


@pytest.mark.parametrize("case", ["one_one", "two_two"])
def test_jacobian(case, rng):
    state = rng.bit_generator.state
    tx, tw = _args(rng, torch)
    rng.bit_generator.state = state
    px, pw = _args(rng, pr)
    targs, pargs = ((tx,), (px,)) if case == "one_one" else ((tx, tw), (px, pw))
    tin = targs[0] if len(targs) == 1 else targs
    pin = pargs[0] if len(pargs) == 1 else pargs
    _cmp(PAF.jacobian(_fns(pr)[case], pin), TAF.jacobian(_fns(torch)[case], tin))


def test_hessian_and_products(rng):
    state = rng.bit_generator.state
    tx, _ = _args(rng, torch)
    rng.bit_generator.state = state
    px, _ = _args(rng, pr)
    v = rng.standard_normal(4).astype(np.float32)
    f, tf = _fns(pr)["scalar"], _fns(torch)["scalar"]
    _cmp(PAF.hessian(f, px), TAF.hessian(tf, tx))
    for name in ("hvp", "vhp"):
        _cmp(getattr(PAF, name)(f, px, pr.tensor(v)), getattr(TAF, name)(tf, tx, torch.tensor(v)))
    g, tg = _fns(pr)["one_one"], _fns(torch)["one_one"]
    _cmp(PAF.vjp(g, px, pr.tensor(v)), TAF.vjp(tg, tx, torch.tensor(v)))
    _cmp(PAF.jvp(g, px, pr.tensor(v)), TAF.jvp(tg, tx, torch.tensor(v)))
    _cmp(PAF.vjp(f, px), TAF.vjp(tf, tx))  # (v omitted: a one-element output)


def test_import_spellings():
    from pyrite.autograd.functional import hessian, jacobian

    assert jacobian is PAF.jacobian and hessian is PAF.hessian


def test_create_graph_and_strict(rng):
    a = rng.standard_normal(3).astype(np.float32)
    px = pr.tensor(a).requires_grad_()
    tx = torch.tensor(a, requires_grad=True)
    pj = pr.autograd.functional.jacobian(lambda x: x.exp() * x.sum(), px, create_graph=True)
    tj = TAF.jacobian(lambda x: x.exp() * x.sum(), tx, create_graph=True)
    pj.sum().backward()
    tj.sum().backward()
    _cmp(px.grad, tx.grad)
    with pytest.raises(RuntimeError, match="independent"):
        PAF.jacobian(lambda x, y: x * 2, (pr.tensor(a), pr.tensor(a)), strict=True)
    # not strict: the independent input's block is zeros
    _, blk = PAF.jacobian(lambda x, y: x * 2, (pr.tensor(a), pr.tensor(a)))
    assert not blk.numpy().any()
