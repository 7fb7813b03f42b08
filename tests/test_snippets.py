"""Real-world eager snippets, written as they appear in PyTorch code, run unchanged on pyrite.

Each snippet is a function of the framework module (`torch` or `pyrite`, imported as `torch` by
the scripts it imitates) and numpy inputs; it is run once with each and the results compared.
The snippets are in the style of popular repositories' utility code: vision preprocessing,
diffusion schedules, RL returns, transformer pieces, metrics, scientific code. Random sampling
is left out of the comparison (the generators differ), or checked for its shape and range.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch as _torch

import pyrite as _pyrite

SNIPPETS = {}
ATOL = {}  # absolute tolerances where a snippet's conditioning needs one (said beside it)


def snippet(fn=None, *, atol=None):
    def register(fn):
        SNIPPETS[fn.__name__] = fn
        if atol is not None:
            ATOL[fn.__name__] = atol
        return fn

    return register(fn) if fn is not None else register


# ---- vision preprocessing -------------------------------------------------------------------
@snippet
def image_to_normalized_tensor(torch, rng):
    img = rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)  # HWC, as PIL/cv2 give
    x = torch.from_numpy(img).permute(2, 0, 1).float().div(255.0)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
    x = (x - mean) / std
    x = torch.nn.functional.interpolate(
        x.unsqueeze(0), size=(24, 32), mode="bilinear", align_corners=False
    )
    h, w = x.shape[-2:]
    top, left = (h - 16) // 2, (w - 16) // 2
    crop = x[..., top : top + 16, left : left + 16]
    return torch.nn.functional.pad(crop, (2, 2, 2, 2), mode="reflect")


@snippet
def tensor_to_uint8_image(torch, rng):
    x = torch.tensor(rng.standard_normal((3, 9, 11)).astype(np.float32))
    x = (x * 0.5 + 0.5).clamp(0, 1)
    img = (x * 255).round().to(torch.uint8).permute(1, 2, 0)
    return img.contiguous()


@snippet
def grayscale_and_flip(torch, rng):
    x = torch.tensor(rng.random((2, 3, 8, 10)).astype(np.float32))
    gray = (0.299 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]).unsqueeze(1)
    return torch.cat([gray, gray.flip(-1), torch.rot90(gray, 1, (2, 3)).transpose(2, 3)], 1)


# ---- diffusion --------------------------------------------------------------------------------
# cos/sin of arguments up to ~750 rad: one f32 ulp of the argument (6e-5) moves the result by as
# much, and the two frameworks' f32 exp() of the frequencies differ by an ulp or two
@snippet(atol=4 * 750 * 2.0**-23)
def timestep_embedding(torch, rng):
    timesteps = torch.tensor([0, 10, 250, 999])
    dim, max_period = 64, 10000
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(0, half, dtype=torch.float32) / half)
    args = timesteps[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


@snippet
def ddpm_schedule_and_q_sample(torch, rng):
    T = 1000
    betas = torch.linspace(1e-4, 0.02, T)
    alphas = 1.0 - betas
    alphas_cumprod = torch.cumprod(alphas, dim=0)
    alphas_cumprod_prev = torch.cat([torch.ones(1), alphas_cumprod[:-1]])
    posterior_variance = betas * (1.0 - alphas_cumprod_prev) / (1.0 - alphas_cumprod)
    x0 = torch.tensor(rng.standard_normal((4, 3, 5, 5)).astype(np.float32))
    noise = torch.tensor(rng.standard_normal((4, 3, 5, 5)).astype(np.float32))
    t = torch.tensor([0, 17, 500, 999])
    a = alphas_cumprod.gather(-1, t).reshape(-1, 1, 1, 1)
    xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
    return xt, posterior_variance[1:].log()


@snippet
def cosine_schedule(torch, rng):
    steps = 101
    x = torch.linspace(0, 100, steps)
    ac = torch.cos(((x / 100) + 0.008) / (1 + 0.008) * math.pi * 0.5) ** 2
    ac = ac / ac[0]
    betas = 1 - (ac[1:] / ac[:-1])
    return torch.clip(betas, 0.0001, 0.9999)


# ---- reinforcement learning ------------------------------------------------------------------
@snippet
def discounted_returns_and_gae(torch, rng):
    rewards = torch.tensor(rng.standard_normal(17).astype(np.float32))
    values = torch.tensor(rng.standard_normal(18).astype(np.float32))
    dones = torch.tensor((rng.random(17) < 0.2).astype(np.float32))
    gamma, lam = 0.99, 0.95
    returns = torch.zeros_like(rewards)
    running = 0.0
    for i in reversed(range(len(rewards))):
        running = rewards[i] + gamma * running * (1 - dones[i])
        returns[i] = running
    adv = torch.zeros_like(rewards)
    last = 0
    for t in reversed(range(17)):
        delta = rewards[t] + gamma * values[t + 1] * (1 - dones[t]) - values[t]
        last = delta + gamma * lam * (1 - dones[t]) * last
        adv[t] = last
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    return returns, adv


@snippet
def policy_log_probs_and_entropy(torch, rng):
    logits = torch.tensor(rng.standard_normal((9, 5)).astype(np.float32))
    actions = torch.tensor(rng.integers(0, 5, 9))
    logp = torch.log_softmax(logits, dim=-1)
    chosen = logp.gather(1, actions.unsqueeze(-1)).squeeze(-1)
    probs = logp.exp()
    entropy = -(probs * logp).sum(-1)
    greedy = logits.argmax(dim=-1)
    return chosen, entropy, greedy


@snippet
def epsilon_greedy_shapes(torch, rng):
    q = torch.tensor(rng.standard_normal((6, 4)).astype(np.float32))
    explore = torch.rand(6) < 0.3
    random_actions = torch.randint(0, 4, (6,))
    actions = torch.where(explore, random_actions, q.argmax(1))
    return (actions >= 0).all() & (actions < 4).all(), actions.shape[0]


# ---- transformer pieces ----------------------------------------------------------------------
@snippet
def causal_mask_attention(torch, rng):
    B, H, T, D = 2, 3, 7, 8
    q = torch.tensor(rng.standard_normal((B, H, T, D)).astype(np.float32))
    k = torch.tensor(rng.standard_normal((B, H, T, D)).astype(np.float32))
    v = torch.tensor(rng.standard_normal((B, H, T, D)).astype(np.float32))
    mask = torch.tril(torch.ones(T, T)).view(1, 1, T, T)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    att = att.masked_fill(mask[:, :, :T, :T] == 0, float("-inf"))
    att = torch.nn.functional.softmax(att, dim=-1)
    y = att @ v
    y = y.transpose(1, 2).contiguous().view(B, T, H * D)
    return y


@snippet
def rotary_embedding(torch, rng):
    dim, seq = 16, 11
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
    t = torch.arange(seq, dtype=inv_freq.dtype)
    freqs = torch.einsum("i,j->ij", t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[None, None], emb.sin()[None, None]
    x = torch.tensor(rng.standard_normal((2, 3, seq, dim)).astype(np.float32))
    x1, x2 = x[..., : dim // 2], x[..., dim // 2 :]
    rotated = torch.cat((-x2, x1), dim=-1)
    return x * cos + rotated * sin


@snippet
def top_p_filtering(torch, rng):
    logits = torch.tensor(rng.standard_normal((3, 50)).astype(np.float32) * 3)
    top_p = 0.9
    sorted_logits, sorted_indices = torch.sort(logits, descending=True)
    cumulative_probs = torch.cumsum(torch.softmax(sorted_logits, dim=-1), dim=-1)
    sorted_indices_to_remove = cumulative_probs > top_p
    sorted_indices_to_remove[..., 1:] = sorted_indices_to_remove[..., :-1].clone()
    sorted_indices_to_remove[..., 0] = 0
    indices_to_remove = sorted_indices_to_remove.scatter(
        1, sorted_indices, sorted_indices_to_remove
    )
    filtered = logits.masked_fill(indices_to_remove, -float("inf"))
    v, _ = torch.topk(logits, 5)
    kept = logits.masked_fill(logits < v[:, [-1]], -float("Inf"))
    return filtered, kept


@snippet
def manual_layer_norm_and_gelu(torch, rng):
    x = torch.tensor(rng.standard_normal((4, 6, 32)).astype(np.float32))
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True, unbiased=False)
    y = (x - mean) / torch.sqrt(var + 1e-5)
    g = 0.5 * y * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (y + 0.044715 * torch.pow(y, 3.0))))
    return g, torch.nn.functional.gelu(y, approximate="tanh")


# ---- data and metrics -------------------------------------------------------------------------
@snippet
def one_hot_label_smoothing(torch, rng):
    target = torch.tensor(rng.integers(0, 7, 13))
    n_classes, smoothing = 7, 0.1
    one_hot = torch.zeros(13, n_classes).scatter_(1, target.unsqueeze(1), 1)
    smooth = one_hot * (1 - smoothing) + smoothing / n_classes
    counts = torch.bincount(target, minlength=n_classes)
    weights = counts.sum() / (n_classes * counts.clamp(min=1).float())
    return smooth, weights, torch.nn.functional.one_hot(target, n_classes)


@snippet
def accuracy_and_confusion(torch, rng):
    logits = torch.tensor(rng.standard_normal((40, 4)).astype(np.float32))
    labels = torch.tensor(rng.integers(0, 4, 40))
    pred = logits.argmax(dim=1)
    acc = (pred == labels).float().mean()
    cm = torch.bincount(labels * 4 + pred, minlength=16).reshape(4, 4)
    _, top2 = logits.topk(2, dim=1)
    top2_acc = (top2 == labels.unsqueeze(1)).any(dim=1).float().mean()
    return acc, cm, top2_acc


@snippet
def box_iou(torch, rng):
    def boxes(n):
        xy = rng.random((n, 2)).astype(np.float32) * 10
        wh = rng.random((n, 2)).astype(np.float32) * 5 + 0.1
        return torch.tensor(np.concatenate([xy, xy + wh], 1))

    b1, b2 = boxes(5), boxes(7)
    area1 = (b1[:, 2] - b1[:, 0]) * (b1[:, 3] - b1[:, 1])
    area2 = (b2[:, 2] - b2[:, 0]) * (b2[:, 3] - b2[:, 1])
    lt = torch.max(b1[:, None, :2], b2[:, :2])
    rb = torch.min(b1[:, None, 2:], b2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    iou = inter / (area1[:, None] + area2 - inter)
    best, idx = iou.max(dim=1)
    return iou, best, idx


@snippet
def batching_and_padding(torch, rng):
    seqs = [torch.tensor(rng.integers(1, 100, n)) for n in (3, 7, 5)]
    lengths = torch.tensor([len(s) for s in seqs])
    maxlen = int(lengths.max())
    padded = torch.stack(
        [torch.cat([s, torch.zeros(maxlen - len(s), dtype=s.dtype)]) for s in seqs]
    )
    mask = torch.arange(maxlen)[None, :] < lengths[:, None]
    chunks = torch.arange(10).chunk(3)
    return padded, mask, torch.stack([c.sum() for c in chunks])


# ---- scientific -------------------------------------------------------------------------------
@snippet
def rbf_kernel_and_solve(torch, rng):
    x = torch.tensor(rng.standard_normal((20, 3)).astype(np.float32))
    y = torch.tensor(rng.standard_normal((20, 1)).astype(np.float32))
    d2 = torch.cdist(x, x) ** 2
    K = torch.exp(-0.5 * d2) + 0.1 * torch.eye(20)
    alpha = torch.linalg.solve(K, y)
    return alpha, (K @ alpha - y).abs().max()


@snippet
def pca_by_eigh(torch, rng):
    x = torch.tensor(
        (rng.standard_normal((50, 4)) * np.array([3.0, 2.0, 1.0, 0.5])).astype(np.float32)
    )
    xc = x - x.mean(0, keepdim=True)
    cov = xc.T @ xc / (x.shape[0] - 1)
    evals, evecs = torch.linalg.eigh(cov)
    return evals, (cov @ evecs - evecs * evals).abs().max() < 1e-3


@snippet
def numerical_integration(torch, rng):
    xs = torch.linspace(0, math.pi, 201)
    ys = torch.sin(xs)
    trap = torch.trapezoid(ys, xs)
    dx = xs[1] - xs[0]
    simpson = dx / 3 * (ys[0] + ys[-1] + 4 * ys[1:-1:2].sum() + 2 * ys[2:-1:2].sum())
    return trap, simpson


@snippet
def finite_differences_and_stats(torch, rng):
    u = torch.tensor(rng.standard_normal((32, 32)).astype(np.float32))
    lap = (
        torch.roll(u, 1, 0)
        + torch.roll(u, -1, 0)
        + torch.roll(u, 1, 1)
        + torch.roll(u, -1, 1)
        - 4 * u
    )
    q = torch.quantile(u.flatten(), torch.tensor([0.1, 0.5, 0.9]))
    h = torch.histc(u, bins=10, min=-3, max=3)
    return lap, q, h, u.std(dim=0).mean()


# ---- a small conv net, functional ------------------------------------------------------------
@snippet
def functional_convnet(torch, rng):
    F = torch.nn.functional
    x = torch.tensor(rng.standard_normal((2, 3, 16, 16)).astype(np.float32))
    w1 = torch.tensor(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.2)
    b1 = torch.tensor(rng.standard_normal(8).astype(np.float32) * 0.1)
    rm, rv = torch.zeros(8), torch.ones(8)
    h = F.conv2d(x, w1, b1, padding=1)
    h = F.batch_norm(h, rm, rv, training=False)
    h = F.max_pool2d(F.relu(h), 2)
    h = F.adaptive_avg_pool2d(h, (1, 1)).flatten(1)
    w2 = torch.tensor(rng.standard_normal((5, 8)).astype(np.float32))
    return F.log_softmax(F.linear(h, w2), dim=1)


# ---- the harness ------------------------------------------------------------------------------
def _as_numpy(v):
    if isinstance(v, (_torch.Tensor,)):
        return v.detach().numpy()
    if isinstance(v, _pyrite.Tensor):
        return v.numpy()
    return np.asarray(v)


def _flatten(v):
    return list(v) if isinstance(v, (tuple, list)) else [v]


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_snippet_runs_unchanged(name):
    fn = SNIPPETS[name]
    seed = sum(map(ord, name))
    want = _flatten(fn(_torch, np.random.default_rng(seed)))
    got = _flatten(fn(_pyrite, np.random.default_rng(seed)))
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = _as_numpy(g), _as_numpy(w)
        assert g.shape == w.shape, f"{name}[{i}]: shape {g.shape}, torch {w.shape}"
        if w.dtype.kind in "biu":
            assert g.dtype.kind == w.dtype.kind or w.dtype == np.int64
            np.testing.assert_array_equal(g, w, err_msg=f"{name}[{i}]")
        else:
            # f32 pipelines of a few dozen ops: a few hundred ulps of the values' scale
            scale = np.nanmax(np.abs(w), initial=1.0)
            atol = ATOL.get(name, 2e-5 * scale)
            np.testing.assert_allclose(
                g.astype(np.float64),
                w.astype(np.float64),
                rtol=2e-4,
                atol=atol,
                err_msg=f"{name}[{i}]",
            )
