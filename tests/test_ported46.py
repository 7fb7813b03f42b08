"""Four PyTorch programs of the kind people write, ported by changing the import (session 46).

Each program is written once, as a function whose first parameter is named `torch` (the code in
it is what a PyTorch user writes; `# port:` marks what the test changed: sizes, data given as
numpy arrays instead of files, random draws made in numpy or by torch and given to both runs,
dropout 0 while training), and run once with PyTorch (CPU) and once with pyrite, from the same
initial weights (torch's, copied through numpy by `_same_init`) and the same seeded data.

1. A seq2seq nn.Transformer (the "Language Translation with nn.Transformer" tutorial, made
   batch_first): token embeddings scaled by sqrt(d), a sinusoidal PositionalEncoding buffer,
   Transformer.generate_square_subsequent_mask, key padding masks for source, target and memory,
   label-smoothed CrossEntropyLoss(ignore_index=PAD), Adam with the Noam warmup as a LambdaLR,
   clip_grad_norm_, a validation loss under eval / no_grad, and batched greedy decoding through
   model.encode / model.decode with the float causal mask turned to bool by `.type(torch.bool)`.
2. A convolutional VAE on small synthetic images: Conv2d encoder, ConvTranspose2d decoder,
   q(z|x) = torch.distributions.Normal(mu, exp(logvar / 2)), z by rsample(), the KL term by
   kl_divergence(q, Normal(0, 1)), BCEWithLogitsLoss(reduction="sum"), Adam with weight decay,
   a validation ELBO and sampling / reconstruction under torch.no_grad().
3. A graph neural network on a batch of random graphs, message passing by hand (no
   torch_scatter, no sparse tensors): nn.Embedding node features, a GCN layer (degrees by
   index_add_, symmetric normalisation), a GraphSAGE layer (scatter_reduce(reduce="mean",
   include_self=False)), a GAT layer (an edge softmax through scatter_reduce("amax") and
   index_add_), F.dropout(training=self.training), graph readout by index_select and segment
   means / maxima, a node-classification loss under a boolean train mask plus a graph-level
   regression loss, AdamW, accuracy on the test mask in eval mode.
4. The pytorch/examples actor-critic (REINFORCE with a baseline) on a tiny corridor
   environment written in torch ops: torch.distributions.Categorical (sample, log_prob,
   entropy), saved (log_prob, value) pairs, returns by a reversed Python loop and
   torch.tensor(list of floats), advantages normalised by std(), smooth_l1_loss for the critic
   against torch.tensor([R]), RMSprop, torch.manual_seed. The actions are sampled by torch's run
   and replayed in pyrite's, so everything compared is deterministic given them.

Tolerances are float32's over a few optimizer steps; each test says why it needs what it uses.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import pyrite as pr
from tests.ported import close as _close
from tests.ported import same_init as _same_init

# ---- 1. seq2seq nn.Transformer: padding masks, label smoothing, Noam warmup, greedy decoding ----
PAD_IDX, BOS_IDX, EOS_IDX = 0, 1, 2


def seq2seq_program(torch, same_init, data, epochs=12):
    nn = torch.nn
    Tensor = torch.Tensor
    Transformer = nn.Transformer
    torch.manual_seed(0)

    # helper Module that adds positional encoding to the token embedding to introduce a notion
    # of word order.
    class PositionalEncoding(nn.Module):
        def __init__(self, emb_size: int, dropout: float, maxlen: int = 64):
            super(PositionalEncoding, self).__init__()
            den = torch.exp(-torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
            pos = torch.arange(0, maxlen).reshape(maxlen, 1)
            pos_embedding = torch.zeros((maxlen, emb_size))
            pos_embedding[:, 0::2] = torch.sin(pos * den)
            pos_embedding[:, 1::2] = torch.cos(pos * den)
            pos_embedding = pos_embedding.unsqueeze(0)  # port: batch_first, (1, maxlen, E)

            self.dropout = nn.Dropout(dropout)
            self.register_buffer("pos_embedding", pos_embedding)

        def forward(self, token_embedding: Tensor):
            return self.dropout(
                token_embedding + self.pos_embedding[:, : token_embedding.size(1), :]
            )

    # helper Module to convert tensor of input indices into corresponding tensor of token
    # embeddings
    class TokenEmbedding(nn.Module):
        def __init__(self, vocab_size: int, emb_size):
            super(TokenEmbedding, self).__init__()
            self.embedding = nn.Embedding(vocab_size, emb_size, padding_idx=PAD_IDX)
            self.emb_size = emb_size

        def forward(self, tokens: Tensor):
            return self.embedding(tokens.long()) * math.sqrt(self.emb_size)

    # Seq2Seq Network
    class Seq2SeqTransformer(nn.Module):
        def __init__(self, num_encoder_layers: int, num_decoder_layers: int, emb_size: int,
                     nhead: int, src_vocab_size: int, tgt_vocab_size: int,
                     dim_feedforward: int = 512, dropout: float = 0.1):  # fmt: skip
            super(Seq2SeqTransformer, self).__init__()
            self.transformer = Transformer(
                d_model=emb_size,
                nhead=nhead,
                num_encoder_layers=num_encoder_layers,
                num_decoder_layers=num_decoder_layers,
                dim_feedforward=dim_feedforward,
                dropout=dropout,
                batch_first=True,
            )
            self.generator = nn.Linear(emb_size, tgt_vocab_size)
            self.src_tok_emb = TokenEmbedding(src_vocab_size, emb_size)
            self.tgt_tok_emb = TokenEmbedding(tgt_vocab_size, emb_size)
            self.positional_encoding = PositionalEncoding(emb_size, dropout=dropout)

        def forward(self, src: Tensor, trg: Tensor, src_mask: Tensor, tgt_mask: Tensor,
                    src_padding_mask: Tensor, tgt_padding_mask: Tensor,
                    memory_key_padding_mask: Tensor):  # fmt: skip
            src_emb = self.positional_encoding(self.src_tok_emb(src))
            tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
            outs = self.transformer(src_emb, tgt_emb, src_mask, tgt_mask, None,
                                    src_padding_mask, tgt_padding_mask, memory_key_padding_mask)  # fmt: skip
            return self.generator(outs)

        def encode(self, src: Tensor, src_mask: Tensor, src_padding_mask: Tensor = None):
            return self.transformer.encoder(
                self.positional_encoding(self.src_tok_emb(src)), src_mask, src_padding_mask
            )

        def decode(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor,
                   memory_key_padding_mask: Tensor = None):  # fmt: skip
            return self.transformer.decoder(
                self.positional_encoding(self.tgt_tok_emb(tgt)), memory, tgt_mask,
                memory_key_padding_mask=memory_key_padding_mask,
            )  # fmt: skip

    def generate_square_subsequent_mask(sz):
        return Transformer.generate_square_subsequent_mask(sz)

    def create_mask(src, tgt):
        src_seq_len = src.shape[1]
        tgt_seq_len = tgt.shape[1]

        tgt_mask = generate_square_subsequent_mask(tgt_seq_len)
        src_mask = torch.zeros((src_seq_len, src_seq_len)).type(torch.bool)

        src_padding_mask = src == PAD_IDX
        tgt_padding_mask = tgt == PAD_IDX
        return src_mask, tgt_mask, src_padding_mask, tgt_padding_mask

    VOCAB, EMB_SIZE, NHEAD, FFN_HID_DIM, WARMUP = 12, 16, 2, 32, 4
    transformer = Seq2SeqTransformer(1, 1, EMB_SIZE, NHEAD, VOCAB, VOCAB, FFN_HID_DIM,
                                     dropout=0.0)  # port: sizes, dropout 0  # fmt: skip
    for p in transformer.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    same_init(transformer)

    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=PAD_IDX, label_smoothing=0.1)
    # port: lr 0.05 (the Annotated Transformer's base lr 1.0 is for d_model 512, warmup 4000)
    optimizer = torch.optim.Adam(transformer.parameters(), lr=0.05, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: EMB_SIZE**-0.5 * min((step + 1) ** -0.5, (step + 1) * WARMUP**-1.5),
    )

    train_iter = torch.utils.data.DataLoader(
        list(zip(data["src"], data["tgt"])),
        batch_size=4,
        collate_fn=lambda batch: tuple(torch.tensor(np.stack(b)) for b in zip(*batch)),
    )  # port: pairs of padded numpy arrays, where the tutorial tokenises text

    def train_epoch(model, optimizer):
        model.train()
        losses, norms = [], []
        for src, tgt in train_iter:
            tgt_input = tgt[:, :-1]
            src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input)
            logits = model(src, tgt_input, src_mask, tgt_mask, src_padding_mask,
                           tgt_padding_mask, src_padding_mask)  # fmt: skip
            optimizer.zero_grad()
            tgt_out = tgt[:, 1:]
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
            loss.backward()
            norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item())
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
        return losses, norms

    def evaluate(model, src, tgt):
        model.eval()
        with torch.no_grad():
            tgt_input = tgt[:, :-1]
            src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input)
            logits = model(src, tgt_input, src_mask, tgt_mask, src_padding_mask,
                           tgt_padding_mask, src_padding_mask)  # fmt: skip
            tgt_out = tgt[:, 1:]
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
        return loss.item(), logits

    # function to generate output sequence using greedy algorithm (batched)
    def greedy_decode(model, src, src_padding_mask, max_len, start_symbol):
        num_tokens = src.shape[1]
        src_mask = torch.zeros(num_tokens, num_tokens).type(torch.bool)
        memory = model.encode(src, src_mask, src_padding_mask)
        ys = torch.ones(src.shape[0], 1).fill_(start_symbol).type(torch.long)
        step_logits = []
        for i in range(max_len - 1):
            tgt_mask = generate_square_subsequent_mask(ys.size(1)).type(torch.bool)
            out = model.decode(ys, memory, tgt_mask, src_padding_mask)
            prob = model.generator(out[:, -1])
            step_logits.append(prob)
            _, next_word = torch.max(prob, dim=1)
            ys = torch.cat([ys, next_word.unsqueeze(1)], dim=1)
        return ys, memory, torch.stack(step_logits, 1)

    history = []
    lrs = []
    for epoch in range(1, epochs + 1):
        lrs.append(scheduler.get_last_lr()[0])
        history.append(train_epoch(transformer, optimizer))

    src_val, tgt_val = torch.tensor(data["src_val"]), torch.tensor(data["tgt_val"])
    val_loss, val_logits = evaluate(transformer, src_val, tgt_val)
    transformer.eval()
    with torch.no_grad():
        ys, memory, dec_logits = greedy_decode(
            transformer, src_val, src_val == PAD_IDX, tgt_val.shape[1], BOS_IDX
        )
    return dict(
        losses=np.array([h[0] for h in history]), norms=np.array([h[1] for h in history]),
        lrs=np.array(lrs), val_loss=val_loss, val_logits=val_logits.numpy(),
        ys=ys.numpy(), dec_logits=dec_logits.numpy(),
        memory=memory.numpy(), memory_kept=memory[~(src_val == PAD_IDX)].numpy(),
        emb_pad_grad=transformer.src_tok_emb.embedding.weight.grad[PAD_IDX].abs().sum().item(),
    )  # fmt: skip


def _seq2seq_data(rng, n=12, n_val=6):
    """The target is the source reversed; lengths 2..6, padded with PAD after EOS."""

    def make(count):
        lens = rng.integers(2, 7, count)
        src = np.full((count, 6), PAD_IDX)
        tgt = np.full((count, 8), PAD_IDX)
        for i, n_tok in enumerate(lens):
            tokens = rng.integers(3, 12, n_tok)
            src[i, :n_tok] = tokens
            tgt[i, : n_tok + 2] = [BOS_IDX, *tokens[::-1], EOS_IDX]
        return src, tgt

    (src, tgt), (src_val, tgt_val) = make(n), make(n_val)
    return dict(src=src, tgt=tgt, src_val=src_val, tgt_val=tgt_val)


def test_seq2seq_transformer_label_smoothing_greedy_decode(rng):
    data = _seq2seq_data(rng, n=16)
    same_init = _same_init()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested-tensor and mismatched-mask-type notices
        rt = seq2seq_program(torch, same_init, data)
        rp = seq2seq_program(pr, same_init, data)
    _close(rp["lrs"], rt["lrs"], 1e-12, 0, "learning rates")  # host arithmetic, both
    # 48 Adam steps of a 1 + 1 layer d=16 Transformer: seen 2e-7 relative on the losses and
    # 3e-6 absolute on logits of size 3 (greedy decoding's smallest margin is 5e-2); 1e-4
    # leaves room for other summation orders in the attention and the matmuls
    _close(rp["losses"], rt["losses"], 1e-4, 1e-6, "training losses")
    _close(rp["norms"], rt["norms"], 1e-4, 1e-6, "gradient norms before clipping")
    _close(rp["val_loss"], rt["val_loss"], 1e-4, 1e-6, "validation loss")
    _close(rp["val_logits"], rt["val_logits"], 1e-4, 1e-5, "validation logits")
    _close(rp["memory"], rt["memory"], 1e-4, 1e-5, "encoder memory")
    _close(rp["memory_kept"], rt["memory_kept"], 1e-4, 1e-5, "memory at the source's tokens")
    _close(rp["dec_logits"], rt["dec_logits"], 1e-4, 1e-5, "greedy decoding's logits")
    np.testing.assert_array_equal(rp["ys"], rt["ys"])
    assert rp["emb_pad_grad"] == rt["emb_pad_grad"] == 0.0


# ---- 2. a convolutional VAE: Normal.rsample, kl_divergence, BCEWithLogitsLoss(sum) -------------
def vae_program(torch, same_init, data, epochs=2, latent_dim=4):
    nn = torch.nn
    F = torch.nn.functional
    Normal = torch.distributions.Normal
    kl_divergence = torch.distributions.kl_divergence

    class VAE(nn.Module):
        def __init__(self, latent_dim):
            super().__init__()
            self.encoder = nn.Sequential(
                nn.Conv2d(1, 8, 3, stride=2, padding=1, bias=False),  # 12 -> 6
                nn.BatchNorm2d(8),
                nn.LeakyReLU(0.2),
                nn.Conv2d(8, 16, 3, stride=2, padding=1),  # 6 -> 3
                nn.LeakyReLU(0.2),
                nn.Flatten(),
            )
            self.fc_mu = nn.Linear(16 * 3 * 3, latent_dim)
            self.fc_logvar = nn.Linear(16 * 3 * 3, latent_dim)
            self.decoder_input = nn.Linear(latent_dim, 16 * 3 * 3)
            self.decoder = nn.Sequential(
                # 3 -> 6; no bias before a BatchNorm (its gradient would be rounding noise,
                # which Adam's normalisation turns into full-size steps in both frameworks)
                nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1, bias=False),
                nn.BatchNorm2d(8),
                nn.ReLU(),
                nn.ConvTranspose2d(8, 1, 3, stride=2, padding=1, output_padding=1),  # 6 -> 12
            )

        def encode(self, x):
            h = self.encoder(x)
            mu, logvar = self.fc_mu(h), self.fc_logvar(h)
            return Normal(mu, torch.exp(0.5 * logvar))

        def decode(self, z):
            h = self.decoder_input(z).view(-1, 16, 3, 3)
            return self.decoder(h)  # logits

        def forward(self, x):
            q = self.encode(x)
            z = q.rsample() if self.training else q.mean
            return self.decode(z), q

    model = VAE(latent_dim)
    same_init(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-4)
    bce = nn.BCEWithLogitsLoss(reduction="sum")

    def loss_function(recon_logits, x, q, beta=1.0):
        prior = Normal(torch.zeros_like(q.loc), torch.ones_like(q.scale))
        recon = bce(recon_logits, x)
        kld = kl_divergence(q, prior).sum()
        return (recon + beta * kld) / x.size(0), recon.item(), kld.item()

    train_set = torch.utils.data.TensorDataset(torch.from_numpy(data["x_train"]))
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=8, shuffle=False)
    history = []
    for epoch in range(1, epochs + 1):
        model.train()
        for batch_idx, (x,) in enumerate(train_loader):
            optimizer.zero_grad()
            recon_logits, q = model(x)
            loss, recon, kld = loss_function(recon_logits, x, q)
            loss.backward()
            optimizer.step()
            history.append((loss.item(), recon, kld))

    model.eval()
    x_val = torch.from_numpy(data["x_val"])
    with torch.no_grad():
        recon_logits, q = model(x_val)
        val_loss = loss_function(recon_logits, x_val, q)[0].item()
        # importance-weighted log-likelihood estimate with K posterior samples
        K = 3
        z = q.sample((K,))  # (K, B, latent)
        logits = model.decode(z.reshape(-1, latent_dim)).view(K, -1, 1, 12, 12)
        log_px_z = -F.binary_cross_entropy_with_logits(
            logits, x_val.expand(K, -1, -1, -1, -1), reduction="none"
        ).sum((-3, -2, -1))
        prior = Normal(torch.zeros(latent_dim), torch.ones(latent_dim))
        log_w = log_px_z + prior.log_prob(z).sum(-1) - q.log_prob(z).sum(-1)
        iwae = (torch.logsumexp(log_w, 0) - math.log(K)).mean().item()
        z_prior = torch.from_numpy(data["z_prior"])  # port: torch.randn(16, latent_dim)
        samples = torch.sigmoid(model.decode(z_prior))
    return dict(
        history=np.array(history), val_loss=val_loss, iwae=iwae, samples=samples.numpy(),
        mu=q.loc.numpy(), scale=q.stddev.numpy(), entropy=q.entropy().sum().item(),
        running_var=model.decoder[1].running_var.numpy(),
        state={k: v.numpy().copy() for k, v in model.state_dict().items()},
    )  # fmt: skip


def _vae_data(rng, n=24, n_val=8):
    """12x12 images in [0, 1]: a bright square of side 3..6 at a random place, soft noise."""

    def make(count):
        x = 0.05 + 0.05 * rng.random((count, 1, 12, 12))
        for i in range(count):
            side = rng.integers(3, 7)
            r, c = rng.integers(0, 12 - side, 2)
            x[i, 0, r : r + side, c : c + side] = 0.95
        return x.astype(np.float32)

    return dict(x_train=make(n), x_val=make(n_val),
                z_prior=rng.standard_normal((16, 4)).astype(np.float32))  # fmt: skip


class _StandardNormalDraws:
    """Both frameworks' Normal.rsample / .sample read eps ~ N(0, 1) from one list drawn here
    (port: the two generators' streams differ): torch's through
    torch.distributions.normal._standard_normal (rsample) and torch.normal (sample), pyrite's
    through pr.randn and pr.normal. torch's run draws; pyrite's takes the same draws in order,
    and must ask for the same shapes."""

    def __init__(self, monkeypatch, rng):
        self.rng, self.drawn, self.taken = rng, [], 0
        monkeypatch.setattr(torch.distributions.normal, "_standard_normal", self.torch_eps)
        monkeypatch.setattr(
            torch, "normal", lambda mean, std: mean + std * self.torch_eps(mean.shape)
        )
        monkeypatch.setattr(pr, "randn", self.pyrite_randn)
        monkeypatch.setattr(
            pr, "normal", lambda mean, std: mean + std * self.pyrite_eps(mean.shape)
        )

    def torch_eps(self, shape, dtype=torch.float32, device=None):
        self.drawn.append(self.rng.standard_normal(tuple(shape)).astype(np.float32))
        return torch.from_numpy(self.drawn[-1]).to(dtype)

    def pyrite_eps(self, shape, dtype=None):
        assert self.taken < len(self.drawn), f"pyrite drew more often than torch ({shape})"
        eps = self.drawn[self.taken]
        assert eps.shape == tuple(shape), (eps.shape, tuple(shape))
        self.taken += 1
        return pr.tensor(eps, dtype=dtype or pr.float32)

    def pyrite_randn(self, *size, dtype=None):
        shape = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
        return self.pyrite_eps(shape, dtype)


def test_conv_vae_rsample_kl_bce_sum(rng, monkeypatch):
    data = _vae_data(rng)
    same_init = _same_init()
    draws = _StandardNormalDraws(monkeypatch, np.random.default_rng(int(rng.integers(1 << 31))))
    torch.manual_seed(0)
    rt = vae_program(torch, same_init, data)
    rp = vae_program(pr, same_init, data)
    assert draws.taken == len(draws.drawn) == 7  # 6 rsample() in training, 1 sample((K,))
    # 6 Adam steps through BatchNorm over batches of 8: seen 4e-7 relative (the summed losses
    # are ~800, so 1e-5 absolute is below their rounding); 1e-4 leaves room for other sum orders
    _close(rp["history"], rt["history"], 1e-4, 1e-5, "loss, reconstruction, KL per step")
    _close(rp["val_loss"], rt["val_loss"], 1e-4, 1e-6, "validation loss")
    _close(rp["iwae"], rt["iwae"], 1e-4, 1e-6, "importance-weighted log-likelihood")
    _close(rp["mu"], rt["mu"], 1e-4, 1e-5, "posterior means")
    _close(rp["scale"], rt["scale"], 1e-4, 1e-6, "posterior scales")
    _close(rp["entropy"], rt["entropy"], 1e-4, 1e-5, "posterior entropy")
    _close(rp["samples"], rt["samples"], 1e-4, 1e-6, "samples from the prior")
    _close(rp["running_var"], rt["running_var"], 1e-4, 1e-6, "decoder BatchNorm running_var")
    for key, value in rt["state"].items():
        _close(rp["state"][key], value, 1e-4, 1e-6, key)


# ---- 3. a GNN by hand: index_add_ / scatter_reduce message passing, segment-mean readout --------
def gnn_program(torch, same_init, data, epochs=8):
    nn = torch.nn
    F = torch.nn.functional

    def add_self_loops(edge_index, num_nodes):
        loop = torch.arange(num_nodes, device=edge_index.device)
        return torch.cat([edge_index, torch.stack([loop, loop])], dim=1)

    class GCNConv(nn.Module):
        def __init__(self, in_channels, out_channels):
            super().__init__()
            self.lin = nn.Linear(in_channels, out_channels, bias=False)
            self.bias = nn.Parameter(torch.zeros(out_channels))

        def forward(self, x, edge_index):
            num_nodes = x.size(0)
            edge_index = add_self_loops(edge_index, num_nodes)
            row, col = edge_index
            deg = torch.zeros(num_nodes, dtype=x.dtype).index_add_(
                0, col, torch.ones(col.size(0), dtype=x.dtype)
            )
            deg_inv_sqrt = deg.pow(-0.5)
            deg_inv_sqrt[deg_inv_sqrt == float("inf")] = 0
            norm = deg_inv_sqrt[row] * deg_inv_sqrt[col]
            x = self.lin(x)
            out = torch.zeros_like(x).index_add_(0, col, x[row] * norm.view(-1, 1))
            return out + self.bias

    class SAGEConv(nn.Module):
        def __init__(self, in_channels, out_channels):
            super().__init__()
            self.lin_l = nn.Linear(in_channels, out_channels)
            self.lin_r = nn.Linear(in_channels, out_channels, bias=False)

        def forward(self, x, edge_index):
            src, dst = edge_index
            msg = x.index_select(0, src)
            index = dst.unsqueeze(-1).expand_as(msg)
            agg = x.new_zeros(x.shape).scatter_reduce(0, index, msg, reduce="mean",
                                                      include_self=False)  # fmt: skip
            return self.lin_l(agg) + self.lin_r(x)

    class GATConv(nn.Module):
        def __init__(self, in_channels, out_channels, heads=2, dropout=0.0):
            super().__init__()
            self.heads, self.out_channels, self.dropout = heads, out_channels, dropout
            self.lin = nn.Linear(in_channels, heads * out_channels, bias=False)
            self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
            self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
            self.bias = nn.Parameter(torch.zeros(heads * out_channels))
            nn.init.xavier_uniform_(self.att_src)
            nn.init.xavier_uniform_(self.att_dst)

        def forward(self, x, edge_index):
            H, C = self.heads, self.out_channels
            N = x.size(0)
            x = self.lin(x).view(-1, H, C)  # (N, H, C)
            alpha_src = (x * self.att_src).sum(dim=-1)  # (N, H)
            alpha_dst = (x * self.att_dst).sum(dim=-1)
            src, dst = add_self_loops(edge_index, N)
            alpha = F.leaky_relu(alpha_src[src] + alpha_dst[dst], 0.2)  # (E, H)
            # softmax over each node's incoming edges (torch_geometric.utils.softmax)
            index = dst.unsqueeze(-1).expand_as(alpha)
            alpha_max = alpha.new_zeros(N, H).scatter_reduce(
                0, index, alpha.detach(), reduce="amax", include_self=False
            )
            alpha = (alpha - alpha_max.index_select(0, dst)).exp()
            alpha_sum = alpha.new_zeros(N, H).index_add_(0, dst, alpha) + 1e-16
            alpha = alpha / alpha_sum.index_select(0, dst)
            alpha = F.dropout(alpha, p=self.dropout, training=self.training)
            out = x.new_zeros(N, H, C).index_add_(0, dst, x[src] * alpha.unsqueeze(-1))
            return out.view(N, H * C) + self.bias, alpha

    def global_mean_pool(x, batch, size):
        out = x.new_zeros(size, x.size(-1)).index_add_(0, batch, x)
        count = torch.bincount(batch, minlength=size).clamp(min=1).to(x.dtype)
        return out / count.unsqueeze(-1)

    def global_max_pool(x, batch, size):
        index = batch.unsqueeze(-1).expand_as(x)
        return x.new_zeros(size, x.size(-1)).scatter_reduce(0, index, x, reduce="amax",
                                                            include_self=False)  # fmt: skip

    class Net(nn.Module):
        def __init__(self, num_types, num_feats, hidden, num_classes, dropout=0.5):
            super().__init__()
            self.dropout = dropout
            self.type_emb = nn.Embedding(num_types, 8)
            self.conv1 = GCNConv(8 + num_feats, hidden)
            self.conv2 = SAGEConv(hidden, hidden)
            self.graph_lin = nn.Linear(hidden, hidden)  # a virtual node, broadcast back
            self.conv3 = GATConv(hidden, hidden // 2, heads=2)
            self.node_head = nn.Linear(hidden, num_classes)
            self.graph_head = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(),
                                            nn.Linear(hidden, 1))  # fmt: skip

        def forward(self, node_type, feats, edge_index, batch, num_graphs):
            x = torch.cat([self.type_emb(node_type), feats], dim=-1)
            x = F.relu(self.conv1(x, edge_index))
            x = F.dropout(x, p=self.dropout, training=self.training)
            x = F.relu(self.conv2(x, edge_index))
            x = x + self.graph_lin(global_mean_pool(x, batch, num_graphs)).index_select(0, batch)
            x = F.dropout(x, p=self.dropout, training=self.training)
            x, alpha = self.conv3(x, edge_index)
            x = F.elu(x)
            pooled = torch.cat([global_mean_pool(x, batch, num_graphs),
                                global_max_pool(x, batch, num_graphs)], dim=-1)  # fmt: skip
            return self.node_head(x), self.graph_head(pooled).squeeze(-1), alpha

    node_type = torch.from_numpy(data["node_type"])
    feats = torch.from_numpy(data["feats"])
    edge_index = torch.from_numpy(data["edge_index"])
    batch = torch.from_numpy(data["batch"])
    y = torch.from_numpy(data["y"])
    graph_y = torch.from_numpy(data["graph_y"])
    train_mask = torch.from_numpy(data["train_mask"])
    test_mask = ~train_mask
    num_graphs = int(batch.max()) + 1

    model = Net(6, feats.size(1), 16, 3)
    same_init(model)
    model.dropout = 0.0  # port: no dropout masks while training (the generators differ)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=5e-4)

    def train():
        model.train()
        optimizer.zero_grad()
        out, graph_pred, _ = model(node_type, feats, edge_index, batch, num_graphs)
        node_loss = F.cross_entropy(out[train_mask], y[train_mask])
        graph_loss = F.mse_loss(graph_pred, graph_y)
        loss = node_loss + 0.5 * graph_loss
        loss.backward()
        optimizer.step()
        return float(node_loss), float(graph_loss)

    @torch.no_grad()
    def test():
        model.eval()
        out, graph_pred, alpha = model(node_type, feats, edge_index, batch, num_graphs)
        pred = out.argmax(dim=1)
        accs = []
        for mask in [train_mask, test_mask]:
            accs.append(int((pred[mask] == y[mask]).sum()) / int(mask.sum()))
        return accs, out, graph_pred, alpha

    history = [train() for epoch in range(1, epochs + 1)]
    model.dropout = 0.5  # port: the script's p again; eval mode ignores it
    accs, out, graph_pred, alpha = test()
    grads = {name: p.grad.numpy().copy() for name, p in model.named_parameters()}
    return dict(history=np.array(history), accs=accs, out=out.numpy(),
                graph_pred=graph_pred.numpy(), alpha=alpha.numpy(), grads=grads)  # fmt: skip


def _graph_data(rng, sizes=(7, 9, 5, 11), p_edge=0.3):
    """Random undirected graphs (one node of the third left isolated), batched as
    torch_geometric's Batch: edges offset per graph, a `batch` vector. A node's class is its
    type mod 3 unless most of its neighbours have type < 3; the graph's target is the fraction
    of class-0 nodes."""
    edges, batch, types, offset = [], [], [], 0
    for g, n in enumerate(sizes):
        a = np.triu(rng.random((n, n)) < p_edge, 1)
        if g == 2:
            a[:, n - 1] = False
        i, j = np.nonzero(a)
        edges.append(np.stack([np.concatenate([i, j]), np.concatenate([j, i])]) + offset)
        batch += [g] * n
        types.append(rng.integers(0, 6, n))
        offset += n
    edge_index, node_type = np.concatenate(edges, 1), np.concatenate(types)
    n_total = offset
    low = np.zeros(n_total)
    np.add.at(low, edge_index[1], node_type[edge_index[0]] < 3)
    deg = np.bincount(edge_index[1], minlength=n_total)
    y = np.where(low > deg / 2 + 0.5, 2, node_type % 3)
    batch = np.array(batch)
    graph_y = np.bincount(batch, weights=y == 0) / np.bincount(batch)
    return dict(
        node_type=node_type, feats=rng.standard_normal((n_total, 3)).astype(np.float32),
        edge_index=edge_index, batch=batch, y=y, graph_y=graph_y.astype(np.float32),
        train_mask=rng.random(n_total) < 0.6,
    )  # fmt: skip


# float(loss) of a loss that requires grad, in train(): torch's warning, and pyrite's (regression 1)
@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True to a scalar")
def test_gnn_message_passing_by_index_add_and_scatter_reduce(rng):
    data = _graph_data(rng)
    same_init = _same_init()
    torch.manual_seed(0)
    rt = gnn_program(torch, same_init, data)
    rp = gnn_program(pr, same_init, data)
    # 8 AdamW steps, full batch, 32 nodes: seen 1e-7 relative (losses), 8e-7 on the gradients;
    # index_add_ / scatter_reduce sums in another order move the last bits
    _close(rp["history"], rt["history"], 1e-4, 1e-6, "node and graph losses")
    assert rp["accs"] == rt["accs"]
    _close(rp["out"], rt["out"], 1e-4, 1e-5, "node logits in eval mode")
    _close(rp["graph_pred"], rt["graph_pred"], 1e-4, 1e-5, "graph predictions")
    _close(rp["alpha"], rt["alpha"], 1e-4, 1e-6, "attention coefficients")
    for key, value in rt["grads"].items():
        _close(rp["grads"][key], value, 1e-4, 1e-6, f"last gradient of {key}")


# ---- 4. actor-critic (pytorch/examples): Categorical, returns by a reversed loop, RMSprop ------
def actor_critic_program(torch, same_init, replay, episodes=6, gamma=0.99, seed=543):
    from collections import namedtuple

    nn = torch.nn
    F = torch.nn.functional
    optim = torch.optim
    Categorical = torch.distributions.Categorical
    torch.manual_seed(seed)

    class Corridor:
        """A corridor of n cells, written in torch ops (port: instead of gym's CartPole): start
        in the middle, +1 at the right end, -1 at the left end, -0.01 a step, at most
        max_steps steps. The observation: the cell one-hot and the position in [0, 1]."""

        def __init__(self, n=7, max_steps=12):
            self.n, self.max_steps = n, max_steps
            self.moves = torch.tensor([-1, 1])

        def observation(self):
            position = (self.pos.float() / (self.n - 1)).unsqueeze(0)
            return torch.cat([F.one_hot(self.pos, self.n).float(), position])

        def reset(self, seed=None):
            self.pos, self.t = torch.tensor(self.n // 2), 0
            return self.observation(), {}

        def step(self, action):
            self.pos = (self.pos + self.moves[action]).clamp(0, self.n - 1)
            self.t += 1
            at_goal, in_pit = self.pos == self.n - 1, self.pos == 0
            reward = torch.where(at_goal, 1.0, torch.where(in_pit, -1.0, -0.01))
            terminated = bool(at_goal | in_pit)
            truncated = self.t >= self.max_steps
            return self.observation(), reward.item(), terminated, truncated, {}

    env = Corridor()
    SavedAction = namedtuple("SavedAction", ["log_prob", "value"])

    class Policy(nn.Module):
        """implements both actor and critic in one model"""

        def __init__(self):
            super(Policy, self).__init__()
            self.affine1 = nn.Linear(8, 32)
            # actor's layer
            self.action_head = nn.Linear(32, 2)
            # critic's layer
            self.value_head = nn.Linear(32, 1)
            # action & reward buffer
            self.saved_actions = []
            self.rewards = []
            self.entropies = []

        def forward(self, x):
            x = F.relu(self.affine1(x))
            # actor: choses action to take from state s_t by returning probability of each action
            action_prob = F.softmax(self.action_head(x), dim=-1)
            # critic: evaluates being in the state s_t
            state_values = self.value_head(x)
            # return values for both actor and critic as a tuple of 2 values:
            # 1. a list with the probability of each action over the action space
            # 2. the value from state s_t
            return action_prob, state_values

    model = Policy()
    same_init(model)
    optimizer = optim.RMSprop(model.parameters(), lr=1e-2, alpha=0.99, eps=1e-5)
    eps = torch.finfo(torch.float32).eps
    log = dict(probs=[], log_probs=[], values=[], returns=[], losses=[], actions=[])

    def select_action(state):
        probs, state_value = model(state)
        # create a categorical distribution over the list of probabilities of actions
        m = Categorical(probs)
        # and sample an action using the distribution
        action = m.sample()
        action = replay(action)  # port: pyrite's run takes the action torch's run sampled
        # save to action buffer
        model.saved_actions.append(SavedAction(m.log_prob(action), state_value))
        model.entropies.append(m.entropy())
        log["probs"].append(probs.detach().numpy().copy())
        # the action to take (left or right)
        return action.item()

    def finish_episode(entropy_coef=0.01):
        """Training code. Calculates actor and critic loss and performs backprop."""
        R = 0
        saved_actions = model.saved_actions
        policy_losses = []  # list to save actor (policy) loss
        value_losses = []  # list to save critic (value) loss
        returns = []  # list to save the true values
        # calculate the true value using rewards returned from the environment
        for r in model.rewards[::-1]:
            # calculate the discounted value
            R = r + gamma * R
            returns.insert(0, R)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        for (log_prob, value), R in zip(saved_actions, returns):
            advantage = R - value.item()
            # calculate actor (policy) loss
            policy_losses.append(-log_prob * advantage)
            # calculate critic (value) loss using L1 smooth loss
            value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
        # reset gradients
        optimizer.zero_grad()
        # sum up all the values of policy_losses and value_losses
        entropy = torch.stack(model.entropies).mean()
        loss = (torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
                - entropy_coef * entropy)  # fmt: skip
        # perform backprop
        loss.backward()
        optimizer.step()
        log["log_probs"] += [lp.item() for lp, _ in saved_actions]
        log["values"] += [v.item() for _, v in saved_actions]
        log["returns"] += returns.tolist()
        log["losses"].append(loss.item())
        # reset rewards and action buffer
        del model.rewards[:]
        del model.saved_actions[:]
        del model.entropies[:]

    running_reward = 0
    episode_rewards = []
    for i_episode in range(1, episodes + 1):  # port: a fixed number of episodes
        state, _ = env.reset()
        ep_reward = 0
        for t in range(1, 10000):
            action = select_action(state)
            log["actions"].append(action)
            state, reward, terminated, truncated, _ = env.step(action)
            model.rewards.append(reward)
            ep_reward += reward
            if terminated or truncated:
                break
        # update cumulative reward
        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
        episode_rewards.append((t, ep_reward, running_reward))
        finish_episode()
    log = {k: np.array(v) for k, v in log.items()}
    log["episodes"] = np.array(episode_rewards)
    log["state"] = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    return log


class _ReplayActions:
    """torch's run samples and records each action; pyrite's run checks its own sample (shape,
    dtype, range) and takes the recorded one instead."""

    def __init__(self):
        self.actions, self.taken, self.pyrite_samples = [], 0, []

    def __call__(self, action):
        if isinstance(action, torch.Tensor):
            self.actions.append(int(action))
            return action
        assert tuple(action.shape) == () and action.dtype == pr.int64, action
        self.pyrite_samples.append(int(action))
        self.taken += 1
        return pr.tensor(self.actions[self.taken - 1])


def test_actor_critic_categorical_returns_rmsprop():
    same_init = _same_init()
    replay = _ReplayActions()
    rt = actor_critic_program(torch, same_init, replay)
    rp = actor_critic_program(pr, same_init, replay)
    assert replay.taken == len(replay.actions) == len(rt["actions"])
    assert set(replay.pyrite_samples) <= {0, 1}
    # 6 RMSprop steps of a 2-layer MLP over 59 transitions: seen 2e-7 relative everywhere
    np.testing.assert_array_equal(rp["actions"], rt["actions"])
    np.testing.assert_array_equal(rp["episodes"][:, 0], rt["episodes"][:, 0])  # lengths
    _close(rp["episodes"], rt["episodes"], 1e-6, 1e-9, "episode rewards")
    _close(rp["probs"], rt["probs"], 1e-5, 1e-7, "action probabilities")
    _close(rp["log_probs"], rt["log_probs"], 1e-5, 1e-6, "log-probabilities")
    _close(rp["values"], rt["values"], 1e-5, 1e-6, "critic values")
    _close(rp["returns"], rt["returns"], 1e-5, 1e-6, "normalised returns")
    _close(rp["losses"], rt["losses"], 1e-5, 1e-6, "losses")
    for key, value in rt["state"].items():
        _close(rp["state"][key], value, 1e-5, 1e-6, key)


# ---- regressions: what the programs' patterns met ---------------------------------------------
# 1. `float(node_loss)` of a loss that requires grad (program 3's train(), as PyG's examples
# write it) warns in torch 2.13, once a process, and said nothing in pyrite; now tensor.py's
# __float__ / __complex__ give torch's warning (int(), bool() and item() stay quiet, as torch's).
@pytest.fixture
def scalar_warning_again(monkeypatch):
    from pyrite import errors

    monkeypatch.setattr(errors, "WARNED_ONCE", set())


def test_float_of_a_tensor_that_requires_grad_warns_once(scalar_warning_again):
    w = pr.tensor(2.0, requires_grad=True)
    loss = w * 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (int(loss), loss.item(), bool(loss)) == (6, 6.0, True)  # quiet
        with pr.no_grad():
            assert float(loss) == 6.0  # grad mode off: quiet
        assert float(loss.detach()) == 6.0
    with pytest.warns(UserWarning, match=r"requires_grad=True to a scalar may lead to une") as rec:
        assert float(loss) == 6.0
    assert "Consider using tensor.detach() first." in str(rec[0].message)
    assert rec[0].filename == __file__  # attributed to the user's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        float(w), complex(loss)  # once a process, as torch's TORCH_WARN_ONCE


def test_complex_of_a_tensor_that_requires_grad_warns(scalar_warning_again):
    with pytest.warns(UserWarning, match="requires_grad=True to a scalar"):
        assert complex(pr.tensor(1.5, requires_grad=True)) == 1.5 + 0j


# 2. scatter_(..., reduce="add") with a Tensor src: torch's deprecation warning (once a process),
# which pyrite did not give; a Python value with reduce= stays quiet in both.
def test_scatter_reduce_argument_with_tensor_src_warns_once(monkeypatch):
    from pyrite import errors

    monkeypatch.setattr(errors, "WARNED_ONCE", set())
    index = pr.tensor([0, 2, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = pr.zeros(3).scatter_(0, index, 2.0, reduce="multiply")
        out = pr.ones(3).scatter(0, index, value=2.0, reduce="add")
    assert out.tolist() == [3.0, 1.0, 5.0]
    with pytest.warns(UserWarning, match="Use torch.scatter_reduce instead"):
        out = pr.zeros(3).scatter_(0, index, pr.tensor([1.0, 2.0, 3.0]), reduce="add")
    assert out.tolist() == [1.0, 0.0, 5.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pr.scatter(pr.ones(3), 0, index, pr.tensor([1.0, 2.0, 3.0]), reduce="multiply")


# 3. TransformerEncoder's inference fast path with a src_key_padding_mask (eval, no grad, no
# mask: the padded rows come back as zeros, as torch's nested tensors give them) now gives
# torch's "nested tensors is in prototype stage" warning, once a process, as torch does there
# and only there.
def test_encoder_nested_tensor_path_warns_once(monkeypatch):
    from pyrite import errors

    monkeypatch.setattr(errors, "WARNED_ONCE", set())
    layer = pr.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    encoder = pr.nn.TransformerEncoder(layer, 1)
    src = pr.randn(2, 3, 8)
    padding = pr.tensor([[False, False, True], [False, False, False]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        encoder(src, src_key_padding_mask=padding)  # training mode: the ordinary path
        encoder.eval()
        with pr.no_grad():
            encoder(src, mask=pr.zeros(3, 3, dtype=pr.bool), src_key_padding_mask=padding)
        encoder(src, src_key_padding_mask=padding)  # parameters requiring grad, grad mode on
    with pr.no_grad(), pytest.warns(UserWarning, match="nested tensors is in prototype stage"):
        out = encoder(src, src_key_padding_mask=padding)
    assert out[0, 2].abs().sum().item() == 0.0
    with warnings.catch_warnings(), pr.no_grad():
        warnings.simplefilter("error")
        encoder(src, src_key_padding_mask=padding)


@pytest.mark.parametrize(
    "shape,index,src_shape",
    [
        ((3,), [0, 2], ()),  # a 0-d source fills one index element only
        ((3, 2), [[0]], ()),  # ... and counts as one dimension
        ((3,), [0, 2], (2, 1)),  # a source of more dimensions than the index
        ((3, 2), [[0, 1]], (1, 2, 1)),
        ((3,), [1], ()),  # accepted: one element
        ((3, 2), [[0, 1]], (2, 3)),  # accepted: a source larger than the index
    ],
)
def test_scatter_source_rank_checked_as_torch(shape, index, src_shape, rng):
    """scatter_ / scatter_add_ / scatter_reduce with a 0-d source or one of another rank than
    the index: refused where torch refuses (pyrite used to broadcast the 0-d source), equal
    values where torch accepts."""
    vals = rng.standard_normal(src_shape).astype(np.float32)
    for call in (
        lambda L, x, i, s: x.scatter_(0, i, s),
        lambda L, x, i, s: x.scatter_add_(0, i, s),
        lambda L, x, i, s: x.scatter_reduce(0, i, s, "amax"),
    ):
        got = want = None
        try:
            want = call(torch, torch.zeros(shape), torch.tensor(index), torch.tensor(vals))
        except (RuntimeError, IndexError):
            with pytest.raises((RuntimeError, ValueError, IndexError)):
                call(pr, pr.zeros(shape), pr.tensor(index), pr.tensor(vals))
            continue
        got = call(pr, pr.zeros(shape), pr.tensor(index), pr.tensor(vals))
        np.testing.assert_array_equal(got.numpy(), want.numpy())
