"""Autograd extension points as ported code uses them: torch.autograd.graph (saved tensor hooks,
save_on_cpu, Node inspection and hooks, register_multi_grad_hook) and torch.autograd.Function's
ctx features. Each case runs the same code with `lib` = torch and `lib` = pyrite and compares
gradients, what the hooks received, and in what order."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr

LIBS = (torch, pr)


def _np(t):
    return None if t is None else np.asarray(t.detach().numpy(), np.float64).round(4).tolist()


def _pair(rng, *shapes):
    arrs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    return lambda lib: [lib.tensor(a, requires_grad=True) for a in arrs]


def _same(run):
    want, got = run(torch), run(pr)
    np.testing.assert_equal(got, want)
    return got


# ---- saved_tensors_hooks ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "op",
    [
        lambda x, w: (x.sin() * 1.0).sum(),
        lambda x, w: (x @ w).sum(),
        lambda x, w: (x**2).log().mean(),
    ],
)
def test_saved_tensors_hooks_see_what_is_saved(rng, op):
    make = _pair(rng, (3, 4), (4, 2))

    def run(lib):
        x, w = make(lib)
        x = x.abs() + 0.5  # (log of positives)
        log = []

        def pack(t):
            log.append(("pack", list(t.shape), _np(t)))
            return (t * 1.0, "box")  # any object: unpack gets it back

        def unpack(p):
            log.append(("unpack", list(p[0].shape)))
            return p[0]

        with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = op(x, w)
        n_packed = len(log)
        y.backward()
        # (the order in which one op packs its saved tensors is its kernel's: torch's mm packs
        # mat2 first, pyrite's self)
        return sorted(log[:n_packed]), sorted(log[n_packed:]), _np(w.grad)

    _same(run)


def test_saved_tensors_hooks_mul_packs_both_operands(rng):
    make = _pair(rng, (5,), (5,))

    def run(lib):
        x, w = make(lib)
        packed, unpacked = [], []
        with lib.autograd.graph.saved_tensors_hooks(
            lambda t: packed.append(_np(t)) or t, lambda t: unpacked.append(1) or t
        ):
            y = (x * w).sum()
        y.backward()
        return sorted(packed), len(unpacked), _np(x.grad), _np(w.grad)

    _same(run)


def test_saved_tensors_hooks_unpack_result_is_used_and_retain_graph_unpacks_again(rng):
    make = _pair(rng, (4,))

    def run(lib):
        (x,) = make(lib)
        calls = []

        def unpack(t):
            calls.append(1)
            return t * 2  # the rule reads a doubled x: d/dx sin(x) becomes cos(2x)

        with lib.autograd.graph.saved_tensors_hooks(lambda t: t.detach(), unpack):
            y = x.sin().sum()
        (g1,) = lib.autograd.grad(y, x, retain_graph=True)
        (g2,) = lib.autograd.grad(y, x)
        return _np(g1), _np(g2), len(calls)

    got = _same(run)
    assert got[2] == 2


def test_saved_tensors_hooks_nest_and_end_with_the_block(rng):
    make = _pair(rng, (3,))

    def run(lib):
        (x,) = make(lib)
        log = []
        H = lib.autograd.graph.saved_tensors_hooks
        with H(lambda t: log.append("outer") or t, lambda t: t):
            a = x.sin()
            with H(lambda t: log.append("inner") or t, lambda t: t):
                b = a.sin()
            c = b.sin()
        d = c.sin()
        (a + b + c + d).sum().backward()
        return log, _np(x.grad)

    _same(run)


def test_save_on_cpu_is_transparent(rng):
    make = _pair(rng, (3, 4), (4, 5))

    def run(lib):
        x, w = make(lib)
        with lib.autograd.graph.save_on_cpu(pin_memory=False):
            y = (x @ w).tanh().sum()
        y.backward()
        return _np(x.grad), _np(w.grad)

    _same(run)


def test_custom_function_saved_tensors_go_through_hooks(rng):
    make = _pair(rng, (4,), (4,))

    def run(lib):
        x, w = make(lib)
        log = []

        class Mul(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a, b):
                ctx.save_for_backward(a, b)
                log.append("forward")
                return a * b

            @staticmethod
            def backward(ctx, g):
                a, b = ctx.saved_tensors
                return g * b, g * a

        with lib.autograd.graph.saved_tensors_hooks(
            lambda t: log.append(("pack", _np(t))) or t, lambda t: log.append("unpack") or t
        ):
            y = Mul.apply(x, w)
        y.sum().backward()
        return log, _np(x.grad), _np(w.grad)

    _same(run)


# ---- Node: grad_fn inspection and hooks --------------------------------------------------------
def test_grad_fn_name_and_next_functions(rng):
    x, w = _pair(rng, (3,), (3,))(pr)
    y = (x * w).exp().sum()
    assert y.grad_fn.name() == "sumBackward"  # (torch: "SumBackward0")
    assert y.grad_fn.name == "sum"  # (pyrite's own tests compare the op name)
    ((exp_fn, k),) = y.grad_fn.next_functions
    assert exp_fn.name() == "expBackward" and k == 0
    ((mul_fn, _),) = exp_fn.next_functions
    leaves = [f for f, _ in mul_fn.next_functions]
    assert [f.name() for f in leaves] == ["torch::autograd::AccumulateGrad"] * 2
    assert leaves[0].variable is x and leaves[1].variable is w
    assert isinstance(y.grad_fn, pr.autograd.graph.Node)

    tx = torch.ones(3, requires_grad=True)
    tleaf = (tx * 2).grad_fn.next_functions[0][0]
    assert tleaf.name() == leaves[0].name()


def test_node_prehook_and_hook_order_values_and_replacement(rng):
    make = _pair(rng, (4,), (4,), (4,))

    def run(lib):
        x, w, c = make(lib)
        log = []
        c.requires_grad_(False)
        y = x * w + c  # (c takes no gradient: grad_inputs has None for it)
        z = y.exp()
        s = z.sum()
        z.register_hook(lambda g: log.append(("tensor", _np(g))))
        z.grad_fn.register_prehook(lambda go: log.append(("pre", [_np(g) for g in go])))
        z.grad_fn.register_hook(
            lambda gi, go: log.append(("post", [_np(g) for g in gi], [_np(g) for g in go]))
        )
        y.grad_fn.register_hook(lambda gi, go: log.append(("add", [_np(g) for g in gi])))
        h = y.grad_fn.register_prehook(lambda go: (go[0] * 3,))  # scales what add receives
        s.backward(retain_graph=True)
        log.append(("grads", _np(x.grad), _np(w.grad)))
        h.remove()
        x.grad = w.grad = None
        s.backward()
        log.append(("grads", _np(x.grad), _np(w.grad)))
        return log

    _same(run)


def test_node_hook_replaces_grad_inputs(rng):
    make = _pair(rng, (2, 3), (3,))

    def run(lib):
        x, b = make(lib)
        y = x + b  # b broadcast: its grad_input is already summed to (3,)
        seen = []

        def hook(gi, go):
            seen.append([list(g.shape) for g in gi])
            return (gi[0] * 0, gi[1] * 2)

        y.grad_fn.register_hook(hook)
        (y * y).sum().backward()
        return seen, _np(x.grad), _np(b.grad)

    _same(run)


@pytest.mark.parametrize("second", ["a", "ab"])
def test_register_multi_grad_hook_all_and_any(rng, second):
    make = _pair(rng, (2,), (2,), (2,))

    def run(lib):
        a, b, c = make(lib)
        log = []
        reg = lib.autograd.graph.register_multi_grad_hook
        reg((a, b, c), lambda gs: log.append(("all", [_np(g) for g in gs])))
        h = reg((a, b), lambda g: log.append(("any", _np(g))), mode="any")
        (a * b).sum().backward()
        loss = (a * 2).sum() if second == "a" else (a * b.exp()).sum()
        loss.backward()
        h.remove()
        (b * 3).sum().backward()
        return log

    _same(run)


def test_register_multi_grad_hook_on_intermediates(rng):
    make = _pair(rng, (3,))

    def run(lib):
        (x,) = make(lib)
        y1, y2 = x.sin(), x.cos()
        log = []
        lib.autograd.graph.register_multi_grad_hook(
            (y1, y2), lambda gs: log.append([_np(g) for g in gs])
        )
        (y1 * y2).sum().backward()
        return log, _np(x.grad)

    _same(run)


# ---- Function ----------------------------------------------------------------------------------
def test_function_non_tensor_args_and_needs_input_grad(rng):
    make = _pair(rng, (4,), (4,))

    def run(lib):
        x, w = make(lib)
        w.requires_grad_(False)
        log = []

        class Scale(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, k, w, flag):
                ctx.save_for_backward(x, w)
                ctx.k = k
                log.append(ctx.needs_input_grad)
                return x * w * k if flag else x

            @staticmethod
            def backward(ctx, g):
                x, w = ctx.saved_tensors
                log.append(ctx.needs_input_grad)
                return g * w * ctx.k, None, None, None

        y = Scale.apply(x, 3.0, w, True)
        y.sum().backward()
        with lib.no_grad():
            Scale.apply(x, 2.0, w, True)
        log.append(y.grad_fn.name())
        return log, _np(x.grad)

    _same(run)


def test_function_setup_context_style_and_once_differentiable(rng):
    make = _pair(rng, (5,))

    def run(lib):
        (x,) = make(lib)
        from_fn = __import__(lib.__name__ + ".autograd.function", fromlist=["x"])

        class Cube(lib.autograd.Function):
            @staticmethod
            def forward(x, p):
                return x**p

            @staticmethod
            def setup_context(ctx, inputs, output):
                x, p = inputs
                ctx.save_for_backward(x, output)
                ctx.p = p

            @staticmethod
            @from_fn.once_differentiable
            def backward(ctx, g):
                x, out = ctx.saved_tensors
                return g * ctx.p * out / x, None

        y = Cube.apply(x, 3)
        (g,) = lib.autograd.grad(y.sum(), x, create_graph=True)
        return _np(g), g.requires_grad

    _same(run)


def test_function_mark_dirty(rng):
    make = _pair(rng, (4,))

    def run(lib):
        (x,) = make(lib)

        class AddOne_(lib.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                t.add_(1)
                ctx.mark_dirty(t)
                return t

            @staticmethod
            def backward(ctx, g):
                return g

        h = x * 2
        v0 = h._version
        o = AddOne_.apply(h)
        out = [o is h, h._version - v0, o.grad_fn.name()]
        (o * o).sum().backward()
        out.append(_np(x.grad))
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            AddOne_.apply(x)
        return out

    _same(run)


def test_function_non_differentiable_and_materialize_grads(rng):
    make = _pair(rng, (5,))

    def run(lib, materialize):
        (x,) = make(lib)
        seen = []

        class Twice(lib.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                ctx.set_materialize_grads(materialize)
                idx = lib.argsort(t)
                ctx.mark_non_differentiable(idx)
                return t * 2, t * 3, idx

            @staticmethod
            def backward(ctx, g2, g3, gi):
                seen.append([_np(g) for g in (g2, g3, gi)])
                out = g2 * 2
                return out if g3 is None else out + g3 * 3

        a, b, idx = Twice.apply(x)
        a.sum().backward()
        return seen, idx.requires_grad, b.requires_grad, _np(x.grad)

    for m in (True, False):
        np.testing.assert_equal(run(pr, m), run(torch, m))


def test_function_saved_tensor_modified_in_place_raises(rng):
    (x,) = _pair(rng, (3,))(pr)

    class Keep(pr.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return t * 1

        @staticmethod
        def backward(ctx, g):
            (t,) = ctx.saved_tensors
            return g * t

    h = x * 1
    y = Keep.apply(h)
    h.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    y2 = Keep.apply(x * 1)
    y2.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y2.grad_fn.saved_tensors


def test_function_wrong_gradient_count_raises(rng):
    (x,) = _pair(rng, (3,))(pr)

    class Bad(pr.autograd.Function):
        @staticmethod
        def forward(ctx, t, k):
            return t * k

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Bad.apply(x, 2.0).sum().backward()


def test_node_metadata_is_a_dict_kept_apart_from_hooks():
    """grad_fn.metadata is torch's empty dict, kept while the node lives and not the node's
    hook list (it was the list of post-hooks)."""
    for L in (torch, pr):
        x = L.tensor([0.5, -1.0, 2.0], requires_grad=True)
        y = x.exp()
        assert y.grad_fn.metadata == {}
        y.grad_fn.metadata["tag"] = 7
        calls = []
        y.grad_fn.register_hook(lambda gi, go: calls.append(1))
        assert y.grad_fn.metadata == {"tag": 7}
        y.sum().backward()
        assert calls == [1]


# ---- AccumulateGrad hooks, GradientEdge, disable_saved_tensors_hooks, once_differentiable ----
def _hook_log(log):
    """Hooks on a leaf and on its AccumulateGrad that log what they see (the prehook adds 1)."""

    def setup(x, acc):
        x.register_hook(lambda g: log.append(("tensor", _np(g))) or g * 3)
        acc.register_prehook(lambda go: log.append(("pre", _np(go[0]))) or (go[0] + 1,))
        acc.register_hook(lambda gi, go: log.append(("post", len(gi), _np(go[0]))))
        x.register_post_accumulate_grad_hook(lambda t: log.append(("acc", _np(t.grad))))

    return setup


def test_accumulate_grad_hooks_persist_across_backward_calls(rng):
    """torch's AccumulateGrad is one object per leaf while the graph or the caller holds it:
    its hooks run at every backward, after the tensor's hooks, the post hook after the
    post-accumulate hook. pyrite made a new one at each `next_functions` read, with no hooks."""
    make = _pair(rng, (3,))

    def run(lib):
        (x,) = make(lib)
        log = []
        y = (x * 2).sum()
        acc = y.grad_fn.next_functions[0][0].next_functions[0][0]
        _hook_log(log)(x, acc)
        y.backward(retain_graph=True)
        (x * 5).sum().backward()  # (another graph, the same accumulator)
        same = (x * 1).grad_fn.next_functions[0][0] is acc
        return log, _np(x.grad), same, acc.name(), acc.variable is x

    got = _same(run)
    assert [e[0] for e in got[0]] == ["tensor", "pre", "acc", "post"] * 2 and got[2]


def test_accumulate_grad_hooks_run_for_backward_inputs_not_for_grad(rng):
    make = _pair(rng, (3,))

    def run(lib):
        (x,) = make(lib)
        log = []
        acc = (x * 1).grad_fn.next_functions[0][0]
        _hook_log(log)(x, acc)
        (g,) = lib.autograd.grad((x * 4).sum(), x)  # (its tensor hook runs: torch's too)
        n = len(log)
        (x * 4).sum().backward(inputs=[x])
        return log[:n], log[n:], _np(g), _np(x.grad)

    _same(run)


def test_accumulate_grad_hook_returning_the_wrong_count_raises():
    for lib in (torch, pr):
        x = lib.ones(2, requires_grad=True)
        acc = (x * 2).grad_fn.next_functions[0][0]
        h = acc.register_hook(lambda gi, go: (go[0],))
        with pytest.raises(
            RuntimeError, match=r"incorrect number of values \(got 1, but expected 0"
        ):
            (x * 2).sum().backward()
        h.remove()
        acc.register_prehook(lambda go: (go[0], go[0]))
        with pytest.raises(
            RuntimeError, match=r"incorrect number of values \(got 2, but expected 1"
        ):
            (x * 2).sum().backward()


def test_gradient_edges_as_inputs_and_outputs(rng):
    """torch.autograd.graph.get_gradient_edge: a gradient asked for through an edge, after the
    tensor itself is gone (a pipeline schedule's split backward), as inputs and as outputs."""
    make = _pair(rng, (4,), (4,))

    def run(lib):
        G = lib.autograd.graph
        x, w = make(lib)
        h = x.sin() * w
        eh, ex = G.get_gradient_edge(h), G.get_gradient_edge(x)
        y = (h * h).sum()
        both = lib.autograd.grad(y, [eh, ex], retain_graph=True)
        del h  # (the edge keeps the node, not the tensor)
        (gh,) = lib.autograd.grad(y, eh, retain_graph=True)
        z = x.exp()
        (gz,) = lib.autograd.grad(G.get_gradient_edge(z), x, grad_outputs=lib.ones(4))
        (gs,) = lib.autograd.grad(G.get_gradient_edge(y), x, retain_graph=True)  # (a scalar)
        y.backward(inputs=G.get_gradient_edge(w))
        split = w.split(2)[1]
        return (
            [_np(g) for g in both],
            _np(gh),
            _np(gz),
            _np(gs),
            _np(w.grad),
            x.grad is None,
            type(eh).__name__,
            eh.output_nr,
            ex.output_nr,
            G.get_gradient_edge(split).output_nr,
            ex.node is (x * 1).grad_fn.next_functions[0][0],
        )

    _same(run)


def test_gradient_edge_errors():
    for lib in (torch, pr):
        G = lib.autograd.graph
        with pytest.raises(RuntimeError, match="does not require gradients"):
            G.get_gradient_edge(lib.ones(2))
        x, w = lib.ones(2, requires_grad=True), lib.ones(2, requires_grad=True)
        y = (x * 2).sum()
        with pytest.raises(RuntimeError, match="materialize_grads cannot be used"):
            lib.autograd.grad(y, G.get_gradient_edge(w), allow_unused=True, materialize_grads=True)
        with pytest.raises(RuntimeError, match="implicitly created only for scalar outputs"):
            lib.autograd.grad(G.get_gradient_edge(x * 2), x)  # (an edge needs grad_outputs)


def test_disable_saved_tensors_hooks():
    for lib in (torch, pr):
        G = lib.autograd.graph
        x = lib.ones(2, requires_grad=True)
        with G.disable_saved_tensors_hooks("no hooks here"):
            with pytest.raises(RuntimeError, match="no hooks here"):
                with G.saved_tensors_hooks(lambda t: t, lambda t: t):
                    pass
            with G.disable_saved_tensors_hooks("inner"):
                with pytest.raises(RuntimeError, match="inner"):
                    with G.save_on_cpu():
                        pass
            with pytest.raises(RuntimeError, match="no hooks here"):  # (the outer's again)
                with G.saved_tensors_hooks(lambda t: t, lambda t: t):
                    pass
            (x.sin() * 2).sum().backward()  # (autograd itself runs as ever)
        with G.saved_tensors_hooks(lambda t: t, lambda t: t):
            with pytest.raises(RuntimeError, match="while active"):
                with G.disable_saved_tensors_hooks("while active"):
                    pass
        with G.saved_tensors_hooks(lambda t: t, lambda t: t):  # (enabled again)
            pass

        @G.disable_saved_tensors_hooks("as a decorator")
        def f():
            with G.saved_tensors_hooks(lambda t: t, lambda t: t):
                pass

        with pytest.raises(RuntimeError, match="as a decorator"):
            f()


def _square(lib):
    once = __import__(lib.__name__ + ".autograd.function", fromlist=["x"]).once_differentiable

    class Sq(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    return Sq


def test_once_differentiable_raises_when_a_double_backward_reaches_it(rng):
    """With create_graph=True and an incoming gradient that requires grad, a once_differentiable
    backward's results are tied to torch's `Error` node: a double backward through them raises
    (pyrite gave gradients without a graph: a silent zero second derivative)."""
    make = _pair(rng, (3,))

    def run(lib):
        (x,) = make(lib)
        Sq = _square(lib)
        (g,) = lib.autograd.grad(Sq.apply(x).sum(), x, create_graph=True)
        plain = (_np(g), g.requires_grad)  # (ones came in: nothing to differentiate)
        ones = lib.ones(3, requires_grad=True)
        (g,) = lib.autograd.grad(Sq.apply(x), x, grad_outputs=ones, create_graph=True)
        with pytest.raises(RuntimeError, match="differentiate twice a function that was marked"):
            g.sum().backward()
        # a double backward whose inputs it does not lead to runs (torch runs only the nodes on
        # a path to autograd.grad's inputs)
        y = Sq.apply(x)
        (g,) = lib.autograd.grad((y * x).sum(), x, create_graph=True)
        (gg,) = lib.autograd.grad(g.sum(), x)
        return plain, _np(g), _np(gg)

    _same(run)


def test_grad_runs_only_the_nodes_its_inputs_need(rng):
    """autograd.grad runs the nodes on a path to its inputs, as torch: a branch whose backward
    would raise (or a node hook elsewhere) is not run."""
    make = _pair(rng, (3,), (3,))

    def run(lib):
        x, w = make(lib)

        class Boom(lib.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                return t * 1

            @staticmethod
            def backward(ctx, g):
                raise RuntimeError("boom")

        calls = []
        a = x.sin()
        b = Boom.apply(w)
        b.grad_fn.register_prehook(lambda go: calls.append("boom pre"))
        a.grad_fn.register_prehook(lambda go: calls.append("sin pre"))
        y = (a * b).sum()
        (gx,) = lib.autograd.grad(y, x, retain_graph=True)
        ran = list(calls)
        with pytest.raises(RuntimeError, match="boom"):
            y.backward()  # (every leaf: it runs there)
        return _np(gx), ran, "boom pre" in calls

    _same(run)
