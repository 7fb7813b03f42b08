"""Breadth gaps a hunt through ported training scripts found, each against torch 2.13 CPU:
GradScaler and gradient clipping when no parameter has a gradient, the dtype checks of the
index/scatter writes, `untyped_storage()` and pr.cuda's memory queries, `optim.Muon`,
`_foreach_powsum`, and the `pr.func` transforms (grad, grad_and_value, vjp, jacrev, jacfwd,
hessian, vmap). Inputs are fresh random values of awkward sizes (the `rng` fixture)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite.errors import PyriteError


def _np(x):
    if isinstance(x, torch.Tensor):
        return x.detach().float().numpy()
    return x.detach().float().numpy() if isinstance(x, pr.Tensor) else np.asarray(x)


def _raises_both(fn, torch_type, pyrite_type, words):
    """fn(L) raises torch_type in torch and pyrite_type in pyrite, both messages holding
    `words`."""
    with pytest.raises(torch_type) as want:
        fn(torch)
    with pytest.raises(pyrite_type) as got:
        fn(pr)
    assert words in str(want.value), str(want.value)
    assert words in str(got.value), str(got.value)
    return got.value


# ---- GradScaler with no gradients ------------------------------------------------------------
def _scaler_pair(L):
    p = L.nn.Parameter(L.ones(3))
    q = L.nn.Parameter(L.ones(5))
    dev = "cpu" if L is torch else "cuda"
    return p, q, L.optim.SGD([p], lr=0.1), L.optim.SGD([q], lr=0.1), L.amp.GradScaler(dev)


def test_grad_scaler_step_without_gradients_raises():
    """torch: scaler.step(opt) of an optimizer none of whose parameters has a .grad is an
    AssertionError, after unscale_ (which records nothing) too."""

    def step_no_grad(L):
        p, q, o1, o2, s = _scaler_pair(L)
        s.scale((p * 2).sum()).backward()
        s.step(o2)  # q has no gradient

    _raises_both(
        step_no_grad,
        AssertionError,
        AssertionError,
        "No inf checks were recorded for this optimizer.",
    )

    def unscale_then_step(L):
        p, q, o1, o2, s = _scaler_pair(L)
        s.scale(L.ones(()))
        s.unscale_(o2)  # allowed: nothing to unscale
        s.step(o2)

    _raises_both(unscale_then_step, AssertionError, AssertionError, "No inf checks were recorded")


def test_grad_scaler_update_needs_a_recorded_check():
    """update() after a scale() with no step (or a step that raised) is torch's AssertionError;
    one optimizer with gradients is enough for update to go ahead."""

    def update_only(L):
        p, q, o1, o2, s = _scaler_pair(L)
        s.scale((p * 2).sum()).backward()
        s.update()

    _raises_both(
        update_only, AssertionError, AssertionError, "No inf checks were recorded prior to update."
    )

    scales = []
    for L in (torch, pr):
        p, q, o1, o2, s = _scaler_pair(L)
        s.scale((p * 2).sum()).backward()
        s.step(o1)
        with pytest.raises(AssertionError, match="No inf checks were recorded for this"):
            s.step(o2)
        s.update()  # o1's check counts
        scales.append(s.get_scale())
        with pytest.raises(AssertionError, match="prior to update"):
            s.update()  # the checks were consumed by the last update
    assert scales[0] == scales[1]


@pytest.mark.parametrize("call", ["unscale_", "step", "update"])
def test_grad_scaler_before_scale_raises(call):
    """torch's scale tensor is made by the first scale(): unscale_/step/update before it raise
    AssertionError "Attempted <call> but _scale is None", after a load_state_dict too."""

    def early(L):
        p, q, o1, o2, s = _scaler_pair(L)
        s.load_state_dict(s.state_dict())
        p.grad = L.ones(3)
        getattr(s, call)(*([] if call == "update" else [o1]))

    _raises_both(early, AssertionError, AssertionError, f"Attempted {call} but _scale is None")
    p, q, o1, o2, s = _scaler_pair(pr)
    off = pr.amp.GradScaler(enabled=False)
    assert off.step(o1) is None  # a disabled scaler just steps


# ---- gradient clipping with no gradients -----------------------------------------------------
@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 3.5])
@pytest.mark.parametrize("foreach", [None, True, False])
def test_clip_grad_norm_without_gradients_is_zero(norm_type, foreach):
    """torch returns a 0-d float32 zero and leaves everything alone (error_if_nonfinite too)."""
    for L in (torch, pr):
        ps = [L.nn.Parameter(L.ones(3)), L.nn.Parameter(L.ones(2, 7))]
        for params in (ps, ps[0], []):
            n = L.nn.utils.clip_grad_norm_(
                params, 1.0, norm_type=norm_type, error_if_nonfinite=True, foreach=foreach
            )
            assert tuple(n.shape) == () and float(n) == 0.0
            assert str(n.dtype).endswith("float32")
        assert all(p.grad is None for p in ps)


@pytest.mark.parametrize("foreach", [None, True, False])
def test_clip_grad_value_without_gradients_raises(foreach):
    """torch 2.13 groups the gradients by device before clamping and refuses an empty list,
    whatever foreach; pyrite raises the same (a RuntimeError)."""
    words = "Expected !nested_tensorlist[0].empty() to be true, but got false."
    for params in (lambda L: [L.nn.Parameter(L.ones(3))], lambda L: [], lambda L: L.ones(2)):
        _raises_both(
            lambda L, params=params: L.nn.utils.clip_grad_value_(params(L), 0.5, foreach=foreach),
            RuntimeError,
            PyriteError,
            words,
        )


def test_clip_grad_value_mixed_and_nan(rng):
    """Parameters with and without gradients: only the gradients are clamped; a NaN
    clip_value makes the gradients NaN, as torch's clamp does (no error)."""
    g = (rng.standard_normal((4, 9)) * 3).astype(np.float32)
    clip = float(rng.uniform(0.2, 1.5))
    out = []
    for L in (torch, pr):
        a, b = L.nn.Parameter(L.zeros(4, 9)), L.nn.Parameter(L.zeros(6))
        a.grad = L.tensor(g)
        assert L.nn.utils.clip_grad_value_([a, b], clip) is None
        out.append(_np(a.grad).copy())
        assert b.grad is None
        L.nn.utils.clip_grad_value_(a, float("nan"))
        assert np.isnan(_np(a.grad)).all()
    np.testing.assert_array_equal(out[1], out[0])  # a clamp is exact


# ---- dtype checks of the index/scatter writes ------------------------------------------------
_WRITES = {
    "index_copy_": lambda L, x, s: x.index_copy_(0, L.tensor([2, 0]), s(2, 3)),
    "index_copy": lambda L, x, s: x.index_copy(0, L.tensor([2, 0]), s(2, 3)),
    "torch.index_copy": lambda L, x, s: L.index_copy(x, 0, L.tensor([1]), s(1, 3)),
    "index_add_": lambda L, x, s: x.index_add_(0, L.tensor([2, 0]), s(2, 3)),
    "index_add": lambda L, x, s: x.index_add(0, L.tensor([3]), s(1, 3), alpha=2),
    "index_reduce_": lambda L, x, s: x.index_reduce_(0, L.tensor([2, 0]), s(2, 3), "amax"),
    "scatter_": lambda L, x, s: x.scatter_(0, L.tensor([[0, 1, 2]]), s(1, 3)),
    "scatter": lambda L, x, s: L.scatter(x, 1, L.tensor([[0], [2]]), s(2, 1)),
    "scatter_add_": lambda L, x, s: x.scatter_add_(0, L.tensor([[0, 1, 2]]), s(1, 3)),
    "scatter_reduce_": lambda L, x, s: x.scatter_reduce_(0, L.tensor([[3, 1, 0]]), s(1, 3), "sum"),
    "masked_scatter_": lambda L, x, s: x.masked_scatter_(x > 0, s(4, 3)),
    "masked_scatter": lambda L, x, s: x.masked_scatter(x > 0, s(12)),
    "put_": lambda L, x, s: x.put_(L.tensor([0, 7]), s(2)),
    "put_ accumulate": lambda L, x, s: x.put_(L.tensor([5, 1]), s(2), accumulate=True),
    "put": lambda L, x, s: x.put(L.tensor([0, 7, 11]), s(3)),
    "put_ empty": lambda L, x, s: x.put_(L.tensor([], dtype=L.int64), s(0)),
    "index_copy_ empty": lambda L, x, s: x.index_copy_(0, L.tensor([], dtype=L.int64), s(0, 3)),
}


_PAIRS = [  # (self's dtype, the source's)
    ("float32", "int32"),
    ("float32", "bfloat16"),
    ("float32", "float64"),
    ("bfloat16", "float32"),
    ("int32", "float32"),
]


@pytest.mark.filterwarnings("ignore:index_reduce")  # torch: "in beta"
@pytest.mark.parametrize("name", sorted(_WRITES))
@pytest.mark.parametrize("pair", _PAIRS, ids="-".join)
def test_index_writes_refuse_another_dtype(name, pair, rng):
    """A source of another dtype than self's is refused (torch: RuntimeError; pyrite: TypeError,
    its dtype refusal, naming both dtypes), bfloat16 ones too (pyrite widens those to float32
    for these kernels: the check comes first). float64 is float32 in pyrite (README), so there
    it is torch alone that refuses. A source of self's dtype goes through, with torch's values."""
    self_dt, src_dt = pair
    v = (rng.standard_normal((4, 3)) * 4).astype(np.float32)
    values = []
    for L in (torch, pr):
        x = L.tensor(v).to(getattr(L, self_dt))
        src = lambda *shape, L=L: L.ones(shape, dtype=getattr(L, src_dt))  # noqa: E731
        same = lambda *shape, L=L, x=x: L.ones(shape, dtype=x.dtype) * 3  # noqa: E731
        if src_dt == "float64" and L is pr:
            _WRITES[name](L, x.clone(), src)  # float64 is float32 here: the same dtype
        else:
            with pytest.raises(TypeError if L is pr else RuntimeError) as info:
                _WRITES[name](L, x.clone(), src)
            msg = str(info.value)
            assert "dtype" in msg or "scalar type" in msg, msg
            if L is pr:
                assert self_dt in msg and src_dt in msg, msg
        out = x.clone()
        res = _WRITES[name](L, out, same)
        values.append((_np(res), _np(out)))
    for got, want in zip(values[1], values[0]):
        np.testing.assert_array_equal(got, want)  # moves and small integer sums: exact


def test_put_values_and_index_fill_casts(rng):
    """put_ of a matching source writes what torch writes; index_fill_'s 0-d value of another
    dtype is cast (torch accepts it), as is scatter_'s Python-number value."""
    v = rng.standard_normal((5, 7)).astype(np.float32)
    idx = rng.choice(35, size=6, replace=False)
    src = rng.standard_normal(6).astype(np.float32)
    out = []
    for L in (torch, pr):
        x = L.tensor(v)
        x.put_(L.tensor(idx), L.tensor(src))
        x.put_(L.tensor(idx[:2]), L.tensor(src[:2]), accumulate=True)
        x.index_fill_(1, L.tensor([3, 0]), L.tensor(2, dtype=L.int32))
        x.scatter_(0, L.tensor([[4, 2]]), 1.5)
        out.append(_np(x))
    np.testing.assert_allclose(out[1], out[0], rtol=1e-6, atol=1e-6)


# ---- untyped_storage and the memory queries --------------------------------------------------
@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float16", "int8", "int16", "int32", "bool"])
def test_untyped_storage_matches_torch(dt, rng):
    """nbytes()/size()/len() as torch counts them (a view reports its base's storage), one
    data_ptr() for every view of a tensor (the base's data_ptr()), another for a copy, and the
    bytes in torch's layout."""
    n, m = 7, int(rng.integers(2, 6))
    vals = rng.integers(-3, 4, (n, m)).astype(np.float32)
    got = {}
    for L in (torch, pr):
        if dt == "float16" and L is pr and not pr.backend.current().has_f16:
            pytest.skip("float16 storage needs shader-f16")
        x = L.tensor(vals)
        x = x > 0 if dt == "bool" else x.to(getattr(L, dt))
        s = x.untyped_storage()
        views = [x[1:], x.t(), x[2:5, 1:], x.reshape(-1)[3:], x.unsqueeze(0).expand(3, n, m), x[-1]]
        same = [v.untyped_storage().data_ptr() == s.data_ptr() for v in views]
        sizes = {s.nbytes(), s.size(), len(s), *(v.untyped_storage().nbytes() for v in views)}
        got[L] = (
            sizes,
            same,
            s.data_ptr() == x.data_ptr(),
            x.clone().untyped_storage().data_ptr() == s.data_ptr(),
            s.element_size(),
            s.tolist(),
            s == x[1:].untyped_storage(),
            L.zeros(0).untyped_storage().nbytes(),
        )
    assert got[pr] == got[torch]
    assert got[pr][0] == {n * m * pr.tensor([], dtype=getattr(pr, dt)).element_size()}


def test_memory_reserved_peak_and_mem_get_info(rng):
    """max_memory_reserved is the peak of memory_reserved (reset by reset_peak_memory_stats);
    mem_get_info is (total - reserved, total) with total the device properties' figure."""
    props = pr.cuda.get_device_properties(0)  # (its first call may probe the device)
    pr.cuda.empty_cache()
    pr.cuda.reset_peak_memory_stats()
    base = pr.cuda.memory_reserved()
    assert pr.cuda.max_memory_reserved() == base >= pr.cuda.memory_allocated()
    n = 1_000_003 + int(rng.integers(0, 1000))  # a size class the pool holds no buffer of
    x = pr.empty(n)
    peak = pr.cuda.max_memory_reserved()
    assert peak >= base + 4 * n and peak == pr.cuda.memory_reserved()
    free, total = pr.cuda.mem_get_info()
    assert free == max(total - pr.cuda.memory_reserved(), 0)
    assert isinstance(free, int) and isinstance(total, int)
    assert total == props.total_memory > 0
    del x
    pr.cuda.empty_cache()
    assert pr.cuda.memory_reserved() < peak == pr.cuda.max_memory_reserved()
    assert pr.cuda.max_memory_cached() == peak  # torch's older name
    pr.cuda.reset_peak_memory_stats()
    assert pr.cuda.max_memory_reserved() == pr.cuda.memory_reserved()
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        pr.cuda.mem_get_info(1)


# ---- optim.Muon ------------------------------------------------------------------------------
_MUON_CASES = [
    ((7, 13), {}),
    ((13, 7), {"nesterov": False, "momentum": 0.9}),
    ((31, 17), {"adjust_lr_fn": "match_rms_adamw", "weight_decay": 0.01, "lr": 0.02}),
    ((1, 9), {"adjust_lr_fn": "original"}),
    ((64, 97), {"lr": 0.05, "ns_steps": 3, "eps": 1e-5}),
    ((5, 5), {"ns_coefficients": (2.0, -1.5, 0.5), "weight_decay": 0.0}),
]


@pytest.mark.parametrize("shape,kw", _MUON_CASES, ids=lambda c: str(c))
def test_muon_steps_match_torch(shape, kw, rng):
    """Each step from the same parameter and momentum buffer as torch's (pyrite's state is
    reset to torch's before it, so differences do not compound): the buffer is an f32 lerp
    (within a few f32 ulps), and the step is torch's bfloat16 Newton-Schulz update O scaled by
    the adjusted lr. O is computed in bf16 by both, with f32 accumulation in a different order,
    so a product may round to the neighbouring bf16 value (2^-8 relative) and that flip passes
    through the remaining iterations X <- aX + ...: the step may differ by a few bf16 ulps of
    max|O| (4 · 2^-8 · max|O| · adjusted lr) plus f32 rounding of the parameter."""
    w0 = rng.standard_normal(shape).astype(np.float32)
    tp = torch.nn.Parameter(torch.tensor(w0))
    pp = pr.nn.Parameter(pr.tensor(w0))
    topt, popt = torch.optim.Muon([tp], **kw), pr.optim.Muon([pp], **kw)
    lr, wd = popt.param_groups[0]["lr"], popt.param_groups[0]["weight_decay"]
    A, B = shape
    adj = {None: max(1, A / B) ** 0.5, "original": max(1, A / B) ** 0.5}.get(
        kw.get("adjust_lr_fn"), 0.2 * max(A, B) ** 0.5
    )
    for step in range(4):
        g = (rng.standard_normal(shape) * rng.uniform(0.1, 10)).astype(np.float32)
        tp.grad, pp.grad = torch.tensor(g), pr.tensor(g)
        before = tp.detach().clone()
        topt.step()
        popt.step()
        want_buf = topt.state[tp]["momentum_buffer"]
        np.testing.assert_allclose(
            _np(popt.state[pp]["momentum_buffer"]), _np(want_buf), rtol=4e-7, atol=4e-7
        )
        o = (before * (1 - lr * wd) - tp.detach()) / (lr * adj)  # torch's update, recovered
        tol = 4 * 2.0**-8 * float(o.abs().max()) * lr * adj + 4e-7 * float(before.abs().max())
        np.testing.assert_allclose(_np(pp), _np(tp), rtol=0, atol=tol)
        with pr.no_grad():  # the next step starts from torch's state
            pp.copy_(pr.tensor(_np(tp)))
            popt.state[pp]["momentum_buffer"].copy_(pr.tensor(_np(want_buf)))


def test_muon_state_dict_round_trip(rng):
    """torch's state dict (groups and momentum buffers) loads into pyrite's Muon and the next
    steps follow torch's; pyrite's own state dict has torch's keys and group options."""
    shapes = [(6, 11), (11, 4)]
    ws = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    tps = [torch.nn.Parameter(torch.tensor(w)) for w in ws]
    topt = torch.optim.Muon(
        [{"params": [tps[0]]}, {"params": [tps[1]], "lr": 0.03, "nesterov": False}], lr=0.01
    )
    for _ in range(2):
        for p in tps:
            p.grad = torch.randn(p.shape)
        topt.step()
    tsd = topt.state_dict()
    pps = [pr.nn.Parameter(pr.tensor(_np(p))) for p in tps]
    popt = pr.optim.Muon([{"params": [pps[0]]}, {"params": [pps[1]]}], lr=0.5)
    popt.load_state_dict(
        {
            "state": {k: {n: v.numpy() for n, v in s.items()} for k, s in tsd["state"].items()},
            "param_groups": tsd["param_groups"],
        }
    )
    psd = popt.state_dict()
    assert psd["param_groups"] == tsd["param_groups"]
    assert {k: sorted(s) for k, s in psd["state"].items()} == {
        k: sorted(s) for k, s in tsd["state"].items()
    }
    g = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    for tp, pp, gi in zip(tps, pps, g):
        tp.grad, pp.grad = torch.tensor(gi), pr.tensor(gi)
    topt.step()
    popt.step()
    for tp, pp, grp in zip(tps, pps, tsd["param_groups"]):
        A, B = tp.shape
        bound = 4 * 2.0**-8 * grp["lr"] * max(1, A / B) ** 0.5 + 4e-7 * float(
            tp.detach().abs().max()
        )
        np.testing.assert_allclose(_np(pp), _np(tp), rtol=0, atol=bound)


def test_muon_errors_match_torch():
    """Constructor and step errors with torch's types and words (a parameter's size prints
    as pyrite.Size where torch prints torch.Size)."""

    def same(fn, exc=ValueError):
        with pytest.raises(exc) as want:
            fn(torch)
        with pytest.raises(exc) as got:
            fn(pr)
        assert str(got.value) == str(want.value).replace("torch.", "pyrite."), (got, want)

    w = lambda L, *s: L.nn.Parameter(L.ones(*s))  # noqa: E731
    same(lambda L: L.optim.Muon([w(L, 2, 3)], lr=-0.1))
    same(lambda L: L.optim.Muon([w(L, 2, 3)], momentum=-1.0))
    same(lambda L: L.optim.Muon([w(L, 2, 3)], weight_decay=-0.5))
    same(lambda L: L.optim.Muon([w(L, 2, 3)], adjust_lr_fn="spectral"))
    same(lambda L: L.optim.Muon([w(L, 2, 3), w(L, 5)]))
    same(lambda L: L.optim.Muon([w(L, 2, 3, 4)]))
    same(lambda L: L.optim.Muon([]))

    def stepping(L, **kw):
        p = w(L, 3, 4)
        opt = L.optim.Muon([p], **kw)
        p.grad = L.ones(3, 4)
        opt.step()

    same(lambda L: stepping(L, ns_steps=100))
    same(lambda L: stepping(L, ns_coefficients=(1.0, 2.0)))

    def added_later(L):  # add_param_group is not checked: the step refuses the 1-D gradient
        opt = L.optim.Muon([w(L, 3, 4)])
        b = w(L, 4)
        opt.add_param_group({"params": [b]})
        b.grad = L.ones(4)
        opt.step()

    same(added_later)
    with pytest.raises(TypeError, match="Tensor learning rate"):  # README: a difference
        pr.optim.Muon([w(pr, 2, 2)], lr=pr.tensor(0.1))


# ---- torch._foreach_powsum -------------------------------------------------------------------
@pytest.mark.parametrize("ord", [0, 1, 2, 3, 2.5, 0.5, -1.5, float("inf"), float("-inf")])
@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_foreach_powsum_matches_torch(ord, dt, rng):
    """Σ|t|^ord per tensor. f32: a sum of n positive terms is within n·2^-24 of its value,
    and each power within ~(1 + |ord|)·2^-24·8 (pow through log2/exp2 of values below 8);
    bf16: both round that f32 value to bf16 once, so they may differ by one bf16 ulp."""
    shapes = [(1,), (7, 3), (2, 5, 11), (129,)]
    vals = [rng.uniform(-4, 4, s).astype(np.float32) for s in shapes]
    if ord < 0:  # keep 0^-p (inf) for its own case below
        vals = [np.where(np.abs(v) < 0.25, 0.5, v) for v in vals]
    vals[1][0, 0] = 0.0 if ord >= 0 else vals[1][0, 0]
    got = {}
    for L in (torch, pr):
        ts = [L.tensor(v).to(getattr(L, dt)) for v in vals]
        got[L] = [_np(s) for s in L._foreach_powsum(ts, ord)]
        got[L, "dtype"] = [str(s.dtype).split(".")[-1] for s in L._foreach_powsum(ts, ord)]
        got[L, "f32"] = [_np(s) for s in L._foreach_powsum(ts, ord, dtype=L.float32)]
    assert got[pr, "dtype"] == got[torch, "dtype"] == [dt] * len(shapes)
    for v, a, b, c, d in zip(vals, got[pr], got[torch], got[pr, "f32"], got[torch, "f32"]):
        n = v.size
        rtol = (n + 8 * (1 + abs(ord) if np.isfinite(ord) else 1)) * 2.0**-24
        if dt == "bfloat16":
            rtol = 2.0**-8
        np.testing.assert_allclose(a, b, rtol=rtol, atol=0)
        np.testing.assert_allclose(c, d, rtol=max(rtol if dt == "float32" else 0, 1e-6))


def test_foreach_powsum_edges():
    """0^0 = 1, 0^-p = inf, inf/NaN as pow gives them; an empty list, a non-number ord and an
    integer tensor are refused (the last: TypeError here, torch's NotImplementedError, as
    README's dtype refusals)."""
    special = [0.0, 1.0, 0.5, -2.0, float("nan"), float("inf")]
    for ord in (0, 1, 2, -1, float("inf"), 0.5):
        for part in (special[:4], special[:5], [0.0, 1.0, float("inf")]):
            want = torch._foreach_powsum([torch.tensor(part)], ord)[0].item()
            have = pr._foreach_powsum([pr.tensor(part)], ord)[0].item()
            assert have == want or (np.isnan(have) and np.isnan(want)), (ord, part, have, want)
    _raises_both(
        lambda L: L._foreach_powsum([], 2),
        RuntimeError,
        RuntimeError,
        "Tensor list must have at least one tensor.",
    )
    _raises_both(
        lambda L: L._foreach_powsum([L.ones(2)], "fro"),
        TypeError,
        TypeError,
        "argument 'ord' (position 2) must be Number, not str",
    )
    with pytest.raises(NotImplementedError):
        torch._foreach_powsum([torch.arange(3)], 2)
    with pytest.raises(TypeError, match="_foreach_powsum: not implemented for pyrite.int32"):
        pr._foreach_powsum([pr.arange(3)], 2)


# ---- pr.func: grad, grad_and_value, vjp, jacrev, jacfwd, hessian, vmap -------------------------
U32 = 2.0**-24  # float32's unit roundoff


def _tree(x):
    from pyrite._pytree import tree_flatten

    return tree_flatten(x)


def _leaves_close(got, want, rtol, atol):
    g, gs = _tree(got)
    w, ws = _tree(want)
    assert repr(gs) == repr(ws), (gs, ws)
    for a, b in zip(g, w):
        assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
        np.testing.assert_allclose(_np(a), _np(b), rtol=rtol, atol=atol)


def _f(x, y):
    """Elementwise chains and sums: grad_x = cos(x)·y + 2x/n, grad_y = sin(x) + exp(y)/4."""
    return (x.sin() * y).sum() + (x * x).mean() + (y.exp() * 0.25).sum()


def _f_tol(x, y):
    """A gradient element is a few ops each within ~4 ulps: 32 ulps of the largest term; the
    value is a sum of 3n terms: 3n ulps of the sum of their magnitudes."""
    terms = np.abs(np.sin(x) * y).sum() + (x * x).mean() + np.exp(y).sum() / 4
    big = float(np.abs(y).max() + np.abs(x).max() + np.exp(y).max())
    return 32 * U32 * big, (3 * x.size + 32) * U32 * terms


@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1, 0), -1, (-2,)])
def test_func_grad_matches_torch(argnums, rng):
    n = int(rng.choice([1, 7, 13, 31]))
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    g_tol, v_tol = _f_tol(x, y)
    res = {}
    for L in (torch, pr):
        a, b = L.tensor(x), L.tensor(y)
        res[L] = (
            L.func.grad(_f, argnums)(a, b),
            L.func.grad_and_value(_f, argnums)(a, b),
            L.func.grad(lambda a, b: (_f(a, b), {"x2": a * 2}), argnums, has_aux=True)(a, b),
        )
    (gp, (gvp, vp), (gap, auxp)), (gt, (gvt, vt), (gat, auxt)) = res[pr], res[torch]
    for got, want in ((gp, gt), (gvp, gvt), (gap, gat)):
        _leaves_close(got, want, 0, g_tol)
    np.testing.assert_allclose(_np(vp), _np(vt), rtol=0, atol=v_tol)
    _leaves_close(auxp, auxt, 0, 0)
    for leaf in _tree((gp, gvp, vp, gap, auxp))[0]:
        assert not leaf.requires_grad  # nothing outside the transform requires grad


def test_func_grad_pytrees_kwargs_and_unused(rng):
    """A dict argument (functional_call's parameters), keyword arguments passed through, an
    argument the output does not use (zeros), and grad inside no_grad (torch ignores it)."""
    w = rng.standard_normal((5, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    got = {}
    for L in (torch, pr):

        def loss(params, x, unused, *, scale):
            return ((x @ params["w"] + params["b"]).tanh() ** 2).mean() * scale

        p = {"w": L.tensor(w), "b": L.tensor(b)}
        with L.no_grad():
            got[L] = L.func.grad(loss, argnums=(0, 2))(p, L.tensor(x), L.tensor(b), scale=3.0)
    # d/dW of mean(tanh(xW + b)^2): dots of length 4 over |x|·|2 tanh·(1 - tanh²)| <= 2|x|
    atol = (4 + 32) * U32 * float(np.abs(x).sum(0).max()) * 2 * 3.0 / 12
    _leaves_close(got[pr], got[torch], 0, atol)
    assert not np.any(_np(got[pr][1]))  # the unused argument's gradient is zeros


def test_func_grad_composes_and_keeps_outer_graph(rng):
    """grad(grad(f)) of a scalar function; a grad result differentiated by autograd with
    respect to a parameter f captures (torch.func keeps that graph); hessian, jacrev∘jacrev and
    jacfwd∘jacrev agree with torch's."""
    x0 = np.float32(rng.uniform(-2, 2))
    v = rng.standard_normal(7).astype(np.float32)
    w0 = rng.standard_normal(7).astype(np.float32)
    res = {}
    for L in (torch, pr):
        g2 = L.func.grad(L.func.grad(lambda t: t.sin() * t**3))(L.tensor(x0))
        w = L.tensor(w0, requires_grad=True)

        def f(x):
            return (x.sin() * w).sum() + (x[:-1] * x[1:] * w[1:]).sum()

        gx = L.func.grad(f)(L.tensor(v))  # depends on w: the graph is kept
        assert gx.requires_grad
        (gx * gx).sum().backward()

        def h(x):
            return (x.sin() * x).sum() + (x[:-1] * x[1:]).sum() * 0.5

        res[L] = (
            g2,
            w.grad,
            L.func.hessian(h)(L.tensor(v)),
            L.func.jacrev(L.func.jacrev(h))(L.tensor(v)),
            L.func.jacfwd(L.func.jacrev(h))(L.tensor(v)),
        )
        assert not res[L][2].requires_grad
    scale = float(1 + np.abs(v).max()) ** 3 + float(np.abs(w0).max())
    _leaves_close(res[pr], res[torch], 0, 64 * U32 * scale * 7)


def _g(x, y):
    """A vector function of two inputs with two outputs (tuple)."""
    return (x.sin() * y[:1], (x[:, None] * y[None, :]).tanh())


@pytest.mark.parametrize("api", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_func_jacobians_match_torch(api, argnums, rng):
    n, m = int(rng.choice([1, 4, 7])), int(rng.choice([2, 5]))
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(m).astype(np.float32)
    res = {}
    for L in (torch, pr):
        a, b = L.tensor(x), L.tensor(y)
        j = getattr(L.func, api)(_g, argnums)(a, b)
        ja, aux = getattr(L.func, api)(lambda a, b: (_g(a, b), a.cos()), argnums, has_aux=True)(
            a, b
        )
        res[L] = (j, ja, aux)
    # each element is a product of a few elementwise derivatives: 32 ulps of the largest factor
    _leaves_close(res[pr], res[torch], 0, 32 * U32 * float(1 + np.abs(x).max() * np.abs(y).max()))


def test_func_vjp_matches_torch(rng):
    """vjp of a pytree output, called twice with different cotangents, with aux; the
    cotangents' structure and shapes are checked as torch's."""
    x = rng.standard_normal((3, 5)).astype(np.float32)
    y = rng.standard_normal(5).astype(np.float32)
    cts = [
        (rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal(3).astype(np.float32))
        for _ in range(2)
    ]
    res = {}
    for L in (torch, pr):

        def f(a, b):
            return (a * b).sin(), (a @ b)

        out, fn, aux = L.func.vjp(
            lambda a, b: (f(a, b), b * 2), L.tensor(x), L.tensor(y), has_aux=True
        )
        got = [fn(tuple(L.tensor(c) for c in ct)) for ct in cts]
        res[L] = (out, aux, got)
        assert isinstance(got[0], tuple) and len(got[0]) == 2
        with pytest.raises(RuntimeError, match="pytree structure of cotangents"):
            fn(L.tensor(cts[0][0]))
        with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_output\[0\] has a shape"):
            fn((L.ones(4), L.tensor(cts[0][1])))
    # a @ b and its vjps are dots of length <= 5: 5 + 8 ulps of Σ|terms|
    big = float(
        np.abs(x).max() * np.abs(y).max() * 5 * max(np.abs(c).max() for ct in cts for c in ct)
    )
    _leaves_close(res[pr], res[torch], 0, 16 * U32 * max(big, 1.0))


def _per_sample_loss(params, x, y):
    h = (x @ params["w1"]).tanh()
    return ((h @ params["w2"] - y) ** 2).sum()


def test_func_vmap_per_sample_gradients(rng):
    """The torch.func tutorial's pattern: vmap(grad(loss), in_dims=(None, 0, 0)) gives each
    sample's gradient; torch's and pyrite's agree. The per-sample matmuls are dots of length
    <= 6 over values < 1 in magnitude: 16 ulps of the largest Σ|a·b|."""
    B, d, h = 5, 6, 4
    x = rng.standard_normal((B, d)).astype(np.float32)
    y = rng.standard_normal((B, 1)).astype(np.float32)
    w1 = (rng.standard_normal((d, h)) / d).astype(np.float32)
    w2 = (rng.standard_normal((h, 1)) / h).astype(np.float32)
    res = {}
    for L in (torch, pr):
        params = {"w1": L.tensor(w1), "w2": L.tensor(w2)}
        per = L.func.vmap(L.func.grad(_per_sample_loss), in_dims=(None, 0, 0))(
            params, L.tensor(x), L.tensor(y)
        )
        res[L] = per
        assert tuple(per["w1"].shape) == (B, d, h)
    scale = float(np.abs(x).max() * d + np.abs(y).max() + 1) * 4
    _leaves_close(res[pr], res[torch], 0, 16 * U32 * scale * d)


@pytest.mark.parametrize(
    "case",
    [
        ("in0_out0", 0, 0),
        ("in1_out1", 1, 1),
        ("in_tuple", (1, None), 0),
        ("out_neg", 0, -1),
        ("out_tuple_none", 0, (0, None)),
        ("nested_dict", ({"a": 0, "b": 1},), 0),
    ],
    ids=lambda c: c[0],
)
def test_func_vmap_in_out_dims_match_torch(case, rng):
    name, in_dims, out_dims = case
    B = int(rng.choice([1, 3, 6]))
    a = rng.standard_normal((B, 4)).astype(np.float32)
    bm = rng.standard_normal((5, B)).astype(np.float32)
    res = {}
    for L in (torch, pr):
        A, Bt = L.tensor(a), L.tensor(bm)
        if name == "in0_out0":
            out = L.func.vmap(lambda r: (r.exp().sum(), r * 2))(A)
        elif name == "in1_out1":
            out = L.func.vmap(lambda c: c.cumsum(0) * c, in_dims=in_dims, out_dims=out_dims)(Bt)
        elif name == "in_tuple":
            out = L.func.vmap(lambda c, s: c * s, in_dims=in_dims)(Bt, L.tensor(3.0))
        elif name == "out_neg":
            out = L.func.vmap(lambda r: r[:, None] * r[None, :], out_dims=out_dims)(A)
        elif name == "out_tuple_none":
            out = L.func.vmap(lambda r, k=None: (r + k, L.ones(2)), out_dims=out_dims)(
                A, k=L.ones(4)
            )
        else:
            out = L.func.vmap(lambda d: d["a"].sum() * d["b"].mean(), in_dims=in_dims)(
                {"a": A, "b": Bt}
            )
        res[L] = out
    _leaves_close(res[pr], res[torch], 16 * U32, 16 * U32 * float(np.exp(np.abs(a)).sum() + 4))
    assert pr.vmap is pr.func.vmap


def test_func_vmap_randomness_and_empty_batch(rng):
    """'error' refuses a random draw inside (torch's message), 'different' gives each element
    its own numbers, 'same' the same numbers; a batch of 0 gives empty outputs of the right
    shape, as torch's."""
    x = pr.zeros(4, 3)
    words = "vmap: called random operation while in randomness error mode"
    _raises_both(
        lambda L: L.func.vmap(lambda r: r + L.rand(3))(L.zeros(4, 3)),
        RuntimeError,
        PyriteError,
        words,
    )
    _raises_both(
        lambda L: L.func.jacfwd(lambda r: r * L.rand(3))(L.zeros(3)),
        RuntimeError,
        PyriteError,
        words,
    )
    diff = pr.func.vmap(lambda r: r + pr.rand(3), randomness="different")(x).numpy()
    same = pr.func.vmap(lambda r: r + pr.rand(3), randomness="same")(x).numpy()
    assert len({tuple(row) for row in diff}) == 4
    assert len({tuple(row) for row in same}) == 1
    for L in (torch, pr):
        e = L.func.vmap(lambda r: (r.sum(), r[:2] * 2), out_dims=(0, 1))(L.zeros(0, 5))
        assert [tuple(t.shape) for t in e] == [(0,), (2, 0)]


_VMAP_ERRORS = {
    "sizes": lambda L: L.func.vmap(lambda a, b: a + b)(L.ones(4, 3), L.ones(5, 3)),
    "in_dims_none": lambda L: L.func.vmap(lambda a: a, in_dims=None)(L.ones(3)),
    "non_tensor": lambda L: L.func.vmap(lambda a: a)(3.0),
    "in_dim_range": lambda L: L.func.vmap(lambda a: a, in_dims=2)(L.ones(3)),
    "in_dim_float": lambda L: L.func.vmap(lambda a: a, in_dims=(0.5,))(L.ones(3)),
    "in_dims_len": lambda L: L.func.vmap(lambda a: a, in_dims=(0, 0))(L.ones(3)),
    "in_dims_list": lambda L: L.func.vmap(lambda a: a, in_dims=[0])(L.ones(3)),
    "no_inputs": lambda L: L.func.vmap(lambda: L.ones(2))(),
    "all_unmapped": lambda L: L.func.vmap(lambda a: a, in_dims=(None,))(L.ones(3)),
    "out_not_tensor": lambda L: L.func.vmap(lambda a: 3.0)(L.ones(3)),
    "out_dims_type": lambda L: L.func.vmap(lambda a: a, out_dims="a")(L.ones(2, 3)),
    "out_dims_len": lambda L: L.func.vmap(lambda a: (a, a), out_dims=(0, 0, 0))(L.ones(2, 3)),
    "chunk_size": lambda L: L.func.vmap(lambda a: a, chunk_size=0),
    "randomness": lambda L: L.func.vmap(lambda a: a, randomness="foo"),
}


@pytest.mark.parametrize("name", sorted(_VMAP_ERRORS))
def test_func_vmap_errors_match_torch(name):
    """torch's error type and words (the structures in the out-of-structure messages are
    pyrite's own notation: compared up to them)."""
    with pytest.raises(Exception) as want:
        _VMAP_ERRORS[name](torch)
    with pytest.raises(Exception) as got:
        _VMAP_ERRORS[name](pr)
    assert isinstance(got.value, type(want.value)), (got.value, want.value)
    w, g = str(want.value), str(got.value)
    assert g.startswith("pyrite: ")
    cut = w.find("structure ")  # a TreeSpec repr from here on in torch's
    assert g[len("pyrite: ") :][: cut if cut > 0 else None] == w[: cut if cut > 0 else None]


_GRAD_ERRORS = {
    "nonscalar": lambda L: L.func.grad(lambda x: x * 2)(L.ones(3)),
    "not_tensor": lambda L: L.func.grad(lambda x: 3)(L.ones(3)),
    "aux_shape": lambda L: L.func.grad(lambda x: x.sum(), has_aux=True)(L.ones(3)),
    "aux_non_tensor": lambda L: L.func.grad(lambda x: (x.sum(), 3), has_aux=True)(L.ones(3)),
    "argnum_range": lambda L: L.func.grad(lambda x: x.sum(), argnums=1)(L.ones(3)),
    "argnums_empty": lambda L: L.func.grad(lambda x: x.sum(), argnums=())(L.ones(3)),
    "argnums_type": lambda L: L.func.grad(lambda x: x.sum(), argnums=0.5)(L.ones(3)),
    "argnums_dup": lambda L: L.func.grad(lambda x, y: x.sum(), argnums=(0, -2))(
        L.ones(1), L.ones(1)
    ),
    "primal_number": lambda L: L.func.grad(lambda x: x)(3.0),
    "vjp_not_tensor": lambda L: L.func.vjp(lambda x: 3, L.ones(2)),
    "vjp_empty": lambda L: L.func.vjp(lambda x: (), L.ones(2)),
    "vjp_int_output": lambda L: L.func.vjp(lambda x: x > 0, L.ones(2)),
    "vjp_aux": lambda L: L.func.vjp(lambda x: x * 2, L.ones(2), has_aux=True),
    "jacrev_chunk": lambda L: L.func.jacrev(lambda x: x, chunk_size=0),
    "jacfwd_randomness": lambda L: L.func.jacfwd(lambda x: x, randomness="sometimes")(L.ones(2)),
}


@pytest.mark.parametrize("name", sorted(_GRAD_ERRORS))
def test_func_grad_errors_match_torch(name):
    with pytest.raises(Exception) as want:
        _GRAD_ERRORS[name](torch)
    with pytest.raises(Exception) as got:
        _GRAD_ERRORS[name](pr)
    assert isinstance(got.value, type(want.value)), (got.value, want.value)
    g = str(got.value)
    assert g.startswith("pyrite: ") and g[len("pyrite: ") :] == str(want.value).replace(
        "torch.", "pyrite."
    ), (g, str(want.value))


def test_func_vmap_nests_and_differentiates(rng):
    """vmap(vmap(f)), vmap(jacrev(sin)) (torch's docs example: a batch of diagonal
    Jacobians), and autograd through a vmap's stacked result back to its input."""
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    res = {}
    for L in (torch, pr):
        X = L.tensor(x, requires_grad=True)
        inner = L.func.vmap(L.func.vmap(lambda r: (r * r.cos()).sum()), in_dims=1)(X)
        jac = L.func.vmap(L.func.jacrev(L.sin))(X[0].detach())
        inner.square().sum().backward()
        res[L] = (inner, jac, X.grad)
        assert tuple(inner.shape) == (4, 3) and tuple(jac.shape) == (4, 5, 5)
    # sums of 5 terms of a few ulps each, then squares and their gradients
    big = float(np.abs(x).max())
    _leaves_close(res[pr], res[torch], 0, 32 * U32 * (5 * big + 1) ** 2)


def test_func_grad_of_module_parameters_keeps_their_graph(rng):
    """grad over functional_call with the module's own parameters (which require grad): the
    gradient is differentiable with respect to them where it depends on them (requires_grad as
    torch's), and a loss on it backpropagates into the parameters' .grad as torch's."""
    w = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    x = rng.standard_normal(3).astype(np.float32)
    res = {}
    for L in (torch, pr):
        m = L.nn.Linear(3, 2)
        with L.no_grad():
            m.weight.copy_(L.tensor(w))
            m.bias.copy_(L.tensor(b))
        params = dict(m.named_parameters())
        sq = L.func.grad(lambda p, x: L.func.functional_call(m, p, (x,)).pow(2).sum())
        lin = L.func.grad(lambda p, x: L.func.functional_call(m, p, (x,)).sum())
        g_sq, g_lin = sq(params, L.tensor(x)), lin(params, L.tensor(x))
        flags = (
            [v.requires_grad for v in g_sq.values()],
            [v.requires_grad for v in g_lin.values()],
        )
        sum(v.square().sum() for v in g_sq.values()).backward()
        res[L] = (flags, g_sq, m.weight.grad, m.bias.grad)
    assert res[pr][0] == res[torch][0] == ([True, True], [False, False])
    # y = Wx + b is a dot of length 3; its gradients are products of it with x: 16 ulps of the
    # largest |W||x| + |b| times |x| (squared through the loss: and again)
    s = float((np.abs(w) @ np.abs(x) + np.abs(b)).max() * (1 + np.abs(x).max()) ** 2)
    _leaves_close(res[pr][1:], res[torch][1:], 0, 16 * U32 * 4 * s)
