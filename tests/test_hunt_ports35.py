"""Ported training and inference scripts (session 35's hunt): small realistic PyTorch programs,
each written once as `run(L, ...)` for L in (torch, pyrite), from identical weights (made in torch
and copied through numpy) and identical inputs, compared step by step against torch CPU.

Tolerances are float32's: losses and parameters after a few optimizer steps to rtol 1e-4 (1e-3
and atol 5e-5 for convolutional models with BatchNorm over a handful of samples, whose small
batch statistics amplify the reordered sums of the convolutions' gradients). Parameters whose gradient is zero in exact arithmetic (a bias right before a
normalisation) are avoided: adaptive optimizers turn float noise there into full-size steps in
both frameworks. Random sampling is compared by distribution (pyrite's RNG is not torch's)."""

from __future__ import annotations

import copy
import math
import os
import tempfile

import numpy as np
import pytest
import torch

import pyrite as pr


# ---- helpers ------------------------------------------------------------------------------
def _np(x):
    if hasattr(x, "detach"):
        x = x.detach()
    if hasattr(x, "numpy"):
        return np.array(x.numpy())
    return np.asarray(x)


def _load(model, L, ref):
    """Give `model` (of framework L) torch model `ref`'s weights."""
    if L is torch:
        model.load_state_dict(ref.state_dict())
    else:
        model.load_state_dict({k: v.detach().numpy().copy() for k, v in ref.state_dict().items()})
    return model


def _close(p, t, rtol=1e-4, atol=1e-5, msg=""):
    np.testing.assert_allclose(_np(p), _np(t), rtol=rtol, atol=atol, err_msg=msg)


def _same_state(pm, tm, rtol=1e-4, atol=1e-5):
    ps, ts = pm.state_dict(), tm.state_dict()
    assert list(ps) == list(ts)
    for k in ts:
        _close(ps[k], ts[k], rtol, atol, k)


def _step(opt, loss):
    """One optimizer step on `loss`: zero_grad, backward, step."""
    opt.zero_grad()
    loss.backward()
    opt.step()


def _train_parity(run):
    """run(torch) and run(pr) each return (model, losses, eval output): the losses, the eval
    outputs and the trained states agree."""
    mt, lt, et = run(torch)
    mp, lp, ep = run(pr)
    _close(lp, lt)
    _close(ep, et, 1e-3, 1e-4)
    _same_state(mp, mt, 1e-3, 5e-5)


def _finish(L, m, losses, X):
    """A training program's result for _train_parity: the model, its losses, its eval output."""
    m.eval()
    with L.no_grad():
        return m, losses, m(X)


def _dict_parity(run):
    """run(torch) and run(pr) each return a dict of arrays: each agrees, named in a failure."""
    rt, rp = run(torch), run(pr)
    for kk in rt:
        _close(rp[kk], rt[kk], 1e-4, 1e-5, kk)


def _seed(rng):
    torch.manual_seed(int(rng.integers(1 << 30)))


# ---- 1. a small CNN: conv padding/stride/dilation/groups, BN, pools, SGD nesterov ----------
def _cnn(L):
    nn = L.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1, stride=1)
            self.bn1 = nn.BatchNorm2d(8)
            self.c2 = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=2, bias=False)
            self.bn2 = nn.BatchNorm2d(8, momentum=0.2)
            self.c3 = nn.Conv2d(8, 12, 3, stride=2, padding=1)
            self.pool = nn.MaxPool2d(2)
            self.apool = nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
            self.gap = nn.AdaptiveAvgPool2d((2, 2))
            self.drop = nn.Dropout(0.3)
            self.flat = nn.Flatten()
            self.fc = nn.Linear(48, 5)

        def forward(self, x):
            x = self.pool(L.relu(self.bn1(self.c1(x))))
            x = self.apool(nn.functional.relu(self.bn2(self.c2(x))))
            x = self.gap(self.c3(x))
            return self.fc(self.drop(self.flat(x)))

    return Net()


@pytest.mark.parametrize("sched", ["step", "cosine"])
def test_cnn_sgd_nesterov_bn_schedulers(rng, sched):
    _seed(rng)
    ref = _cnn(torch)
    x = rng.standard_normal((4, 3, 12, 12)).astype(np.float32)
    y = rng.integers(0, 5, 4)
    w = rng.uniform(0.5, 2, 5).astype(np.float32)

    def run(L):
        m = _load(_cnn(L), L, ref)
        opt = L.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)
        S = L.optim.lr_scheduler
        s = S.StepLR(opt, 2, 0.5) if sched == "step" else S.CosineAnnealingLR(opt, 4, 0.01)
        crit = L.nn.CrossEntropyLoss(weight=L.tensor(w), label_smoothing=0.1)
        X, Y = L.tensor(x), L.tensor(y)
        losses = []
        m.drop.p = 0.0  # train deterministically, then eval with p=0.3 (identity)
        for _ in range(4):
            opt.zero_grad()
            loss = crit(m(X), Y)
            loss.backward()
            opt.step()
            s.step()
            losses.append(loss.item())
        m.drop.p = 0.3
        m.eval()
        with L.no_grad():
            ev = m(X)
        return m, losses, ev, s.get_last_lr()

    mt, lt, et, rt = run(torch)
    mp, lp, ep, rp = run(pr)
    _close(lp, lt)
    _close(ep, et, 1e-3, 1e-4)
    assert rp == pytest.approx(rt)
    _same_state(mp, mt, 1e-3, 5e-5)


# ---- 2. an LSTM/GRU language model over packed sequences, clip_grad_norm_, Adam(W) amsgrad ---
def _lm(L, kind):
    nn = L.nn

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 6, padding_idx=0)
            R = nn.LSTM if kind == "lstm" else nn.GRU
            self.rnn = R(6, 8, num_layers=2, batch_first=True, bidirectional=True)
            self.out = nn.Linear(16, 20)

        def forward(self, x, lengths):
            e = self.emb(x)
            pk = nn.utils.rnn.pack_padded_sequence(
                e, lengths, batch_first=True, enforce_sorted=False
            )
            o, h = self.rnn(pk)
            o, lens = nn.utils.rnn.pad_packed_sequence(o, batch_first=True, total_length=x.shape[1])
            return self.out(o), h, lens

    return LM()


@pytest.mark.parametrize("kind,optname", [("lstm", "adam"), ("gru", "adamw")])
def test_rnn_language_model_packed_clip_amsgrad(rng, kind, optname):
    _seed(rng)
    ref = _lm(torch, kind)
    B, T = 4, 7
    lengths = np.array([7, 3, 5, 2])
    rng.shuffle(lengths)
    x = rng.integers(1, 20, (B, T))
    y = rng.integers(1, 20, (B, T))
    for b in range(B):
        x[b, lengths[b] :] = 0
        y[b, lengths[b] :] = 0

    def run(L):
        m = _load(_lm(L, kind), L, ref)
        if optname == "adam":
            opt = L.optim.Adam(m.parameters(), lr=0.01, amsgrad=True)
        else:
            opt = L.optim.AdamW(
                m.parameters(), lr=0.01, weight_decay=0.1, amsgrad=True, betas=(0.8, 0.95)
            )
        X, Y, lens = L.tensor(x), L.tensor(y), L.tensor(lengths)
        res = []
        for _ in range(3):
            opt.zero_grad()
            logits, h, ol = m(X, lens)
            loss = L.nn.functional.cross_entropy(
                logits.reshape(-1, 20), Y.reshape(-1), ignore_index=0
            )
            loss.backward()
            gn = L.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            opt.step()
            res.append((loss.item(), float(gn)))
        return m, res, logits, (h[0] if kind == "lstm" else h), ol

    mt, rt, lgt, ht, olt = run(torch)
    mp, rp, lgp, hp, olp = run(pr)
    _close(np.array(rp), np.array(rt))
    _close(lgp, lgt, 1e-4, 5e-5)  # three amsgrad steps over 2x2 bidirectional recurrences
    _close(hp, ht, 1e-4, 5e-5)
    np.testing.assert_array_equal(_np(olp), _np(olt))
    assert not _np(mp.emb.weight)[0].any()  # padding_idx row never trained
    # amsgrad's first step is lr-sized whatever the gradient's size: a recurrent weight whose
    # first gradient is float noise (~1e-9, both frameworks) moves by up to lr there
    _same_state(mp, mt, 1e-4, 5e-4)


# ---- 3. a tiny GPT: hand-written causal attention, tied head, greedy/KV-cache/top-k ---------
def _gpt(L, V=17, E=16, H=2, T=12):
    nn = L.nn
    F = nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(E)
            self.ln2 = nn.LayerNorm(E, eps=1e-6)
            self.qkv = nn.Linear(E, 3 * E)
            self.proj = nn.Linear(E, E)
            self.fc1 = nn.Linear(E, 4 * E)
            self.fc2 = nn.Linear(4 * E, E)
            self.register_buffer("mask", L.tril(L.ones(T, T)).view(1, 1, T, T))

        def forward(self, x, cache=None):
            B, S, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(E, dim=2)
            q, k, v = (t.view(B, S, H, E // H).transpose(1, 2) for t in (q, k, v))
            if cache is not None:
                k = L.cat([cache[0], k], dim=2)
                v = L.cat([cache[1], v], dim=2)
            Tk = k.shape[2]
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.mask[:, :, Tk - S : Tk, :Tk] == 0, float("-inf"))
            y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(B, S, E)
            x = x + self.proj(y)
            x = x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))
            return x, (k, v)

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(V, E)
            self.pos = nn.Parameter(L.zeros(1, T, E))
            self.blocks = nn.ModuleList([Block() for _ in range(2)])
            self.lnf = nn.LayerNorm(E)
            self.head = nn.Linear(E, V, bias=False)
            self.head.weight = self.tok.weight

        def forward(self, idx, caches=None, start=0):
            x = self.tok(idx) + self.pos[:, start : start + idx.shape[1]]
            new = []
            for i, b in enumerate(self.blocks):
                x, c = b(x, None if caches is None else caches[i])
                new.append(c)
            return self.head(self.lnf(x)), new

    return GPT()


def test_gpt_train_then_greedy_kv_cache_and_top_k(rng):
    _seed(rng)
    ref = _gpt(torch)
    with torch.no_grad():
        ref.pos.normal_(0, 0.1)
        ref.tok.weight.mul_(0.3)
    idx = rng.integers(0, 17, (3, 12))
    tgt = np.roll(idx, -1, 1)

    def run(L):
        m = _load(_gpt(L), L, ref)
        F = L.nn.functional
        opt = L.optim.AdamW(m.parameters(), lr=3e-3)
        losses = []
        for _ in range(3):
            logits, _ = m(L.tensor(idx))
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), L.tensor(tgt).view(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        m.eval()
        with L.no_grad():
            seq = L.tensor(idx[:1, :3])
            for _ in range(6):
                lg, _ = m(seq)
                seq = L.cat([seq, lg[:, -1, :].argmax(dim=-1, keepdim=True)], dim=1)
            seq2 = L.tensor(idx[:1, :3])
            lg, caches = m(seq2)
            for pos in range(3, 9):
                nxt = lg[:, -1, :].argmax(-1, keepdim=True)
                seq2 = L.cat((seq2, nxt), 1)
                lg, caches = m(nxt, caches, start=pos)
            full, _ = m(seq[:, :8])
            last = full[:, -1, :] / 0.8
            v, _ = L.topk(last, 5)
            last = last.clone()
            last[last < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(last, dim=-1)
        return losses, _np(seq), _np(seq2), probs, full

    rt, rp = run(torch), run(pr)
    _close(rp[0], rt[0])
    _close(rp[4], rt[4])
    np.testing.assert_array_equal(rp[2], rp[1])  # the KV cache decodes as the full recompute
    np.testing.assert_array_equal(rp[1], rt[1])
    _close(rp[3], rt[3], 1e-4, 1e-6)
    g = pr.Generator().manual_seed(int(rng.integers(1 << 30)))
    n = 6000
    s = pr.multinomial(rp[3].expand(n, -1).contiguous(), 1, replacement=True, generator=g)
    freq = np.bincount(_np(s).ravel(), minlength=17) / n
    p = _np(rt[3])[0]
    assert np.all(freq[p == 0] == 0)
    assert np.abs(freq - p).max() < 5 * np.sqrt(0.25 / n)


# ---- 4. nn.TransformerEncoder/Decoder (norm_first, gelu, masks), LambdaLR ------------------
def _seq2seq_tf(L):
    nn = L.nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(11, 16)
            layer = nn.TransformerDecoderLayer(
                16, 4, 32, 0.1, activation="gelu", batch_first=True, norm_first=True
            )
            self.dec = nn.TransformerDecoder(layer, num_layers=2, norm=nn.LayerNorm(16))
            self.enc = nn.TransformerEncoder(
                nn.TransformerEncoderLayer(16, 2, 24, 0.1, batch_first=True), 1
            )
            self.head = nn.Linear(16, 11)

        def forward(self, src, tgt, src_pad):
            mem = self.enc(self.emb(src), src_key_padding_mask=src_pad)
            cm = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
            h = self.dec(
                self.emb(tgt), mem, tgt_mask=cm, memory_key_padding_mask=src_pad, tgt_is_causal=True
            )
            return self.head(h)

    return M()


def _set_dropout(m, L, p):
    for mod in m.modules():
        if isinstance(mod, L.nn.Dropout):
            mod.p = p
        if isinstance(mod, L.nn.MultiheadAttention):
            mod.dropout = p  # attention dropout is a float attribute, not a module


def test_transformer_encoder_decoder_train_and_eval(rng):
    _seed(rng)
    ref = _seq2seq_tf(torch)
    src = rng.integers(0, 11, (3, 6))
    tgt = rng.integers(0, 11, (3, 7))
    pad = np.zeros((3, 6), bool)
    pad[1, 4:] = True
    pad[2, 2:] = True

    def run(L):
        m = _load(_seq2seq_tf(L), L, ref)
        _set_dropout(m, L, 0.0)
        opt = L.optim.Adam(m.parameters(), lr=1e-2)
        sch = L.optim.lr_scheduler.LambdaLR(opt, lambda e: 1.0 / (1 + e))
        S, T, P = L.tensor(src), L.tensor(tgt), L.tensor(pad)
        out = []
        for _ in range(3):
            lg = m(S, T[:, :-1], P)
            loss = L.nn.functional.cross_entropy(lg.transpose(1, 2), T[:, 1:])
            _step(opt, loss)
            sch.step()
            out.append(loss.item())
        _set_dropout(m, L, 0.1)
        m.eval()
        with L.no_grad():
            ev = m(S, T[:, :-1], P)
        return out, ev

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's nested-tensor prototype warning
        rt = run(torch)
    rp = run(pr)
    _close(rp[0], rt[0])
    _close(rp[1], rt[1])


# ---- 5. a conv autoencoder: ConvTranspose2d, interpolate, BCE + MSE, RMSprop/Adagrad --------
def _ae(L):
    nn = L.nn
    F = nn.functional

    class AE(nn.Module):
        def __init__(self):
            super().__init__()
            self.e1 = nn.Conv2d(1, 4, 3, stride=2, padding=1)
            self.e2 = nn.Conv2d(4, 8, 3, stride=2, padding=1)
            self.d1 = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
            self.d2 = nn.ConvTranspose2d(4, 4, 4, stride=1, padding=1, groups=2)
            self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
            self.d3 = nn.ConvTranspose2d(4, 1, 3, stride=1, padding=1)
            self.act = nn.LeakyReLU(0.1)

        def forward(self, x):
            h = self.act(self.e2(self.act(self.e1(x))))
            h = F.interpolate(self.act(self.d1(h)), scale_factor=1.5, mode="nearest")
            h = F.interpolate(
                self.act(self.d2(h)), size=(8, 8), mode="bilinear", align_corners=True
            )
            return L.sigmoid(self.d3(self.up(h)))

    return AE()


@pytest.mark.parametrize("optname", ["rmsprop", "adagrad"])
def test_conv_autoencoder_bce_mse(rng, optname):
    _seed(rng)
    ref = _ae(torch)
    x = rng.uniform(0, 1, (3, 1, 16, 16)).astype(np.float32)

    def run(L):
        m = _load(_ae(L), L, ref)
        F = L.nn.functional
        if optname == "rmsprop":
            opt = L.optim.RMSprop(
                m.parameters(), lr=1e-2, alpha=0.9, momentum=0.5, centered=True, weight_decay=1e-4
            )
        else:
            opt = L.optim.Adagrad(
                m.parameters(), lr=5e-2, lr_decay=1e-3, initial_accumulator_value=0.1
            )
        X = L.tensor(x)
        losses = []
        for _ in range(4):
            out = m(X)
            loss = (
                F.binary_cross_entropy(out, X)
                + 0.5 * F.mse_loss(out, X, reduction="sum") / X.numel()
            )
            _step(opt, loss)
            losses.append(loss.item())
        return m, losses, out

    mt, lt, ot = run(torch)
    mp, lp, op = run(pr)
    _close(lp, lt)
    _close(op, ot)
    # centered RMSprop divides by sqrt(E[g²] - E[g]²): a weight whose gradient barely varies
    # turns float32 rounding into ~1e-5 absolute differences after four steps
    _same_state(mp, mt, 1e-4, 5e-5)


# ---- 6. DataLoader: dict collate, shuffle with a Generator, drop_last, samplers -------------
def test_dataloader_dict_collate_shuffle_generator(rng):
    X = rng.standard_normal((10, 3)).astype(np.float32)
    Y = rng.integers(0, 3, 10)
    seed = int(rng.integers(1 << 30))

    def run(L):
        D = L.utils.data

        class DictDS(D.Dataset):
            def __init__(self, base):
                self.base = base

            def __len__(self):
                return len(self.base)

            def __getitem__(self, i):
                x, y = self.base[i]
                return {
                    "x": x,
                    "y": y,
                    "idx": i,
                    "w": float(i) * 0.5,
                    "name": f"s{i}",
                    "np": np.full(2, i, np.float32),
                    "pair": (i, x.sum()),
                }

        ds = DictDS(D.TensorDataset(L.tensor(X), L.tensor(Y)))
        g = L.Generator()
        g.manual_seed(seed)
        dl = D.DataLoader(ds, batch_size=4, shuffle=True, drop_last=True, generator=g)
        return len(dl), [list(dl) for _ in range(2)]

    for L in (torch, pr):
        n, epochs = run(L)
        assert n == 2 and [len(e) for e in epochs] == [2, 2]
        orders = []
        for e in epochs:
            idx = np.concatenate([_np(b["idx"]) for b in e])
            assert len(set(idx.tolist())) == 8
            orders.append(idx)
            for b in e:
                i = _np(b["idx"])
                _close(b["x"], X[i])
                np.testing.assert_array_equal(_np(b["y"]), Y[i])
                assert b["name"] == [f"s{j}" for j in i]
                _close(b["w"], i * 0.5)
                _close(b["np"], np.repeat(i[:, None], 2, 1))
                assert isinstance(b["pair"], list)
                _close(b["pair"][1], X[i].sum(1), 1e-5, 1e-6)
        if L is pr:
            assert str(epochs[0][0]["x"].dtype) == "pyrite.float32"
            again = run(pr)[1]
            for e, o in zip(again, orders):
                np.testing.assert_array_equal(np.concatenate([_np(b["idx"]) for b in e]), o)

    for L in (torch, pr):
        D = L.utils.data
        ds = D.TensorDataset(L.arange(10), L.arange(10) * 2)
        a, b = D.random_split(ds, [0.7, 0.3], generator=L.Generator().manual_seed(0))
        assert (len(a), len(b)) == (7, 3)
        assert sorted([int(a[i][0]) for i in range(7)] + [int(b[i][0]) for i in range(3)]) == list(
            range(10)
        )
        c = D.ConcatDataset([a, b])
        assert len(c) == 10 and int(c[8][1]) == 2 * int(c[8][0])
        bs = list(D.BatchSampler(D.SequentialSampler(range(7)), 3, drop_last=False))
        assert bs == [[0, 1, 2], [3, 4, 5], [6]]
        ws = D.WeightedRandomSampler(
            [0.0, 0.0, 1.0, 0.0], 5, generator=L.Generator().manual_seed(1)
        )
        assert list(ws) == [2] * 5
        dl = D.DataLoader(ds, batch_sampler=bs, collate_fn=lambda items: [int(i[0]) for i in items])
        assert list(dl) == bs
        dl = D.DataLoader(D.Subset(ds, [3, 1, 4]), batch_size=2)
        assert [(x.tolist(), y.tolist()) for x, y in dl] == [([3, 1], [6, 2]), ([4], [8])]


# ---- 7. checkpoint mid-training (model + optimizer + scheduler) and continue ----------------
def _mlp_bn(L):
    nn = L.nn
    return nn.Sequential(nn.Linear(5, 8, bias=False), nn.BatchNorm1d(8), nn.Tanh(), nn.Linear(8, 3))


@pytest.mark.parametrize("optname", ["adam", "sgd", "rmsprop"])
def test_checkpoint_resume_matches_uninterrupted(rng, optname):
    _seed(rng)
    ref = _mlp_bn(torch)
    X = rng.standard_normal((8, 5)).astype(np.float32)
    Y = rng.integers(0, 3, 8)
    d = tempfile.mkdtemp()

    def make(L):
        m = _load(_mlp_bn(L), L, ref)
        if optname == "adam":
            opt = L.optim.Adam(m.parameters(), lr=1e-2, amsgrad=True, weight_decay=1e-3)
        elif optname == "sgd":
            opt = L.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, dampening=0.1)
        else:
            opt = L.optim.RMSprop(m.parameters(), lr=1e-2, momentum=0.3)
        return m, opt, L.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=10)

    def train(L, m, opt, sch, steps):
        out = []
        for _ in range(steps):
            opt.zero_grad()
            loss = L.nn.functional.cross_entropy(m(L.tensor(X)), L.tensor(Y))
            loss.backward()
            opt.step()
            sch.step()
            out.append(loss.item())
        return out

    ref_run = None
    for L in (torch, pr):
        full = train(L, *make(L), 6)
        m, opt, sch = make(L)
        first = train(L, m, opt, sch, 3)
        path = os.path.join(d, f"ck_{L.__name__}.pt")
        L.save(
            {
                "model": m.state_dict(),
                "opt": opt.state_dict(),
                "sched": sch.state_dict(),
                "epoch": 3,
            },
            path,
        )
        ck = L.load(path)
        m2, opt2, sch2 = make(L)
        m2.load_state_dict(ck["model"])
        opt2.load_state_dict(ck["opt"])
        sch2.load_state_dict(ck["sched"])
        assert ck["epoch"] == 3
        second = train(L, m2, opt2, sch2, 3)
        _close(first + second, full, 1e-5, 1e-6)
        if L is torch:
            ref_run = (full, m2)
        else:
            _close(full, ref_run[0])
            _same_state(m2, ref_run[1])


# ---- 8. misc tensor ops a script uses ----------------------------------------------------
def _misc(L, a, b, idx, lab, cube):
    F = L.nn.functional
    A, B, I, Y, C = L.tensor(a), L.tensor(b), L.tensor(idx), L.tensor(lab), L.tensor(cube)
    r = {}
    r["einsum_bij"] = L.einsum("bij,bjk->bik", C, C.transpose(1, 2))
    r["einsum_diag"] = L.einsum("ii->i", A[:4, :4])
    r["einsum_outer"] = L.einsum("i,j->ij", A[0], B[0])
    r["einsum_ell"] = L.einsum("...ij,...j->...i", C, C[:, 0, :])
    r["einsum_sum"] = L.einsum("bij->j", C)
    r["gather"] = L.gather(A, 1, I)
    r["scatter_add"] = L.zeros(5, 6).scatter_add(1, I, B[:, :3])
    r["scatter_add_"] = L.zeros(5, 6).scatter_add_(0, I % 5, B[:, :3])
    r["scatter_amax"] = L.zeros(5, 6).scatter_reduce(
        1, I, B[:, :3], reduce="amax", include_self=False
    )
    r["scatter_mean"] = L.ones(5, 6).scatter_reduce(1, I, B[:, :3], reduce="mean")
    r["index_add"] = L.zeros(7, 6).index_add(0, Y[:5], A)
    r["masked_fill"] = A.masked_fill(A > 0.5, -1.0)
    r["masked_fill_bc"] = A.masked_fill((Y[:5] == 2)[:, None], float("-inf"))
    r["topk_v"], r["topk_i"] = L.topk(A, 3, dim=1)
    r["topk_small"], r["topk_small_i"] = A.topk(2, dim=0, largest=False)
    r["sort"], r["sort_i"] = L.sort(A, dim=1, descending=True)
    r["argsort"] = L.argsort(A, dim=0)
    r["cumsum"] = L.cumsum(A, dim=1)
    r["cumsum_int"] = L.cumsum(Y, 0)
    r["cumprod"] = A.cumprod(0)
    r["logcumsumexp"] = L.logcumsumexp(A, 1)
    r["cummax"] = L.cummax(A, 1)[0]
    r["where"] = L.where(A > 0, A, B)
    r["where_scalar"] = L.where(A > 0, A, 0.0)
    r["argmax_kd"] = A.argmax(dim=1, keepdim=True)
    r["argmin"] = L.argmin(A)
    r["max_dim"], r["max_dim_i"] = A.max(dim=0)
    r["unique"], r["unique_inv"], r["unique_cnt"] = L.unique(
        Y, sorted=True, return_inverse=True, return_counts=True
    )
    r["unique_dim"] = L.unique(L.tensor(np.array([[1, 2], [0, 1], [1, 2]])), dim=0)
    r["unique_consec"] = L.unique_consecutive(L.tensor(np.array([1, 1, 2, 2, 3, 1, 1])))
    r["one_hot"] = F.one_hot(Y, num_classes=7)
    r["one_hot_auto"] = F.one_hot(Y)
    r["clamp"] = A.clamp(min=-0.2, max=0.3)
    r["clamp_t"] = L.clamp(A, min=B)
    r["normalize"] = F.normalize(A, dim=1)
    r["normalize_p1"] = F.normalize(A, p=1, dim=0)
    r["cos"] = F.cosine_similarity(A, B, dim=1)
    r["cos_bc"] = F.cosine_similarity(A[:, None, :], B[None, :, :], dim=-1)
    r["cdist"] = L.cdist(A, B)
    r["bincount"] = L.bincount(Y, minlength=8)
    r["nonzero"] = L.nonzero(A > 0.5)
    r["roll"] = L.roll(A, shifts=(1, -2), dims=(0, 1))
    r["triu_idx"] = L.triu_indices(4, 4, 1)
    r["repeat_interleave"] = L.repeat_interleave(A[:3], L.tensor(np.array([1, 0, 2])), dim=0)
    r["kthvalue"] = L.kthvalue(A, 2, dim=1).values
    r["median"] = A.median(dim=1).values
    r["quantile"] = L.quantile(A, L.tensor(np.array([0.25, 0.5], np.float32)), dim=1)
    r["std"] = A.std(dim=0, unbiased=True)
    r["var_c0"] = A.var(dim=1, correction=0, keepdim=True)
    r["logsumexp"] = L.logsumexp(A, dim=1)
    r["take_along"] = L.take_along_dim(A, r["topk_small_i"], dim=0)
    r["searchsorted"] = L.searchsorted(L.sort(A[0]).values, B[0])
    r["bucketize"] = L.bucketize(B[0], L.tensor(np.array([-0.5, 0.0, 0.5], np.float32)), right=True)
    r["chunkcat"] = L.cat(list(reversed(A.chunk(3, dim=1))), 1)
    r["stack_split"] = L.stack(A.split([2, 4], dim=1)[1].unbind(0), dim=1)
    r["baddbmm"] = L.baddbmm(C[:, :, :2], C, C.transpose(1, 2)[:, :, :2], beta=0.5, alpha=2.0)
    r["isin"] = L.isin(Y, L.tensor(np.array([1, 3])))
    r["count_nonzero"] = L.count_nonzero(A > 0, dim=1)
    r["amax"] = L.amax(C, dim=(0, 2))
    r["vnorm"] = L.linalg.vector_norm(A, ord=3, dim=1)
    r["nan_to_num"] = L.nan_to_num(L.log(A), nan=0.0, neginf=-5.0)
    r["idx_bool"] = A[A > 0]
    r["idx_adv"] = A[Y[:3] % 5, [0, 1, 2]]
    r["idx_mixed"] = A[1:, [0, 2, 4]]
    r["setitem"] = A.clone()
    r["setitem"][Y[:5] % 5 == 0, 1:3] = 7.0
    r["index_put_acc"] = L.zeros(6).index_put_((Y % 6,), L.ones(7), accumulate=True)
    return r


def test_misc_tensor_ops(rng):
    a = rng.standard_normal((5, 6)).astype(np.float32)
    b = rng.standard_normal((5, 6)).astype(np.float32)
    idx = rng.integers(0, 6, (5, 3))
    lab = rng.integers(0, 7, 7)
    lab[0] = 6
    cube = rng.standard_normal((2, 3, 4)).astype(np.float32)
    rt, rp = _misc(torch, a, b, idx, lab, cube), _misc(pr, a, b, idx, lab, cube)
    for k in rt:
        x, y = _np(rp[k]), _np(rt[k])
        assert x.shape == y.shape, k
        if y.dtype.kind in "biu":
            np.testing.assert_array_equal(x, y, err_msg=k)
        else:
            _close(x, y, 1e-5, 1e-6, k)


# ---- 9. nn.init and default initialisations: deterministic ones exactly, random by law -------
def test_init_functions_and_default_inits():
    res = {}
    for L in (torch, pr):
        L.manual_seed(0)
        init = L.nn.init

        def stats(t):
            a = _np(t)
            return np.array([a.min(), a.max(), a.std(), a.mean()], float)

        r = {
            "exact": [
                init.calculate_gain("relu"),
                init.calculate_gain("leaky_relu", 0.2),
                init.calculate_gain("tanh"),
                init.calculate_gain("selu"),
                *init._calculate_fan_in_and_fan_out(L.empty(6, 4, 3, 3)),
            ]
        }
        r["eye"] = _np(init.eye_(L.empty(3, 5)))
        r["dirac"] = _np(init.dirac_(L.empty(4, 2, 3, 3), groups=2))
        r["const"] = _np(init.constant_(L.empty(2, 3), 0.7))
        r["xu"] = stats(init.xavier_uniform_(L.empty(200, 300), gain=init.calculate_gain("relu")))
        r["xn"] = stats(init.xavier_normal_(L.empty(200, 300)))
        r["ku"] = stats(
            init.kaiming_uniform_(
                L.empty(200, 300), a=0.1, mode="fan_out", nonlinearity="leaky_relu"
            )
        )
        r["kn"] = stats(
            init.kaiming_normal_(L.empty(64, 16, 3, 3), mode="fan_in", nonlinearity="relu")
        )
        r["tn"] = stats(init.trunc_normal_(L.empty(300, 300), mean=0.5, std=1.0, a=-1.0, b=1.5))
        o = _np(init.orthogonal_(L.empty(20, 50), gain=2.0))
        r["orth"] = np.abs(o @ o.T - 4 * np.eye(20)).max()
        r["lin_w"] = stats(L.nn.Linear(400, 300).weight)
        r["conv_w"] = stats(L.nn.Conv2d(16, 64, 5).weight)
        r["convt_w"] = stats(L.nn.ConvTranspose2d(16, 64, 5).weight)
        r["lstm"] = stats(L.nn.LSTM(100, 200).weight_ih_l0)
        r["mha_in"] = stats(L.nn.MultiheadAttention(64, 4).in_proj_weight)
        em = L.nn.Embedding(300, 200, padding_idx=3)
        r["emb"] = stats(em.weight)
        r["emb_pad"] = _np(em.weight[3])
        bn = L.nn.BatchNorm2d(5)
        r["bn"] = np.concatenate([_np(bn.weight), _np(bn.bias), _np(bn.running_var)])
        res[L.__name__] = r
    t, p = res["torch"], res["pyrite"]
    for k in ("exact", "eye", "dirac", "const", "emb_pad", "bn"):
        np.testing.assert_allclose(
            np.asarray(p[k], float), np.asarray(t[k], float), rtol=1e-6, err_msg=k
        )
    assert p["orth"] < 1e-4
    for k in ("xu", "xn", "ku", "kn", "tn", "lin_w", "conv_w", "convt_w", "lstm", "mha_in", "emb"):
        a, b = t[k], p[k]
        assert abs(b[2] - a[2]) < 0.03 * a[2], (k, a, b)  # std
        assert abs(b[3] - a[3]) < 0.03 * a[2], (k, a, b)  # mean
        if k not in ("xn", "kn", "emb"):  # bounded laws: the same bounds
            assert np.all(np.abs(a[:2] - b[:2]) < 0.05 * a[2]), (k, a, b)


# ---- 10. every lr scheduler's sequence (param groups with their own lr) --------------------
SCHEDS = [
    "multistep",
    "exp",
    "warm",
    "cyclic",
    "cyclic_exp",
    "seq",
    "chained",
    "poly",
    "onecycle",
    "onecycle_cos",
    "lambda",
    "mult",
    "plateau",
]


def _lrs(L, kind):
    p, q = L.nn.Parameter(L.zeros(2)), L.nn.Parameter(L.zeros(2))
    opt = L.optim.SGD([{"params": [p]}, {"params": [q], "lr": 0.5}], lr=0.1, momentum=0.9)
    S = L.optim.lr_scheduler
    make = {
        "multistep": lambda: S.MultiStepLR(opt, milestones=[2, 5], gamma=0.3),
        "exp": lambda: S.ExponentialLR(opt, gamma=0.9),
        "warm": lambda: S.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=0.001),
        "cyclic": lambda: S.CyclicLR(
            opt, base_lr=0.01, max_lr=0.1, step_size_up=2, mode="triangular2"
        ),
        "cyclic_exp": lambda: S.CyclicLR(
            opt,
            base_lr=[0.01, 0.02],
            max_lr=[0.1, 0.3],
            step_size_up=3,
            step_size_down=2,
            mode="exp_range",
            gamma=0.9,
        ),
        "seq": lambda: S.SequentialLR(
            opt,
            [S.LinearLR(opt, start_factor=0.1, total_iters=3), S.CosineAnnealingLR(opt, T_max=5)],
            milestones=[3],
        ),
        "chained": lambda: S.ChainedScheduler(
            [S.ConstantLR(opt, factor=0.5, total_iters=2), S.ExponentialLR(opt, gamma=0.8)]
        ),
        "poly": lambda: S.PolynomialLR(opt, total_iters=6, power=2.0),
        "onecycle": lambda: S.OneCycleLR(
            opt, max_lr=[0.2, 1.0], total_steps=12, anneal_strategy="linear", three_phase=True
        ),
        "onecycle_cos": lambda: S.OneCycleLR(
            opt,
            max_lr=0.3,
            epochs=3,
            steps_per_epoch=4,
            pct_start=0.25,
            div_factor=10,
            final_div_factor=100,
        ),
        "lambda": lambda: S.LambdaLR(opt, [lambda e: 0.9**e, lambda e: 1 / (e + 1)]),
        "mult": lambda: S.MultiplicativeLR(opt, lambda e: 0.95),
        "plateau": lambda: S.ReduceLROnPlateau(
            opt, mode="min", factor=0.5, patience=1, threshold=0.01, cooldown=1, min_lr=[0.01, 0.05]
        ),
    }
    s = make[kind]()
    metrics = [1.0, 0.9, 0.95, 0.95, 0.94, 0.93, 0.99, 0.5, 0.6, 0.7, 0.8, 0.9]
    out = []
    for i in range(11):
        opt.step()
        s.step(metrics[i]) if kind == "plateau" else s.step()
        row = [g["lr"] for g in opt.param_groups]
        if kind in ("cyclic", "onecycle", "onecycle_cos"):
            row += [g.get("momentum", 0) for g in opt.param_groups]
        out.append(row)
    if kind != "plateau":
        out.append(s.get_last_lr() + [0, 0] * (len(out[-1]) == 4))
    return np.array(out, float)


def test_lr_scheduler_sequences():
    for kind in SCHEDS:
        np.testing.assert_allclose(
            _lrs(pr, kind), _lrs(torch, kind), rtol=1e-6, atol=1e-9, err_msg=kind
        )


# ---- 11. optimizers beyond the common three, param groups, closures ------------------------
OPTS = {
    "nadam": lambda O, ps: O.NAdam(ps, lr=1e-2, momentum_decay=4e-3, weight_decay=1e-2),
    "nadam_dec": lambda O, ps: O.NAdam(ps, lr=1e-2, weight_decay=1e-2, decoupled_weight_decay=True),
    "radam": lambda O, ps: O.RAdam(ps, lr=1e-2, weight_decay=1e-2),
    "radam_dec": lambda O, ps: O.RAdam(ps, lr=1e-2, weight_decay=1e-2, decoupled_weight_decay=True),
    "adamax": lambda O, ps: O.Adamax(ps, lr=2e-2, weight_decay=1e-3),
    "asgd": lambda O, ps: O.ASGD(ps, lr=1e-2, t0=2, lambd=1e-3),
    "rprop": lambda O, ps: O.Rprop(ps, lr=1e-2, etas=(0.4, 1.3), step_sizes=(1e-4, 0.1)),
    "adadelta": lambda O, ps: O.Adadelta(ps, lr=1.0, rho=0.8, weight_decay=1e-3),
    "sgd_max": lambda O, ps: O.SGD(ps, lr=1e-2, momentum=0.5, maximize=True),
    "adam_max": lambda O, ps: O.Adam(ps, lr=1e-2, maximize=True, betas=(0.5, 0.9)),
    "adamw_foreach": lambda O, ps: O.AdamW(ps, lr=1e-2, foreach=True, amsgrad=True),
    "groups": lambda O, ps: O.SGD(
        [{"params": ps[:2], "lr": 0.05, "weight_decay": 0.1}, {"params": ps[2:], "momentum": 0.9}],
        lr=0.01,
    ),
    "adam_groups": lambda O, ps: O.Adam(
        [{"params": ps[:2], "betas": (0.8, 0.9)}, {"params": ps[2:], "lr": 3e-3}], lr=1e-2
    ),
    "lbfgs": lambda O, ps: O.LBFGS(ps, lr=0.1, max_iter=4, history_size=3),
}


def _mlp(L):
    nn = L.nn
    return nn.Sequential(nn.Linear(4, 6), nn.SiLU(), nn.Linear(6, 6), nn.Mish(), nn.Linear(6, 2))


def test_optimizers_states_and_closures(rng):
    X = rng.standard_normal((10, 4)).astype(np.float32)
    Y = rng.standard_normal((10, 2)).astype(np.float32)
    _seed(rng)
    ref = _mlp(torch)

    def run(L, name):
        m = _load(_mlp(L), L, ref)
        ps = list(m.parameters())
        opt = OPTS[name](L.optim, ps)
        losses = []
        for i in range(4):

            def closure():
                opt.zero_grad()
                loss = L.nn.functional.mse_loss(m(L.tensor(X)), L.tensor(Y))
                loss.backward()
                return loss

            if name.startswith("lbfgs"):
                loss = opt.step(closure)
            else:
                loss = closure()
                opt.step()
            losses.append(loss.item())
            if i == 1 and name == "groups":
                opt.add_param_group({"params": [L.nn.Parameter(L.ones(3))], "lr": 0.3})
        return m, losses, opt

    for name in OPTS:
        mt, lt, ot = run(torch, name)
        mp, lp, op = run(pr, name)
        # LBFGS runs 4 inner iterations a step, each a forward and backward: float32 rounding
        # compounds through its curvature pairs
        lb = name.startswith("lbfgs")
        _close(lp, lt, 2e-4 if lb else 2e-5, 1e-6, name)
        _same_state(mp, mt, 1e-3 if lb else 1e-4, 1e-4 if lb else 1e-5)
        st, sp = ot.state_dict()["state"], op.state_dict()["state"]
        assert sorted(st) == sorted(sp), name
        for k in st:
            if lb:  # its direction d = -H g is conditioned by y·s: compared through the losses
                continue
            for key, v in st[k].items():
                if isinstance(v, torch.Tensor) and key in sp[k]:
                    _close(sp[k][key], v, 1e-4, 1e-5, f"{name} {k} {key}")


def test_lbfgs_strong_wolfe_least_squares(rng):
    """The strong-Wolfe line search branches on loss comparisons and fits cubics through
    float32 losses that agree to an ulp: on a non-convex model a one-ulp difference can pick
    another bracket (torch against itself in float64 would differ as much), so the parity
    program is a least-squares fit, where the cubic is exact. Near the optimum the loss is flat,
    so parameters agree to 1e-3 while the losses agree to float32 rounding (and the number of
    evaluations before the tolerance_change stop is rounding's, not compared)."""
    X = rng.standard_normal((10, 4)).astype(np.float32)
    Y = rng.standard_normal((10, 2)).astype(np.float32)
    _seed(rng)
    ref = torch.nn.Linear(4, 2)

    def run(L):
        m = _load(L.nn.Linear(4, 2), L, ref)
        opt = L.optim.LBFGS(
            m.parameters(), lr=1, max_iter=5, line_search_fn="strong_wolfe", history_size=4
        )
        out = []
        for _ in range(4):

            def closure():
                opt.zero_grad()
                loss = L.nn.functional.mse_loss(m(L.tensor(X)), L.tensor(Y))
                loss.backward()
                return loss

            out.append(opt.step(closure).item())
        return out, m

    (lt, mt), (lp, mp) = run(torch), run(pr)
    _close(lp, lt, 2e-6, 1e-7)
    _same_state(mp, mt, 1e-3, 1e-3)


# ---- 12. a second CNN: reflect/circular padding, GroupNorm, unpool, InstanceNorm, NAdam ------
def _cnn2(L):
    nn = L.nn
    F = nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(2, 6, (3, 5), padding=(1, 2), padding_mode="reflect")
            self.gn = nn.GroupNorm(3, 6)
            self.pool = nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True, return_indices=True)
            self.unpool = nn.MaxUnpool2d(3, stride=2, padding=1)
            self.inorm = nn.InstanceNorm2d(6, affine=True, track_running_stats=True)
            self.c2 = nn.Conv2d(
                6, 6, 3, padding="same", padding_mode="circular", groups=3, bias=False
            )
            self.bn = nn.BatchNorm2d(6, momentum=None)
            self.ap = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=True)
            self.ap2 = nn.AvgPool2d(2, divisor_override=3)
            self.amp = nn.AdaptiveMaxPool2d((3, 2))
            self.aap = nn.AdaptiveAvgPool2d((3, None))
            self.c3 = nn.Conv2d(6, 4, 1, padding_mode="replicate", padding=1)
            self.prelu = nn.PReLU(4)
            self.fc = nn.Linear(132, 3)

        def forward(self, x):
            h = F.elu(self.gn(self.c1(x)))
            p, i = self.pool(h)
            h = F.gelu(self.inorm(h + self.unpool(p, i, output_size=h.shape[-2:])))
            h = self.bn(self.c2(h))
            b = self.aap(F.hardswish(self.ap(h)))
            c = self.amp(self.prelu(self.c3(self.ap2(h))))
            return self.fc(L.cat([c.flatten(1), b.flatten(1)], 1))

    return Net()


def test_cnn_unpool_instance_norm_cumulative_bn_plateau(rng):
    _seed(rng)
    ref = _cnn2(torch)
    x = rng.standard_normal((3, 2, 11, 10)).astype(np.float32)
    y = rng.integers(0, 3, 3)
    cw = np.array([1.0, 2.0, 0.5], np.float32)

    def run(L):
        m = _load(_cnn2(L), L, ref)
        opt = L.optim.NAdam(m.parameters(), lr=1e-2)
        sch = L.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, factor=0.5)
        X, Y = L.tensor(x), L.tensor(y)
        losses = []
        for _ in range(4):
            loss = L.nn.functional.nll_loss(L.log_softmax(m(X), 1), Y, weight=L.tensor(cw))
            _step(opt, loss)
            sch.step(loss.item() + 1)
            losses.append(loss.item())
        return _finish(L, m, losses, X)

    _train_parity(run)


# ---- 13. attention: SDPA masks and MultiheadAttention variants, with gradients -------------
def test_attention_masks_and_mha_variants(rng):
    q = rng.standard_normal((2, 2, 5, 4)).astype(np.float32)
    k = rng.standard_normal((2, 2, 6, 4)).astype(np.float32)
    v = rng.standard_normal((2, 2, 6, 4)).astype(np.float32)
    am = rng.random((5, 6)) > 0.3
    am[:, 0] = True
    x = rng.standard_normal((2, 5, 8)).astype(np.float32)
    kpm = np.zeros((2, 5), bool)
    kpm[1, 3:] = True
    variants = {
        "plain": {},
        "kdim": dict(kdim=5, vdim=3),
        "bias_kv": dict(add_bias_kv=True),
        "zero_attn": dict(add_zero_attn=True),
    }
    _seed(rng)
    W = {}
    for name, kw in variants.items():
        m = torch.nn.MultiheadAttention(8, 2, batch_first=True, **kw)
        with torch.no_grad():
            for p in m.parameters():
                p.add_(torch.randn_like(p) * 0.1)
        W[name] = {kk: vv.detach().numpy().copy() for kk, vv in m.state_dict().items()}

    def run(L):
        F = L.nn.functional
        Q, K, V = L.tensor(q), L.tensor(k), L.tensor(v)
        r = {
            "causal": F.scaled_dot_product_attention(Q, K, V, is_causal=True),
            "causal_rect": F.scaled_dot_product_attention(Q[:, :, :3], K, V, is_causal=True),
            "bool": F.scaled_dot_product_attention(Q, K, V, attn_mask=L.tensor(am)),
            "float": F.scaled_dot_product_attention(
                Q,
                K,
                V,
                attn_mask=L.tensor(np.where(am, 0.0, -1e4).astype(np.float32))[None, None],
                scale=0.3,
            ),
            "gqa_expand": F.scaled_dot_product_attention(
                Q, K[:, :1].expand(-1, 2, -1, -1), V[:, :1].expand(-1, 2, -1, -1)
            ),
        }
        for name, kw in variants.items():
            mha = L.nn.MultiheadAttention(8, 2, batch_first=True, **kw)
            mha.load_state_dict({kk: L.tensor(vv) for kk, vv in W[name].items()})
            X = L.tensor(x)
            kin = X[..., :5] if name == "kdim" else X
            vin = X[..., :3] if name == "kdim" else X
            o, w = mha(X, kin, vin, key_padding_mask=L.tensor(kpm), average_attn_weights=False)
            mask = L.tensor(~am[:5, :5]) if name in ("plain", "kdim") else None
            o2, w2 = mha(X, kin, vin, attn_mask=mask)
            (o.sum() + o2.square().sum()).backward()
            g = (
                mha.in_proj_weight.grad
                if mha.in_proj_weight is not None
                else mha.q_proj_weight.grad
            )
            r.update(
                {f"{name}_o": o, f"{name}_w": w, f"{name}_o2": o2, f"{name}_w2": w2, f"{name}_g": g}
            )
        return r

    _dict_parity(run)


# ---- 14. losses a script combines, with their gradients ------------------------------------
def test_loss_zoo_values_and_gradients(rng):
    N, C = 6, 4
    logits = rng.standard_normal((N, C)).astype(np.float32)
    tgt = rng.integers(0, C, N)
    tgt[0], tgt[1] = 2, 0
    soft = rng.dirichlet(np.ones(C), N).astype(np.float32)
    w = rng.uniform(0.2, 2, C).astype(np.float32)
    x = rng.standard_normal((N, 3)).astype(np.float32)
    y = rng.standard_normal((N, 3)).astype(np.float32)
    yb = (rng.random((N, 3)) > 0.5).astype(np.float32)
    sl = rng.standard_normal((2, 5, C)).astype(np.float32)
    st = rng.integers(0, C, (2, 5))
    st[1, 3:] = -100

    def run(L):
        F, nn = L.nn.functional, L.nn
        Lg = L.tensor(logits).requires_grad_()
        T, S, W = L.tensor(tgt), L.tensor(soft), L.tensor(w)
        X = L.tensor(x).requires_grad_()
        Y, YB = L.tensor(y), L.tensor(yb)
        three = L.tensor(np.array([1.0, 2.0, 0.5], np.float32))
        r = {
            "ce_soft_ls_w": F.cross_entropy(Lg, S, weight=W, label_smoothing=0.2),
            "ce_ign_w_ls": F.cross_entropy(Lg, T, weight=W, ignore_index=2, label_smoothing=0.1),
            "ce_ign_sum": F.cross_entropy(Lg, T, ignore_index=2, reduction="sum"),
            "ce_none_w": F.cross_entropy(Lg, T, weight=W, reduction="none", label_smoothing=0.3),
            "ce_seq": nn.CrossEntropyLoss(label_smoothing=0.05)(
                L.tensor(sl).permute(0, 2, 1), L.tensor(st)
            ),
            "nll_w": nn.NLLLoss(weight=W, ignore_index=0)(F.log_softmax(Lg, -1), T),
            "kl_bm": F.kl_div(F.log_softmax(Lg, -1), F.softmax(S * 3, -1), reduction="batchmean"),
            "kl_logt": F.kl_div(
                F.log_softmax(Lg, -1), F.log_softmax(S, -1), reduction="sum", log_target=True
            ),
            "bce_logits_pw": F.binary_cross_entropy_with_logits(
                X, YB, pos_weight=three, weight=three * 0 + YB[0]
            ),
            "bce_w": F.binary_cross_entropy(L.sigmoid(X), YB, weight=YB + 0.5, reduction="sum"),
            "smoothl1": F.smooth_l1_loss(X, Y, beta=0.5),
            "smoothl1_b0": F.smooth_l1_loss(X, Y, beta=0.0),
            "huber": F.huber_loss(X, Y, delta=0.7, reduction="none"),
            "l1": nn.L1Loss(reduction="sum")(X, Y),
            "mse_bc": F.mse_loss(X, Y[:1].expand_as(Y)),
            "margin_rank": F.margin_ranking_loss(X[:, 0], X[:, 1], L.sign(Y[:, 0]), margin=0.2),
            "hinge_emb": F.hinge_embedding_loss(X, L.sign(Y), margin=0.5),
            "cos_emb": F.cosine_embedding_loss(X, Y, L.sign(Y[:, 0]), margin=0.1),
            "triplet": F.triplet_margin_loss(X, Y, Y.flip(0), margin=0.5, p=2, swap=True),
            "poisson": F.poisson_nll_loss(X, Y.abs(), log_input=True, full=True),
            "gauss": F.gaussian_nll_loss(X, Y, Y.abs() + 0.1, full=True),
            "multilabel_soft": F.multilabel_soft_margin_loss(X, YB, weight=three),
            "multi_margin": F.multi_margin_loss(Lg, T, p=1, margin=0.8, weight=W),
            "soft_margin": F.soft_margin_loss(X, L.sign(Y)),
        }
        sum(v.sum() for v in r.values()).backward()
        r["g_logits"], r["g_x"] = Lg.grad, X.grad
        return r

    _dict_parity(run)


# ---- 15. module utilities: hooks, deepcopy EMA, frozen head, grad accumulation, GP ----------
def _multihead(L):
    nn = L.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8))
            self.heads = nn.ModuleDict({"a": nn.Linear(8, 2), "b": nn.Linear(8, 3)})
            self.scale = nn.Parameter(L.ones(1))
            self.plist = nn.ParameterList(
                [nn.Parameter(L.zeros(8)), nn.Parameter(L.full((8,), 0.1))]
            )
            self.register_buffer("step", L.zeros(()), persistent=False)
            self.register_buffer("center", L.zeros(8))

        def forward(self, x):
            h = self.body(x) * self.scale + self.plist[0] + self.plist[1] - self.center
            return self.heads["a"](h), self.heads["b"](h), h

    return Net()


def test_hooks_ema_frozen_head_accumulation_gradient_penalty(rng):
    x = rng.standard_normal((8, 4)).astype(np.float32)
    ya = rng.standard_normal((8, 2)).astype(np.float32)
    yb = rng.integers(0, 3, 8)
    _seed(rng)
    ref = _multihead(torch)

    def run(L):
        F = L.nn.functional
        m = _multihead(L)
        sd = {k: L.tensor(v.detach().numpy().copy()) for k, v in ref.state_dict().items()}
        res = m.load_state_dict(sd, strict=False)
        r = {
            "keys": list(m.state_dict()),
            "missing": list(res.missing_keys),
            "unexpected": list(
                m.load_state_dict({**sd, "extra": L.zeros(1)}, strict=False).unexpected_keys
            ),
            "nparams": sum(p.numel() for p in m.parameters()),
            "named": [n for n, _ in m.named_parameters()],
            "modules": [n for n, _ in m.named_modules()],
        }
        feats, seen = [], []
        hook = m.body[1].register_forward_hook(
            lambda mod, inp, out: feats.append(out.detach().clone())
        )
        m.body[2].register_full_backward_hook(
            lambda mod, gin, gout: seen.append(gout[0].detach().clone())
        )
        ema = copy.deepcopy(m)
        for p in ema.parameters():
            p.requires_grad_(False)
        m.heads["b"].requires_grad_(False)
        opt = L.optim.Adam([p for p in m.parameters() if p.requires_grad], lr=1e-2)
        X, YA, YB = L.tensor(x), L.tensor(ya), L.tensor(yb)
        losses = []
        for _ in range(4):
            for micro in range(2):
                xs = X[micro::2].clone().requires_grad_(True)
                a, b, h = m(xs)
                loss = F.mse_loss(a, YA[micro::2]) + F.cross_entropy(b, YB[micro::2])
                (g,) = L.autograd.grad(a.sum(), xs, create_graph=True)
                loss = loss + 0.1 * ((g.norm(2, dim=1) - 1) ** 2).mean()
                h.register_hook(lambda gr: gr * 0.5)
                (loss / 2).backward()
                losses.append(loss.item())
            L.nn.utils.clip_grad_value_(m.parameters(), 0.05)
            opt.step()
            opt.zero_grad()
            with L.no_grad():
                for pe, pm in zip(ema.parameters(), m.parameters()):
                    pe.mul_(0.9).add_(pm.detach(), alpha=0.1)
                m.step += 1
                m.center.copy_(0.9 * m.center + 0.1 * h.mean(0))
        hook.remove()
        r.update(
            losses=np.array(losses),
            feats=np.stack([_np(f) for f in feats[:4]]),
            seen=np.concatenate([_np(g) for g in seen]),
            params=np.concatenate([_np(p).ravel() for p in m.parameters()]),
            ema=np.concatenate([_np(p).ravel() for p in ema.parameters()]),
            frozen_grads=[p.grad for p in m.heads["b"].parameters()],
            center=_np(m.center),
            step=float(m.step),
            ema_keys=list(ema.state_dict()),
        )
        return r

    rt, rp = run(torch), run(pr)
    for k in rt:
        if isinstance(rt[k], np.ndarray):
            _close(rp[k], rt[k], 1e-4, 1e-5, k)
        elif k == "frozen_grads":
            assert all(g is None for g in rp[k])
        else:
            assert rp[k] == rt[k], k


# ---- 16. vision ops: grid_sample/affine_grid (STN), interpolate modes, fold, pads ------------
def test_vision_resampling_ops_and_gradients(rng):
    x = rng.standard_normal((2, 3, 6, 8)).astype(np.float32)
    theta = (np.array([[[1, 0, 0], [0, 1, 0]]]) + 0.3 * rng.standard_normal((2, 2, 3))).astype(
        np.float32
    )
    x1 = rng.standard_normal((2, 2, 5)).astype(np.float32)
    x3 = rng.standard_normal((1, 2, 4, 3, 5)).astype(np.float32)

    def run(L):
        F = L.nn.functional
        X, TH = L.tensor(x).requires_grad_(), L.tensor(theta).requires_grad_()
        X1, X3 = L.tensor(x1).requires_grad_(), L.tensor(x3).requires_grad_()
        r = {}
        for ac in (True, False):
            grid = F.affine_grid(TH, (2, 3, 5, 7), align_corners=ac)
            r[f"grid{ac}"] = grid
            for mode in ("bilinear", "nearest", "bicubic"):
                for pm in ("zeros", "border", "reflection"):
                    r[f"gs_{mode}_{pm}_{ac}"] = F.grid_sample(
                        X, grid * 1.3, mode=mode, padding_mode=pm, align_corners=ac
                    )
        for mode, kw in [
            ("nearest", {}),
            ("nearest-exact", {}),
            ("bilinear", {"align_corners": False}),
            ("bilinear", {"align_corners": True}),
            ("bicubic", {"align_corners": False}),
            ("bicubic", {"align_corners": True}),
            ("area", {}),
        ]:
            for size in [(5, 9), (3, 4)]:
                r[f"i_{mode}_{kw}_{size}"] = F.interpolate(X, size=size, mode=mode, **kw)
            r[f"sf_{mode}_{kw}"] = F.interpolate(X, scale_factor=(1.7, 0.6), mode=mode, **kw)
            if mode != "area":
                r[f"rc_{mode}_{kw}"] = F.interpolate(
                    X, scale_factor=1.3, mode=mode, recompute_scale_factor=True, **kw
                )
        r["aa_bilinear"] = F.interpolate(X, size=(2, 3), mode="bilinear", antialias=True)
        r["aa_bicubic"] = F.interpolate(X, size=(3, 2), mode="bicubic", antialias=True)
        r["linear1d"] = F.interpolate(X1, size=11, mode="linear")
        r["linear1d_ac"] = F.interpolate(X1, scale_factor=2.5, mode="linear", align_corners=True)
        r["tri"] = F.interpolate(X3, size=(3, 5, 2), mode="trilinear")
        r["near3d"] = F.interpolate(X3, scale_factor=(1.5, 0.7, 2), mode="nearest")
        u = F.unfold(X, kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
        r["unfold"] = u
        r["fold"] = F.fold(
            u, output_size=(6, 8), kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1)
        )
        r["pixshuf"] = F.pixel_shuffle(L.cat([X, X], 1)[:, :4], 2)
        r["pixunshuf"] = F.pixel_unshuffle(X[:, :, :4, :6], 2)
        r["pad_neg"] = F.pad(X, (-1, 2, 1, -2))
        for pm in ("reflect", "replicate", "circular"):
            r[f"pad_{pm}"] = F.pad(X, (2, 1, 3, 0), mode=pm)
        r["pad_const"] = F.pad(X1, (3, 1), value=-2.0)
        r["channel_shuffle"] = L.nn.ChannelShuffle(3)(L.cat([X, X], 1))
        r["up_nn"] = L.nn.UpsamplingNearest2d(scale_factor=2)(X)
        r["up_bl"] = L.nn.UpsamplingBilinear2d(size=(6, 5))(X)
        r["lp_pool"] = F.lp_pool2d(X.abs() + 0.1, 2.0, 2)
        sum((v * (i + 1) * 0.01).sum() for i, v in enumerate(r.values())).backward()
        r.update(gX=X.grad, gTH=TH.grad, gX1=X1.grad, gX3=X3.grad)
        return r

    _dict_parity(run)


# ---- 17. seq2seq with attention: LSTM proj_size, GRUCell/LSTMCell, max_norm, EmbeddingBag ----
def _s2s(L):
    nn = L.nn

    class S2S(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(12, 6, max_norm=1.0)
            self.enc = nn.LSTM(6, 8, batch_first=True, proj_size=4, num_layers=2)
            self.dec_cell = nn.GRUCell(10, 4)
            self.lcell = nn.LSTMCell(4, 4)
            self.att = nn.Linear(4, 4, bias=False)
            self.bag = nn.EmbeddingBag(12, 4, mode="mean")
            self.bag_sum = nn.EmbeddingBag(12, 4, mode="sum", padding_idx=0)
            self.out = nn.Linear(8, 12)

        def forward(self, src, tgt, offsets, tf=True):
            enc_out, (h, c) = self.enc(self.emb(src))
            hd, lc = h[-1], (h[-1], c[-1][:, :4])
            B, T = tgt.shape
            bagv = self.bag(src.reshape(-1), offsets) + self.bag_sum(src)
            logits, inp = [], tgt[:, 0]
            for t in range(1, T):
                w = L.softmax(L.bmm(enc_out, self.att(hd).unsqueeze(2)).squeeze(2), dim=1)
                ctx = (w.unsqueeze(2) * enc_out).sum(1)
                hd = self.dec_cell(L.cat([self.emb(inp), ctx], 1), hd)
                lc = self.lcell(hd, lc)
                lg = self.out(L.cat([lc[0], bagv], 1))
                logits.append(lg)
                inp = tgt[:, t] if tf else lg.argmax(-1)
            return L.stack(logits, 1)

    return S2S()


def test_seq2seq_attention_cells_max_norm_embedding_bag(rng):
    import warnings

    src = rng.integers(0, 12, (3, 5))
    tgt = rng.integers(0, 12, (3, 6))
    offsets = np.array([0, 2, 7])
    _seed(rng)
    ref = _s2s(torch)

    def run(L):
        m = _load(_s2s(L), L, ref)
        opt = L.optim.Adam(m.parameters(), lr=1e-2)
        S, T, O = L.tensor(src), L.tensor(tgt), L.tensor(offsets)
        losses = []
        for _ in range(3):
            loss = L.nn.functional.cross_entropy(m(S, T, O).reshape(-1, 12), T[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            L.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
        with L.no_grad():
            greedy = m(S, T, O, tf=False)
        return m, losses, greedy

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mt, lt, gt = run(torch)
    mp, lp, gp = run(pr)
    _close(lp, lt)
    _close(gp, gt)
    _same_state(mp, mt)


# ---- 18. checkpointing, weight/spectral norm, SWA, autocast + GradScaler ------------------
_SN_UV = {}


def _ln_mlp(L):
    nn = L.nn
    return nn.Sequential(nn.Linear(4, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))


@pytest.mark.parametrize("mode", ["ckpt", "wn", "sn", "swa", "amp"])
def test_training_utilities(rng, mode):
    X = rng.standard_normal((6, 4)).astype(np.float32)
    Y = rng.integers(0, 3, 6)
    _seed(rng)
    ref = _ln_mlp(torch)

    def run(L):
        m = _load(_ln_mlp(L), L, ref)
        F = L.nn.functional
        if mode == "wn":
            m[0] = L.nn.utils.parametrizations.weight_norm(m[0])
        if mode == "sn":
            m[3] = L.nn.utils.parametrizations.spectral_norm(m[3], n_power_iterations=3)
            if L is torch:  # the power iteration's random start, copied
                _SN_UV.update(
                    {
                        k: v.numpy().copy()
                        for k, v in m.state_dict().items()
                        if k.endswith(("_u", "_v"))
                    }
                )
            else:
                m.load_state_dict({**m.state_dict(), **{k: L.tensor(v) for k, v in _SN_UV.items()}})
        opt = L.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        if mode == "swa":
            swa = L.optim.swa_utils.AveragedModel(m)
            swa_s = L.optim.swa_utils.SWALR(
                opt, swa_lr=0.05, anneal_epochs=2, anneal_strategy="cos"
            )
        scaler = L.amp.GradScaler("cpu", init_scale=1024.0) if mode == "amp" else None
        Xl, Yl = L.tensor(X), L.tensor(Y)
        res = {"losses": []}
        for _ in range(4):
            opt.zero_grad()
            if mode == "ckpt":
                h = L.utils.checkpoint.checkpoint(
                    lambda t: m[2](m[1](m[0](t))), Xl, use_reentrant=False
                )
                out = m[3](h)
            elif mode == "amp":
                with L.autocast("cpu", dtype=L.bfloat16):
                    out = m(Xl)
                out = out.float()
            else:
                out = m(Xl)
            loss = F.cross_entropy(out, Yl)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
                L.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            if mode == "swa":
                swa.update_parameters(m)
                swa_s.step()
            res["losses"].append(loss.item())
        res["params"] = np.concatenate([_np(p).ravel() for p in m.parameters()])
        if mode == "swa":
            res["swa"] = np.concatenate([_np(p).ravel() for p in swa.module.parameters()])
            res["n"] = int(swa.n_averaged)
            res["lr"] = opt.param_groups[0]["lr"]
        if mode == "sn":
            res["sn_w"] = _np(m[3].weight)
        if mode == "amp":
            res["scale"] = float(scaler.get_scale())
        return res

    rt, rp = run(torch), run(pr)
    # autocast: torch CPU computes the linears in bfloat16, pyrite's autocast in float32 (amp.py)
    tol = (2e-2, 2e-2) if mode == "amp" else (1e-4, 1e-5)
    for k in rt:
        if isinstance(rt[k], (int, float)):
            assert rp[k] == pytest.approx(rt[k], rel=1e-9), k
        else:
            _close(rp[k], rt[k], *tol, k)


# ---- 19. an actor-critic step: distributions, GAE, PPO clip ------------------------------
def _ac(L):
    nn = L.nn

    class AC(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 16), nn.Tanh())
            self.pi, self.mu, self.v = nn.Linear(16, 3), nn.Linear(16, 2), nn.Linear(16, 1)
            self.log_std = nn.Parameter(L.full((2,), -0.5))

        def forward(self, s):
            h = self.body(s)
            return (
                self.pi(h),
                self.mu(h),
                self.log_std.exp().expand(s.shape[0], 2),
                self.v(h).squeeze(-1),
            )

    return AC()


def test_actor_critic_distributions_gae_ppo(rng):
    T = 8
    S = rng.standard_normal((T, 4)).astype(np.float32)
    A = rng.integers(0, 3, T)
    U = (0.5 * rng.standard_normal((T, 2))).astype(np.float32)
    R = rng.standard_normal(T).astype(np.float32)
    Dn = (rng.random(T) < 0.2).astype(np.float32)
    _seed(rng)
    ref = _ac(torch)

    def run(L):
        m = _load(_ac(L), L, ref)
        Dist = L.distributions
        opt = L.optim.Adam(m.parameters(), lr=3e-3, eps=1e-5)
        s, a, u, rew, done = L.tensor(S), L.tensor(A), L.tensor(U), L.tensor(R), L.tensor(Dn)
        r = {"loss": [], "ent": [], "kl": []}
        for _ in range(3):
            logits, mu, std, v = m(s)
            cat, nrm = Dist.Categorical(logits=logits), Dist.Normal(mu, std)
            ind = Dist.Independent(nrm, 1)
            tanh_d = Dist.TransformedDistribution(
                Dist.Normal(mu, std), [Dist.transforms.TanhTransform(cache_size=1)]
            )
            with L.no_grad():
                adv, last = L.zeros_like(rew), L.zeros(())
                for t in reversed(range(T)):
                    nv = v[t + 1] if t + 1 < T else L.zeros(())
                    delta = rew[t] + 0.99 * nv * (1 - done[t]) - v[t]
                    last = delta + 0.99 * 0.95 * (1 - done[t]) * last
                    adv[t] = last
                ret = adv + v
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            lp = cat.log_prob(a) + ind.log_prob(u) + tanh_d.log_prob(L.tanh(u) * 0.99).sum(-1)
            ratio = L.exp(lp - (lp.detach() + 0.05))
            pg = -L.min(ratio * adv, L.clamp(ratio, 0.8, 1.2) * adv).mean()
            ent = cat.entropy().mean() + ind.entropy().mean()
            loss = pg - 0.01 * ent + 0.5 * (ret - v).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            L.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            opt.step()
            r["loss"].append(loss.item())
            r["ent"].append(ent.item())
            r["kl"].append(
                Dist.kl_divergence(
                    cat, Dist.Categorical(probs=L.softmax(logits.detach() * 0.5, -1))
                )
                .mean()
                .item()
                + Dist.kl_divergence(nrm, Dist.Normal(L.zeros_like(mu), L.ones_like(std)))
                .sum(-1)
                .mean()
                .item()
            )
        r["probs"] = cat.probs
        r["cdf"], r["icdf"] = nrm.cdf(u), nrm.icdf(L.full_like(u, 0.3))
        r["beta"] = Dist.Beta(L.tensor(2.0), L.tensor(3.0)).log_prob(L.tensor([0.2, 0.7]))
        r["mvn"] = Dist.MultivariateNormal(
            L.zeros(2), scale_tril=L.tensor([[1.0, 0.0], [0.5, 2.0]])
        ).log_prob(u)
        r["bern"] = Dist.Bernoulli(logits=logits[:, 0]).log_prob(done)
        r["gamma"] = Dist.Gamma(L.tensor(2.0), L.tensor(0.5)).log_prob(L.tensor([0.5, 3.0]))
        r["dirichlet"] = Dist.Dirichlet(L.tensor([1.0, 2.0, 3.0])).log_prob(
            L.tensor([0.2, 0.3, 0.5])
        )
        r["onehot"] = Dist.OneHotCategorical(logits=logits).log_prob(
            L.nn.functional.one_hot(a, 3).float()
        )
        return r

    rt, rp = run(torch), run(pr)
    for k in rt:
        _close(rp[k], rt[k], 1e-4, 1e-5, k)
    pr.manual_seed(int(rng.integers(1 << 30)))
    n = 20000
    c = pr.distributions.Categorical(probs=pr.tensor([0.2, 0.5, 0.3])).sample((n,))
    assert np.abs(np.bincount(_np(c), minlength=3) / n - [0.2, 0.5, 0.3]).max() < 0.02
    z = _np(pr.distributions.Normal(pr.tensor([1.0]), pr.tensor([2.0])).rsample((n,)))
    assert abs(z.mean() - 1) < 0.06 and abs(z.std() - 2) < 0.06


# ---- 20. ties, NaNs and integer division as accuracy/argmax code meets them ----------------
def _ties(L):
    z = L.zeros(4, 5)
    nan = float("nan")
    a = L.tensor(
        [
            [1.0, 3.0, 3.0, 0.0, 3.0],
            [2.0] * 5,
            [0.0, -1.0, 5.0, 5.0, -1.0],
            [nan, 1.0, nan, 2.0, 0.0],
        ]
    )
    ai = L.tensor([[1, 3, 3, 0, 3], [2, 2, 2, 2, 2], [0, -1, 5, 5, -1]])
    r = {
        "argmax_zero": z.argmax(1),
        "argmin_zero": z.argmin(1),
        "argmax_flat": z.argmax(),
        "argmax": a.argmax(1),
        "argmin": a.argmin(1),
        "max_i": a.max(1).indices,
        "min_i": a.min(1).indices,
        "max_v": a.max(1).values,
        "argmax_int": ai.argmax(1),
        "argmax0": ai.argmax(0),
        "sort_stable": L.sort(ai, dim=1, stable=True).indices,
        "sort_stable_desc": L.sort(ai, dim=1, descending=True, stable=True).indices,
        "argsort_stable": L.argsort(a[:3], dim=1, stable=True),
        "sort_nan": L.sort(a[3]).values,
        "sort_nan_i": L.sort(a[3]).indices,
        "sort_nan_desc": L.sort(a[3], descending=True).values,
        "topk_nan": L.topk(a[3], 2).values,
        "median_even": L.median(L.tensor([4.0, 1.0, 3.0, 2.0])),
        "median_dim": a[:3].median(1).values,
        "median_dim_i": L.tensor([[1.0, 1.0, 2.0], [3.0, 3.0, 3.0]]).median(1).indices,
        "nanmedian": L.nanmedian(a[3]),
        "median_nan": L.median(a[3]),
        "max_nan": a[3].max(),
        "argmax_nan": a[3].argmax(),
        "amax_nan": a.amax(1),
        "maximum_nan": L.maximum(a[3], L.zeros(5)),
        "fmax": L.fmax(a[3], L.zeros(5)),
        "clamp_nan": a[3].clamp(0, 1),
        "relu_nan": L.relu(a[3]),
        "mode": L.mode(ai, 1).values,
        "cummax_i": L.cummax(ai, 1).indices,
        "kth": L.kthvalue(ai, 3, 1).values,
        "div_trunc": L.div(L.tensor([-7, 7, -7]), L.tensor([2, -2, -2]), rounding_mode="trunc"),
        "div_floor": L.div(L.tensor([-7, 7, -7]), L.tensor([2, -2, -2]), rounding_mode="floor"),
        "fdiv": L.tensor([-7.5, 7.5]) // 2,
        "fmod": L.fmod(L.tensor([-7, 7]), 3),
        "remainder": L.remainder(L.tensor([-7, 7]), -3),
        "cumsum_bool": L.cumsum(L.tensor([True, False, True]), 0),
        "acc": (z.argmax(1) == L.tensor([0, 1, 0, 0])).float().mean(),
        "round_half": L.round(L.tensor([0.5, 1.5, 2.5, -1.5, -2.5])),
        "logsumexp_inf": L.logsumexp(
            L.tensor([[-float("inf"), -float("inf")], [float("inf"), 1.0]]), 1
        ),
        "softmax_allinf": L.softmax(L.tensor([[-float("inf"), -float("inf")]]), 1),
        "xlogy0": L.xlogy(L.tensor([0.0, 1.0]), L.tensor([0.0, 2.0])),
    }
    return r


def test_ties_nans_and_integer_division():
    rt, rp = _ties(torch), _ties(pr)
    for k in rt:
        x, y = _np(rp[k]), _np(rt[k])
        assert x.shape == y.shape, k
        np.testing.assert_array_equal(x.astype(y.dtype) if y.dtype.kind == "i" else x, y, err_msg=k)


# ---- 21. MAML and per-sample gradients through torch.func ---------------------------------
def _tiny(L):
    return L.nn.Sequential(L.nn.Linear(3, 8), L.nn.Tanh(), L.nn.Linear(8, 1))


def test_func_vmap_grad_and_maml_second_order(rng):
    xs = rng.standard_normal((5, 3)).astype(np.float32)
    ys = rng.standard_normal(5).astype(np.float32)
    xq = rng.standard_normal((4, 3)).astype(np.float32)
    yq = rng.standard_normal(4).astype(np.float32)
    _seed(rng)
    ref = _tiny(torch)

    def run(L):
        m = _load(_tiny(L), L, ref)
        F, fc = L.nn.functional, L.func.functional_call
        X, Y = L.tensor(xs), L.tensor(ys)

        def loss_fn(p, x, y):
            return F.mse_loss(fc(m, p, (x.unsqueeze(0),)).squeeze(0), y.unsqueeze(0))

        params = dict(m.named_parameters())
        psg = L.func.vmap(L.func.grad(loss_fn), in_dims=(None, 0, 0))(params, X, Y)
        r = {f"psg.{k}": _np(v) for k, v in psg.items()}
        meta_opt = L.optim.Adam(m.parameters(), lr=1e-2)
        meta = []
        for _ in range(3):
            p = dict(m.named_parameters())
            for _ in range(2):
                loss = F.mse_loss(fc(m, p, (X,)).squeeze(-1), Y)
                g = L.autograd.grad(loss, list(p.values()), create_graph=True)
                p = {k: v - 0.1 * gi for (k, v), gi in zip(p.items(), g)}
            ql = F.mse_loss(fc(m, p, (L.tensor(xq),)).squeeze(-1), L.tensor(yq))
            meta_opt.zero_grad()
            ql.backward()
            meta_opt.step()
            meta.append(ql.item())
        r["meta"] = np.array(meta)
        r.update({f"param.{k}": _np(v) for k, v in m.named_parameters()})
        xx = L.tensor(np.array([0.5, -1.0, 2.0], np.float32))
        r["jac"] = _np(L.autograd.functional.jacobian(lambda x: x.sin() * x.sum(), xx))
        r["hess"] = _np(L.autograd.functional.hessian(lambda x: (x**3).sum() + x.prod(), xx))
        w = L.tensor(np.array([1.0, 2.0], np.float32), requires_grad=True)
        h = w * 3
        h.retain_grad()
        o = (h**2).sum()
        o.backward(retain_graph=True)
        o.backward()
        r["acc"], r["hgrad"] = (
            _np(w.grad).copy(),
            _np(h.grad).copy(),
        )  # torch's numpy() shares memory
        w.exp().backward(L.tensor(np.array([1.0, -1.0], np.float32)))
        r["acc2"] = _np(w.grad).copy()
        return r

    rt, rp = run(torch), run(pr)
    for k in rt:
        _close(rp[k], rt[k], 1e-4, 1e-5, k)


# ---- 22. weights changed between calls: no stale cached plan or weight -------------------
def _tiny_lm(L):
    nn = L.nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 8)
            self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
            self.ln = nn.LayerNorm(8)
            self.conv = nn.Conv1d(8, 8, 3, padding=1)
            self.head = nn.Linear(8, 10)

        def forward(self, idx):
            x = self.emb(idx)
            T = idx.shape[1]
            a, _ = self.attn(
                x, x, x, attn_mask=L.triu(L.ones(T, T, dtype=L.bool), 1), need_weights=False
            )
            x = self.ln(x + a)
            x = x + self.conv(x.transpose(1, 2)).transpose(1, 2)
            return self.head(x)

    return M()


def test_weights_mutated_between_calls_and_varying_shapes(rng):
    seqs = [rng.integers(0, 10, s) for s in ((2, 5), (3, 7), (1, 4), (2, 6))]
    _seed(rng)
    ref, ref2 = _tiny_lm(torch), _tiny_lm(torch)
    W2 = {k: v.detach().numpy().copy() for k, v in ref2.state_dict().items()}

    def run(L):
        m = _load(_tiny_lm(L), L, ref)
        F = L.nn.functional
        outs = []

        def fwd(i):
            s = L.tensor(seqs[i % len(seqs)])
            lg = m(s)
            outs.append(_np(F.cross_entropy(lg[:, :-1].reshape(-1, 10), s[:, 1:].reshape(-1))))
            outs.append(_np(lg[0, -1]))

        fwd(0)
        fwd(1)
        with L.no_grad():
            m.head.weight.mul_(0.5)
        fwd(0)
        with L.no_grad():
            m.head.weight.copy_(L.tensor(W2["head.weight"]))
        fwd(2)
        m.head.weight.data = L.tensor(W2["head.weight"] * 2)
        fwd(0)
        m.attn.in_proj_weight.data.mul_(-1.0)
        fwd(1)
        m.load_state_dict({k: L.tensor(v) for k, v in W2.items()})
        fwd(2)
        m.eval()
        fwd(0)
        m.train()
        fwd(1)
        opt = L.optim.SGD(m.parameters(), lr=0.5)
        for i in range(3):
            s = L.tensor(seqs[i])
            loss = F.cross_entropy(m(s)[:, :-1].reshape(-1, 10), s[:, 1:].reshape(-1))
            _step(opt, loss)
            fwd(i + 1)
        m.requires_grad_(False)
        fwd(0)
        with L.no_grad():
            fwd(2)
        m.head = L.nn.Linear(8, 10)
        m.head.load_state_dict(
            {"weight": L.tensor(W2["head.weight"]), "bias": L.tensor(W2["head.bias"])}
        )
        fwd(2)
        return outs

    for i, (a, b) in enumerate(zip(run(pr), run(torch))):
        _close(a, b, 1e-4, 1e-5, str(i))


# ---- 23. speech: Conv1d front end, packed BiGRU with h0, CTC, greedy decode -----------------
def _asr(L):
    nn = L.nn

    class ASR(nn.Module):
        def __init__(self):
            super().__init__()
            self.front = nn.Sequential(
                nn.Conv1d(5, 8, 3, stride=2, padding=1, bias=False),
                nn.BatchNorm1d(8),
                nn.Hardtanh(0, 20, inplace=True),
            )
            self.rnn = nn.GRU(8, 6, num_layers=2, bidirectional=True)
            self.fc = nn.Linear(12, 6)

        def forward(self, x, lens):
            h = self.front(x.transpose(1, 2)).permute(2, 0, 1)
            lens2 = (lens + 1) // 2
            pk = nn.utils.rnn.pack_padded_sequence(h, lens2.tolist(), enforce_sorted=True)
            o, _ = self.rnn(pk, L.zeros(4, x.shape[0], 6) + 0.1)
            o, _ = nn.utils.rnn.pad_packed_sequence(o)
            return self.fc(o).log_softmax(-1), lens2

    return ASR()


def test_ctc_speech_model(rng):
    B, T = 3, 14
    x = rng.standard_normal((B, T, 5)).astype(np.float32)
    lens = np.array([14, 11, 7])
    tg = rng.integers(1, 6, (B, 4))
    tlens = np.array([4, 3, 2])
    _seed(rng)
    ref = _asr(torch)

    def run(L):
        m = _load(_asr(L), L, ref)
        opt = L.optim.Adam(m.parameters(), lr=5e-3)
        ctc = L.nn.CTCLoss(blank=0, zero_infinity=True)
        X, LN, TG, TL = L.tensor(x), L.tensor(lens), L.tensor(tg), L.tensor(tlens)
        losses = []
        for _ in range(3):
            lp, ol = m(X, LN)
            loss = ctc(lp, TG, ol, TL)
            _step(opt, loss)
            losses.append(loss.item())
        m.eval()
        with L.no_grad():
            lp, ol = m(X, LN)
            best = lp.argmax(-1).T
            dec = [
                [int(v) for v in L.unique_consecutive(best[b, : int(ol[b])]) if int(v) != 0]
                for b in range(B)
            ]
            total = L.nn.functional.ctc_loss(lp, TG, ol, TL, reduction="sum").item()
        return losses, lp, dec, total

    rt, rp = run(torch), run(pr)
    _close(rp[0], rt[0])
    _close(rp[1], rt[1], 1e-4, 1e-5)
    _close(rp[3], rt[3])
    lpt = _np(rt[1])  # the decode agrees wherever the frame's best label is clear
    margin = np.sort(lpt, -1)[..., -1] - np.sort(lpt, -1)[..., -2]
    if margin.min() > 1e-4:
        assert rp[2] == rt[2]


# ---- 24. segmentation: UNet-ish, ignore_index=255 with class weights, Dice, mIoU ----------
def _unet(L):
    nn = L.nn
    F = nn.functional

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1 = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU())
            self.d2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(6, 8, 3, padding=1), nn.ReLU())
            self.up = nn.ConvTranspose2d(8, 6, 2, stride=2)
            self.out = nn.Conv2d(12, 4, 1)

        def forward(self, x):
            a = self.d1(x)
            u = self.up(self.d2(a))
            if u.shape[-2:] != a.shape[-2:]:
                u = F.interpolate(u, size=a.shape[-2:], mode="bilinear", align_corners=False)
            return self.out(L.cat([a, u], dim=1))

    return UNet()


def _dice(L, logits, t, C=4):
    valid = t != 255
    tt = t.clone()
    tt[~valid] = 0
    oh = L.nn.functional.one_hot(tt, C).permute(0, 3, 1, 2).float() * valid.unsqueeze(1)
    p = L.softmax(logits, 1) * valid.unsqueeze(1)
    inter, den = (p * oh).sum((0, 2, 3)), p.sum((0, 2, 3)) + oh.sum((0, 2, 3))
    return 1 - ((2 * inter + 1) / (den + 1)).mean()


def test_segmentation_ignore_index_weights_dice(rng):
    x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
    t = rng.integers(0, 4, (2, 9, 11))
    t[rng.random(t.shape) < 0.2] = 255
    w = np.array([0.5, 1.0, 2.0, 1.5], np.float32)
    _seed(rng)
    ref = _unet(torch)

    def run(L):
        m = _load(_unet(L), L, ref)
        opt = L.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        sch = L.optim.lr_scheduler.PolynomialLR(opt, total_iters=5, power=0.9)
        X, T, W = L.tensor(x), L.tensor(t), L.tensor(w)
        losses = []
        for _ in range(4):
            lg = m(X)
            loss = L.nn.functional.cross_entropy(lg, T, weight=W, ignore_index=255) + _dice(
                L, lg, T
            )
            _step(opt, loss)
            sch.step()
            losses.append(loss.item())
        return _finish(L, m, losses, X)

    _train_parity(run)


# ---- 25. a ResNet block: in-place ReLU, `out += identity`, SE gate, in-place tails ---------
def _resnet(L):
    nn = L.nn
    F = nn.functional

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(
                    nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
                )

        def forward(self, x):
            identity = x if self.down is None else self.down(x)
            out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
            out += identity
            return self.relu(out)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True)
            )
            self.l1, self.l2 = Block(8, 8, 1), Block(8, 16, 2)
            self.se = nn.Sequential(
                nn.AdaptiveAvgPool2d(1),
                nn.Conv2d(16, 4, 1),
                nn.LeakyReLU(0.1, inplace=True),
                nn.Conv2d(4, 16, 1),
                nn.Hardsigmoid(inplace=True),
            )
            self.fc = nn.Linear(16, 5)

        def forward(self, x):
            x = self.l2(self.l1(self.stem(x)))
            x = x * self.se(x)
            x.mul_(2.0)
            x = F.hardtanh_(x, -3.0, 3.0)
            x = F.dropout(x, 0.0, training=self.training, inplace=True)
            return self.fc(L.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1))

    return Net()


def test_resnet_inplace_residuals(rng):
    x = rng.standard_normal((6, 3, 10, 10)).astype(np.float32)
    y = rng.integers(0, 5, 6)
    _seed(rng)
    ref = _resnet(torch)

    def run(L):
        m = _load(_resnet(L), L, ref)
        opt = L.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
        sch = L.optim.lr_scheduler.MultiStepLR(opt, [2], 0.1)
        X, Y = L.tensor(x), L.tensor(y)
        losses = []
        for _ in range(4):
            loss = L.nn.functional.cross_entropy(m(X), Y, label_smoothing=0.1)
            _step(opt, loss)
            sch.step()
            losses.append(loss.item())
        return _finish(L, m, losses, X)

    _train_parity(run)


# ---- 26. packed RNNs with a non-zero h0 and unsorted lengths (h0 follows the sort) -----------
@pytest.mark.parametrize(
    "kind,bidir,proj", [("LSTM", True, 2), ("LSTM", False, 0), ("GRU", True, 0), ("RNN", False, 0)]
)
def test_packed_rnn_with_h0_unsorted(rng, kind, bidir, proj):
    B, T = 4, 6
    x = rng.standard_normal((T, B, 3)).astype(np.float32)
    lengths = [3, 6, 2, 5]
    kw = {"proj_size": proj} if proj else {}
    _seed(rng)
    tm = getattr(torch.nn, kind)(3, 4, num_layers=2, bidirectional=bidir, **kw)
    nd = 2 if bidir else 1
    h0 = rng.standard_normal((2 * nd, B, proj or 4)).astype(np.float32)
    c0 = rng.standard_normal((2 * nd, B, 4)).astype(np.float32)
    outs = []
    for L in (torch, pr):
        m = _load(getattr(L.nn, kind)(3, 4, num_layers=2, bidirectional=bidir, **kw), L, tm)
        X, H0 = L.tensor(x).requires_grad_(), L.tensor(h0).requires_grad_()
        hx = (H0, L.tensor(c0)) if kind == "LSTM" else H0
        o, hn = m(
            L.nn.utils.rnn.pack_padded_sequence(X, L.tensor(lengths), enforce_sorted=False), hx
        )
        o, _ = L.nn.utils.rnn.pad_packed_sequence(o)
        h = hn[0] if kind == "LSTM" else hn
        c = hn[1] if kind == "LSTM" else h
        (o.sum() + (h * 2).sum() + (c * 3).sum()).backward()
        outs.append([o, h, c, X.grad, H0.grad])
    for name, a, b in zip(["out", "h", "c", "gx", "gh0"], outs[1], outs[0]):
        _close(a, b, 1e-4, 1e-5, name)


# ---- 27. param_groups edited by hand mid-training --------------------------------------
@pytest.mark.parametrize("name", ["sgd", "adam", "adamw", "rms"])
def test_param_groups_edited_by_hand(rng, name):
    x = rng.standard_normal((8, 4)).astype(np.float32)
    y = rng.integers(0, 3, 8)
    _seed(rng)
    ref = torch.nn.Linear(4, 3)

    def run(L):
        m = _load(L.nn.Linear(4, 3), L, ref)
        opt = {
            "sgd": lambda: L.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
            "adam": lambda: L.optim.Adam(m.parameters(), lr=0.01),
            "adamw": lambda: L.optim.AdamW(m.parameters(), lr=0.01, weight_decay=0.1),
            "rms": lambda: L.optim.RMSprop(m.parameters(), lr=0.01),
        }[name]()
        out = []
        for i in range(6):
            loss = L.nn.functional.cross_entropy(m(L.tensor(x)), L.tensor(y))
            _step(opt, loss)
            out.append(loss.item())
            for g in opt.param_groups:
                g["lr"] *= 0.5
                if i == 2 and g.get("momentum", 0) > 0:
                    g["momentum"] = 0.5
                if i == 2 and "betas" in g:
                    g["betas"] = (0.5, 0.9)
                if i == 3 and "weight_decay" in g:
                    g["weight_decay"] = 0.3
        return out, m

    (lt, mt), (lp, mp) = run(torch), run(pr)
    _close(lp, lt)
    _same_state(mp, mt)


# ---- 28. image preprocessing on uint8 tensors -------------------------------------------
UINT8_LINES = r"""
img.float().div(255)
img.permute(2, 0, 1).contiguous()
img[..., [2, 1, 0]]
(img.float() * 1.2).clamp(0, 255).round().to(L.uint8)
img.sum()
img.sum(-1)
img // 2
img + 200
img * 2
img - 100
200 - img
img.argmax()
L.bincount(img.flatten(), minlength=256)[::17]
F.interpolate(img.permute(2, 0, 1).unsqueeze(0), size=(7, 5), mode='nearest')
F.pad(img.permute(2, 0, 1), (1, 1, 2, 0), value=7)
((img.float() / 255 - L.tensor([0.485, 0.456, 0.406])) / L.tensor([0.229, 0.224, 0.225])).permute(2, 0, 1)
L.where(img > 100, img, L.zeros_like(img))
img.clamp(50, 150)
img.bitwise_and(0x0F)
img >> 2
img.to(L.int8)
L.tensor(np.array([300.7, -5.2, 255.5], np.float32)).clamp(0, 255).to(L.uint8)
L.tensor(np.array([1.9, -1.9, 127.9], np.float32)).to(L.int8)
L.tensor(np.arange(6, dtype=np.uint8)) / 2
L.tensor([250], dtype=L.uint8) + L.tensor([10], dtype=L.uint8)
L.tensor([250], dtype=L.uint8) + L.tensor([10])
L.tensor([5], dtype=L.uint8) - L.tensor([10], dtype=L.uint8)
L.tensor([100], dtype=L.int8) * 2
-L.tensor([3], dtype=L.uint8)
L.tensor([200, 100], dtype=L.uint8).cumsum(0)
L.tensor([200, 100], dtype=L.uint8) * 1.5
L.tensor([200, 100], dtype=L.uint8) ** 2
L.tensor([-3, 5], dtype=L.int16) * 20000
"""


def test_uint8_image_pipeline(rng):
    im = rng.integers(0, 256, (6, 4, 3)).astype(np.uint8)
    res = {}
    for L in (torch, pr):
        env = {"L": L, "F": L.nn.functional, "img": L.tensor(im), "np": np}
        res[L.__name__] = [eval(line, env) for line in UINT8_LINES.strip().split("\n")]
    for line, a, b in zip(UINT8_LINES.strip().split("\n"), res["torch"], res["pyrite"]):
        np.testing.assert_allclose(
            _np(b).astype(float), _np(a).astype(float), rtol=1e-6, atol=1e-5, err_msg=line
        )
        ta, tb = str(a.dtype).split(".")[-1], str(b.dtype).split(".")[-1]
        assert tb == ta or (ta, tb) == ("int64", "int32"), (line, ta, tb)


# ---- 29. a compiled module and function in a training loop --------------------------------
def test_compiled_module_training_loop(rng):
    xs = [rng.standard_normal((n, 4)).astype(np.float32) for n in (5, 5, 3)]
    ys = [rng.integers(0, 3, n) for n in (5, 5, 3)]
    _seed(rng)
    ref, ref2 = _ln_mlp(torch), _ln_mlp(torch)
    W2 = {k: v.detach().numpy().copy() for k, v in ref2.state_dict().items()}

    def run(L):
        m = _load(_ln_mlp(L), L, ref)
        cm = L.compile(m) if L is pr else m
        F = L.nn.functional
        opt = L.optim.AdamW(m.parameters(), lr=1e-2)
        out = []
        for i in range(6):
            loss = F.cross_entropy(cm(L.tensor(xs[i % 3])), L.tensor(ys[i % 3]))
            _step(opt, loss)
            out.append(loss.item())
        m.eval()
        with L.no_grad():
            out.append(_np(cm(L.tensor(xs[0]))))
            m[0].weight.mul_(0.5)
            out.append(_np(cm(L.tensor(xs[1]))))
            m.load_state_dict({k: L.tensor(v) for k, v in W2.items()})
            out.append(_np(cm(L.tensor(xs[2]))))
        m.train()
        out.append(_np(cm(L.tensor(xs[0]))))

        def step(x, y):
            return F.mse_loss(m(x)[:, 0], y) * 2

        cf = L.compile(step) if L is pr else step
        for i in range(3):
            out.append(cf(L.tensor(xs[i]), L.tensor(ys[i]).float()).item())
        return out

    for i, (a, b) in enumerate(zip(run(pr), run(torch))):
        _close(a, b, 1e-4, 1e-5, str(i))
