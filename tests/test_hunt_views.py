"""Views and in-place writes under autograd, against torch: histories of views taken before
an in-place op, leaf views, operands that alias the written tensor, copy_'s zero gradient, and
mul's saved operands (found by a random differential hunt)."""

import numpy as np
import pytest
import torch

import pyrite as pr


def _run(lib, program):
    env = {"T": lib}
    exec(program, env)
    return env


def _np(t):
    return None if t is None else t.detach().numpy()


def _same(program, names=("a", "b")):
    """Run `program` with T = torch and T = pyrite; the grads of `names` and every x* agree."""
    te, pe = _run(torch, program), _run(pr, program)
    for k in names:
        a, b = _np(te[k].grad), _np(pe[k].grad)
        assert (a is None) == (b is None), (k, a, b)
        if a is not None:
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5, err_msg=f"{k}.grad")
    for k in te:
        if k.startswith("x") and k[1:].isdigit():
            np.testing.assert_allclose(_np(pe[k]), _np(te[k]), rtol=1e-5, atol=1e-5, err_msg=k)


_HEAD = """
a = T.tensor([[0.5, -1.25, 2.0], [1.5, 0.25, -0.75], [-2.0, 1.0, 0.5]]).requires_grad_()
b = T.tensor([0.7, -1.3], requires_grad=True)
"""

CASES = {
    # views taken before an in-place op on their base read through the base's new history
    "base_clamped_after_views": """
x0 = a.sin() * b[1]
x1 = x0.flatten(0)
x2 = x1.unsqueeze(-2)
x0.clamp_(-0.5, 0.5)
x3 = x0.permute(1, 0)
loss = (x0 * 0.3).sum() + (x1 * 0.47).sum() + (x2 * 0.64).sum() + (x3 * 0.81).sum()
loss.backward()
""",
    "write_through_one_view_seen_by_another": """
x0 = a * 1.5 + b[0]
x1 = x0.view_as(x0)
x2 = x0.squeeze()
x3 = x1.view(9)
x1[T.tensor([0, 2])] = -6.0
loss = (x0 * 0.3).sum() + (x1 * 0.47).sum() + (x2 * 0.64).sum() + (x3 * 0.81).sum()
loss.backward()
""",
    "expanded_view_of_rebased_base": """
x0 = (a * 1.5 + b[0])[:1]
x1 = x0.expand(3, 3)
x0[0, 1] = b.sum()
loss = (x0 * 0.3).sum() + (x1 * 0.47).sum()
loss.backward()
""",
    "view_of_detached_tensor_written_with_grad": """
x0 = a * 1.5
x1 = x0.detach()
x2 = x1.select(1, 1)
x1.add_(b.sum())
loss = (x2 * 0.64).sum() + (x1 * 0.3).sum()
loss.backward()
""",
    "view_of_plain_buffer_written_with_grad": """
x0 = T.zeros(4, 3)
x1 = x0[2:]
x0[:2] = a[:2] * b[0]
x0[2:] = a[1:] * b[1]
loss = (x0 * 0.3).sum() + (x1 * 0.5).sum()
loss.backward()
""",
    # a view written with itself as the operand
    "view_add_itself": """
x0 = a.tanh() * b[1]
x1 = x0.select(1, 0)
x1.add_(x1)
loss = (x0 * 0.3).sum() + (x1 * 0.47).sum()
loss.backward()
""",
    "permuted_view_add_itself": """
x0 = a * 1.5 + b[0]
x1 = x0.permute(1, 0)[:, 1:]
x1.add_(x1, alpha=0.5)
loss = (x0 * 0.3).sum() + (x1 * 0.47).sum()
loss.backward()
""",
    # copy_ over a whole tensor: the overwritten history gets zeros, not None
    "copy_over_everything": """
x0 = a.sigmoid() * b[1]
x0.copy_(T.ones(3, 3) * b.sum())
x1 = x0.view(9)
loss = (x0 * 0.3).sum() + (x1 * 0.47).sum()
loss.backward()
""",
    # mul by a scalar does not keep its tensor: writing that tensor later is allowed
    "mul_by_scalar_then_write_input": """
x0 = a * 1.0
x1 = x0 * 2
x2 = x0 + b[0]
x0.add_(1)
loss = x1.sum() + x2.sum()
loss.backward()
""",
    "sub_alpha_of_own_view": """
x0 = a * 1.5 + b[0]
x1 = x0.view(3, 3)
x0.sub_(x1, alpha=2)
loss = (x0 * 0.3).sum()
loss.backward()
""",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_views_and_inplace_grads_match_torch(name):
    _same(_HEAD + CASES[name])


def test_operand_aliasing_the_written_view_is_read_before_the_write():
    # torch refuses this backward (its saved operand was overwritten); pyrite reads the operand
    # as it was, as it does for y.mul_(y) (README): the gradient of the values computed
    program = (
        _HEAD
        + """
x0 = a * 1.5
x2 = x0[1]
x3 = x2.view(3)
x3.mul_(x2)
loss = (x0 * 0.64).sum()
loss.backward()
"""
    )
    env = _run(pr, program)
    x = 1.5 * np.array([[0.5, -1.25, 2.0], [1.5, 0.25, -0.75], [-2.0, 1.0, 0.5]])
    want = np.full((3, 3), 0.64 * 1.5)
    want[1] = 0.64 * 1.5 * 2 * x[1]
    np.testing.assert_allclose(_np(env["a"].grad), want, rtol=1e-5)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _run(torch, program)


LEAF_WRITES = [
    "a.reshape(-1).fill_(0)",
    "a[0].add_(1)",
    "a[0] = 7",
    "a.add_(1)",
    "a.reshape(-1).index_add_(0, T.tensor([0]), T.ones(1))",
    "a.unfold(1, 1, 2)[0] = -8",
    "a.T.mul_(2)",
    "a[a > 2] = 0",
]


@pytest.mark.parametrize("stmt", LEAF_WRITES)
@pytest.mark.parametrize("leaf_is_view", [False, True])
def test_inplace_into_leaf_or_its_views_raises_before_writing(stmt, leaf_is_view):
    make = (
        "a = T.tensor([1., 2, 3, 4]).reshape(2, 2).requires_grad_()"
        if leaf_is_view
        else "a = T.tensor([[1., 2], [3, 4]], requires_grad=True)"
    )
    for lib in (torch, pr):
        env = _run(lib, make)
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            exec(stmt, env)
        a = env["a"]
        assert a.is_leaf and a.grad_fn is None
        np.testing.assert_array_equal(_np(a).ravel(), [1, 2, 3, 4])


def test_writes_through_detach_and_data_are_allowed_and_shared():
    for lib in (torch, pr):
        a = lib.tensor([[1.0, 2], [3, 4]], requires_grad=True)
        a.detach()[0] = 9
        a.data[1] += 1
        np.testing.assert_array_equal(_np(a), [[9, 9], [4, 5]])
        assert a.is_leaf
        (a * a).sum().backward()
        np.testing.assert_array_equal(_np(a.grad), [[18, 18], [8, 10]])
