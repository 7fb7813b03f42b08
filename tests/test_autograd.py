"""The autograd engine (pyrite/autograd.py): accumulation, broadcasting, graph lifetime, hooks,
double backward, in-place safety, custom Functions — each against torch's autograd on the same
random inputs, or against torch's errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr


def both(rng, *shapes):
    arrs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    return (
        [pr.tensor(a).requires_grad_() for a in arrs],
        [torch.tensor(a, requires_grad=True) for a in arrs],
    )


def close(p, t, tol=2e-5):
    assert p is not None and t is not None, (p, t)
    np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=tol, atol=tol)


def test_chain_of_ops_matches_torch(rng):
    (x, w, b), (tx, tw, tb) = both(rng, (7, 13), (5, 13), (5,))

    def f(L, x, w, b):
        h = (x @ w.T + b).tanh() * 0.5 + x[:, :5].sigmoid()
        return (h.exp().mean(0) - h.relu().sum(1, keepdim=True).log1p()).sum()

    f(pr, x, w, b).backward()
    f(torch, tx, tw, tb).backward()
    for p, t in ((x, tx), (w, tw), (b, tb)):
        close(p.grad, t.grad)


def test_broadcast_gradients_sum_back_and_accumulate(rng):
    (a, b), (ta, tb) = both(rng, (4, 1, 3), (5, 1))
    for _ in range(2):  # .grad accumulates across backward calls
        (a * b + b).sum().backward()
        (ta * tb + tb).sum().backward()
    close(a.grad, ta.grad)
    close(b.grad, tb.grad)
    assert tuple(b.grad.shape) == (5, 1)


def test_grad_of_non_scalar_needs_gradient(rng):
    (x,), _ = both(rng, (3,))
    y = x * 2
    with pytest.raises(RuntimeError, match="implicitly created only for scalar"):
        y.backward()
    g = pr.tensor([1.0, 2.0, 3.0])
    y.backward(g)
    np.testing.assert_allclose(x.grad.numpy(), [2, 4, 6])


def test_backward_twice_needs_retain_graph(rng):
    (x,), _ = both(rng, (3,))
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_double_backward_of_cube_and_gradient_penalty(rng):
    (x,), (tx,) = both(rng, (6,))
    (g,) = pr.autograd.grad((x**3).sum(), x, create_graph=True)
    (tg,) = torch.autograd.grad((tx**3).sum(), tx, create_graph=True)
    close(g, tg)
    (gg,) = pr.autograd.grad(g.sum(), x)
    (tgg,) = torch.autograd.grad(tg.sum(), tx)
    close(gg, tgg)
    # a gradient penalty: || d/dx (w·tanh(x)) ||² differentiated wrt w
    (w,), (tw,) = both(rng, (6,))
    (gx,) = pr.autograd.grad((w * x.tanh()).sum(), x, create_graph=True)
    (tgx,) = torch.autograd.grad((tw * tx.tanh()).sum(), tx, create_graph=True)
    (gx * gx).sum().backward()
    (tgx * tgx).sum().backward()
    close(w.grad, tw.grad)


def test_hooks_retain_grad_and_inspection(rng):
    (x,), (tx,) = both(rng, (4,))
    y = x * 3
    y.retain_grad()
    seen = []
    h = y.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 2)
    (y * y).sum().backward()
    ty = tx * 3
    ty.retain_grad()
    ty.register_hook(lambda g: g * 2)
    (ty * ty).sum().backward()
    close(x.grad, tx.grad)
    close(y.grad, ty.grad)
    assert len(seen) == 1
    h.remove()
    assert y.grad_fn is not None and not y.is_leaf and x.is_leaf
    assert y.grad_fn.next_functions[0][0].variable is x


def test_no_grad_detach_and_integer_results(rng):
    (x,), _ = both(rng, (5,))
    with pr.no_grad():
        assert not (x * 2).requires_grad
    assert not x.detach().requires_grad
    assert (x * 2).requires_grad
    idx = x.argmax()
    assert not idx.requires_grad and idx.grad_fn is None
    assert not (x > 0).requires_grad
    with pytest.raises(RuntimeError, match="floating point"):
        pr.tensor([1, 2]).requires_grad_()


def test_inplace_on_leaf_and_stale_saved_tensor_raise(rng):
    (x,), _ = both(rng, (4,))
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.add_(1)
    with pr.no_grad():
        x.add_(1)  # allowed without recording, as torch
    y = x * 2
    z = y.exp()  # saves its output
    y.add_(1)  # does not touch z's saved output
    z.sum().backward()
    w = x * 2
    v = w.sin()  # saves w
    w.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        v.sum().backward()


def test_inplace_on_non_leaf_records(rng):
    (x,), (tx,) = both(rng, (6,))
    z = x.sin()
    z.mul_(3.0)
    z.relu_()
    (z * x).sum().backward()
    tz = tx.sin()
    tz.mul_(3.0)
    tz.relu_()
    (tz * tx).sum().backward()
    close(x.grad, tx.grad)


def test_setitem_and_advanced_getitem(rng):
    (x, v), (tx, tv) = both(rng, (5, 4), (2, 4))
    idx = [0, 3, 0]  # a repeated index accumulates
    buf = pr.zeros(6, 4)
    buf[1:3] = v * 2
    out = (buf.sum(0) * x[idx].sum(0)).sum()
    out.backward()
    tbuf = torch.zeros(6, 4)
    tbuf[1:3] = tv * 2
    (tbuf.sum(0) * tx[idx].sum(0)).sum().backward()
    close(x.grad, tx.grad)
    close(v.grad, tv.grad)


def test_custom_function(rng):
    class Cube(pr.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

    (x,), (tx,) = both(rng, (5,))
    Cube.apply(x).sum().backward()
    (tx**3).sum().backward()
    close(x.grad, tx.grad)


def test_autograd_grad_of_intermediate_and_unused(rng):
    (x, u), _ = both(rng, (3,), (3,))
    y = x.exp()
    z = (y * 2).sum()
    gy, gx = pr.autograd.grad(z, [y, x], retain_graph=True)
    np.testing.assert_allclose(gy.numpy(), 2.0)
    np.testing.assert_allclose(gx.numpy(), 2 * np.exp(x.detach().numpy()), rtol=1e-6)
    with pytest.raises(RuntimeError, match="not have been used"):
        pr.autograd.grad(z, [u], retain_graph=True)
    assert pr.autograd.grad(z, [u], allow_unused=True) == (None,)
    assert x.grad is None


def test_missing_rule_raises_at_backward(rng):
    (x,), _ = both(rng, (4, 4))
    h = pr.heaviside(x, x + 1)  # (no rule: torch has no derivative for heaviside either)
    assert h.requires_grad
    with pytest.raises(NotImplementedError, match="heaviside"):
        h.sum().backward()
    # histc is not differentiable in torch: its counts never require grad
    assert not pr.histc(x, bins=5).requires_grad


def test_anomaly_names_the_op(rng):
    x = pr.tensor([0.0, 1.0]).requires_grad_()
    y = x.sqrt().sum()  # d sqrt at 0 is inf
    with pr.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match="sqrtBackward"):
            y.backward()


def test_gradcheck_passes_and_catches_a_wrong_rule(rng):
    x = pr.tensor(rng.standard_normal((3, 4)).astype(np.float32)).requires_grad_()
    assert pr.autograd.gradcheck(lambda t: (t.tanh() * t).sum(1), (x,), eps=1e-2, atol=2e-2)

    class Wrong(pr.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3

    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        pr.autograd.gradcheck(Wrong.apply, (x,), eps=1e-2, atol=1e-2)


def test_second_derivatives_through_output_reading_rules(rng):
    """Rules that read their output (tanh, exp, sqrt, div, softmax...) recompute it while a
    double backward is recorded: d²/dx² matches torch's, where the saved output alone would
    treat it as a constant."""
    a = rng.uniform(0.2, 1.5, (7,)).astype(np.float32)
    fns = [
        lambda L, x: (x.tanh() * x).sum(),
        lambda L, x: (x.exp() * x.sqrt()).sum(),
        lambda L, x: (1.0 / x + x.sigmoid() * x).sum(),
        lambda L, x: (L.softmax(x * x, 0) * x).sum() + L.log_softmax(x, 0)[2] * x[1],
        lambda L, x: (x[1:4] ** 3).sum() + x.logsumexp(0) * x.std(),
    ]
    for f in fns:
        x = pr.tensor(a).requires_grad_()
        tx = torch.tensor(a, requires_grad=True)
        (g,) = pr.autograd.grad(f(pr, x), x, create_graph=True)
        (tg,) = torch.autograd.grad(f(torch, tx), tx, create_graph=True)
        (gg,) = pr.autograd.grad((g * g).sum(), x)
        (tgg,) = torch.autograd.grad((tg * tg).sum(), tx)
        close(gg, tgg, 1e-4)


@pytest.mark.parametrize("name", ["relu", "sigmoid", "tanh", "gelu", "gelu_tanh", "silu"])
def test_fused_activation_gradients_first_and_second_order(name, rng):
    """The activations' one-kernel first-order gradients (ops/elementwise_grads._FUSED) equal
    torch's, on a non-contiguous input; under create_graph the composite rule records, so the
    second derivative matches torch's too."""
    import torch.nn.functional as TF

    import pyrite.nn.functional as F

    a = (rng.standard_normal((9, 13)) * 2.5).astype(np.float32)
    w = rng.standard_normal((13, 9)).astype(np.float32)

    def f(L, Fn, x):
        if name.startswith("gelu"):
            y = Fn.gelu(x.t(), approximate="tanh" if name == "gelu_tanh" else "none")
        else:
            y = getattr(Fn, name)(x.t())
        return (y * L.tensor(w)).sum()

    x = pr.tensor(a).requires_grad_()
    tx = torch.tensor(a, requires_grad=True)
    f(pr, F, x).backward()
    f(torch, TF, tx).backward()
    close(x.grad, tx.grad, 2e-5 * np.abs(w).max())
    x = pr.tensor(a).requires_grad_()
    tx = torch.tensor(a, requires_grad=True)
    (g,) = pr.autograd.grad(f(pr, F, x), x, create_graph=True)
    (tg,) = torch.autograd.grad(f(torch, TF, tx), tx, create_graph=True)
    if name == "relu":  # piecewise linear: no second derivative, and g does not depend on x
        close(g, tg, 2e-5 * np.abs(w).max())
        return
    (gg,) = pr.autograd.grad((g * g).sum(), x)
    (tgg,) = torch.autograd.grad((tg * tg).sum(), tx)
    close(gg, tgg, 1e-4 * np.abs(w).max() ** 2)


def test_warnings_point_at_the_callers_line():
    """Op wrappers (autograd's, the bf16 fallback's) add frames: pyrite's warnings still name
    the user's line (pyrite.errors.warn walks out of the package)."""
    import warnings

    import pyrite.nn.functional as F

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        F.mse_loss(pr.ones(3, 1, 2).requires_grad_(), pr.ones(3, 5, 2))
    assert caught and all(w.filename == __file__ for w in caught), [
        (w.filename, w.lineno) for w in caught
    ]


def test_inplace_into_views_rebases_the_base(rng):
    """In-place ops into views of a tensor in the graph (torch's CopySlices): h[1].mul_(y),
    h[:, 2:4] += ..., a view kept and written, a buffer filled from a grad tensor — gradients
    equal torch's; a view of a leaf that requires grad is refused as torch refuses it."""
    (x, y), (tx, ty) = both(rng, (4, 5), (5,))

    def f(L, x, y):
        h = x * 2
        h[1].mul_(y)
        h[:, 2:4] += 1.5 * x[:, :2]
        v = h[2]
        v.add_(y)
        buf = L.zeros(3, 5)
        buf[1:].copy_(h[:2].tanh())
        return (h * h).sum() + v.sum() + (buf * buf).sum()

    f(pr, x, y).backward()
    f(torch, tx, ty).backward()
    close(x.grad, tx.grad)
    close(y.grad, ty.grad)
    with pytest.raises(RuntimeError, match="view of a leaf Variable"):
        x[0].add_(1.0)


def test_double_backward_through_in_place_writes_into_views(rng):
    """A second derivative through the same writes into views (CopySlices' rule writes the
    gradient in place into an as_strided window, whose own gradient reads only the window's
    layout: autograd.Geometry), and as_strided's input written in place after the view is taken
    — Hessian-vector products equal torch's."""
    (x, y), (tx, ty) = both(rng, (4, 7), (7,))

    def f(L, x, y):
        h = x * 1.5
        h[1:3].mul_(y)
        h[:, 2:5] += x[:, :3] ** 2
        w = h.as_strided((3, 2), (7, 3), 1)
        return (h**3).sum() + (w * w).sum()

    for L, a, b in ((pr, x, y), (torch, tx, ty)):
        gx, gy = L.autograd.grad(f(L, a, b), (a, b), create_graph=True)
        (gx.sin().sum() + (gy * gy).sum()).backward()
    close(x.grad, tx.grad, 1e-4)
    close(y.grad, ty.grad, 1e-4)

    (x,), (tx,) = both(rng, (10,))
    for L, a in ((pr, x), (torch, tx)):
        h = a * 2.0
        w = h.as_strided((3, 2), (3, 1), 2)
        out = (w * 3.0).sum()  # (w's values not saved)
        h.add_(1.0)  # (as_strided's gradient reads h's layout, not its values)
        out.backward()
    close(x.grad, tx.grad)


def test_in_place_on_an_op_result_that_is_internally_a_view(rng):
    """linear of a 1-D input returns a view of its 2-D GEMM output, attention its output in its
    inputs' head layout: to the caller they are new tensors, so an in-place op on them keeps
    their gradient (it was silently dropped: the view's invisible base took the history)."""
    import torch.nn.functional as TF

    import pyrite.nn.functional as F

    a = rng.standard_normal(7).astype(np.float32)
    w = rng.standard_normal((4, 7)).astype(np.float32)
    grads = []
    for lib, Fn in ((pr, F), (torch, TF)):
        x, W = lib.tensor(a, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = Fn.linear(x, W)
        y.mul_(3.0)
        y[1:3] += 0.5  # into a view of the (now own) result
        (y**2).sum().backward()
        grads.append((x.grad, W.grad))
    close(grads[0][0], grads[1][0], 1e-5)
    close(grads[0][1], grads[1][1], 1e-5)
    # attention saves its output: modifying it in place raises the version error (as torch's
    # flash kernels do) instead of giving no gradient
    B, L, H, E = 2, 5, 3, 8
    qkv = pr.tensor(rng.standard_normal((B, L, 3 * H * E)).astype(np.float32)).requires_grad_()
    q, k, v = (t.reshape(B, L, H, E).transpose(1, 2) for t in qkv.split(H * E, dim=-1))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    o.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        o.sum().backward()


@pytest.mark.parametrize("op", ["sort", "max", "topk", "kthvalue", "median"])
def test_in_place_on_values_whose_backward_reads_only_indices(op, rng):
    """sort/max(dim)/topk/kthvalue/median(dim) route the gradient through their indices: their
    values may be changed in place afterwards, as torch allows (a version error before)."""
    a = rng.permutation(24).astype(np.float32).reshape(4, 6) * 0.5  # no ties
    grads = []
    for lib in (pr, torch):
        x = lib.tensor(a, requires_grad=True)
        y = x * 1.0
        if op == "topk":
            vals = y.topk(3, dim=1)[0]
        elif op == "kthvalue":
            vals = y.kthvalue(2, dim=1)[0]
        else:
            vals = getattr(y, op)(1)[0] if op != "sort" else y.sort(1)[0]
        vals.mul_(2.0)
        (vals * vals).sum().backward()
        grads.append(x.grad)
    close(grads[0], grads[1], 1e-5)


_INPLACE_AFTER = {
    "linear1d": lambda L, Fn, a, w: Fn.linear(a[0], w),
    "matmul_vec": lambda L, Fn, a, w: a @ w[0],
    "softmax": lambda L, Fn, a, w: Fn.softmax(a, -1),
    "layer_norm": lambda L, Fn, a, w: Fn.layer_norm(a, (6,)),
    "gelu": lambda L, Fn, a, w: Fn.gelu(a),
    "div": lambda L, Fn, a, w: a / (w[:4] ** 2 + 1),
    "pow": lambda L, Fn, a, w: a**3,
    "var": lambda L, Fn, a, w: a.var(1),
    "sort": lambda L, Fn, a, w: a.sort(1)[0],
    "max_dim": lambda L, Fn, a, w: a.max(1)[0],
    "cumsum": lambda L, Fn, a, w: a.cumsum(1),
    "conv2d": lambda L, Fn, a, w: Fn.conv2d(a.reshape(1, 1, 4, 6), w[:2, :4].reshape(2, 1, 2, 2)),
    "embedding": lambda L, Fn, a, w: Fn.embedding(L.tensor([1, 3, 1]), a),
    "cat": lambda L, Fn, a, w: L.cat([a, w], 0),
    "index": lambda L, Fn, a, w: a[L.tensor([0, 2])],
    "narrow_of_mm": lambda L, Fn, a, w: (a @ w.t())[1:3],
    "t_of_mm": lambda L, Fn, a, w: (a @ w.t()).t(),
    "exp": lambda L, Fn, a, w: (
        a.exp()
    ),  # torch raises (exp's backward reads its output): so must pyrite
}


@pytest.mark.parametrize("how", ["mul_", "slice_add"])
@pytest.mark.parametrize("op", sorted(_INPLACE_AFTER))
def test_in_place_after_the_op_as_torch(op, how, rng):
    """An op's result modified in place before backward: the gradient equals torch's, or both
    raise (a saved output modified). Never a silently different or missing gradient."""
    import torch.nn.functional as TF

    import pyrite.nn.functional as F

    A = rng.standard_normal((4, 6)).astype(np.float32)
    W = rng.standard_normal((5, 6)).astype(np.float32)
    got = []
    for lib, Fn in ((pr, F), (torch, TF)):
        a, w = lib.tensor(A, requires_grad=True), lib.tensor(W, requires_grad=True)
        try:
            y = _INPLACE_AFTER[op](lib, Fn, a * 1.0, w * 1.0)
            if how == "mul_":
                y.mul_(1.5)
            else:
                y[..., :1] += 0.25
            (y * y).sum().backward()
            got.append((a.grad, w.grad))
        except RuntimeError:
            got.append("raised")
    if got[1] == "raised":
        assert got[0] == "raised"
        return
    assert got[0] != "raised"
    for p, t in zip(*got):
        assert (p is None) == (t is None)
        if t is not None:
            close(p, t, 1e-4 * max(1.0, float(t.abs().max())))


def test_retained_grad_accumulates_across_backward_calls(rng):
    """A non-leaf's retained .grad adds up over backward calls, as a leaf's does (it was
    overwritten: [1, 1, 1] where torch gives [2, 2, 2])."""
    (x,), (tx,) = both(rng, (3,))
    h, th = x * 2, tx * 2
    h.retain_grad()
    th.retain_grad()
    loss, tloss = (h * h).sum(), (th * th).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    tloss.backward(retain_graph=True)
    tloss.backward()
    close(h.grad, th.grad)
    close(x.grad, tx.grad)


def test_a_kernel_without_a_gradient_is_named_by_its_public_op(rng):
    """A public op (no rule of its own) whose body runs a raw map on an input that requires
    grad: the backward's error names the op, not the map's WGSL expression."""
    from pyrite.autograd import wrap
    from pyrite.ops.core import empty, run_map

    def my_op(x):
        out = empty(x.shape, pr.float32)
        run_map("x0 * 2.0", (x,), ("f32",), out, "f32")
        return out.sum()

    (x,), _ = both(rng, (5,))
    with pytest.raises(NotImplementedError, match="gradient of my_op is not implemented"):
        wrap(my_op, "my_op", None)(x).backward()
