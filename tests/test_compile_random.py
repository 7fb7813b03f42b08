"""Random programs under pr.compile with every pass on (fusion, common subexpressions, constant
folding, row and GEMM store fusion, dead code): a replay's outputs and gradients equal eager's
within the roundings fusion moves. Each program mixes elementwise maps (some computed twice, some
of constants), linear layers whose pre-activations a backward saves, layer norms with residual
adds, softmax, cat and reductions, on awkward sizes drawn from the test's seed."""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr
import pyrite.nn.functional as F


def _program(rng, n_ops):
    """A list of op tuples over a growing list of values (value 0: the input x, (rows, d))."""
    ops = []
    for _ in range(n_ops):
        kind = rng.choice(
            ["map", "map2", "twice", "const", "linear", "norm", "cat", "gelu", "softmax", "mean"]
        )
        ops.append((kind, int(rng.integers(0, 1 << 30))))
    return ops


def _run(ops, x, params):
    vals = [x]
    for kind, seed in ops:
        r = np.random.default_rng(seed)
        a = vals[int(r.integers(0, len(vals)))]
        b = vals[int(r.integers(0, len(vals)))]
        if kind == "map":
            v = a * float(r.uniform(0.5, 1.5)) + float(r.uniform(-1, 1))
        elif kind == "map2":
            v = a * b.tanh() - 0.25 * b
        elif kind == "twice":  # the same expression twice: a common subexpression
            v = (a * 0.5 + 1.0).relu() + (a * 0.5 + 1.0).relu()
        elif kind == "const":  # constants folded at the trace
            d = a.shape[-1]
            v = a + pr.arange(d, dtype=pr.float32) * 0.01 + pr.ones(d)
        elif kind == "linear":
            w, bias = params["w"], params["b"]
            h = F.linear(a, w, bias)  # the pre-activation, read again below
            v = F.gelu(h) + 0.1 * h
        elif kind == "norm":
            v = F.layer_norm(a, (a.shape[-1],), params["g"], params["beta"]) + b
        elif kind == "cat":
            d = a.shape[-1]
            v = pr.cat([a[:, : d // 2], b[:, d // 2 :]], dim=1) * 1.5
        elif kind == "softmax":  # a row op's backward, a map reading its gradient after it
            v = F.softmax(a, -1) * 4.0 + b
        elif kind == "mean":  # a reduction broadcast back
            v = a - a.mean(-1, keepdim=True) + b.amax(-1, keepdim=True) * 0.1
        else:
            v = F.gelu(a) * b.sigmoid()
        vals.append(v)
    return sum(v.sum(-1) for v in vals[1:])  # (every value reaches the loss)


def _compare(ops, rows, d, seed, stats):
    """Run the program eagerly and compiled (its third call a replay) and compare."""
    xa = np.random.default_rng(seed).standard_normal((rows, d)).astype(np.float32)

    def params_for(seed):
        r = np.random.default_rng(seed)
        return {
            "w": pr.tensor((r.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)),
            "b": pr.tensor(r.standard_normal(d).astype(np.float32)),
            "g": pr.tensor(r.uniform(0.5, 1.5, d).astype(np.float32)),
            "beta": pr.tensor(r.standard_normal(d).astype(np.float32)),
        }

    results = []
    for compiled in (False, True):
        params = params_for(seed)
        for p in params.values():
            p.requires_grad_()
        x = pr.tensor(xa).requires_grad_()

        def step(x):
            for p in (*params.values(), x):
                p.grad = None
            out = _run(ops, x, params)
            out.sum().backward()
            return out

        f = pr.compile(step) if compiled else step
        for _ in range(3 if compiled else 1):  # (the third call replays)
            out = f(x)
        # (the parameters' gradients: a compiled function's tensor arguments are its copies, so
        # x's gradient is not passed out: README, Differences from PyTorch)
        grads = [params[k].grad for k in sorted(params)]
        results.append((out.numpy(), [None if g is None else g.numpy() for g in grads]))
        if compiled:
            stats.append((f.stats(), str(f.graph)))
            assert stats[-1][0]["replays"] >= 1, stats[-1][0]
    (o1, g1), (o2, g2) = results
    # fusion may contract a multiply-add or reorder a sum (a few f32 roundings an op, 2^-24
    # relative each) through at most ~10 ops: within 2^-14 of each result's largest magnitude
    assert np.abs(o2 - o1).max() <= 2**-14 * (np.abs(o1).max() + 1)
    for a, b in zip(g1, g2):
        assert (a is None) == (b is None)
        if a is not None:
            assert np.abs(b - a).max() <= 2**-14 * (np.abs(a).max() + 1)


@pytest.fixture(params=[True, False], ids=["poison", "no-poison"])
def poison(request):
    """Both buffer-reuse patterns: PYRITE_POISON's fill of every new tensor changes which
    buffers the pool hands out (the first bug this test found showed only without it)."""
    from pyrite.ops import core

    was = core.POISON
    core.set_poison(request.param)
    yield request.param
    core.set_poison(was)


@pytest.mark.parametrize("case", range(6))
def test_random_program_compiled_equals_eager(case, rng, poison):
    r = np.random.default_rng([int(rng.integers(1 << 30)), case, poison])  # (a program a case)
    rows, d = int(r.integers(3, 40)), int(r.choice([8, 12, 16, 20, 32]))
    _compare(_program(r, int(r.integers(4, 10))), rows, d, int(r.integers(1 << 30)), [])


def test_the_passes_all_ran_on_a_fixed_program():
    """A program with every kind of op once (in a fixed order): the replay matches eager, and
    fusion and common subexpressions each removed something."""
    kinds = ["linear", "twice", "const", "norm", "map", "map2", "cat", "gelu", "softmax", "mean"]
    kinds += ["linear", "norm"]
    stats = []
    _compare([(k, 1000 + i) for i, k in enumerate(kinds)], 24, 16, 7, stats)
    st, _ = stats[0]
    assert st["fused"] > 0 and st["common"] > 0, st
    assert st["kernels"] < st["kernels_traced"]
