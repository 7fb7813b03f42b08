"""Randomized differential fuzz of `pr.compile` against eager pyrite (session 45): whole training
steps, traced once and replayed, over calls whose inputs and surroundings change.

Each seed builds a small random model (one of four families: an MLP on (B, D); tokens (B, L)
through an Embedding, attention blocks (F.scaled_dot_product_attention, causal or not) and MLPs;
Conv1d on (B, C, L); Conv2d on (B, C, H, W)) from Linear, Conv, LayerNorm, BatchNorm, Dropout
with p=0, GELU / ReLU / SiLU / Tanh, residual adds, reshape / transpose / slicing views, in-place
ops on activations (add_, mul_, relu_, clamp_), torch.where, cat / stack and reductions; a loss
(mse, l1, cross_entropy with and without ignore_index and label_smoothing); an optimizer (SGD
with momentum / nesterov / weight decay, Adam, AdamW), optionally clip_grad_norm_ inside the
step, an LR schedule stepped outside, and gradient accumulation (the step only runs backward;
`opt.step(); opt.zero_grad()` run outside every k calls). The step is `step(x, y[, s])`:
zero_grad first or last, forward, backward, step; it returns the loss and sometimes more
(a detached output, a dict, a tuple, the gradient norm).

Two identical copies of model and optimizer are made; one runs the step eagerly, the other
through `pr.compile(step)` (`options={"fusion": False}` on a third of the seeds: then a replay
must be bit-identical to eager, up to a few ulps). K = 5..8 calls, each with new inputs, and
between calls, to both sides alike: a new batch size, a new input dtype (float16: the model
casts), a Python scalar argument that changes, `train()` / `eval()`, `requires_grad` toggled on a
parameter, an optimizer hyperparameter changed (lr, weight_decay from / to 0, momentum, betas),
parameters scaled outside (`with pr.no_grad(): p.mul_(0.9)`), a schedule's step, gradient
accumulation's step and zero_grad. After every call: every returned value, every parameter,
every `.grad` (and whether it is None), every buffer (BatchNorm's running statistics) and the
optimizer's state are compared, with
    |compiled - eager| <= tol · (call + 1) · (|eager| + max|eager|),
tol = 2^-21 with fusion off (a few ulps) and 2^-18 with it on (a fused map may round once where
eager rounded twice; through Adam's m / sqrt(v) a gradient's relative error moves a parameter
by up to lr times it). (On lavapipe every seed of 0:200 agreed bit for bit when this was
written, fusion on or off: the tolerances are headroom, not noise.) The compiled side raising where eager does not is a finding; a seed
whose eager run raises is skipped (counted).

Classified as documented (README, pr.compile and Differences), not generated or not failures:
- Dropout with p > 0: under `pr.compile` each replay draws a new key from the generator, so its
  masks are not eager's (README "Training fast paths"); only p = 0 is compared.
- Python values computed from anything but the arguments and the watched modules and
  optimizers are frozen at the trace: the fuzzer passes changing scalars as arguments.
- `zero_grad(set_to_none=False)` last in the step runs Adam-style updates eagerly (correct).
- The compiled function's outputs are fresh detached copies: nothing calls backward on them.
- Warnings that a function runs eagerly (graph breaks, a new object met during a trace) are
  expected, not findings: the results must still agree.
- Not failures, noted for speed only: gradient accumulation inside a step whose model is not
  found before the first call (reached only through another function) never replays while the
  parameters have a `.grad`: autograd accumulates by rebinding (`t.grad = t.grad + g`), which a
  trace sees as "replaced a tensor it had read" and remembers as eager; with k >= 3 micro-steps
  and an event between, each call may trace again until the recordings' gradient buffers cycle.

Found and fixed (tests/test_fuzz_compile45.py):
- a replay set every watched parameter's `.grad` back to what its trace had found, not only
  the ones the trace set: a no_grad forward compiled beside the step (or `pr.compile(model)`
  under no_grad) handed the first call's gradients back after every later step
  (compile/__init__.py, `grads_out`).
- a parameter frozen for some calls and trained again under Adam / AdamW: its step count falls
  behind, the guards matched the first recording, whose fused update has one set of bias
  corrections, and the replay raised "updated different parameters, or with different scalars"
  (which parameters share their optimizer state's host numbers is a guard: compile/_guards.py).

    .venv/bin/python scripts/fuzz_compile.py --seeds 0:200 [--calls 9:14] [--show 17] [--verbose]
"""

from __future__ import annotations

import math
import sys
import traceback
import warnings

import numpy as np

import pyrite as pr
import pyrite.nn as nn
import pyrite.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import fuzz_driver  # noqa: E402
from fuzz_driver import parse_seeds  # noqa: E402,F401  (the tests' seed lists)

ACTS = ("gelu", "relu", "silu", "tanh")


# ---- the plan: every random choice of a seed, made before anything runs --------------------------
CALLS = (5, 9)  # calls per seed: [lo, hi) (--calls; longer runs reach more guard states)


class Plan:
    def __init__(self, seed):
        self.seed = seed
        r = self.rng = np.random.default_rng(seed)
        self.family = ("mlp", "seq", "conv1d", "conv2d")[int(r.integers(0, 4))]
        self.d = int(r.choice([4, 6, 8]))
        self.blocks = [self.block() for _ in range(int(r.integers(1, 5)))]
        self.classes = int(r.choice([3, 5]))
        self.loss = str(r.choice(["mse", "l1", "ce", "ce_ignore", "ce_smooth"]))
        self.opt = str(r.choice(["sgd", "adam", "adamw"]))
        self.opt_kw = self.opt_kwargs()
        self.clip = self.chance(0.3)
        self.sched = str(r.choice(["none", "none", "step", "exp", "cos"]))
        self.accum = int(r.choice([1, 1, 1, 2, 3]))  # >1: backward only; step outside
        self.zero_last = self.accum == 1 and self.chance(0.3)
        self.scalar = self.chance(0.4)  # step(x, y, s): the loss times s
        self.ret = str(r.choice(["loss", "loss", "tuple", "dict", "norm", "grad", "param"]))
        self.write_y = self.chance(0.2)  # the step writes its target argument in place
        self.read = self.chance(0.2)  # a graph break: a branch on loss.item() inside
        self.fusion = not self.chance(0.33)
        self.bn_cumulative = self.chance(0.2)  # BatchNorm(momentum=None): reads its count back
        self.emb = str(r.choice(["plain", "plain", "padding", "max_norm"]))
        self.ce_weight = self.chance(0.2)
        self.clip_value = self.chance(0.15)
        self.sched_inside = self.chance(0.2)  # the schedule stepped inside the step
        self.kwargs = self.chance(0.3)  # s and k passed by keyword
        self.rows = self.chance(0.25)  # step(x, y, s, k): the loss over the first k rows only
        self.predict = self.chance(0.4)  # a forward under no_grad compiled beside the step
        self.module = self.chance(0.25)  # pr.compile(model) in an eager step, not the step
        self.eval_only = self.chance(0.15)  # eval() throughout: Dropout p > 0 is exact
        self.calls = int(r.integers(*CALLS))
        self.events = [self.event(i) for i in range(self.calls)]

    def chance(self, p):
        return bool(self.rng.random() < p)

    def block(self):
        r = self.rng
        common = ["act", "ln", "bn", "drop0", "res", "inplace", "where", "cat", "stack", "reduce"]
        common += ["view", "slice"]
        if self.family == "mlp":
            kinds = common + ["linear", "linear"]
        elif self.family == "seq":
            kinds = common + ["linear", "attn", "attn", "mlp"]
        else:
            kinds = common + ["conv", "conv"]
        return (str(r.choice(kinds)), int(r.integers(0, 1 << 30)))

    def opt_kwargs(self):
        r = self.rng
        if self.opt == "sgd":
            kw = {"lr": 0.05, "momentum": float(r.choice([0.0, 0.9]))}
            if kw["momentum"] and self.chance(0.3):
                kw["nesterov"] = True
            elif kw["momentum"] and self.chance(0.3):
                kw["dampening"] = 0.1
        else:
            kw = {"lr": float(r.choice([1e-3, 1e-2]))}
            if self.chance(0.3):
                kw["betas"] = (0.8, 0.99)
            if self.chance(0.25):
                kw["amsgrad"] = True
            if self.chance(0.1):
                kw["maximize"] = True
        if self.chance(0.4):
            kw["weight_decay"] = float(r.choice([0.0, 0.01, 0.1]))
        return kw

    def event(self, i):
        """What happens before call i (to both sides alike)."""
        ev = []
        if i == 0:
            return ev
        options = [
            "shape",
            "dtype",
            "mode",
            "requires_grad",
            "hyper",
            "scale_params",
            "scalar",
            "rows",
            "grad_none",
            "zero_grad",
            "rebind",
            "load_state",
            "opt_reload",
            "opt_state",
            "same",
            "same",
        ]
        if self.eval_only:
            options.remove("mode")
        n = int(self.rng.choice([0, 0, 0, 1, 1, 2]))  # (mostly none: replays must happen)
        for _ in range(n):
            ev.append(str(self.rng.choice(options)))
        return ev

    def text(self):
        out = [f"seed {self.seed}: {self.family} d={self.d} classes={self.classes}"]
        out.append(f"  blocks {self.blocks}")
        out.append(
            f"  loss {self.loss}; {self.opt} {self.opt_kw}; clip {self.clip}; sched "
            f"{self.sched}; accum {self.accum}; zero_last {self.zero_last}; scalar "
            f"{self.scalar}; returns {self.ret}; fusion {self.fusion}; rows {self.rows}; "
            f"predict {self.predict}; module {self.module}; eval_only {self.eval_only}; "
            f"write_y {self.write_y}; read {self.read}; bn_cumulative {self.bn_cumulative}; "
            f"emb {self.emb}; ce_weight {self.ce_weight}; clip_value {self.clip_value}; "
            f"sched_inside {self.sched_inside}; kwargs {self.kwargs}"
        )
        out.append(f"  events {self.events}")
        return "\n".join(out)


# ---- the model ---------------------------------------------------------------------------------
class Net(nn.Module):
    """A stack of blocks over a (B, D) / (B, L, D) / (B, D, L) / (B, D, H, W) activation."""

    def __init__(self, plan: Plan):
        super().__init__()
        pr.manual_seed(plan.seed)
        self.plan = plan
        d = plan.d
        fam = plan.family
        self.mods = nn.ModuleList()
        self.kinds = []
        if fam == "seq":
            if plan.emb == "padding":
                self.stem = nn.Embedding(11, d, padding_idx=0)
            elif plan.emb == "max_norm":  # (renormalises the rows it reads, in place)
                self.stem = nn.Embedding(11, d, max_norm=1.5)
            else:
                self.stem = nn.Embedding(11, d)
        elif fam == "mlp":
            self.stem = nn.Linear(5, d)
        elif fam == "conv1d":
            self.stem = nn.Conv1d(3, d, 3, padding=1)
        else:
            self.stem = nn.Conv2d(2, d, 3, padding=1)
        for kind, s in plan.blocks:
            r = np.random.default_rng(s)
            self.kinds.append((kind, s))
            self.mods.append(self._module(kind, r, d))
        self.head = nn.Linear(d, plan.classes)

    def _module(self, kind, r, d):
        fam = self.plan.family
        if kind == "linear":
            return nn.Linear(d, d, bias=bool(r.integers(0, 2)))
        if kind == "ln":
            return nn.LayerNorm(d) if fam in ("mlp", "seq") else nn.Identity()
        if kind == "bn":
            bn = {"mlp": nn.BatchNorm1d, "conv1d": nn.BatchNorm1d, "conv2d": nn.BatchNorm2d}
            momentum = None if self.plan.bn_cumulative else 0.1
            return bn[fam](d, momentum=momentum) if fam in bn else nn.Identity()
        if kind == "drop0":  # (p > 0 only where the model never trains: eval's identity)
            return nn.Dropout(0.3 if self.plan.eval_only else 0.0)
        if kind == "conv":
            conv = nn.Conv1d if fam == "conv1d" else nn.Conv2d
            k = int(r.choice([1, 3]))
            return conv(d, d, k, padding=k // 2, bias=bool(r.integers(0, 2)))
        if kind == "attn":
            return nn.ModuleDict({"qkv": nn.Linear(d, 3 * d), "proj": nn.Linear(d, d)})
        if kind == "mlp":
            return nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        return nn.Identity()

    def forward(self, x):
        fam = self.plan.family
        if fam != "seq":
            x = x.float()  # (an f16 input is a new dtype: a new trace)
        h = self.stem(x)
        if fam == "mlp":
            h = h.unsqueeze(1)  # (B, 1, D): every family keeps a length / spatial axis
        saved = h
        for (kind, s), m in zip(self.kinds, self.mods):
            r = np.random.default_rng(s)
            h, saved = self.apply(kind, r, m, h, saved)
        if fam == "conv1d":
            h = h.transpose(1, 2)  # (B, L, D)
        elif fam == "conv2d":
            h = h.flatten(2).transpose(1, 2)  # (B, H·W, D)
        if fam == "seq":
            return self.head(h).reshape(-1, self.plan.classes)  # (B·L, C)
        return self.head(h.mean(1))  # (B, C)

    def channels_last(self):
        return self.plan.family in ("mlp", "seq")

    def apply(self, kind, r, m, h, saved):
        d = self.plan.d
        cl = self.channels_last()
        cdim = -1 if cl else 1
        if kind == "linear":
            return m(h), saved
        if kind in ("ln", "drop0"):
            return m(h), saved
        if kind == "bn":
            if self.plan.family == "mlp":
                return m(h.squeeze(1)).unsqueeze(1), saved
            return m(h), saved
        if kind == "conv":
            return m(h), saved
        if kind == "act":
            a = ACTS[int(r.integers(0, len(ACTS)))]
            return getattr(F, a)(h), saved
        if kind == "res":
            if saved.shape == h.shape:
                h = h + saved * float(r.uniform(0.5, 1.5))
            return h, h
        if kind == "inplace":
            h = h * 1.0 + 0.0 if r.integers(0, 2) else h.clone()
            op = int(r.integers(0, 4))
            if op == 0:
                h.add_(float(r.uniform(-0.5, 0.5)))
            elif op == 1:
                h.mul_(float(r.uniform(0.5, 1.5)))
            elif op == 2:
                h.relu_()
            else:
                h.clamp_(-2.0, 2.0)
            return h, saved
        if kind == "where":
            return pr.where(h > 0, h, h * 0.1), saved
        if kind == "cat":
            k = d // 2
            a, b = h.narrow(cdim, 0, k), h.narrow(cdim, k, d - k)
            return pr.cat([b * 0.5, a], dim=cdim), saved
        if kind == "stack":
            return pr.stack([h, h.tanh()], 0).sum(0) * 0.5, saved
        if kind == "reduce":
            if r.integers(0, 2):
                return h - h.mean(cdim, keepdim=True), saved
            return h * h.amax(cdim, keepdim=True).sigmoid(), saved
        if kind == "view":
            if cl:  # (B, L, D) -> (B, L, 2, D/2) -> swap -> back
                shp = h.shape
                v = h.reshape(*shp[:-1], 2, d // 2).transpose(-1, -2).reshape(shp)
                return v, saved
            return h.transpose(1, -1).contiguous().transpose(1, -1) * 1.0, saved
        if kind == "slice":  # a strided slice, padded back to d by a cat
            if cl:
                return pr.cat([h[..., ::2], h[..., 1::2]], dim=-1), saved
            return pr.cat([h[:, ::2], h[:, 1::2]], dim=1), saved
        if kind == "attn":
            b, l_, _ = h.shape
            heads = 2 if d % 2 == 0 else 1
            e = d // heads
            q, k, v = m["qkv"](h).reshape(b, l_, 3, heads, e).unbind(2)  # (B, L, H, E) each
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, L, E)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=bool(r.integers(0, 2)))
            return h + m["proj"](o.transpose(1, 2).reshape(b, l_, d)), saved
        if kind == "mlp":
            return h + m(h), saved
        raise AssertionError(kind)


# ---- one side: model, optimizer, schedule, step -----------------------------------------------
class Side:
    def __init__(self, plan: Plan, compiled: bool):
        self.plan = plan
        self.model = Net(plan)
        p = plan
        if p.eval_only:
            self.model.eval()
        opt = {"sgd": pr.optim.SGD, "adam": pr.optim.Adam, "adamw": pr.optim.AdamW}[p.opt]
        self.opt = opt(self.model.parameters(), **p.opt_kw)
        if p.sched == "step":
            self.sched = pr.optim.lr_scheduler.StepLR(self.opt, 2, gamma=0.5)
        elif p.sched == "exp":
            self.sched = pr.optim.lr_scheduler.ExponentialLR(self.opt, 0.9)
        elif p.sched == "cos":
            self.sched = pr.optim.lr_scheduler.CosineAnnealingLR(self.opt, 6)
        else:
            self.sched = None
        options = {"fusion": p.fusion}
        # the model as the step calls it: pr.compile(model) in an eager step, or the model
        self.fwd = pr.compile(self.model, options=options) if compiled and p.module else None
        self.step = self._make_step()
        if compiled and not p.module:
            self.step = pr.compile(self.step, options=options)
        self.predict = None
        if p.predict:
            self.predict = self._make_predict()
            if compiled and not p.module:
                self.predict = pr.compile(self.predict, options=options)

    def _loss(self, out, y):
        p = self.plan
        if p.loss == "mse":
            return F.mse_loss(out, y)
        if p.loss == "l1":
            return F.l1_loss(out, y)
        if p.loss == "ce":
            if p.ce_weight:
                w = pr.linspace(0.5, 1.5, p.classes)
                return F.cross_entropy(out, y, weight=w)
            return F.cross_entropy(out, y)
        if p.loss == "ce_ignore":
            return F.cross_entropy(out, y, ignore_index=-100)
        return F.cross_entropy(out, y, label_smoothing=0.1)

    def _make_predict(self):
        model, fwd = self.model, self.fwd

        def predict(x):
            with pr.no_grad():
                out = (fwd or model)(x)
                return out.softmax(-1), out.argmax(-1)

        return predict

    def _make_step(self):
        p, model, opt, fwd, sched = self.plan, self.model, self.opt, self.fwd, self.sched
        params = list(model.parameters())

        def body(model, x, y, s, k):
            out = (fwd or model)(x)
            if s is not None:  # (a Python float inside the maps: fusion may bake it)
                out = out * s + (1.0 - s)
            if k is not None:  # (a Python int choosing the rows: a new shape per value)
                out, y = out[:k], y[:k]
            if p.write_y and y.dtype == pr.float32:  # (an argument written: copied back)
                y.mul_(0.5).add_(0.25)
            loss = self._loss(out, y)
            if p.read and loss.item() > 1.0:  # (a branch on a value read back: a rerun)
                opt.param_groups[0]["lr"] *= 0.99
                loss = loss * 0.5
            if p.accum > 1:
                loss = loss / p.accum
            loss.backward()
            norm = None
            if p.clip:
                norm = nn.utils.clip_grad_norm_(params, 0.5)
            if p.clip_value:
                nn.utils.clip_grad_value_(params, 0.05)
            return loss, out, norm

        def finish(loss, out, norm):
            if p.ret == "tuple":
                return loss, out.detach()
            if p.ret == "dict":
                return {"loss": loss, "out": out.detach().sum(-1)}
            if p.ret == "norm" and norm is not None:
                return loss, norm
            if p.ret == "grad":  # (a tensor the recording keeps: `.grad` itself, or None)
                return loss, model.head.bias.grad
            if p.ret == "param":  # (a tensor from outside the recording)
                return [loss, model.head.weight]
            return loss

        if p.accum > 1:

            def step(x, y, s=None, k=None):
                return finish(*body(model, x, y, s, k))

        elif p.zero_last:

            def step(x, y, s=None, k=None):
                res = body(model, x, y, s, k)
                opt.step()
                opt.zero_grad()
                if p.sched_inside and sched is not None:
                    sched.step()
                return finish(*res)

        else:

            def step(x, y, s=None, k=None):
                opt.zero_grad()
                res = body(model, x, y, s, k)
                opt.step()
                if p.sched_inside and sched is not None:
                    sched.step()
                return finish(*res)

        return step


# ---- inputs and events -------------------------------------------------------------------------
def make_inputs(plan: Plan, rng, batch, dtype):
    fam = plan.family
    if fam == "seq":
        x = pr.tensor(rng.integers(0, 11, (batch, 4)), dtype=pr.int64)
        n = batch * 4
    elif fam == "mlp":
        x = pr.tensor(rng.standard_normal((batch, 5)).astype(np.float32)).to(dtype)
        n = batch
    elif fam == "conv1d":
        x = pr.tensor(rng.standard_normal((batch, 3, 5)).astype(np.float32)).to(dtype)
        n = batch
    else:
        x = pr.tensor(rng.standard_normal((batch, 2, 3, 3)).astype(np.float32)).to(dtype)
        n = batch
    return x, make_targets(plan, rng, n)


def make_targets(plan: Plan, rng, n):
    """The loss's targets for n predictions: floats for mse/l1, else class indices (ce_ignore:
    some -100)."""
    c = plan.classes
    if plan.loss in ("mse", "l1"):
        return pr.tensor(rng.standard_normal((n, c)).astype(np.float32))
    t = rng.integers(0, c, n)
    if plan.loss == "ce_ignore":
        t[rng.random(n) < 0.3] = -100
        t[0] = 0  # (never every target ignored: eager's loss would be nan)
    return pr.tensor(t, dtype=pr.int64)


def apply_event(ev, side: Side, choice, state):
    """Apply one event to one side (`choice`: drawn once, the same for both sides)."""
    m, opt = side.model, side.opt
    named = list(m.named_parameters())
    name, param = named[choice % len(named)]
    if ev == "mode":
        if state["training"]:
            m.eval()
        else:
            m.train()
    elif ev == "requires_grad":
        param.requires_grad_(not param.requires_grad)
    elif ev == "hyper":
        g = opt.param_groups[0]
        k = choice % 4
        if k == 0:
            g["lr"] = g["lr"] * 0.5
        elif k == 1:
            g["weight_decay"] = 0.0 if g.get("weight_decay") else 0.05
        elif k == 2 and "momentum" in g:
            g["momentum"] = 0.5 if g["momentum"] else g["momentum"]
        elif k == 3 and "betas" in g:
            g["betas"] = (0.85, g["betas"][1])
    elif ev == "scale_params":
        with pr.no_grad():
            param.mul_(0.9)
    elif ev == "grad_none":
        param.grad = None
    elif ev == "zero_grad":
        opt.zero_grad()
    elif ev == "rebind":  # a new tensor in the parameter's place (`.data =`)
        param.data = param.data * 0.95
    elif ev == "opt_reload":  # the optimizer's state dict loaded back: new state tensors
        opt.load_state_dict(opt.state_dict())
    elif ev == "opt_state":  # optimizer state written in place outside
        with pr.no_grad():
            for st in opt.state.values():
                for v in st.values():
                    if isinstance(v, pr.Tensor) and v.dtype.kind == "f" and v.ndim:
                        v.mul_(0.5)
    elif ev == "load_state":  # a state dict loaded (copied into the parameters)
        sd = {k: v.clone() * 0.97 for k, v in m.state_dict().items() if v.dtype.kind == "f"}
        m.load_state_dict(sd, strict=False)


def run_side(plan: Plan, compiled: bool):
    """Run the K calls on one side; returns (side, [snapshot after each call])."""
    side = Side(plan, compiled)
    rng = np.random.default_rng(plan.seed + 7)
    batch, dtype, scalar, rows = 4, pr.float32, 1.0, 3
    state = {"training": not plan.eval_only}
    snaps = []
    for i in range(plan.calls):
        for ev in plan.events[i]:
            choice = int(rng.integers(0, 1 << 30))
            if ev == "shape":
                batch = 4 if batch != 4 else (3 if plan.family != "seq" else 2)
            elif ev == "dtype" and plan.family != "seq":
                dtype = pr.float16 if dtype == pr.float32 else pr.float32
            elif ev == "scalar":
                scalar = round(scalar * 0.75 + 0.1, 3)
            elif ev == "rows":
                rows = 1 + choice % 3
            elif ev == "mode":
                apply_event(ev, side, choice, state)
                state["training"] = not state["training"]
            else:
                apply_event(ev, side, choice, state)
        x, y = make_inputs(plan, rng, batch, dtype)
        args, kw = (x, y, scalar if plan.scalar else None), {}
        if plan.rows:
            args += (rows,)
        if plan.kwargs:
            kw = dict(zip(("s", "k"), args[2:]))
            args = args[:2]
        snap = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = side.step(*args, **kw)
            if plan.accum > 1 and (i + 1) % plan.accum == 0:
                side.opt.step()
                side.opt.zero_grad()
            if side.sched is not None and not (plan.sched_inside and plan.accum == 1):
                side.sched.step()
            if side.predict is not None:
                for k, v in _flat(side.predict(x), "predict"):
                    snap[k] = _np(v)
        snap.update(snapshot(side, out))
        snap["argument y"] = _np(y)
        snaps.append(snap)
    return side, snaps


def _flat(out, prefix="out"):
    if isinstance(out, pr.Tensor):
        return [(prefix, out)]
    if isinstance(out, (list, tuple)):
        return [kv for j, o in enumerate(out) for kv in _flat(o, f"{prefix}[{j}]")]
    if isinstance(out, dict):
        return [kv for k, o in out.items() for kv in _flat(o, f"{prefix}[{k!r}]")]
    return [(prefix, out)]


def _np(t):
    return None if t is None else t.detach().float().numpy().astype(np.float64)


def snapshot(side: Side, out):
    """Every value to compare, by name, as float64 numpy arrays (or plain values)."""
    snap = {}
    for k, v in _flat(out):
        snap[k] = _np(v) if isinstance(v, pr.Tensor) else v
    for name, p in side.model.named_parameters():
        snap[f"param {name}"] = _np(p)
        snap[f"grad {name}"] = _np(p.grad)
        snap[f"requires_grad {name}"] = p.requires_grad
    for name, b in side.model.named_buffers():
        snap[f"buffer {name}"] = _np(b)
    names = {id(p): n for n, p in side.model.named_parameters()}
    for p, st in side.opt.state.items():
        for k, v in st.items():
            key = f"opt {names.get(id(p), '?')}.{k}"
            snap[key] = _np(v) if isinstance(v, pr.Tensor) else v
    snap["lr"] = side.opt.param_groups[0]["lr"]
    return snap


def compare(plan: Plan, want: dict, got: dict, call: int):
    """The first disagreement, as text, or None."""
    tol = (2.0**-21 if not plan.fusion else 2.0**-18) * (call + 1)
    for k in sorted(set(want) | set(got)):
        if k not in want or k not in got:
            return f"call {call}: {k} only on the {'eager' if k in want else 'compiled'} side"
        a, b = want[k], got[k]
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            if a is None or b is None:
                return f"call {call}: {k}: eager {_desc(a)}, compiled {_desc(b)}"
            if a.shape != b.shape:
                return f"call {call}: {k}: shapes {a.shape} vs {b.shape}"
            if not a.size:
                continue
            scale = np.abs(a) + np.abs(a).max()
            bad = ~(np.abs(a - b) <= tol * scale) & ~(np.isnan(a) & np.isnan(b))
            if bad.any():
                j = int(np.argmax(bad.ravel()))
                return (
                    f"call {call}: {k}: {int(bad.sum())}/{a.size} differ; first eager "
                    f"{a.ravel()[j]!r} compiled {b.ravel()[j]!r}; max |d| "
                    f"{float(np.nanmax(np.abs(a - b))):.3g}"
                )
        elif isinstance(a, float) and isinstance(b, float):
            if not (math.isclose(a, b, rel_tol=1e-12) or (math.isnan(a) and math.isnan(b))):
                return f"call {call}: {k}: eager {a!r} compiled {b!r}"
        elif a != b:
            return f"call {call}: {k}: eager {a!r} compiled {b!r}"
    return None


def _desc(a):
    return "None" if a is None else f"array {a.shape}"


def _msg(e):
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]


def check(plan: Plan):
    """(status, detail): ok, skip (eager raised) or fail."""
    try:
        _, want = run_side(plan, False)
    except Exception as e:  # noqa: BLE001
        return "skip", f"eager raised {_msg(e)}"
    try:
        side, got = run_side(plan, True)
    except Exception as e:  # noqa: BLE001
        tb = traceback.format_exc().splitlines()[-6:]
        return "fail", f"compiled raised where eager did not: {_msg(e)}\n" + "\n".join(tb)
    for i, (a, b) in enumerate(zip(want, got)):
        bad = compare(plan, a, b, i)
        if bad:
            return "fail", f"{bad} ({_counts(side)})"
    return "ok", _counts(side)


def _counts(side) -> str:
    """How the compiled function's calls went: traces, replays, reruns, eager calls."""
    if side.fwd is not None:
        st = side.fwd.stats()["training"]
        keys = ("traces", "replays", "eager_calls")
        return "module: " + ", ".join(f"{k} {st.get(k)}" for k in keys)
    f = side.step
    vs = [v for vs in f._variants.values() for v in vs]
    replays = sum(v.replays for v in vs)
    reruns = sum(v.reruns for v in vs)
    return f"traces {f.traces}, replays {replays}, reruns {reruns}, eager {f.eager_calls}"


def _calls_option(ap):
    ap.add_argument("--calls", default="5:9", help="calls per seed, lo:hi (hi excluded)")


def _configure(args):
    global CALLS
    CALLS = tuple(int(c) for c in args.calls.split(":"))


def main(argv=None):
    return fuzz_driver.run(
        __doc__,
        Plan,
        check,
        lambda plan: plan.text(),
        argv,
        add_options=_calls_option,
        configure=_configure,
    )


if __name__ == "__main__":
    sys.exit(main())
