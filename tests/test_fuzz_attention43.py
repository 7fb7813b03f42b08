"""Regressions of the session-43 differential fuzz of scaled_dot_product_attention
(scripts/fuzz_attention.py) against torch 2.13 CPU, each minimized, on fresh inputs from `rng`,
plus a small seeded run of the fuzz itself.

Found by it (fixed the same session: the saved log-sum-exp is kept as its two parts,
kernels/attention.lse_store):
- the gradients of a query row whose every key carries one large negative float mask value
  (-1e9, or torch.finfo(float32).min as Hugging Face's masks use; a fully padded query row)
  are off: torch (and the forward) weigh the keys uniformly there, softmax of equal scores, but
  the fused backward recomputes p = exp(s - lse) from the saved log-sum-exp lse = m + log(l),
  and at |m| ~ 1e9 .. 3.4e38 the float32 sum rounds log(l) away, so every p is 1 (not 1/S):
  dv, dq and dk of such rows S times too large (kernels/attention.py's forward writes lse, its
  attn_dq_kernel / attn_dkv_kernel and kernels/attention_tiled_bwd.py read it; seed 3 case 68).
The fuzz's other differences were torch's: a negative scale gives NaN through its math path
(it scales q and k by sqrt(scale); with is_causal in float32 too), values with more rows than
the keys are taken by its fused CPU kernel (reading past them), pyrite refuses them.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import pyrite as pr
from tests import fuzzing

torch = pytest.importorskip("torch")


def _fuzz():
    return fuzzing.load_script("fuzz_attention")


# ---- a row of keys all at one large negative float: its gradients -------------------------------
BWD = {
    "rows": {"FORCE_TILED_BWD": False},  # (lavapipe's rule)
    "tiled": {"FORCE_TILED_BWD": True, "FORCE_TILED_BWD_TB": 16, "DS_GEMM": False},
    "tiled-ds": {"FORCE_TILED_BWD": True, "FORCE_TILED_BWD_TB": 16, "DS_GEMM": True},
    "tiled-gemm3": {
        "FORCE_TILED_BWD": True,
        "FORCE_TILED_BWD_TB": 16,
        "DS_GEMM": True,
        "GEMM_PRODUCTS": True,
    },
}


@pytest.mark.parametrize("kernel", list(BWD))
@pytest.mark.parametrize("fill", [-1e9, float(np.finfo(np.float32).min)], ids=["-1e9", "f32min"])
def test_gradients_of_a_row_whose_keys_all_carry_one_large_negative_mask_value(
    rng, monkeypatch, kernel, fill
):
    """A query row whose every key gets the same huge negative float mask value attends to its
    keys uniformly (its float32 scores all round to the fill: softmax of equal scores), forward
    and backward: dq, dk and dv equal torch float32's (its CPU math path, no saved log-sum-exp)
    within float32 rounding (the row's p = 1/S, not 1). (torch float64 keeps q·k beside -1e9,
    so it is the reference only where the fill swamps it in float64 too, as finfo.min does; at
    finfo.min torch float32 and float64 agree within 3e-7.)"""
    from pyrite.nn import _attention as A

    for name, val in BWD[kernel].items():
        monkeypatch.setattr(A, name, val)
    L, S, E = 3, 5, 8
    q, k, v, w = (rng.standard_normal((2, n, E)).astype(np.float32) for n in (L, S, S, L))
    m = np.zeros((2, L, S), np.float32)
    m[:, 1] = np.float32(fill)  # (query row 1: every key)
    m[1, 2, 1:] = np.float32(fill)  # (a row with one key left: not uniform, p = 1 there)
    got, want = [], []
    for M, dt, out in ((torch, np.float32, want), (pr, np.float32, got)):
        ts = [M.tensor(a.astype(dt)).requires_grad_(True) for a in (q, k, v)]
        o = M.nn.functional.scaled_dot_product_attention(*ts, attn_mask=M.tensor(m.astype(dt)))
        (o * M.tensor(w.astype(dt))).sum().backward()
        out += [o.detach().numpy()] + [t.grad.numpy() for t in ts]
    for name, g, r in zip(("out", "dq", "dk", "dv"), got, want):
        # (float32 sums of S or L terms of magnitude ~|w||v|·|q|: a few ulps of the largest)
        tol = 64 * 2.0**-24 * math.sqrt(E) * max(np.abs(r).max(), 1.0)
        np.testing.assert_allclose(g, r, rtol=0, atol=tol, err_msg=name)


def test_mismatched_rows_and_head_dims_are_named_at_the_attention_call(rng):
    """A value with another row count than the key, or a key with another head dim than the
    query, is refused by scaled_dot_product_attention with its own ShapeError naming both shapes
    (it was matmul's "mat1 and mat2 shapes cannot be multiplied"); a value head dim of its own
    stays allowed, as in torch."""
    from pyrite.errors import ShapeError

    F = pr.nn.functional

    def t(*shape):
        return pr.tensor(rng.standard_normal(shape).astype(np.float32))

    with pytest.raises(ShapeError, match=r"key and value.*\(2, 5, 8\).*\(2, 7, 8\)"):
        F.scaled_dot_product_attention(t(2, 3, 8), t(2, 5, 8), t(2, 7, 8))
    with pytest.raises(ShapeError, match=r"query and key.*\(2, 3, 8\).*\(2, 5, 9\)"):
        F.scaled_dot_product_attention(t(2, 3, 8), t(2, 5, 9), t(2, 5, 8))
    q, k, v = t(2, 3, 8), t(2, 5, 8), t(2, 5, 6)
    got = F.scaled_dot_product_attention(q, k, v)
    want = torch.nn.functional.scaled_dot_product_attention(
        *(torch.tensor(x.numpy()) for x in (q, k, v))
    )
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=1e-6)


# ---- the fuzz itself, a small seeded run ---------------------------------------------------------
def test_seeded_fuzz_of_attention_agrees_with_torch(rng):
    """A handful of drawn calls (shapes, masks, scales, grouped heads, views, kernel choices,
    gradients) agree with torch float64 within the rounding bounds of the fuzz, and every case
    restores the module constants it set."""
    from pyrite.nn import _attention as A

    fz = _fuzz()
    knobs = {n: getattr(A, n) for n in ("FORCE_TILED", "FORCE_DECODE", "FORCE_SPLITS")}
    seed = int(rng.integers(0, 2**31))
    fails = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(5):
            case_rng = np.random.default_rng([seed, i])
            case = fz.gen_case(case_rng)
            case.configs = case.configs[:2]  # (the rule's choice and one forced: time)
            msg = fz.check(case, case_rng)
            if msg is not None:
                fails.append(f"[{seed}, {i}] {fz.describe(case)}: {msg}")
    assert not fails, "\n".join(fails)
    assert {n: getattr(A, n) for n in knobs} == knobs


def test_fuzz_judges_a_wrong_answer_as_a_mismatch(rng, monkeypatch):
    """The fuzz's comparison is not vacuous: an output element off by 3 times its bound, and a
    row of zeros where torch has values, are both reported; torch's own float32 rounding of
    the reference passes."""
    fz = _fuzz()
    case_rng = np.random.default_rng([7, 3])
    case = fz.gen_case(case_rng)
    while case.invalid or case.grad:
        case = fz.gen_case(case_rng)
    ref = fz.run_torch(case, "float64")[0].detach().numpy()
    tol, _ = fz.bounds(case)
    bad = ref.copy()
    bad.reshape(-1)[0] += 6 * np.broadcast_to(tol, ref.shape).reshape(-1)[0] + 1e-6
    assert fz.compare("out", bad, ref, tol)[0] > 1
    bad = ref.copy()
    bad[..., 0, :] = 0
    assert np.abs(ref[..., 0, :]).max() == 0 or fz.compare("out", bad, ref, tol)[0] > 1
    assert fz.compare("out", ref.astype(np.float32), ref, tol)[0] <= 1
