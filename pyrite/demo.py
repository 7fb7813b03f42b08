"""`pyrite demo`: a short tour of tensor work on the chosen device, each result checked against
numpy (float64) so the tour doubles as a smoke test on a new machine."""

from __future__ import annotations

import time

import numpy as np

import pyrite as pr


def _check(label, got, want, tol):
    got = got.numpy() if isinstance(got, pr.Tensor) else np.asarray(got)
    err = float(
        np.max(np.abs(got.astype(np.float64) - np.asarray(want, dtype=np.float64)), initial=0.0)
    )
    status = "ok " if err <= tol else "BAD"
    print(f"  [{status}] {label:<52} max |error| {err:.2e}")
    return err <= tol


def main():
    info = pr.device_info()
    print(
        f"pyrite {pr.__version__} on {info['name']} ({info['implementation']}, "
        f"{info['backend']}, {info['type']})\n"
    )
    pr.manual_seed(0)
    rng = np.random.default_rng(0)
    ok = True
    t0 = time.perf_counter()

    # a batch of token embeddings, (B, T, C), and a projection
    xn = rng.standard_normal((4, 33, 96)).astype(np.float32)
    wn = rng.standard_normal((128, 96)).astype(np.float32) / np.sqrt(96)
    x, w = pr.tensor(xn), pr.tensor(wn)
    print("x:", tuple(x.shape), x.dtype, "  w:", tuple(w.shape))

    # views cost nothing: a transpose and a strided slice, then broadcasting arithmetic
    y = x[:, ::2, :].transpose(1, 2) * 0.5 + 1.0
    ok &= _check(
        "strided view, transpose, broadcast", y, xn[:, ::2, :].transpose(0, 2, 1) * 0.5 + 1.0, 1e-6
    )

    # linear layer, GELU, softmax over the features
    h = pr.nn.functional.gelu(x @ w.T)
    hn = xn.astype(np.float64) @ wn.T.astype(np.float64)
    from math import erf

    gelu = np.vectorize(lambda v: 0.5 * v * (1.0 + erf(v / np.sqrt(2.0))))
    ok &= _check("x @ w.T then exact GELU", h, gelu(hn), 1e-4)
    p = h.softmax(dim=-1)
    g = gelu(hn)
    e = np.exp(g - g.max(-1, keepdims=True))
    ok &= _check("softmax(dim=-1)", p, e / e.sum(-1, keepdims=True), 1e-5)

    # reductions over several dims, with keepdim; max with indices
    ok &= _check(
        "sum over (0, 2), keepdim",
        x.sum(dim=(0, 2), keepdim=True),
        xn.astype(np.float64).sum(axis=(0, 2), keepdims=True),
        1e-3,
    )
    values, indices = x.max(dim=-1)
    ok &= _check("max(dim=-1).indices", indices, xn.argmax(-1), 0)
    ok &= _check(
        "std(dim=1, correction=1)", x.std(dim=1), xn.astype(np.float64).std(1, ddof=1), 1e-4
    )

    # advanced indexing: gather rows by index, boolean mask
    idx = pr.tensor([3, 0, 3, 1])
    ok &= _check("x[idx, 5] (integer-tensor indexing)", x[idx, 5], xn[[3, 0, 3, 1], 5], 0)
    ok &= _check(
        "masked sum of positives", x[x > 0].sum(), xn[xn > 0].astype(np.float64).sum(), 1e-2
    )

    # layer norm, attention composed from the ops
    F = pr.nn.functional
    ln = F.layer_norm(x, (96,))
    m = xn.astype(np.float64)
    ln_ref = (m - m.mean(-1, keepdims=True)) / np.sqrt(m.var(-1, keepdims=True) + 1e-5)
    ok &= _check("layer_norm over C", ln, ln_ref, 1e-4)
    q = x.reshape(4, 33, 4, 24).transpose(1, 2)  # (B, heads, T, head_dim)
    att = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    qn = m.reshape(4, 33, 4, 24).transpose(0, 2, 1, 3)
    s = qn @ qn.transpose(0, 1, 3, 2) / np.sqrt(24)
    s = np.where(np.tril(np.ones((33, 33), bool)), s, -np.inf)
    s = np.exp(s - s.max(-1, keepdims=True))
    ok &= _check(
        "causal scaled_dot_product_attention", att, (s / s.sum(-1, keepdims=True)) @ qn, 1e-4
    )

    # an 8-bit image through a vision preprocessing chain: uint8 HWC -> float CHW, resize, pool
    img = rng.integers(0, 256, (45, 61, 3), dtype=np.uint8)
    xi = pr.from_numpy(img).permute(2, 0, 1).float().div(255.0).unsqueeze(0)
    up = F.interpolate(xi, scale_factor=2, mode="nearest")
    ok &= _check(
        "uint8 image, /255, nearest 2x upsample",
        up,
        np.repeat(np.repeat(img.transpose(2, 0, 1)[None] / 255.0, 2, axis=2), 2, axis=3),
        1e-6,
    )
    back = (xi * 255).round().to(pr.uint8)
    ok &= _check("back to uint8 (round, cast)", back, img.transpose(2, 0, 1)[None], 0)

    # a linear system and a long scan: correct even where the device limits each invocation's
    # loops (lavapipe: 65,535 iterations; the kernels split the work)
    a_n = rng.standard_normal((64, 64)) + 8 * np.eye(64)
    b_n = rng.standard_normal((64, 3))
    sol = pr.linalg.solve(pr.tensor(a_n.astype(np.float32)), pr.tensor(b_n.astype(np.float32)))
    ok &= _check("linalg.solve (LU, partial pivoting)", sol, np.linalg.solve(a_n, b_n), 1e-4)
    n = 3_000_001
    ok &= _check(f"cumsum of {n:,} ones (last element)", pr.ones(n).cumsum(0)[-1], n, 0)

    # random numbers are made on the device, reproducibly
    pr.manual_seed(1234)
    a = pr.randn(1000)
    pr.manual_seed(1234)
    b = pr.randn(1000)
    ok &= _check("manual_seed reproduces randn", a, b.numpy(), 0)

    pr.synchronize()
    stats = pr.memory_stats()
    print(
        f"\n{stats['dispatches']} kernels in {stats['submits']} submissions, "
        f"{stats['pipelines']} pipelines, {time.perf_counter() - t0:.2f} s; "
        f"live {stats['live_bytes'] / 1e6:.1f} MB, pooled {stats['pooled_bytes'] / 1e6:.1f} MB"
    )
    print("all checks passed" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
