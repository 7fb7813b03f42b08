"""Regressions of the session-46 differential fuzz of pyrite.utils.data and of sparse COO tensors
(scripts/fuzz_data_sparse.py) against torch 2.13 CPU, each minimized to a named parity test,
plus a small seeded run of the fuzz itself.

Found and fixed by it:
- a sparse result torch keeps sparse (`s * c`, `s / c`, `-s`, `s * dense`, `dense * s`,
  `s + s2`, `s - s2`, `s.add(s2, alpha=)`, `s * s2`, `s.t()`, `s.transpose(i, j)`) was a dense
  tensor, so a later `.to_dense()` no longer masked the gradient to the COO pattern:
  `(x.to_sparse() * 2).to_dense()` gave x the gradient 2 everywhere where torch gives it at
  x's nonzeros only (ops/sparse_coo.py: these return a SparseCOOTensor of torch's pattern);
- torch.sparse.sum / sparse.mm / sparse.addmm passed a sparse operand's gradient unmasked
  (torch's is sparse, of the operand's pattern) (sparse.py);
- a sparse tensor of no entries made from values requiring grad left values.grad None and
  sparse.softmax of it raised "does not require grad" (torch: an empty gradient);
- `t()` of a hybrid tensor and `transpose` of a sparse dim with a dense one were computed
  densely: torch refuses them;
- `s * inf` / `s / 0` stored nan where no index names an entry (0 * inf): to_dense read nan
  there and `dense + s * inf` was nan everywhere (torch: those entries stay 0);
- a DataLoader over a TensorDataset whose batch_sampler yields an empty batch returned empty
  tensors: torch's default_collate([]) raises IndexError (dataloader.py's one-gather path).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pyrite as pr
from tests import fuzzing

torch = pytest.importorskip("torch")

U = 2.0**-24


def _dense_grad_of_x(L, x_np, op, w_np):
    """x.to_sparse() -> op -> to_dense -> sum(. * W): the gradient x gets, as numpy."""
    x = L.tensor(x_np, requires_grad=True)
    out = op(L, x.to_sparse())
    out = out.to_dense() if out.is_sparse else out
    (out * L.tensor(w_np)).sum().backward()
    return x.grad.numpy(), out.detach().numpy()


def _sparse_x(rng, shape, frac=0.6):
    x = rng.standard_normal(shape).astype(np.float32)
    x[rng.random(shape) < frac] = 0.0
    return x


# ---- sparse results keep torch's pattern (and so its gradient mask) ------------------------------
OPS = {
    "mul_scalar": lambda L, s: s * 1.5,
    "rmul_scalar": lambda L, s: -0.5 * s,
    "div_scalar": lambda L, s: s / 4.0,
    "neg": lambda L, s: -s,
    "mul_dense": lambda L, s: s * L.ones(s.shape) * 3,
    "dense_mul": lambda L, s: L.full(tuple(s.shape), 2.0) * s,
    "add_self": lambda L, s: s + s,
    "sub_other": lambda L, s: s - (s * 0.5),
    "add_alpha": lambda L, s: s.add(s * 2, alpha=-0.25),
    "mul_sparse": lambda L, s: s * s,
    "t_t": lambda L, s: s.t().t(),
    "transpose": lambda L, s: s.transpose(0, 1),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_sparse_results_keep_the_gradient_mask_of_torch(rng, name):
    shape = (7, 5)
    x, w = _sparse_x(rng, shape), rng.standard_normal(shape).astype(np.float32)
    op = OPS[name]
    wt = w.T.copy() if name == "transpose" else w
    tg, tv = _dense_grad_of_x(torch, x, op, wt)
    pg, pv = _dense_grad_of_x(pr, x, op, wt)
    np.testing.assert_allclose(pv, tv, rtol=8 * U, atol=8 * U)
    np.testing.assert_allclose(pg, tg, rtol=8 * U, atol=8 * U)
    assert (pg[x == 0] == 0).all()  # (the mask itself: no gradient where x had no entry)


@pytest.mark.parametrize("name", ["mul_scalar", "neg", "mul_dense", "t_t", "transpose"])
def test_sparse_results_coo_form_matches_torch(rng, name):
    idx = np.stack([rng.integers(0, 5, 9), rng.integers(0, 3, 9)])  # (duplicates, unsorted)
    vals = rng.standard_normal(9).astype(np.float32)
    got = []
    for L in (torch, pr):
        s = L.sparse_coo_tensor(L.tensor(idx), L.tensor(vals), (5, 3))
        out = OPS[name](L, s)
        c = out.coalesce()
        got.append((out.is_sparse, out.is_coalesced(), c._indices().tolist(), c._values().numpy()))
    assert got[0][:3] == got[1][:3]
    np.testing.assert_allclose(got[1][3], got[0][3], rtol=16 * U, atol=16 * U)


@pytest.mark.parametrize("fn", ["sum", "sum_dim", "mm", "addmm"])
def test_sparse_functions_mask_the_sparse_operands_gradient(rng, fn):
    x = _sparse_x(rng, (5, 7))
    m = rng.standard_normal((7, 3)).astype(np.float32)
    a = rng.standard_normal((5, 3)).astype(np.float32)
    grads = []
    for L in (torch, pr):
        xt = L.tensor(x, requires_grad=True)
        s = xt.to_sparse()
        if fn == "sum":
            out = L.sparse.sum(s) * 3
        elif fn == "sum_dim":
            out = L.sparse.sum(s, 1)
            out = (out.to_dense() if out.is_sparse else out) * L.arange(5.0)
        elif fn == "mm":
            out = L.sparse.mm(s, L.tensor(m))
        else:
            out = L.sparse.addmm(L.tensor(a), s, L.tensor(m), beta=0.5, alpha=-2.0)
        out.sum().backward()
        grads.append(xt.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=64 * U, atol=64 * U)
    assert (grads[1][x == 0] == 0).all()


def test_empty_values_get_an_empty_gradient(rng):
    for L in (torch, pr):
        v = L.zeros(0, requires_grad=True)
        s = L.sparse_coo_tensor(L.zeros(2, 0, dtype=L.int64), v, (3, 4))
        out = L.sparse.softmax(s, 1)
        out = out.to_dense() if out.is_sparse else out
        (out * L.tensor(rng.standard_normal((3, 4)).astype(np.float32))).sum().backward()
        assert v.grad is not None and tuple(v.grad.shape) == (0,)
        assert (out.detach().numpy() == 0).all()


def test_t_and_transpose_refuse_what_torch_refuses(rng):
    vals = rng.standard_normal((2, 3)).astype(np.float32)
    for L in (torch, pr):
        hybrid = L.sparse_coo_tensor(L.tensor([[0, 4]]), L.tensor(vals), (5, 3))
        with pytest.raises(RuntimeError, match="t\\(\\) expects"):
            hybrid.t()
        with pytest.raises(RuntimeError, match="transposed dimensions must be sparse"):
            hybrid.transpose(0, 1)
        assert hybrid.transpose(1, 1).is_sparse


@pytest.mark.parametrize("how", ["mul_inf", "div_zero"])
def test_nonfinite_scale_leaves_unspecified_entries_zero(rng, how):
    x = _sparse_x(rng, (4, 6))
    d = rng.standard_normal((4, 6)).astype(np.float32)
    got = []
    for L in (torch, pr):
        s = L.tensor(x).to_sparse()
        out = s * float("inf") if how == "mul_inf" else s / 0.0
        got.append((out.to_dense().numpy(), (L.tensor(d) + out).numpy()))
    for want, have in zip(got[0], got[1]):
        np.testing.assert_array_equal(have, want)


def test_empty_batch_from_a_batch_sampler_raises_as_torch(rng):
    x = rng.standard_normal((5, 2)).astype(np.float32)
    for L in (torch, pr):
        ds = L.utils.data.TensorDataset(L.tensor(x))
        for d in (ds, L.utils.data.Subset(ds, [4, 0, 2])):
            loader = L.utils.data.DataLoader(d, batch_sampler=[[1], []])
            with pytest.raises(IndexError):
                list(loader)


# ---- the fuzz itself, a small seeded run ---------------------------------------------------------
def _fuzz():
    return fuzzing.load_script("fuzz_data_sparse")


def test_seeded_fuzz_of_data_and_sparse_agrees_with_torch(rng):
    fz = _fuzz()
    seeds = [int(s) for s in rng.integers(0, 2**31, 150)]
    fails = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in seeds:
            case = fz.Gen(seed).build()
            if case.get("workers"):  # (torch's worker processes: slow to start, not pyrite's)
                case["workers"] = 0
            status, detail = fz.check(case)
            if status == "fail":
                fails.append(f"seed {seed}: {detail}\n{fz.describe(case)}")
    assert not fails, "\n".join(fails)


@pytest.mark.parametrize("beta,alpha", [(0.0, 2.0), (0, -2.5), (0.0, 1.0), (0.5, 2.7)])
def test_integer_addmm_casts_its_scalars_to_the_integer_type(rng, beta, alpha):
    """torch casts beta and alpha to the integer dtype (2.5 is 2); beta 0 took a float path
    and gave float32 (found by the sparse fuzz's addmm)."""
    a = rng.integers(-9, 9, (3, 5))
    b = rng.integers(-9, 9, (5, 4))
    c = rng.integers(-9, 9, (3, 4))
    want = torch.addmm(torch.tensor(c), torch.tensor(a), torch.tensor(b), beta=beta, alpha=alpha)
    got = pr.addmm(pr.tensor(c), pr.tensor(a), pr.tensor(b), beta=beta, alpha=alpha)
    assert got.dtype is pr.int32
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize(
    "form",
    [
        lambda T, s: T.mul(s, 2),
        lambda T, s: T.multiply(s, -0.5),
        lambda T, s: T.neg(s),
        lambda T, s: T.div(s, 4),
        lambda T, s: T.true_divide(s, 3),
        lambda T, s: T.add(s, s, alpha=2),
        lambda T, s: T.sub(s, s * 3),
        lambda T, s: T.t(s),
        lambda T, s: T.transpose(s, 0, 1),
        lambda T, s: T.swapdims(s, 1, 0),
    ],
)
def test_function_forms_keep_sparse_results_as_their_methods(rng, form):
    """pr.mul(s, 2) and kin hand a sparse input to its method, as torch's dispatch does: the
    result is sparse and a later to_dense() keeps the gradient to the stored entries (the
    function forms gave dense results, so the gradient reached every element)."""
    x0 = rng.standard_normal((3, 5)).astype(np.float32)
    x0[rng.random((3, 5)) < 0.5] = 0
    w = rng.standard_normal((3, 5)).astype(np.float32)
    got = []
    for T in (torch, pr):
        x = T.tensor(x0, requires_grad=True)
        y = form(T, x.to_sparse())
        wt = T.tensor(w if tuple(y.shape) == (3, 5) else w.T.copy())
        (y.to_dense() * wt).sum().backward()
        got.append((y.is_sparse, y.to_dense().detach().numpy(), x.grad.numpy()))
    assert got[1][0] and got[0][0]
    np.testing.assert_allclose(got[1][1], got[0][1], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got[1][2], got[0][2], rtol=1e-6, atol=1e-7)
