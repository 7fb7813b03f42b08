"""The one-pass decode kernel (kernels/attention_decode.attn_decode_lanes_kernel) at shapes drawn
at random, forced on whatever the device (lavapipe's subgroups hold 8 lanes): odd head dims,
1..8 queries, leading dims of rank 1..3, masks of the broadcast layouts torch takes (bool and
float; its float64 math refuses a 1-D one), causal
blocks, grouped-query heads (folded at one query a head), key/value caches sliced from longer
buffers, key ranges merged in the kernel or by the merge kernel; against torch in float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
import pyrite.nn.functional as F
from pyrite import backend
from pyrite.nn import _attention
from pyrite.testing.tolerance import assert_close

DRAWS = 16


def _draw(rng):
    E = int(rng.integers(1, 129))
    L = int(rng.integers(1, 9))
    S = int(rng.integers(256, 800))
    lead = tuple(int(n) for n in rng.integers(1, 4, size=int(rng.integers(1, 4))))
    hk = lead[-1]
    r = int(rng.choice([1, 1, 2, 3])) if len(lead) >= 2 else 1
    if r > 1:
        L = 1
    hq_lead = lead[:-1] + (hk * r,)
    kind = str(rng.choice(["none", "S", "LS", "lead1", "full", "causal"]))
    if r > 1 and kind == "causal":
        kind = "none"
    return E, L, S, lead, hq_lead, r, kind, bool(rng.integers(0, 2)), bool(rng.integers(0, 2))


@pytest.mark.parametrize("draw", range(DRAWS))
def test_random_decode(rng, monkeypatch, draw):
    dev = backend.current()
    if not dev.subgroups:
        pytest.skip("the one-pass decode kernel needs subgroups")
    monkeypatch.setattr(_attention, "FORCE_DECODE", True)
    monkeypatch.setattr(_attention._KD, "DECODE_SG", True)
    E, L, S, lead, hq_lead, r, kind, floatmask, fused = _draw(rng)
    monkeypatch.setattr(_attention, "DECODE_FUSED_MERGE", True if fused else False)
    monkeypatch.setattr(_attention._KD, "MERGE_SPINS", 64)  # (lavapipe's loop budget)
    q = rng.standard_normal((*hq_lead, L, E)).astype(np.float32)
    big = rng.standard_normal((*lead, S + 37, E)).astype(np.float32)  # (a longer cache)
    v = rng.standard_normal((*lead, S, E)).astype(np.float32)
    kw = {}
    mshape = {"S": (1, S), "LS": (L, S), "lead1": (*lead[:-1], 1, L, S),
              "full": (*hq_lead, L, S)}.get(kind)  # fmt: skip
    if kind == "causal":
        kw["is_causal"] = True
    elif mshape is not None:
        if floatmask:
            m = rng.standard_normal(mshape).astype(np.float32)
        else:
            m = rng.random(mshape) < 0.7
            m[..., 0] = True
        kw["attn_mask"] = m
    gqa = {"enable_gqa": True} if r > 1 else {}
    pk = pr.tensor(big)[..., 20 : 20 + S, :]
    tk = torch.tensor(big, dtype=torch.float64)[..., 20 : 20 + S, :]
    pkw = {k: pr.tensor(x) if isinstance(x, np.ndarray) else x for k, x in kw.items()}
    tkw = {k: torch.tensor(x).double() if isinstance(x, np.ndarray) and x.dtype != bool
           else torch.tensor(x) if isinstance(x, np.ndarray) else x for k, x in kw.items()}  # fmt: skip
    got = F.scaled_dot_product_attention(pr.tensor(q), pk, pr.tensor(v), **pkw, **gqa)
    want = TF_sdpa(torch.tensor(q).double(), tk, torch.tensor(v).double(), **tkw, **gqa)
    # a score is a length-E dot product, the output a weighted sum over S keys (unit normals)
    tol = 16 * (E + S) * 2.0**-24 * max(1.0, float(np.abs(want).max()))
    assert_close(got.numpy(), want.astype(np.float32), atol=tol)


def TF_sdpa(*a, **kw):
    return torch.nn.functional.scaled_dot_product_attention(*a, **kw).numpy()
