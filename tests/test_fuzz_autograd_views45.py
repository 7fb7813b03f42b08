"""Regressions of the session-45 differential fuzz of autograd through views and in-place writes
(scripts/fuzz_autograd_views.py) against torch 2.13 CPU, each minimized to a named parity test
on fresh inputs from `rng`, plus a small seeded run of the fuzz itself.

Found and fixed by it:
- a double backward through an in-place binary op that reads its output (`h.div_(y)`,
  `h[1:].div_(y)`, `h.pow_(y)`) raised KeyError 'div_': the rule recomputed the output under
  the in-place node's name (ops/elementwise_grads.py `_o`);
- a tensor hook registered before an in-place write into the tensor (or into a view of it) ran
  for both versions, so it scaled the gradient twice; it belongs to the version it was
  registered on, as torch's (autograd `_retire_hooks`), and retain_grad to the newest;
- a double backward refused a saved input or output written in place since where torch reads
  neither: div's output (`y = a / b; y[1:].fill_(0)`), tanh's / exp's / sigmoid's input
  (`y = x.tanh(); x.mul_(2)`), and pow(x, 0.5)'s output (it runs as sqrt); a rule reading its
  result now takes the saved output tied to its own node, as torch's saved result (so a hook
  on that output also sees the double backward's gradient, as in torch);
- `x.flatten()` of a 1-D x (start_dim == end_dim) was a new view: torch returns x itself, and
  `autograd.grad(out, [x.flatten()])` is x's gradient;
- `x[:, :] = x[0]` raised a partial-overlap error: torch expands a value of another shape to
  the target's before copying (its overlap is then too hard to decide), and expand gives a new
  size-1 dim torch's stride;
- `autograd.grad(out, [v])` of a view v whose base was written in place since took v's old
  history: torch regenerates it (the gradient of the new v), as hooks and retain_grad do;
- an input of autograd.grad whose node also passes gradient on to another input was captured
  after its hooks: torch captures it before them (its engine's "hooks ordering").
- softmax / log_softmax recomputed their output from the input for a double backward, refused
  once that input was written in place: they save their result only, as torch's;
- the same single element reached through views of other shapes or size-1 strides
  (`d.reshape(1, 1)[:, :] = d.unsqueeze(0)`) was refused as a partial overlap (ops/overlap.py).
The fuzz's other differences are pyrite's documented choices (the script's docstring).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pyrite as pr
from tests import fuzzing

torch = pytest.importorskip("torch")


def _lib_tensor(T, a, grad=False):
    t = T.tensor(a) if T is pr else T.tensor(a, dtype=torch.float64)
    return t.requires_grad_() if grad else t


def _np(t):
    return None if t is None else t.detach().double().numpy()


def _same(fn, *arrays, rtol=2e-5, atol=1e-5):
    """fn(T, *tensors) -> list of tensors (or None), on torch float64 and pyrite float32."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = fn(torch, *arrays)
        got = fn(pr, *arrays)
    assert len(want) == len(got)
    for i, (w, g) in enumerate(zip(want, got)):
        assert (w is None) == (g is None), (i, w, g)
        if w is not None:
            np.testing.assert_allclose(_np(g), _np(w), rtol=rtol, atol=atol, err_msg=f"[{i}]")


def _second(T, out, xs):
    """First-order grads with a graph, then the grads of a nonlinear function of them."""
    gs = T.autograd.grad(out, xs, create_graph=True)
    s = sum((g * g).sum() + g.sin().sum() for g in gs)
    return [*gs, *T.autograd.grad(s, xs)]


def _vals(rng, *shape, lo=-1.5, hi=1.5):
    return rng.uniform(lo, hi, shape).astype(np.float32)


# ---- double backward through an in-place binary op that reads its output ----------------------
@pytest.mark.parametrize(
    "stmt", ["h.div_(y)", "h[1:].div_(y[1:])", "h.pow_(y)", "h[:2].pow_(y[:2])"]
)
def test_double_backward_through_inplace_div_and_pow(rng, stmt):
    def fn(T, a, b):
        x, y = _lib_tensor(T, a, True), _lib_tensor(T, b, True)
        h = x * 1.5
        exec(stmt, {"h": h, "y": y})
        return _second(T, (h * h).sum(), [x, y])

    _same(fn, _vals(rng, 5, lo=0.5, hi=1.5), _vals(rng, 5, lo=1.0, hi=2.0))


# ---- a hook belongs to the version it was registered on --------------------------------------
HOOK_CASES = {
    "write_into_a_view": "h.register_hook(lambda g: g * 3); h[1:] = 0.0",
    "write_into_the_base": "h.register_hook(lambda g: g * 3); h.mul_(2)",
    "hooks_before_and_after": "h.register_hook(lambda g: g * 3); h.mul_(2); "
    "h.register_hook(lambda g: g * 5)",
    "removed_after_the_write": "hd = h.register_hook(lambda g: g * 3); h.mul_(2); hd.remove()",
    "hook_on_a_view_then_base_written": "v = h[1:]; v.register_hook(lambda g: g * 3); "
    "h.mul_(2); keep.append(v)",
    "hook_on_a_view_then_view_written": "v = h[1:]; v.register_hook(lambda g: g * 3); v.mul_(2)",
}


@pytest.mark.parametrize("name", sorted(HOOK_CASES))
def test_hook_registered_before_an_inplace_write_sees_that_version_only(rng, name):
    def fn(T, a, w):
        x = _lib_tensor(T, a, True)
        h = x * 2
        y = h * 1  # (the old version feeds the loss too)
        keep = []
        exec(HOOK_CASES[name], {"h": h, "keep": keep})
        out = (h * _lib_tensor(T, w)).sum() + y.sum() + sum((v * v).sum() for v in keep)
        out.backward()
        return [x.grad]

    _same(fn, _vals(rng, 4), _vals(rng, 4))


def test_retained_grad_follows_the_newest_version(rng):
    def fn(T, a, w):
        x = _lib_tensor(T, a, True)
        h = x * 2
        h.retain_grad()
        y = h * 1
        h[1:].mul_(2)
        v = h[:2]
        v.retain_grad()
        h.add_(1)
        (h * _lib_tensor(T, w)).sum().add(y.sum()).add((v * v).sum()).backward()
        return [x.grad, h.grad, v.grad]

    _same(fn, _vals(rng, 4), _vals(rng, 4))


# ---- a double backward after a saved tensor was written in place -----------------------------
def test_double_backward_after_the_output_of_div_was_written(rng):
    def fn(T, a, c):
        x = _lib_tensor(T, a, True)
        y = _lib_tensor(T, c) / (x * x + 1)
        y[1:].fill_(0.25)
        return _second(T, (y * y).sum(), [x])

    _same(fn, _vals(rng, 5), _vals(rng, 5))


@pytest.mark.parametrize("op", ["tanh", "exp", "sigmoid", "sqrt", "pow_half"])
def test_double_backward_after_the_input_of_a_result_reading_rule_was_written(rng, op):
    f = {"pow_half": lambda t: t.pow(0.5)}.get(op, lambda t: getattr(t, op)())

    def fn(T, a, w):
        x = _lib_tensor(T, a, True)
        h = x * x + 0.5
        y = f(h)
        if op not in ("sqrt", "pow_half"):  # (torch's pow reads its input: refuses this)
            h.mul_(2)
        return _second(T, (y * _lib_tensor(T, w)).sum(), [x])

    _same(fn, _vals(rng, 6), _vals(rng, 6))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1])
def test_double_backward_of_softmax_after_its_input_was_written(rng, op, dim):
    """softmax / log_softmax save their result only (torch's): a double backward reads it, so
    writing the input after the forward is allowed (it recomputed from the input and raised)."""

    def fn(T, a, w):
        x = _lib_tensor(T, a, True)
        h = x * 1.5
        y = getattr(h, op)(dim)
        h.mul_(2)
        return _second(T, (y * _lib_tensor(T, w)).sum(), [x])

    _same(fn, _vals(rng, 4, 7), _vals(rng, 4, 7))


def test_pow_half_output_written_then_backward_as_torch(rng):
    def fn(T, a, w):
        x = _lib_tensor(T, a, True)
        y = (x * x + 0.5).pow(0.5)
        y[::2].add_(1.0)
        return _second(T, (y * _lib_tensor(T, w)).sum(), [x])

    _same(fn, _vals(rng, 7), _vals(rng, 7))


def test_hook_on_a_result_sees_the_double_backward_gradient(rng):
    # torch's tanh backward reads its saved result, whose gradient in a double backward goes
    # through the result's own node: a hook there sees it
    def fn(T, a, w):
        x = _lib_tensor(T, a, True)
        y = (x * 1.5).tanh()
        y.register_hook(lambda g: g * 2.0)
        return _second(T, (y * y * _lib_tensor(T, w)).sum(), [x])

    _same(fn, _vals(rng, 5), _vals(rng, 5))


# ---- flatten of one dim is the input itself -------------------------------------------------
def test_flatten_without_dims_to_merge_is_the_input(rng):
    def fn(T, a, w):
        x = _lib_tensor(T, a, True)
        d = (x * 1.0).diagonal()
        f = d.flatten()
        assert f is d and (x * 1).flatten(1, 1).shape == (4, 4)
        out = (d.tanh() * _lib_tensor(T, w)).sum() + (f * f).sum()
        return list(T.autograd.grad(out, [x, f]))

    _same(fn, _vals(rng, 4, 4), _vals(rng, 4))


# ---- setitem of a broadcast value that overlaps the target ------------------------------------
@pytest.mark.parametrize("shape", [(1, 5), (3, 5)])
def test_setitem_of_a_broadcast_row_of_the_target_itself(rng, shape):
    def fn(T, a, w):
        x = _lib_tensor(T, a, True)
        h = x * 2
        h[:, :] = h[0]
        return [h, *_second(T, (h.sin() * _lib_tensor(T, w)).sum(), [x])]

    _same(fn, _vals(rng, *shape), _vals(rng, *shape))


def test_one_element_written_from_itself_through_another_view(rng):
    """The same single element reached through views of other shapes or strides (unsqueeze,
    reshape, a 0-d select) is a full overlap, not a partial one (fuzz seeds 779 and 2966)."""

    def fn(T, a):
        x = _lib_tensor(T, a, True)
        h = x * 1.0
        d = h.diagonal(-2, 1, 0)  # (one element of a (1, 4))
        d.reshape(1, 1)[:, :] = d.unsqueeze(0)
        h[0, 3].unsqueeze(0)[0:1:2] = h[0, 3]
        return [h, *_second(T, (h * h * h).sum(), [x])]

    _same(fn, _vals(rng, 1, 4))


def test_expand_gives_a_new_size_one_dim_torchs_stride():
    for T in (torch, pr):
        x = T.zeros(3, 1)
        got = [
            x.expand(1, 3, 4).stride(),
            x.expand(1, 1, 3, 4).stride(),
            x.expand(2, 3, 4).stride(),
        ]
        got.append(T.zeros(()).expand(1, 1).stride())
        assert got == [(3, 1, 0), (3, 3, 1, 0), (0, 1, 0), (0, 0)], (T.__name__, got)


# ---- a view whose base was written since is its new version -----------------------------------
def test_grad_with_respect_to_a_view_whose_base_was_written_since(rng):
    def fn(T, a, w):
        x = _lib_tensor(T, a, True)
        h = x * 1.5
        v = h[1:].expand(2, 3)
        out = (v * _lib_tensor(T, w)).sum()
        h[:1] = 0.5  # v's history is now its base's new one: out did not read that v
        g = T.autograd.grad(out, [x, v], allow_unused=True, retain_graph=True)
        out2 = (v * v).sum()
        return [*g, *T.autograd.grad(out2, [x, v])]

    _same(fn, _vals(rng, 4), _vals(rng, 2, 3))


# ---- the hooks of an input whose node passes gradient on --------------------------------------
def test_input_captured_before_its_hooks_where_its_node_runs_on(rng):
    def fn(T, a, w):
        x = _lib_tensor(T, a, True)
        y = x.pow(2)
        y.register_hook(lambda g: g * 0.5)
        out = (y * _lib_tensor(T, w)).sum() + (x * x).sum()
        return [*T.autograd.grad(out, [x, y], retain_graph=True), *T.autograd.grad(out, [y])]

    _same(fn, _vals(rng, 3, 5), _vals(rng, 3, 5))


# ---- the fuzz itself, a small seeded run ---------------------------------------------------------
def _fuzz():
    return fuzzing.load_script("fuzz_autograd_views")


def test_seeded_fuzz_of_views_inplace_and_double_backward_agrees_with_torch(rng):
    fz = _fuzz()
    seeds = [int(s) for s in rng.integers(0, 2**31, 24)]
    fails = []
    for seed in seeds:
        prog = fz.Gen(seed).build()
        status, detail = fz.check(prog)
        if status == "fail":
            fails.append(f"seed {seed}: {detail}\n{prog.text()}")
    assert not fails, "\n".join(fails)
