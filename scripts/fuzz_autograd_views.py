"""Randomized differential fuzz of pyrite's autograd through views and in-place writes, against
torch 2.13 CPU (session 45): values, first-order gradients and second-order gradients of small
random programs, and whether each side raises.

A program is Python text over `T` (the library module) and `C` (its constants), built per seed:
leaves of awkward shapes ((3, 5), (4, 1, 6), (7,), ...) that require grad or not, and plain
buffers; out-of-place ops (mul, add, div, sin, exp, tanh, pow, matmul, sum over dims, softmax,
where, cat, stack); views (slices with steps, select, transpose, permute, reshape/view,
unsqueeze, expand, diagonal, narrow, unbind, split, as_strided inside the tensor, t(), unfold,
movedim) and views of views; in-place ops on views and on bases (add_, sub_, mul_, div_,
copy_, fill_, zero_, clamp_, exp_, tanh_, masked_fill_, index_fill_, setitem with slices), so
that views are read after their base or a sibling was written; retain_grad and hooks. While
it is built, each statement runs on a torch float64 shadow, which keeps the values moderate
(exp only of small values, tanh / sigmoid / softmax of values whose derivative float32 can
still resolve, divisors of at least 1, clamp bounds away from every value, masks fixed) and
the statements mostly valid.

Then the program runs, statement by statement, on torch float64 (the reference), torch
float32 (how far float32 rounding alone moves this program) and pyrite float32. The end of
each program is either
    out = Σ (v·W).sum()                         (a few live tensors, some through sin or v²)
    G = autograd.grad(out, inputs, create_graph=True, allow_unused=True)
    s = Σ f(G[i]) (f: g², sin g, tanh g, g·input, times constants);  G2 = autograd.grad(s, leaves)
or the same through out.backward(create_graph=True) / s.backward() and the leaves' .grad, with
the retained gradients of intermediates after the first. (`inputs` may hold an intermediate;
G2 is taken with respect to the leaves only, and retained gradients are not compared after
the double backward: both depend on which tensor each backward rule reads, its input or its
output.) Compared: every variable's value after the forward and which variables share
storage, out, G, G2 and the retained gradients (a None gradient reads as zeros), with
    |pyrite - ref| <= K·u·(|ref| + max|ref| + 0.01·S) + 4·|torch32 - ref|,   u = 2^-24,
K = 32·(statements + 8), S the largest magnitude among the arrays of that kind (at least 1):
float32 rounding relative to the float64 reference's magnitude, widened by what torch's own
float32 run shows of the program's conditioning. And the raising: a statement or phase where
torch raises and pyrite does not, or the other way round, is a finding.

Classified as intentional (pyrite's documented choices, README "Differences from PyTorch"),
counted but not failures:
- ViewWriteError: pyrite refuses an in-place write into a view of a base that is not
  contiguous and requires grad (its CopySlices cuts the view's window out of a contiguous
  gradient); torch records it.
- writes into split / unbind outputs: torch refuses ("a function that returns multiple
  views"); pyrite allows them. The program is re-run on torch with select / narrow views in
  their place, and pyrite must agree with that.
- in-place ops keep a copy of the old value their backward reads, and read an operand that
  shares memory with the tensor written as its old value (`x.mul_(x)`); torch saves the
  tensor itself and refuses the backward once it is written again. The program is re-run on
  torch with each `x.f_(y)` as `x.copy_(x.clone().f(y.clone()))`, and pyrite must agree.
- layout: pyrite's elementwise results are always row-major where torch's follow the
  operand's memory order, so a later `.view()` may be refused by one side only, and a
  `reshape` / `flatten` / `contiguous()` may copy in one and view in the other (seen as
  variables sharing storage differently).
- a write into a view that overlaps itself (unfold with step < size, as_strided, expand):
  pyrite applies a computed write once per element, torch once per alias (not generated:
  such targets get fills only, and now and then a computed write into a stride-0 view, which
  both refuse); masked_fill_ into an expanded view is refused by pyrite.
- torch refuses ("a leaf Variable that requires grad ...") a write into a view taken before
  its base was given a history by an in-place op; pyrite writes it.
- not generated: hooks together with in-place unary ops (tanh_, sin_, exp_, clamp_): pyrite
  runs those as copy_ of the out-of-place op (ops/operators.py), so in a double backward a
  hook on the written tensor does not see the gradient through the op's saved output, which
  torch's does; hooks and retain_grad on views (torch 2.13 segfaulted in register_hook on an
  unfold / as_strided view whose base was written); integer tensors (pyrite's int64 is int32,
  and they take no gradient); negative slice steps (torch refuses them).
Counted as known: none now (softmax / log_softmax's double backward recomputed the output
from the input, refused once that input was written in place: fixed, ops/rowops.py _out_of).

    .venv/bin/python scripts/fuzz_autograd_views.py --seeds 0:200 [--show 17] [--verbose]
"""

from __future__ import annotations

import math
import re
import sys
import warnings

import numpy as np
import torch

import pyrite as pr

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import fuzz_driver  # noqa: E402

SHAPES = ((3, 5), (4, 1, 6), (7,), (2, 3, 4), (5, 5), (1, 4), (6, 2), (3, 1), (2, 1, 3, 2), (4, 4))
MAX_NUMEL = 120  # (results larger than this are dropped: programs stay small and quick)
BIG = 30.0  # largest |value| a statement may make (exp of 3.4): float32 keeps 2^-24 of it
U = 2.0**-24  # float32's unit roundoff


# ---- the program -------------------------------------------------------------------------------
class Program:
    def __init__(self, seed):
        self.seed = seed
        self.lines: list[str] = []  # the forward, one statement each
        self.consts: dict[str, np.ndarray] = {}
        self.vars: list[str] = []  # every tensor variable the forward defines
        self.phases: list[tuple[str, list[str]]] = []  # ("loss" | "grad1" | "grad2", lines)
        self.mode = "grad"
        self.retained: list[str] = []
        self.inputs: list[str] = []  # what G and G2 are taken with respect to

    def text(self) -> str:
        out = [f"# seed {self.seed}: {self.mode} mode"]
        for k, a in self.consts.items():
            out.append(f"# C[{k!r}]: {a.dtype} {a.shape}")
        out += self.lines
        for name, lines in self.phases:
            out.append(f"# -- {name}")
            out += lines
        return "\n".join(out)


def _fmt(c: float) -> str:
    return repr(round(float(c), 3))


def _f(t) -> float:
    return float(t.detach().abs().max()) if t.numel() else 0.0


class Gen(fuzz_driver.Draws):
    """Builds a Program, running each statement on a torch float64 shadow as it goes."""

    def __init__(self, seed):
        super().__init__(seed)
        self.p = Program(seed)
        self.env = {"T": torch, "C": {}, "DT": torch.float64}
        self.n = 0
        self.stop = False  # a kept statement that raised: the program ends there

    # -- helpers
    def const(self, prefix, a):
        name = f"{prefix}{len(self.p.consts)}"
        self.p.consts[name] = a
        self.env["C"][name] = _to_lib(torch, torch.float64, a)
        return f'C["{name}"]'

    def fconst(self, shape, lo=-1.5, hi=1.5, prefix="w"):
        return self.const(prefix, self.rng.uniform(lo, hi, shape))

    def new(self, prefix="x"):
        name = f"{prefix}{self.n}"
        self.n += 1
        return name

    def t(self, name):
        return self.env[name]

    def live(self, pred=None):
        out = []
        for v in self.p.vars:
            t = self.env.get(v)
            try:  # (torch refuses to read grad_fn of a multi-output view written since)
                if isinstance(t, torch.Tensor) and t.numel() and (pred is None or pred(v, t)):
                    out.append(v)
            except RuntimeError:
                continue
        return out

    def pick(self, names):
        """Recent variables more often (the program's tail is where views meet writes)."""
        if not names:
            return None
        w = np.arange(1, len(names) + 1, dtype=np.float64) ** 1.5
        return names[int(self.rng.choice(len(names), p=w / w.sum()))]

    def run(self, line, new=(), keep_error=0.0, big=BIG):
        """Run `line` on the shadow; keep it if it ran and made nothing over `big` (or, with
        probability `keep_error`, if it raised: the program then ends there)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                exec(line, self.env)
            except Exception:
                for v in new:
                    self.env.pop(v, None)
                if self.chance(keep_error):
                    self.p.lines.append(line)
                    self.stop = True
                return False
        for v in new:
            t = self.env[v]
            if t.numel() > MAX_NUMEL or t.numel() == 0 or not math.isfinite(_f(t)) or _f(t) > big:
                for w in new:
                    self.env.pop(w, None)
                return False
        self.p.lines.append(line)
        self.p.vars += list(new)
        return True

    # -- shapes
    def shape(self):
        return SHAPES[self.r(len(SHAPES))]

    def partner(self, shape, exact=False, pred=None):
        """A live variable whose shape broadcasts with `shape` (to `shape` itself: exact)."""
        got = []
        for v in self.live(pred):
            s = tuple(self.t(v).shape)
            try:
                b = tuple(torch.broadcast_shapes(s, shape))
            except RuntimeError:
                continue
            if b == tuple(shape) or (not exact and math.prod(b) <= MAX_NUMEL):
                got.append(v)
        return self.pick(got)

    def slices(self, shape, ints=True):
        parts, used_int = [], 0
        for n in shape:
            k = self.rng.random()
            if k < 0.4 or n == 1 and k < 0.8:
                parts.append(":")
            elif k < 0.55 and ints and used_int < 2:
                parts.append(str(self.r(n) - (n if self.chance(0.3) else 0)))
                used_int += 1
            else:
                a = self.r(n)
                step = int(self.rng.choice([1, 2, 2, 3]))
                b = a + 1 + self.r(n - a)
                stop = "" if b == n and self.chance(0.5) else str(b)
                parts.append(f"{a}:{stop}" + (f":{step}" if step > 1 else ""))
        while len(parts) > 1 and parts[-1] == ":" and self.chance(0.6):
            parts.pop()
        return ", ".join(parts)

    def factor(self, n):
        """A random shape of n elements, 1 to 3 dims."""
        fs = self.prime_factors(n)
        k = 1 + self.r(3)
        dims = [1] * k
        for q in fs:
            dims[self.r(k)] *= q
        return tuple(dims)

    # -- statements
    def leaf(self, grad=None):
        name = self.new("a")
        shape = self.shape()
        c = self.fconst(shape, prefix="a")
        grad = self.chance(0.7) if grad is None else grad
        line = f"{name} = {c}.requires_grad_()" if grad else f"{name} = {c}"
        self.run(line, (name,))

    def buffer(self):
        name = self.new("b")
        shape = self.shape()
        if self.chance(0.5):
            self.run(f"{name} = T.zeros({shape}, dtype=DT)", (name,))
        else:
            self.run(f"{name} = {self.fconst(shape, prefix='b')}.clone()", (name,))

    def divisor(self, y):
        """A divisor of at least 1 made from y (tanh' of a large y would be all rounding)."""
        if y.startswith("C[") or _f(self.t(y)) < 3:
            return f"({y}.tanh() * 0.5 + 1.5)"
        return f"({y} * {y} * 0.01 + 1.0)"

    def unary(self):
        x = self.pick(self.live())
        m = _f(self.t(x))
        ops = ["{x}.sin()", "{x} * {c}", "{x} + {c}", "-{x}"]
        if m < 3:  # (tanh' = 1 - tanh² of a large x is all rounding in float32)
            ops += ["{x}.tanh()", "{x}.sigmoid()"]
        if m < 2.5:
            ops += ["{x}.exp()", "T.exp({x} * 0.5)"]
        if m < 2.5:
            ops += ["{x}.pow(2)", "{x}.pow(3)", "{x} * {x}"]
        ops += ["({x} * {x} + 0.5).pow(0.5)", "{x}.clone()", "{x}.contiguous()"]
        e = ops[self.r(len(ops))].format(x=x, c=_fmt(self.rng.uniform(-1.8, 1.8)))
        name = self.new()
        self.run(f"{name} = {e}", (name,))

    def binary(self):
        x = self.pick(self.live())
        s = tuple(self.t(x).shape)
        y = self.partner(s) if self.chance(0.8) else None
        if y is None:
            lead = self.chance(0.3)
            ys = tuple(1 if self.chance(0.3) else n for n in s)
            if lead:
                ys = (2,) + ys
            y = self.fconst(ys)
        op = ["+", "-", "*", "*", "/"][self.r(5)]
        if op == "/":
            num, den = (x, y) if self.chance(0.7) else (y, x)
            e = f"{num} / {self.divisor(den)}"
        else:
            e = f"{x} {op} {y}"
        if self.chance(0.2):
            fn = {"+": "T.add", "-": "T.sub", "*": "T.mul"}.get(op)
            if fn:
                e = f"{fn}({x}, {y})"
        name = self.new()
        self.run(f"{name} = {e}", (name,))

    def structural(self):
        x = self.pick(self.live())
        t = self.t(x)
        s, nd = tuple(t.shape), t.dim()
        k = self.r(7)
        name = self.new()
        if k == 0 and nd >= 1:  # matmul
            kk = s[-1]
            if nd >= 2 and self.chance(0.4):
                e = f"{x} @ {x}.mT" if self.chance(0.5) else f"{x}.mT @ {x}"
            else:
                want = lambda v, u: u.dim() in (1, 2) and u.shape[0] == kk  # noqa: E731
                y = self.pick(self.live(want)) if self.chance(0.6) else None
                if y is None:
                    y = self.fconst((kk, 1 + self.r(4)), -1.0, 1.0)
                e = f"{x} @ {y}" if self.chance(0.8) else f"T.matmul({x}, {y})"
        elif k == 1 and nd >= 1:  # sum / mean
            d = self.r(nd)
            kd = self.chance(0.4)
            f = "sum" if self.chance(0.75) else "mean"
            if nd >= 2 and self.chance(0.3):
                d2 = (d + 1 + self.r(nd - 1)) % nd
                e = f"{x}.{f}(({d}, {d2 - nd}), keepdim={kd})"
            else:
                e = f"{x}.{f}({d - (nd if self.chance(0.3) else 0)}, keepdim={kd})"
        elif k == 2 and nd >= 1:
            if _f(t) > 5:  # (p·(1 - p) of a saturated softmax is all rounding)
                return
            e = f"{x}.softmax({self.r(nd)})"
        elif k == 3:
            mask = self.const("m", self.rng.random(s) < 0.5)
            y = self.partner(s)
            other = y if y is not None and self.chance(0.6) else _fmt(self.rng.uniform(-1, 1))
            e = (
                f"T.where({mask}, {x}, {other})"
                if self.chance(0.5)
                else f"T.where({mask}, {other}, {x})"
            )
        elif k in (4, 5) and nd >= 1:  # cat / stack
            d = self.r(nd + (1 if k == 5 else 0))
            if k == 4:
                same = lambda v, u: (
                    u.dim() == nd
                    and all(  # noqa: E731
                        a == b for i, (a, b) in enumerate(zip(u.shape, s)) if i != d
                    )
                )
            else:
                same = lambda v, u: tuple(u.shape) == s  # noqa: E731
            y = self.pick(self.live(same))
            if y is None or y == x and self.chance(0.5):
                y = f"{x}.sin()"
            f = "T.cat" if k == 4 else "T.stack"
            e = f"{f}([{x}, {y}], {d})" if self.chance(0.7) else f"{f}(({y}, {x}), dim={d})"
        else:
            e = f"T.sum({x} * {x}, dim=-1)" if nd else f"{x} * 2.0"
        self.run(f"{name} = {e}", (name,))

    def view(self):
        x = self.pick(self.live())
        t = self.t(x)
        s, nd = tuple(t.shape), t.dim()
        name = self.new()
        k = self.r(16)
        new = (name,)
        if k == 0 and nd:
            e = f"{x}[{self.slices(s)}]"
        elif k == 1 and nd:
            d = self.r(nd)
            e = f"{x}.select({d}, {self.r(s[d])})"
        elif k == 2 and nd >= 2:
            a, b = self.rng.choice(nd, 2, replace=False)
            e = f"{x}.transpose({a}, {b - (nd if self.chance(0.3) else 0)})"
        elif k == 3 and nd >= 2:
            e = f"{x}.permute({', '.join(map(str, self.rng.permutation(nd)))})"
        elif k == 4:
            shape = self.factor(t.numel())
            if self.chance(0.3):
                shape = tuple(-1 if i == self.r(len(shape)) else n for i, n in enumerate(shape))
            f = "view" if self.chance(0.5) else "reshape"
            e = f"{x}.{f}({', '.join(map(str, shape))})"
        elif k == 5:
            e = f"{x}.unsqueeze({self.r(nd + 1)})"
        elif k == 6:
            sizes = [n if n != 1 or self.chance(0.3) else 2 + self.r(3) for n in s]
            if self.chance(0.4) or sizes == list(s):
                sizes = [2] + sizes
            e = f"{x}.expand({', '.join(map(str, sizes))})"
        elif k == 7 and nd >= 2:
            a, b = self.rng.choice(nd, 2, replace=False)
            off = int(self.rng.integers(-(s[a] - 1), s[b]))
            e = f"{x}.diagonal({off}, {a}, {b})"
        elif k == 8 and nd:
            d = self.r(nd)
            st = self.r(s[d])
            e = f"{x}.narrow({d}, {st}, {1 + self.r(s[d] - st)})"
        elif k == 9 and nd and 1 < s[self.r(nd)] <= 4:
            d = next(i for i in range(nd) if 1 < s[i] <= 4)
            new = tuple(self.new() for _ in range(s[d]))
            e = f"{x}.unbind({d})"
            name = ", ".join(new)
        elif k == 10 and nd:
            d = self.r(nd)
            size = 1 + self.r(s[d])
            parts = -(-s[d] // size)
            if parts > 4:
                return
            new = tuple(self.new() for _ in range(parts))
            e = f"{x}.split({size}, {d})"
            name = ", ".join(new) + ("," if parts == 1 else "")
        elif k == 11 and t.is_contiguous():
            n = t.numel()
            dims = [1 + self.r(4) for _ in range(1 + self.r(2))]
            strides = [self.r(4) for _ in dims]
            reach = sum((a - 1) * b for a, b in zip(dims, strides))
            if reach >= n:
                return
            off = self.r(n - reach)
            e = f"{x}.as_strided({tuple(dims)}, {tuple(strides)}, {x}.storage_offset() + {off})"
        elif k == 12 and nd <= 2:
            e = f"{x}.t()"
        elif k == 13 and nd:
            d = self.r(nd)
            size = 1 + self.r(s[d])
            e = f"{x}.unfold({d}, {size}, {1 + self.r(3)})"
        elif k == 14 and nd >= 2:
            a, b = self.rng.choice(nd, 2, replace=False)
            e = f"{x}.movedim({a}, {b})"
        elif k == 15 and nd:
            e = f"{x}.flatten()" if self.chance(0.5) else f"{x}.squeeze()"
        else:
            return
        self.run(f"{name} = {e}", new, keep_error=0.05)

    def inplace(self):
        views = self.live(lambda v, u: u._base is not None)
        cands = views if views and self.chance(0.65) else self.live()
        # leaves that require grad (and their views) refuse in-place writes: rarely, to check
        # pyrite refuses them too
        if not self.chance(0.05):
            cands = [v for v in cands if v in self.live(lambda v, u: not _leafy(u))]
        x = self.pick(cands)
        if x is None:
            return
        t = self.t(x)
        s, m = tuple(t.shape), _f(t)
        # a view that overlaps itself (expand, unfold, as_strided): torch refuses computed
        # writes into a stride-0 one, and applies them once per alias into others, where
        # pyrite applies them once per element (README); fills only, and the refusal now
        # and then
        overlap = torch._debug_has_internal_overlap(t)
        if overlap and not (overlap == 1 and self.chance(0.1)):
            e = (
                f"{x}.fill_({_fmt(self.rng.uniform(-1.5, 1.5))})"
                if self.chance(0.7)
                else f"{x}.zero_()"
            )
            self.run(e, keep_error=0.3)
            return
        y = self.partner(s, exact=True)
        ym = _f(self.t(y)) if y is not None else 0.0
        c = _fmt(self.rng.uniform(-1.5, 1.5))
        k = self.r(15)
        if k == 0 and y is not None and m + ym < BIG:
            e = f"{x}.add_({y})" if self.chance(0.7) else f"{x}.add_({y}, alpha={c})"
        elif k == 1 and y is not None and m + ym < BIG:
            e = f"{x}.sub_({y})"
        elif k == 2 and y is not None and m * ym < BIG:
            e = f"{x}.mul_({y})"
        elif k == 3:
            e = f"{x}.mul_({c})" if self.chance(0.5) else f"{x}.add_({c})"
        elif k == 4:
            if y is not None and self.chance(0.6):
                e = f"{x}.div_({self.divisor(y)})"
            else:
                e = f"{x}.div_({_fmt(self.rng.choice([-1, 1]) * self.rng.uniform(0.6, 1.9))})"
        elif k == 5 and y is not None:
            e = f"{x}.copy_({y})"
        elif k == 6:
            e = f"{x}.fill_({c})" if self.chance(0.7) else f"{x}.zero_()"
        elif k in (7, 8, 9) and any("register_hook" in line for line in self.p.lines):
            return  # (see _UNARY_INPLACE)
        elif k == 7:
            bounds = _clamp_bounds(self.rng, t.detach().numpy().ravel())
            if bounds is None:
                return
            e = f"{x}.clamp_({_fmt(bounds[0])}, {_fmt(bounds[1])})"
        elif k == 8 and m < 2.5:
            e = f"{x}.exp_()"
        elif k == 9:
            e = f"{x}.tanh_()" if self.chance(0.5) else f"{x}.sin_()"
        elif k == 10:
            mask = self.const("m", self.rng.random(s) < 0.4)
            e = f"{x}.masked_fill_({mask}, {c})"
        elif k == 11 and t.dim():
            d = self.r(t.dim())
            idx = self.const("i", np.unique(self.rng.integers(0, s[d], 1 + self.r(2))))
            e = f"{x}.index_fill_({d}, {idx}, {c})"
        elif k in (12, 13, 14) and t.dim():
            sl = self.slices(s, ints=self.chance(0.5))
            region = eval(f"_t[{sl}]", {"_t": t})
            rs = tuple(region.shape)
            v = self.partner(rs, exact=True) if self.chance(0.7) else None
            if torch._debug_has_internal_overlap(region):
                v = c
            if v is None:
                v = c if self.chance(0.5) else f"{self.fconst(rs)}"
            elif self.chance(0.3):
                v = f"{v}.sin()"
            e = f"{x}[{sl}] = {v}"
            self.run(e, keep_error=0.3)
            return
        else:
            return
        self.run(e, keep_error=0.3)

    def hook(self):
        # (torch 2.13 segfaults in register_hook on some views whose base was written since,
        # an unfold or an as_strided view: hooks go on non-views only)
        cands = self.live(
            lambda v, u: u.requires_grad and u.grad_fn is not None and u._base is None
        )
        if any(_UNARY_INPLACE.search(line) for line in self.p.lines):
            return  # (see _UNARY_INPLACE)
        x = self.pick(cands)
        if x is None:
            return
        if self.chance(0.5):
            if self.run(f"{x}.retain_grad()") and x not in self.p.retained:
                self.p.retained.append(x)
        else:
            self.run(f"{x}.register_hook(lambda g: g * {_fmt(self.rng.uniform(0.5, 1.5))})")

    # -- the whole program
    def build(self):
        self.leaf(grad=True)
        for _ in range(1 + self.r(2)):
            self.leaf()
        if self.chance(0.3):
            self.buffer()
        steps = 6 + self.r(14)
        table = (
            (self.unary, 3),
            (self.binary, 4),
            (self.structural, 3),
            (self.view, 7),
            (self.inplace, 7),
            (self.hook, 1),
            (self.leaf, 0.3),
            (self.buffer, 0.3),
        )
        fns = [f for f, _ in table]
        w = np.array([w for _, w in table])
        for _ in range(steps * 2):
            if self.stop or len(self.p.lines) >= steps + 3:
                break
            try:
                fns[int(self.rng.choice(len(fns), p=w / w.sum()))]()
            except RuntimeError:  # (the shadow refusing to read a tensor: no statement)
                pass
        if not self.stop:
            self.finish()
        return self.p

    def finish(self):
        p = self.p
        grads = self.live(lambda v, u: u.requires_grad)
        if not grads:
            return
        chosen = list(dict.fromkeys(self.pick(grads) for _ in range(1 + self.r(4))))
        terms = []
        for v in chosen:
            w = self.fconst(tuple(self.t(v).shape), -1.0, 1.0)
            f = self.r(4) if _f(self.t(v)) < 3 else self.r(3)
            terms.append(
                (
                    f"({v} * {w}).sum()",
                    f"({v}.sin() * {w}).sum()",
                    f"({v} * {v} * {w}).sum()",
                    f"({v}.tanh() * {w}).sum()",
                )[f]  # fmt: skip
            )
        leaves = [v for v in p.vars if v.startswith("a") and self.t(v).requires_grad]
        p.mode = "backward" if self.chance(0.35) else "grad"
        inputs = list(leaves)
        if p.mode == "grad" and self.chance(0.25):
            mids = self.live(lambda v, u: u.grad_fn is not None and not v.startswith("a"))
            if mids:
                inputs.append(self.pick(mids))
        p.inputs = inputs
        loss = ["out = " + " + ".join(terms)]
        ins = "[" + ", ".join(inputs) + "]"
        if p.mode == "grad":
            g1 = [f"G = T.autograd.grad(out, {ins}, create_graph=True, allow_unused=True)"]
        else:
            g1 = [
                "out.backward(create_graph=True)",
                f"G = [{', '.join(v + '.grad' for v in inputs)}]",
            ]
            if p.retained:
                g1.append(f"R1 = [{', '.join(v + '.grad' for v in p.retained)}]")
            g1 += [f"{v}.grad = None" for v in inputs]
        # which of G torch gives as None (those take no term in s)
        env = self.env
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                for line in loss + g1:
                    exec(line, env)
            except Exception:
                p.phases = [("loss", loss), ("grad1", g1)]
                return
        terms2 = []
        for i, (v, g) in enumerate(zip(inputs, env["G"])):
            if g is None:
                continue
            c = self.fconst(tuple(g.shape), -1.0, 1.0, prefix="s")
            f = self.r(4)
            terms2.append(
                (
                    f"(G[{i}] * G[{i}] * {c}).sum()",
                    f"(G[{i}].sin() * {c}).sum()",
                    f"(G[{i}].tanh() * {c}).sum()",
                    f"(G[{i}] * {v} * {c}).sum()",
                )[f]  # fmt: skip
            )
        if not terms2:
            p.phases = [("loss", loss), ("grad1", g1)]
            return
        g2 = ["s = " + " + ".join(terms2)]
        if p.mode == "grad":
            # (leaves only: a second derivative with respect to an intermediate depends on
            # which of its forward's tensors each backward rule reads, its input or its output)
            lv = "[" + ", ".join(leaves) + "]"
            g2.append(
                f"G2 = T.autograd.grad(s, {lv}, allow_unused=True) if s.requires_grad else None"
            )
        else:
            g2 += [
                "s.backward() if s.requires_grad else None",
                f"G2 = [{', '.join(v + '.grad' for v in inputs)}]",
            ]
        p.phases = [("loss", loss), ("grad1", g1), ("grad2", g2)]


# pyrite runs an in-place unary op as copy_ of the out-of-place op on a clone (ops/operators.py),
# so in a double backward the gradient through its saved output reaches the out-of-place op's
# node, not the written tensor's: a hook on that tensor sees it in torch, not in pyrite (the
# values without hooks agree). Programs with these ops get no hooks.
_UNARY_INPLACE = re.compile(r"\.(tanh|sin|exp|clamp)_\(")


def _leafy(t) -> bool:
    """A leaf that requires grad, or a view of one (in-place writes into them raise)."""
    b = t._base if t._base is not None else t
    return (b.requires_grad and b.grad_fn is None) or (t.requires_grad and t.grad_fn is None)


def _clamp_bounds(rng, vals):
    """(lo, hi) with lo < hi, each at least 0.05 from every value (no kink at a value)."""
    for _ in range(20):
        lo, hi = sorted(rng.uniform(-1.5, 1.5, 2))
        lo, hi = round(lo, 3), round(hi, 3)
        if hi - lo > 0.1 and np.all(np.abs(vals - lo) > 0.05) and np.all(np.abs(vals - hi) > 0.05):
            return lo, hi
    return None


# ---- running a program -------------------------------------------------------------------------
def _to_lib(lib, dtype, a):
    if lib is torch:
        t = torch.tensor(a)
        return t.to(dtype) if a.dtype.kind == "f" else t
    if a.dtype.kind == "f":
        return pr.tensor(a.astype(np.float32))
    return pr.tensor(a)


_DECOUPLE = re.compile(r"^(\w+)\.(add|sub|mul|div|clamp|exp|tanh|sin)_\((.*)\)$")


def _decouple(line):
    """An in-place op `x.f_(y)` as `x.copy_(x.clone().f(y.clone()))`, a setitem's or copy_'s
    value cloned: the same values and gradients, with nothing the backward reads written
    afterwards. pyrite's in-place ops keep a copy of the old value their rule reads (and read
    an operand that shares memory with the tensor written as its old value), where torch saves
    the tensor itself and refuses the backward once it is written again (README); this torch
    program is the oracle for what pyrite computes then."""
    m = _DECOUPLE.match(line)
    if m:
        x, f, args = m.groups()
        args = re.sub(r"^(\w+)(,|$)", r"\1.clone()\2", args)
        return f"{x}.copy_({x}.clone().{f}({args}))"
    line = re.sub(r"\.copy_\((\w+)\)$", r".copy_(\1.clone())", line)
    return re.sub(r"^(\w+\[[^=]*\]) = (\w+)$", r"\1 = \2.clone()", line)


def _unbind_v(x, d=0):
    return tuple(x.select(d, i) for i in range(x.shape[d]))


def _split_v(x, size, d=0):
    n = x.shape[d]
    return tuple(x.narrow(d, i, min(size, n - i)) for i in range(0, n, size))


def _as_views(line):
    """`x.unbind(d)` / `x.split(k, d)` as select / narrow views (torch allows writes into
    those): the oracle for a program torch refuses for writing into a multi-output view."""
    line = re.sub(r"(\w+)\.unbind\(", r"_unbind_v(\1, ", line)
    return re.sub(r"(\w+)\.split\(", r"_split_v(\1, ", line)


class Outcome:
    def __init__(self):
        self.error = None  # (phase, line number, exception)
        self.values: dict[str, np.ndarray] = {}
        self.got: dict[str, np.ndarray | None] = {}  # "out", "G[0]", "G2[1]", "R1[0]", ...
        self.env = None
        self.storage: dict[str, int] = {}  # variable -> its storage's identity


def _storage_key(t):
    return t.untyped_storage().data_ptr() if isinstance(t, torch.Tensor) else id(t._storage)


def _aliasing(o, names):
    """Each variable labelled by the first variable sharing its storage."""
    first: dict[int, str] = {}
    return {v: first.setdefault(o.storage[v], v) for v in names}


def _aliasing_differs(prog, ref, got):
    """The first variable that shares storage with different variables in pyrite than in
    torch, with the statement that made it; None if none does."""
    names = [v for v in prog.vars if v in ref.storage and v in got.storage]
    a, b = _aliasing(ref, names), _aliasing(got, names)
    for v in names:
        if a[v] != b[v]:
            line = next((ln for ln in prog.lines if re.match(rf"(.*\b)?{v}\b.* = ", ln)), "")
            return v, line
    return None


def _np(t):
    if t is None:
        return None
    if isinstance(t, torch.Tensor):
        return t.detach().double().numpy()
    return t.detach().numpy().astype(np.float64)


def run(prog: Program, lib, dtype, as_views=False, decouple=False) -> Outcome:
    o = Outcome()
    env = {"T": lib, "DT": dtype, "_unbind_v": _unbind_v, "_split_v": _split_v}
    env["C"] = {k: _to_lib(lib, dtype, a) for k, a in prog.consts.items()}
    phases = [("forward", prog.lines), *prog.phases]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for phase, lines in phases:
            for i, line in enumerate(lines):
                try:
                    if as_views:
                        line = _as_views(line)
                    if decouple and phase == "forward":
                        line = _decouple(line)
                    exec(line, env)
                except Exception as e:  # noqa: BLE001 (any refusal is compared with torch's)
                    o.error, o.env = (phase, i, e), env
                    return o
            if phase == "forward":
                for v in prog.vars:
                    t = env.get(v)
                    if t is not None and hasattr(t, "detach"):
                        o.values[v] = _np(t)
                        o.storage[v] = _storage_key(t)
            elif phase == "loss":
                o.got["out"] = _np(env["out"])
            else:
                for key in ("G", "R1") if phase == "grad1" else ("G2", "R2"):
                    for i, g in enumerate(env.get(key) or ()):
                        o.got[f"{key}[{i}]"] = _np(g)
    return o


# ---- comparing -------------------------------------------------------------------------------
def _close(p, r, q, k, scale=0.0):
    """(ok, detail) for pyrite's p against the reference r, torch float32's q; `scale`: the
    largest magnitude among the reference's arrays of this kind, at least 1, the size of the
    data (a gradient that cancels to 0 still carries rounding of the terms that cancelled)."""
    if r is None and q is None and p is None:
        return True, ""
    shape = next(a.shape for a in (r, q, p) if a is not None)
    r = np.zeros(shape) if r is None else r
    q = r if q is None else q
    p = np.zeros(shape) if p is None else p
    if p.shape != r.shape:
        return False, f"shape {p.shape} vs torch {r.shape}"
    if np.isnan(r).any() or np.isnan(p).any():
        if not np.array_equal(np.isnan(p), np.isnan(r)):
            return False, "NaN positions differ"
        p, r, q = (np.nan_to_num(a) for a in (p, r, q))
    mag = max(np.abs(r).max(initial=0.0), np.abs(q).max(initial=0.0))
    tol = k * U * (np.abs(r) + mag + 0.01 * max(scale, 1.0)) + 4 * np.abs(q - r)
    err = np.abs(p - r)
    if np.all(err <= tol):
        return True, ""
    i = np.unravel_index(int(np.argmax(err - tol)), err.shape) if err.ndim else ()
    return (
        False,
        f"max err {err.max():.3g} (at {i}: pyrite {p[i]:.6g}, torch {r[i]:.6g}, tol {tol[i]:.3g})",
    )


def _when(err):
    return ("forward", "loss", "grad1", "grad2").index(err[0]), err[1]


def _msg(e):
    return f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"


def _intentional_raise(prog, err) -> str | None:
    """The documented reason pyrite raises where torch does not, or None (a finding)."""
    phase, i, e = err
    line = prog.lines[i] if phase == "forward" else ""
    if isinstance(e, pr.autograd.ViewWriteError) and "non-contiguous" in str(e):
        return "ViewWriteError: a write into a view of a non-contiguous base that requires grad"
    if "view" in line and "not compatible" in str(e):
        return "layout: pyrite's elementwise results are row-major, a .view() differs"
    if "masked_fill_" in line and "single memory location" in str(e):
        return "masked_fill_ into an expanded view is refused"
    return None


def _known(err) -> str | None:
    """A finding left unfixed here (its fix belongs to a file this fuzz's session did not own),
    or None."""
    return None


def _intentional_torch_raise(prog, err, env=None) -> str | None:
    phase, i, e = err
    line = prog.lines[i] if phase == "forward" else ""
    if "a leaf Variable that requires grad" in str(e) and env is not None:
        m = re.match(r"(\w+)[.\[]", line)
        t = env.get(m.group(1)) if m else None
        if isinstance(t, torch.Tensor) and t._base is not None and t._base.grad_fn is not None:
            return (
                "torch refuses a write into a view taken before its base was given a history "
                "by an in-place op (its 'leaf Variable' error); pyrite writes it"
            )
    if "view" in line and "not compatible" in str(e) or "view size is not compatible" in str(e):
        return "layout: torch's elementwise results follow the operand's order, a .view() differs"
    if "returns multiple views" in str(e):
        return "multi-output views written in place (torch refuses; checked against select/narrow)"
    return None


# pyrite's documented readings of programs torch refuses, each with a torch program that
# computes the same thing, the oracle then: (as_views, decouple, reason)
_ORACLES = (
    (True, False, "writes into split / unbind outputs (torch refuses; checked against "
     "select / narrow)"),
    (False, True, "in-place ops keep a copy of what their backward reads (torch refuses the "
     "backward once that is written; checked against out-of-place ops)"),
    (True, True, "writes into split / unbind outputs, in-place ops keep copies (checked "
     "against select / narrow and out-of-place ops)"),
)  # fmt: skip


def check(prog: Program):
    """("ok" | "intentional" | "fail", detail) of one program."""
    ref = run(prog, torch, torch.float64)
    got = run(prog, pr, pr.float32)
    status, why, variant = "ok", "", (False, False)
    at = got.error[:2] if got.error is not None else None
    if ref.error is not None and ref.error[:2] != at:
        for as_views, decouple, reason in _ORACLES:
            ref2 = run(prog, torch, torch.float64, as_views=as_views, decouple=decouple)
            if ref2.error is None or ref2.error[:2] == at:
                ref, status, why, variant = ref2, "intentional", reason, (as_views, decouple)
                break
    if ref.error is None and got.error is not None:
        why = _intentional_raise(prog, got.error)
        known = _known(got.error)
        if why is None and known:
            return "known", known
        if why is None:
            return "fail", f"pyrite raises at {at} ({_msg(got.error[2])}), torch does not"
        return "intentional", why
    if ref.error is not None and got.error is None:
        why = _intentional_torch_raise(prog, ref.error, ref.env)
        if why is None:
            return (
                "fail",
                f"torch raises at {ref.error[:2]} ({_msg(ref.error[2])}), pyrite does not",
            )
        return "intentional", why
    if ref.error is not None:  # both raise
        if _when(got.error) < _when(ref.error) and _intentional_raise(prog, got.error):
            return "intentional", _intentional_raise(prog, got.error)
        if _when(ref.error) < _when(got.error) and _intentional_torch_raise(
            prog, ref.error, ref.env
        ):
            return "intentional", _intentional_torch_raise(prog, ref.error, ref.env)
        if ref.error[:2] != at:
            return "fail", (
                f"torch raises at {ref.error[:2]} ({_msg(ref.error[2])}), pyrite at {at} "
                f"({_msg(got.error[2])})"
            )
        return status, why or f"both raise at {at}"
    alias = _aliasing_differs(prog, ref, got)
    if alias is not None:
        v, line = alias
        if re.search(r"\.(reshape|flatten|contiguous)\(", line):
            return "intentional", (
                "layout: pyrite's elementwise results are row-major, so a reshape / contiguous "
                "copies in one and views in the other"
            )
        return "fail", f"{v} shares storage with other variables than in torch ({line})"
    f32 = run(prog, torch, torch.float32, as_views=variant[0], decouple=variant[1])
    if f32.error is not None:  # (float32 torch raising where float64 did not: not judged)
        return "intentional", f"torch float32 raises: {_msg(f32.error[2])}"
    k = 32 * (len(prog.lines) + 8)
    bad = []
    for name, r in ref.values.items():
        ok, d = _close(got.values.get(name), r, f32.values.get(name), k)
        if not ok:
            bad.append(f"value {name}: {d}")
    scale = {}
    for key, r in ref.got.items():
        kind = key.split("[")[0]
        scale[kind] = max(
            scale.get(kind, 0.0), 0.0 if r is None else float(np.abs(r).max(initial=0))
        )
    for key in ref.got.keys() | got.got.keys():
        sc = scale.get(key.split("[")[0], 0.0)
        ok, d = _close(got.got.get(key), ref.got.get(key), f32.got.get(key), k, sc)
        if not ok:
            bad.append(f"{key}: {d}")
    if bad:
        return "fail", "; ".join(sorted(bad))
    return status, why


def main(argv=None):
    return fuzz_driver.run(
        __doc__, lambda seed: Gen(seed).build(), check, lambda prog: prog.text(), argv
    )


if __name__ == "__main__":
    sys.exit(main())
