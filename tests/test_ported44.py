"""Three PyTorch programs of the kind people write, ported by changing the import (session 44).

Each program is written once, as a function whose first parameter is named `torch` (the code in
it is what a PyTorch user writes; `# port:` marks what the test changed: sizes, data given as
numpy arrays instead of files, dropout 0 so that the two runs draw no random masks), and run once
with PyTorch (CPU) and once with pyrite, from the same initial weights (torch's, copied through
numpy by `_same_init`) and the same seeded data. The losses of every step, the learning rates and
the final metrics are compared.

1. nanoGPT's char-level model and train.py: hand-written causal attention through
   F.scaled_dot_product_attention(is_causal=True), weight tying, AdamW with weight-decay param
   groups, warmup + cosine lr set by hand, gradient accumulation, GradScaler (disabled),
   clip_grad_norm_, estimate_loss under no_grad, a checkpoint (model, optimizer, numbers) saved
   and resumed through torch.save/torch.load, greedy and top-k sampling with torch.multinomial.
2. A CIFAR-style ResNet: BasicBlocks with ReLU(inplace=True) and `out += identity`,
   kaiming_normal_ / zero-init residual BN, channels_last, uint8 HWC images normalised,
   TensorDataset/DataLoader, label smoothing, SGD nesterov with weight-decay groups, OneCycleLR,
   flip test-time augmentation, a confusion matrix from bincount, SWA (AveragedModel, update_bn)
   and a snapshot ensemble evaluated with torch.func.stack_module_state + functional_call + vmap.
3. A padded-sequence classifier: a Dataset subclass returning dicts, a bucketing batch Sampler,
   a collate_fn with pad_sequence, a packed bidirectional 2-layer LSTM, attention pooling with
   einsum and masked_fill, class weights, gradient accumulation with clip_grad_value_,
   ReduceLROnPlateau, early stopping on a deepcopy of the state_dict, macro-F1 from scatter_add_ /
   index_add_ / bincount, and the old HuggingFace AdamW (transformers 2.x, copied into many
   repositories), which calls torch's deprecated scalar-first overloads (`add_(1 - beta1, grad)`,
   `addcmul_(1 - beta2, grad, grad)`, `addcdiv_(-step_size, exp_avg, denom)`).

Tolerances are float32's over a few optimizer steps: rtol 2e-4 for the losses of the MLP-sized
models, 1e-3 / atol 5e-5 for the convolutional one with BatchNorm over small batches.
"""

from __future__ import annotations

import copy
import inspect
import math
import warnings
from collections import OrderedDict
from contextlib import nullcontext

import numpy as np
import pytest
import torch

import pyrite as pr
from tests.ported import close as _close
from tests.ported import same_init as _same_init


# ---- 1. nanoGPT: a char-level GPT, trained, checkpointed, resumed and sampled -------------------
def gpt_program(torch, same_init, data, ckpt_path, max_iters=8):
    nn = torch.nn
    F = torch.nn.functional
    # port: the config, shrunk
    block_size, vocab_size, n_layer, n_head, n_embd, dropout, bias = 16, 27, 2, 4, 32, 0.0, False

    class LayerNorm(nn.Module):
        """LayerNorm but with an optional bias. PyTorch doesn't support simply bias=False"""

        def __init__(self, ndim, bias):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(ndim))
            self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

        def forward(self, input):
            return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            assert n_embd % n_head == 0
            self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
            self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
            self.attn_dropout = nn.Dropout(dropout)
            self.resid_dropout = nn.Dropout(dropout)
            self.n_head = n_head
            self.n_embd = n_embd
            self.dropout = dropout

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0,
                is_causal=True,
            )  # fmt: skip
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=bias)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=bias)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = LayerNorm(n_embd, bias=bias)
            self.attn = CausalSelfAttention()
            self.ln_2 = LayerNorm(n_embd, bias=bias)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            x = x + self.mlp(self.ln_2(x))
            return x

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(vocab_size, n_embd),
                wpe=nn.Embedding(block_size, n_embd),
                drop=nn.Dropout(dropout),
                h=nn.ModuleList([Block() for _ in range(n_layer)]),
                ln_f=LayerNorm(n_embd, bias=bias),
            ))  # fmt: skip
            self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight  # weight tying
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

        def get_num_params(self, non_embedding=True):
            n_params = sum(p.numel() for p in self.parameters())
            if non_embedding:
                n_params -= self.transformer.wpe.weight.numel()
            return n_params

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            device = idx.device
            b, t = idx.size()
            assert t <= block_size, f"Cannot forward sequence of length {t}"
            pos = torch.arange(0, t, dtype=torch.long, device=device)
            tok_emb = self.transformer.wte(idx)
            pos_emb = self.transformer.wpe(pos)
            x = self.transformer.drop(tok_emb + pos_emb)
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            if targets is not None:
                logits = self.lm_head(x)
                loss = F.cross_entropy(
                    logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
                )
            else:
                logits = self.lm_head(x[:, [-1], :])
                loss = None
            return logits, loss

        def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
            param_dict = {pn: p for pn, p in self.named_parameters()}
            param_dict = {pn: p for pn, p in param_dict.items() if p.requires_grad}
            decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
            optim_groups = [
                {"params": decay_params, "weight_decay": weight_decay},
                {"params": nodecay_params, "weight_decay": 0.0},
            ]
            fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
            use_fused = fused_available and device_type == "cuda"
            extra_args = dict(fused=True) if use_fused else dict()
            return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)

        @torch.no_grad()
        def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
            for _ in range(max_new_tokens):
                idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
                logits, _ = self(idx_cond)
                logits = logits[:, -1, :] / temperature
                if top_k is not None:
                    v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                    logits[logits < v[:, [-1]]] = -float("Inf")
                probs = F.softmax(logits, dim=-1)
                idx_next = torch.multinomial(probs, num_samples=1)
                idx = torch.cat((idx, idx_next), dim=1)
            return idx

    # ---- train.py ----
    device = "cuda" if torch.cuda.is_available() else "cpu"
    device_type = "cuda" if "cuda" in device else "cpu"
    dtype = "float32"  # port: no bfloat16 autocast (the two frameworks round differently)
    ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[
        dtype
    ]
    ctx = (
        nullcontext()
        if device_type == "cpu"
        else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
    )
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    gradient_accumulation_steps, learning_rate, warmup_iters, min_lr = 2, 6e-3, 2, 6e-4
    lr_decay_iters, eval_iters, grad_clip = max_iters, 2, 1.0
    train_data, val_data = data["train"], data["val"]
    train_ix = iter(data["ix"])  # port: the batches' offsets drawn in numpy

    def get_batch(split):
        d = train_data if split == "train" else val_data
        ix = next(train_ix) if split == "train" else data["val_ix"]
        x = torch.stack([torch.from_numpy((d[i : i + block_size]).astype(np.int64)) for i in ix])
        y = torch.stack(
            [torch.from_numpy((d[i + 1 : i + 1 + block_size]).astype(np.int64)) for i in ix]
        )
        if device_type == "cuda":
            x = x.pin_memory().to(device, non_blocking=True)
            y = y.pin_memory().to(device, non_blocking=True)
        else:
            x, y = x.to(device), y.to(device)
        return x, y

    model = GPT()
    same_init(model)  # port: torch's initial weights in both runs
    n_params = model.get_num_params()
    model.to(device)
    scaler = torch.amp.GradScaler("cuda", enabled=(dtype == "float16"))
    optimizer = model.configure_optimizers(0.1, learning_rate, (0.9, 0.95), device_type)
    raw_model = model

    @torch.no_grad()
    def estimate_loss():
        out = {}
        model.eval()
        for split in ["val"]:
            losses = torch.zeros(eval_iters)
            for k in range(eval_iters):
                X, Y = get_batch(split)
                with ctx:
                    logits, loss = model(X, Y)
                losses[k] = loss.item()
            out[split] = losses.mean()
        model.train()
        return out

    def get_lr(it):
        if it < warmup_iters:
            return learning_rate * (it + 1) / (warmup_iters + 1)
        if it > lr_decay_iters:
            return min_lr
        decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
        assert 0 <= decay_ratio <= 1
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return min_lr + coeff * (learning_rate - min_lr)

    X, Y = get_batch("train")
    losses, norms, lrs = [], [], []
    iter_num, best_val_loss = 0, 1e9
    while True:
        lr = get_lr(iter_num)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        for micro_step in range(gradient_accumulation_steps):
            with ctx:
                logits, loss = model(X, Y)
                loss = loss / gradient_accumulation_steps
            X, Y = get_batch("train")
            scaler.scale(loss).backward()
        if grad_clip != 0.0:
            scaler.unscale_(optimizer)
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        lossf = loss.item() * gradient_accumulation_steps
        losses.append(lossf)
        norms.append(float(norm))
        lrs.append(optimizer.param_groups[0]["lr"])
        iter_num += 1
        if iter_num >= max_iters:
            break

    val = estimate_loss()["val"]
    if val < best_val_loss:
        best_val_loss = val
        checkpoint = {
            "model": raw_model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "model_args": dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd),
            "iter_num": iter_num,
            "best_val_loss": best_val_loss,
        }
        torch.save(checkpoint, ckpt_path)

    # sample.py: a fresh model from the checkpoint
    checkpoint = torch.load(ckpt_path, map_location=device)
    model2 = GPT()
    state_dict = checkpoint["model"]
    unwanted_prefix = "_orig_mod."
    for k, v in list(state_dict.items()):
        if k.startswith(unwanted_prefix):
            state_dict[k[len(unwanted_prefix) :]] = state_dict.pop(k)
    model2.load_state_dict(state_dict)
    model2.eval()
    model2.to(device)
    optimizer2 = model2.configure_optimizers(0.1, learning_rate, (0.9, 0.95), device_type)
    optimizer2.load_state_dict(checkpoint["optimizer"])
    start_ids = data["prompt"]
    x = torch.tensor(start_ids, dtype=torch.long, device=device)[None, ...]
    with torch.no_grad():
        with ctx:
            greedy = model2.generate(x, 20, temperature=1.0, top_k=1)
            sampled = model2.generate(x.repeat(3, 1), 20, temperature=0.8, top_k=5)
    return dict(
        losses=losses, norms=norms, lrs=lrs, val=float(val), n_params=n_params,
        greedy=greedy[0].tolist(), sampled=sampled.cpu().numpy(), iter_num=checkpoint["iter_num"],
        best=float(checkpoint["best_val_loss"]), tied=model2.transformer.wte.weight is model2.lm_head.weight,
        opt_step=float(optimizer2.state_dict()["state"][0]["step"]), model=model2,
    )  # fmt: skip


def _gpt_data(rng):
    base = rng.integers(1, 27, 12)  # a noisy repeating text: something to learn in 8 steps
    text = np.tile(base, 40)
    noise = rng.random(text.size) < 0.1
    text[noise] = rng.integers(0, 27, noise.sum())
    train, val = text[:400].astype(np.uint16), text[400:].astype(np.uint16)
    return dict(
        train=train, val=val, ix=[rng.integers(0, len(train) - 17, 4) for _ in range(17)],
        val_ix=rng.integers(0, len(val) - 17, 4), prompt=base[:3].tolist(),
    )  # fmt: skip


def test_nanogpt_char_lm_train_checkpoint_sample(rng, tmp_path):
    data = _gpt_data(rng)
    same_init = _same_init()
    torch.manual_seed(1337)
    rt = gpt_program(torch, same_init, data, tmp_path / "torch_ckpt.pt")
    rp = gpt_program(pr, same_init, data, tmp_path / "pyrite_ckpt.pt")
    assert rt["losses"][-1] < rt["losses"][0] - 0.3  # it learns
    _close(rp["losses"], rt["losses"], 2e-4, 1e-5, "losses")
    _close(rp["norms"], rt["norms"], 1e-3, 1e-5, "gradient norms")
    _close(rp["lrs"], rt["lrs"], 1e-12, 0, "learning rates")
    _close(rp["val"], rt["val"], 2e-4, 1e-5, "val loss")
    for key in ("n_params", "iter_num", "tied", "opt_step"):
        assert rp[key] == rt[key], key
    assert rp["tied"] and rp["best"] == pytest.approx(rt["best"], rel=2e-4)
    assert rp["greedy"] == rt["greedy"]
    # top-k sampling draws from pyrite's generator: each token is one of torch's model's top 5
    sampled, tmodel = rp["sampled"], rt["model"]
    assert sampled.shape == (3, 23) and (sampled[:, :3] == data["prompt"]).all()
    with torch.no_grad():
        for t in range(3, sampled.shape[1]):
            logits, _ = tmodel(torch.from_numpy(sampled[:, max(0, t - 16) : t].astype(np.int64)))
            fifth = logits[:, -1].topk(5).values[:, -1]
            chosen = logits[:, -1].gather(1, torch.from_numpy(sampled[:, t : t + 1]).long())
            assert (chosen[:, 0] >= fifth - 1e-4).all(), t


# ---- 2. a CIFAR-style ResNet: train, evaluate with TTA, SWA, a snapshot ensemble with vmap ------
def resnet_program(torch, same_init, data, epochs=3, drop=0.0):
    nn = torch.nn
    F = torch.nn.functional
    optim = torch.optim
    TensorDataset, DataLoader = torch.utils.data.TensorDataset, torch.utils.data.DataLoader
    stack_module_state = torch.func.stack_module_state
    functional_call, vmap = torch.func.functional_call, torch.func.vmap

    def conv3x3(in_planes, out_planes, stride=1):
        return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)

    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = conv3x3(inplanes, planes, stride)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = conv3x3(planes, planes)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = downsample
            self.stride = stride

        def forward(self, x):
            identity = x
            out = self.conv1(x)
            out = self.bn1(out)
            out = self.relu(out)
            out = self.conv2(out)
            out = self.bn2(out)
            if self.downsample is not None:
                identity = self.downsample(x)
            out += identity
            out = self.relu(out)
            return out

    class ResNet(nn.Module):
        def __init__(self, block, layers, num_classes=4, zero_init_residual=True):
            super().__init__()
            self.inplanes = 8
            self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(self.inplanes)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.layer1 = self._make_layer(block, 8, layers[0])
            self.layer2 = self._make_layer(block, 16, layers[1], stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.head = nn.Sequential(OrderedDict([
                ("dropout", nn.Dropout(p=drop)),
                ("fc", nn.Linear(16 * block.expansion, num_classes)),
            ]))  # fmt: skip
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)
            if zero_init_residual:
                for m in self.modules():
                    if isinstance(m, BasicBlock) and m.bn2.weight is not None:
                        nn.init.constant_(m.bn2.weight, 0)

        def _make_layer(self, block, planes, blocks, stride=1):
            downsample = None
            if stride != 1 or self.inplanes != planes * block.expansion:
                downsample = nn.Sequential(
                    nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                    nn.BatchNorm2d(planes * block.expansion),
                )
            layers = [block(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes * block.expansion
            for _ in range(1, blocks):
                layers.append(block(self.inplanes, planes))
            return nn.Sequential(*layers)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer2(self.layer1(x))
            x = self.avgpool(x)
            x = torch.flatten(x, 1)
            return self.head(x)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cudnn.benchmark = True
    mean = torch.tensor([0.49, 0.48, 0.45]).view(1, 3, 1, 1)
    std = torch.tensor([0.25, 0.24, 0.26]).view(1, 3, 1, 1)
    x_train = (torch.from_numpy(data["x_train"]).permute(0, 3, 1, 2).float() / 255.0 - mean) / std
    x_test = (torch.from_numpy(data["x_test"]).permute(0, 3, 1, 2).float().div(255) - mean) / std
    train_ds = TensorDataset(x_train, torch.from_numpy(data["y_train"]).long())
    test_ds = TensorDataset(x_test, torch.from_numpy(data["y_test"]))
    # port: shuffle=False (the data are drawn in a random order): the two frameworks' shuffles differ
    train_loader = DataLoader(train_ds, batch_size=16, shuffle=False, drop_last=True)
    test_loader = DataLoader(test_ds, batch_size=32)

    model = ResNet(BasicBlock, [1, 1]).to(device)
    same_init(model)
    model = model.to(memory_format=torch.channels_last)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 or name.endswith(".bias") else decay).append(p)
    optimizer = optim.SGD(
        [{"params": decay, "weight_decay": 5e-4}, {"params": no_decay, "weight_decay": 0.0}],
        lr=0.05, momentum=0.9, nesterov=True,
    )  # fmt: skip
    scheduler = optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=0.1, epochs=epochs, steps_per_epoch=len(train_loader), pct_start=0.25
    )
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

    losses, lrs, snapshots = [], [], []
    for epoch in range(epochs):
        model.train()
        running_loss, correct, total = 0.0, 0, 0
        for i, (inputs, targets) in enumerate(train_loader):
            inputs = inputs.to(device, non_blocking=True)
            inputs = inputs.contiguous(memory_format=torch.channels_last)
            targets = targets.to(device, non_blocking=True)
            optimizer.zero_grad()
            outputs = model(inputs)
            loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()
            scheduler.step()
            running_loss += loss.item() * inputs.size(0)
            _, predicted = outputs.max(1)
            total += targets.size(0)
            correct += predicted.eq(targets).sum().item()
            losses.append(loss.item())
            lrs.append(scheduler.get_last_lr()[0])
        train_acc = 100.0 * correct / total
        snapshots.append(copy.deepcopy(model).eval())

    # evaluation: horizontal-flip test-time augmentation, a confusion matrix
    model.eval()
    num_classes = 4
    confusion = torch.zeros(num_classes, num_classes, dtype=torch.int64)
    test_loss, correct, probs_all = 0.0, 0, []
    with torch.no_grad():
        for inputs, targets in test_loader:
            logits = (model(inputs) + model(torch.flip(inputs, dims=[3]))) / 2
            test_loss += F.cross_entropy(logits, targets, reduction="sum").item()
            pred = logits.argmax(dim=1, keepdim=True)
            correct += pred.eq(targets.view_as(pred)).sum().item()
            confusion += torch.bincount(
                targets * num_classes + pred.squeeze(1), minlength=num_classes**2
            ).reshape(num_classes, num_classes)
            probs_all.append(F.softmax(logits, dim=1))
    probs = torch.cat(probs_all)
    n_test = len(test_loader.dataset)
    per_class = confusion.diag().float() / confusion.sum(1).clamp(min=1).float()

    # stochastic weight averaging, BN statistics recomputed over the training data
    swa_model = optim.swa_utils.AveragedModel(model)
    swa_model.update_parameters(model)
    optim.swa_utils.update_bn(train_loader, swa_model)
    swa_model.eval()
    with torch.inference_mode():
        swa_logits = swa_model(x_test[:8])

    # the epochs' snapshots as one ensemble (the "model ensembling" tutorial's torch.func way)
    params, buffers = stack_module_state(snapshots)
    base_model = copy.deepcopy(snapshots[0]).to("meta")

    def fmodel(params, buffers, x):
        return functional_call(base_model, (params, buffers), (x,))

    with torch.no_grad():
        ensemble_logits = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x_test[:8])
    ensemble_probs = ensemble_logits.softmax(dim=-1).mean(0)
    return dict(
        losses=losses, lrs=lrs, train_acc=train_acc, test_loss=test_loss / n_test,
        test_acc=100.0 * correct / n_test, confusion=confusion.numpy(), probs=probs.numpy(),
        per_class=per_class.numpy(), swa=swa_logits.numpy(), n_averaged=int(swa_model.n_averaged),
        bn_mean=model.bn1.running_mean.numpy(), bn_batches=int(model.bn1.num_batches_tracked),
        stacked_shape=tuple(params["conv1.weight"].shape), stacked_grad=params["conv1.weight"].requires_grad,
        ensemble=ensemble_probs.numpy(), last_snapshot=snapshots[-1](x_test[:8]).detach().numpy(),
        ensemble_last=ensemble_logits[-1].numpy(),
    )  # fmt: skip


def _image_data(rng, n_train=96, n_test=40, hw=12):
    """Four classes: the quadrant holding a bright patch (in one of the channels), on noise;
    uint8 HWC images, as CIFAR's arrays."""

    def make(n):
        y = rng.integers(0, 4, n)
        x = rng.normal(110, 30, (n, hw, hw, 3))
        for i, c in enumerate(y):
            r, s = (c // 2) * (hw // 2), (c % 2) * (hw // 2)
            x[i, r : r + hw // 2, s : s + hw // 2, c % 3] += 90
        return np.clip(x, 0, 255).astype(np.uint8), y

    x_train, y_train = make(n_train)
    x_test, y_test = make(n_test)
    return dict(x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)


@pytest.mark.filterwarnings("ignore:There is a performance drop")  # torch vmap's fallback
def test_resnet_classifier_swa_and_vmap_ensemble(rng):
    data = _image_data(rng)
    same_init = _same_init()
    torch.manual_seed(0)
    rt = resnet_program(torch, same_init, data)
    rp = resnet_program(pr, same_init, data)
    assert np.mean(rt["losses"][-3:]) < np.mean(rt["losses"][:3])  # it learns
    _close(rp["losses"], rt["losses"], 1e-3, 5e-5, "losses")
    _close(rp["lrs"], rt["lrs"], 1e-9, 0, "learning rates")
    _close(rp["test_loss"], rt["test_loss"], 1e-3, 5e-5, "test loss")
    # a prediction may flip only where torch's two top probabilities are within rounding
    close_call = np.sort(rt["probs"], 1)[:, -1] - np.sort(rt["probs"], 1)[:, -2] < 1e-4
    flips = (rp["probs"].argmax(1) != rt["probs"].argmax(1)) & ~close_call
    assert not flips.any()
    if not close_call.any():
        assert rp["train_acc"] == rt["train_acc"] and rp["test_acc"] == rt["test_acc"]
        np.testing.assert_array_equal(rp["confusion"], rt["confusion"])
        _close(rp["per_class"], rt["per_class"], 1e-6, 0, "per-class accuracy")
    _close(rp["probs"], rt["probs"], 1e-3, 5e-5, "test probabilities")
    _close(rp["swa"], rt["swa"], 1e-3, 5e-5, "SWA logits")
    _close(rp["bn_mean"], rt["bn_mean"], 1e-3, 5e-5, "running mean")
    for key in ("n_averaged", "bn_batches", "stacked_shape", "stacked_grad"):
        assert rp[key] == rt[key], key
    assert rt["stacked_shape"] == (3, 8, 3, 3, 3) and rt["stacked_grad"]
    _close(rp["ensemble"], rt["ensemble"], 1e-3, 5e-5, "ensemble probabilities")
    _close(rp["ensemble_last"], rp["last_snapshot"], 1e-5, 1e-6, "vmap's last slice")


# ---- 3. a padded-sequence classifier with an old-style custom optimizer ----------------------
def sequence_program(torch, same_init, data, epochs=4):
    nn = torch.nn
    F = torch.nn.functional
    Dataset, Sampler = torch.utils.data.Dataset, torch.utils.data.Sampler
    DataLoader, Optimizer = torch.utils.data.DataLoader, torch.optim.Optimizer
    pad_sequence = nn.utils.rnn.pad_sequence
    pack_padded_sequence = nn.utils.rnn.pack_padded_sequence
    pad_packed_sequence = nn.utils.rnn.pad_packed_sequence
    PAD, NUM_CLASSES, VOCAB = 0, 3, 12

    class AdamW(Optimizer):
        """transformers 2.x's AdamW (optimization.py), as copied into many repositories."""

        def __init__(
            self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0,
            correct_bias=True,
        ):  # fmt: skip
            if lr < 0.0:
                raise ValueError("Invalid learning rate: {} - should be >= 0.0".format(lr))
            if not 0.0 <= betas[0] < 1.0:
                raise ValueError("Invalid beta parameter: {} - should be in [0.0, 1.0[".format(betas[0]))  # fmt: skip
            defaults = dict(
                lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, correct_bias=correct_bias
            )
            super().__init__(params, defaults)

        def step(self, closure=None):
            loss = None
            if closure is not None:
                loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad.data
                    if grad.is_sparse:
                        raise RuntimeError("Adam does not support sparse gradients")
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = 0
                        state["exp_avg"] = torch.zeros_like(p.data)
                        state["exp_avg_sq"] = torch.zeros_like(p.data)
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    beta1, beta2 = group["betas"]
                    state["step"] += 1
                    exp_avg.mul_(beta1).add_(1.0 - beta1, grad)
                    exp_avg_sq.mul_(beta2).addcmul_(1.0 - beta2, grad, grad)
                    denom = exp_avg_sq.sqrt().add_(group["eps"])
                    step_size = group["lr"]
                    if group["correct_bias"]:
                        bias_correction1 = 1.0 - beta1 ** state["step"]
                        bias_correction2 = 1.0 - beta2 ** state["step"]
                        step_size = step_size * math.sqrt(bias_correction2) / bias_correction1
                    p.data.addcdiv_(-step_size, exp_avg, denom)
                    if group["weight_decay"] > 0.0:
                        p.data.add_(-group["lr"] * group["weight_decay"], p.data)
            return loss

    class SequenceDataset(Dataset):
        def __init__(self, sequences, labels):
            self.sequences = sequences
            self.labels = labels

        def __len__(self):
            return len(self.sequences)

        def __getitem__(self, idx):
            seq = torch.tensor(self.sequences[idx], dtype=torch.long)
            return {"input_ids": seq, "label": torch.tensor(self.labels[idx]), "length": len(seq)}

    class BucketBatchSampler(Sampler):
        """Batches of similar lengths, longest first."""

        def __init__(self, lengths, batch_size):
            self.lengths = lengths
            self.batch_size = batch_size

        def __iter__(self):
            order = sorted(range(len(self.lengths)), key=lambda i: -self.lengths[i])
            yield from (
                order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)
            )

        def __len__(self):
            return (len(self.lengths) + self.batch_size - 1) // self.batch_size

    def collate_fn(batch):
        input_ids = pad_sequence(
            [b["input_ids"] for b in batch], batch_first=True, padding_value=PAD
        )
        lengths = torch.tensor([b["length"] for b in batch], dtype=torch.long)
        labels = torch.stack([b["label"] for b in batch])
        attention_mask = (input_ids != PAD).long()
        return input_ids, attention_mask, lengths, labels

    class AttentivePooling(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.query = nn.Parameter(torch.randn(dim) * 0.1)
            self.proj = nn.Linear(dim, dim)

        def forward(self, h, mask):
            keys = torch.tanh(self.proj(h))
            scores = torch.einsum("btd,d->bt", keys, self.query)
            scores = scores.masked_fill(mask == 0, float("-inf"))
            weights = F.softmax(scores, dim=-1)
            return torch.einsum("bt,btd->bd", weights, h), weights

    class LSTMClassifier(nn.Module):
        def __init__(self, vocab_size, embed_dim, hidden_dim, num_classes):
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD)
            self.lstm = nn.LSTM(
                embed_dim, hidden_dim, num_layers=2, batch_first=True, bidirectional=True
            )
            self.pool = AttentivePooling(2 * hidden_dim)
            self.norm = nn.LayerNorm(4 * hidden_dim)
            self.classifier = nn.Sequential(
                nn.Linear(4 * hidden_dim, hidden_dim), nn.SiLU(), nn.Linear(hidden_dim, num_classes)
            )

        def forward(self, input_ids, attention_mask, lengths):
            embedded = self.embedding(input_ids)
            packed = pack_padded_sequence(
                embedded, lengths.cpu(), batch_first=True, enforce_sorted=False
            )
            packed_out, (h_n, c_n) = self.lstm(packed)
            out, _ = pad_packed_sequence(
                packed_out, batch_first=True, total_length=input_ids.size(1)
            )
            pooled, weights = self.pool(out, attention_mask)
            final = torch.cat((h_n[-2, :, :], h_n[-1, :, :]), dim=1)  # last layer, both ways
            features = self.norm(torch.cat([pooled, final], dim=-1))
            return self.classifier(features), weights

    train_ds = SequenceDataset(data["train_seqs"], data["train_labels"])
    val_ds = SequenceDataset(data["val_seqs"], data["val_labels"])
    train_loader = DataLoader(
        train_ds,
        batch_sampler=BucketBatchSampler([len(s) for s in data["train_seqs"]], 8),
        collate_fn=collate_fn,
    )
    val_loader = DataLoader(val_ds, batch_size=16, shuffle=False, collate_fn=collate_fn)

    model = LSTMClassifier(VOCAB, 8, 12, NUM_CLASSES)
    same_init(model)
    counts = torch.bincount(torch.as_tensor(data["train_labels"]), minlength=NUM_CLASSES).float()
    class_weights = counts.sum() / (NUM_CLASSES * counts)
    criterion = nn.CrossEntropyLoss(weight=class_weights)
    no_decay = ["bias", "LayerNorm.weight", "norm.weight"]
    optimizer_grouped_parameters = [
        {
            "params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
            "weight_decay": 0.01,
        },
        {
            "params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
            "weight_decay": 0.0,
        },
    ]  # fmt: skip
    optimizer = AdamW(optimizer_grouped_parameters, lr=1e-2, eps=1e-8)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="min", factor=0.5, patience=0
    )
    accumulation_steps = 2

    def evaluate():
        model.eval()
        total_loss, preds, golds = 0.0, [], []
        with torch.no_grad():
            for input_ids, attention_mask, lengths, labels in val_loader:
                logits, _ = model(input_ids, attention_mask, lengths)
                total_loss += criterion(logits, labels).item() * labels.size(0)
                preds.append(logits.argmax(-1))
                golds.append(labels)
        preds, golds = torch.cat(preds), torch.cat(golds)
        tp = torch.zeros(NUM_CLASSES).scatter_add_(0, golds, (preds == golds).float())
        pred_count = torch.zeros(NUM_CLASSES).index_add_(
            0, preds, torch.ones_like(preds, dtype=torch.float)
        )
        gold_count = torch.bincount(golds, minlength=NUM_CLASSES).float()
        precision = tp / pred_count.clamp_min(1)
        recall = tp / gold_count.clamp_min(1)
        f1 = torch.where(
            precision + recall > 0,
            2 * precision * recall / (precision + recall),
            torch.zeros_like(tp),
        )
        return total_loss / len(val_ds), f1.mean().item(), (preds == golds).float().mean().item()

    history, step_losses = [], []
    best_loss, best_state, bad_epochs, patience = float("inf"), None, 0, 2
    for epoch in range(epochs):
        model.train()
        optimizer.zero_grad()
        for step, (input_ids, attention_mask, lengths, labels) in enumerate(train_loader):
            logits, _ = model(input_ids, attention_mask, lengths)
            loss = criterion(logits, labels) / accumulation_steps
            loss.backward()
            step_losses.append(loss.item() * accumulation_steps)
            if (step + 1) % accumulation_steps == 0 or step + 1 == len(train_loader):
                nn.utils.clip_grad_value_(model.parameters(), clip_value=1.0)
                optimizer.step()
                optimizer.zero_grad()
        val_loss, val_f1, val_acc = evaluate()
        scheduler.step(val_loss)
        history.append((val_loss, val_f1, val_acc, optimizer.param_groups[0]["lr"]))
        if val_loss < best_loss:
            best_loss, best_state, bad_epochs = val_loss, copy.deepcopy(model.state_dict()), 0
        else:
            bad_epochs += 1
            if bad_epochs >= patience:
                break

    model.load_state_dict(best_state)
    final = evaluate()
    model.eval()
    with torch.no_grad():  # one unpadded sequence
        ids = torch.tensor(data["val_seqs"][0]).unsqueeze(0)
        logits, weights = model(ids, torch.ones_like(ids), torch.tensor([ids.shape[1]]))
        probs = logits.softmax(dim=-1).squeeze(0)
    return dict(
        step_losses=step_losses, history=np.array(history), final=np.array(final),
        probs=probs.numpy(), weights=weights.numpy(), class_weights=class_weights.numpy(),
    )  # fmt: skip


def _sequence_data(rng, n_train=48, n_val=24):
    """Label: which of the tokens 1, 2, 3 occurs most often (ties to the smallest)."""

    def make(n):
        seqs, labels = [], []
        for _ in range(n):
            s = rng.integers(1, 12, int(rng.integers(3, 11)))
            seqs.append(s.tolist())
            labels.append(int(np.argmax([(s == t).sum() for t in (1, 2, 3)])))
        return seqs, labels

    train_seqs, train_labels = make(n_train)
    val_seqs, val_labels = make(n_val)
    return dict(
        train_seqs=train_seqs, train_labels=train_labels, val_seqs=val_seqs, val_labels=val_labels
    )


def test_packed_lstm_classifier_with_legacy_adamw(rng):
    data = _sequence_data(rng)
    same_init = _same_init()
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the deprecated overloads warn, in both
        rt = sequence_program(torch, same_init, data)
        rp = sequence_program(pr, same_init, data)
    assert min(rt["step_losses"][-6:]) < min(rt["step_losses"][:6])  # it learns
    _close(rp["step_losses"], rt["step_losses"], 2e-4, 1e-5, "step losses")
    assert rp["history"].shape == rt["history"].shape
    _close(rp["history"], rt["history"], 2e-4, 1e-5, "val loss, F1, accuracy, lr by epoch")
    _close(rp["final"], rt["final"], 2e-4, 1e-5, "best model's metrics")
    _close(rp["probs"], rt["probs"], 2e-4, 1e-5, "probabilities")
    _close(rp["weights"], rt["weights"], 2e-4, 1e-6, "attention weights")
    _close(rp["class_weights"], rt["class_weights"], 1e-6, 0, "class weights")


# ---- regressions: what the programs met -------------------------------------------------------
# 1. torch's deprecated scalar-first overloads (program 3's AdamW): pyrite raised "add_() takes 2
# positional arguments but 3 were given". Now ops/legacy.py's _install_scalar_first /
# _scalar_first_functions take them, with torch's deprecation warning.
SCALAR_FIRST = [
    "L.add(a, 2, b)", "L.sub(a, 0.5, b)", "L.addcmul(a, 0.5, b, c)", "L.addcdiv(a, -0.25, b, c)",
    "a.add(2, b)", "a.sub(3, b)", "a.addcmul(0.5, b, c)", "a.addcdiv(0.5, b, c)",
    "a.clone().add_(-0.1, b)", "a.clone().sub_(2, b)", "a.clone().addcmul_(0.1, b, b)",
    "a.clone().addcdiv_(-0.01, b, c)", "a.add(2, 3)", "a.clone().mul_(0.9).add_(1 - 0.9, b)",
]  # fmt: skip


@pytest.fixture
def warn_again(monkeypatch):
    """Each deprecated overload warns once a process, as torch's: forget which did."""
    from pyrite import errors

    monkeypatch.setattr(errors, "WARNED_ONCE", set())


@pytest.mark.parametrize("form", SCALAR_FIRST)
def test_deprecated_scalar_first_overloads(rng, warn_again, form):
    a_, b_ = rng.standard_normal((2, 3, 5)).astype(np.float32)
    c_ = rng.uniform(0.5, 2.0, (3, 5)).astype(np.float32)
    out = []
    for L in (torch, pr):
        a, b, c = (L.tensor(v) for v in (a_, b_, c_))
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            out.append(eval(form).numpy())
    name = form.split("(")[-2].split(".")[-1]
    assert [str(w.message).split(":")[0] for w in record] == [
        f"This overload of {name} is deprecated"
    ]
    assert f":\n\t{name}(" in str(record[0].message)  # torch's words: the old signature
    _close(out[1], out[0], 1e-6, 1e-6, form)


def test_deprecated_scalar_first_overloads_edges(rng, warn_again):
    """The warning is torch's, once; the ordinary forms are untouched (no warning); a keyword
    alpha beside a leading scalar, or a Tensor then a number, is refused as in torch; gradients
    flow through x.add(alpha, y); a self-referencing p.data.add_(-wd, p.data) works."""
    a, b = (pr.tensor(v) for v in rng.standard_normal((2, 4)).astype(np.float32))
    with pytest.warns(UserWarning) as record:
        a.clone().add_(2, b)
    assert str(record[0].message) == (
        "This overload of add_ is deprecated:\n\tadd_(Number alpha, Tensor other)\nConsider "
        "using one of the following signatures instead:\n\tadd_(Tensor other, *, Number alpha = 1)"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a.clone().add_(2, b)  # once
        _close(a.add(b, alpha=2).numpy(), (a + 2 * b).numpy(), 1e-6, 1e-6, "add alpha=")
        _close(pr.addcmul(a, b, b, value=0.5).numpy(), (a + 0.5 * b * b).numpy(), 1e-6, 1e-6, "")
    for bad in ("a.add(2, b, alpha=3)", "a.add(b, 2)", "pr.add(a, b, 2)", "a.addcmul(b, b, 0.5)"):
        with pytest.raises(TypeError):
            eval(bad)
    x = pr.tensor(a.numpy(), requires_grad=True)
    y = pr.tensor(b.numpy(), requires_grad=True)
    with pytest.warns(UserWarning):
        (x.add(3.0, y) * x).sum().backward()
    _close(x.grad.numpy(), (2 * a + 3 * b).numpy(), 1e-6, 1e-6, "d/dx")
    _close(y.grad.numpy(), (3 * a).numpy(), 1e-6, 1e-6, "d/dy")
    p = pr.nn.Parameter(a.clone())
    p.data.add_(-0.1, p.data)
    _close(p.detach().numpy(), (0.9 * a).numpy(), 1e-6, 1e-6, "p.data.add_(-wd, p.data)")


# 2. torch.func.stack_module_state (program 2's snapshot ensemble) was missing: now in
# pyrite/func.py, with torch's checks and words.
def _mlp_bn(L):
    return L.nn.Sequential(L.nn.Linear(3, 5), L.nn.BatchNorm1d(5), L.nn.ReLU(), L.nn.Linear(5, 2))


def test_stack_module_state_and_vmap_ensemble(rng):
    torch.manual_seed(int(rng.integers(1 << 30)))
    tmodels = [_mlp_bn(torch) for _ in range(3)]
    x_ = rng.standard_normal((7, 3)).astype(np.float32)
    for m in tmodels:
        m(torch.tensor(x_))  # running statistics of their own
    pmodels = [_mlp_bn(pr) for _ in range(3)]
    for pm, tm in zip(pmodels, tmodels):
        pm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    out = []
    for L, models in ((torch, tmodels), (pr, pmodels)):
        for m in models:
            m.eval()
        params, buffers = L.func.stack_module_state(models)
        assert list(params) == [n for n, _ in models[0].named_parameters()]
        assert list(buffers) == [n for n, _ in models[0].named_buffers()]
        w = params["0.weight"]
        assert tuple(w.shape) == (3, 5, 3) and w.is_leaf and w.requires_grad
        assert not buffers["1.running_mean"].requires_grad
        assert tuple(buffers["1.num_batches_tracked"].shape) == (3,)
        base = copy.deepcopy(models[0]).to("meta")

        def fmodel(params, buffers, x):
            return L.func.functional_call(base, (params, buffers), (x,))

        x = L.tensor(x_)
        y = L.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x)
        y.sum().backward()  # gradients reach the stacked leaves, not the models
        assert models[0][0].weight.grad is None
        out.append((y.detach().numpy(), params["3.bias"].grad.numpy()))
        with L.no_grad():
            _close(y[1].numpy(), models[1](x).numpy(), 1e-5, 1e-6, "slice 1 is model 1")
    _close(out[1][0], out[0][0], 1e-5, 1e-6, "ensemble outputs")
    _close(out[1][1], out[0][1], 1e-6, 0, "stacked bias gradient")


@pytest.mark.parametrize("case", ["empty", "mode", "class", "requires_grad"])
def test_stack_module_state_errors(case):
    def models(L):
        a, b = L.nn.Linear(2, 2), L.nn.Linear(2, 2)
        if case == "empty":
            return []
        if case == "mode":
            b.eval()
        if case == "class":
            b = L.nn.Sequential(L.nn.Linear(2, 2))
        if case == "requires_grad":
            b.weight.requires_grad_(False)
        return [a, b]

    with pytest.raises(RuntimeError) as t:
        torch.func.stack_module_state(models(torch))
    with pytest.raises(RuntimeError) as p:
        pr.func.stack_module_state(models(pr))
    assert str(p.value) == str(t.value)
