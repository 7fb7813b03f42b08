"""The fused optimizer update: one invocation per element reads a parameter, its gradient and the
optimizer's state tensors, runs the update rule, and writes the parameter and the state back.

The rule is WGSL statements over f32 variables named after the operands (`p`, `g`, `exp_avg`,
...) and the scalars (`lr`, `beta1`, ...). The rule's shape (which options are on: momentum,
nesterov, amsgrad, ...) is baked into the text; every number that may change between steps
(learning rate, bias corrections, the first-step switch) is a scalar read from the info words,
so one pipeline serves an optimizer configuration for the whole run. There are no loops, so
the loop budget (DESIGN.md) does not apply.

Operands are contiguous in a flat index (the dispatcher stages anything else). Storage tokens:
f32 and f16 (read into f32, written back rounded as the strided map does); bf16 is widened by
the dispatcher (its packed words are shared by two elements: optim/_fused.py).

Info words (i32):
  [0] numel  [1 .. 1+k) the operands' element offsets  then the scalars (f32 bits).
"""

from __future__ import annotations

from functools import lru_cache

from .common import (
    ENTRY,
    FLAT_INDEX,
    STORAGE_ELEM,
    WG,
    KernelSource,
    header,
    helpers_for,
    load,
    store,
)

TOKENS = ("f32", "f16")


@lru_cache(maxsize=256)
def update_kernel(operands: tuple, rule: str, scalars: tuple) -> KernelSource:
    """`operands`: ((name, storage token, written), ...) in binding order; `rule`: WGSL
    statements assigning the written operands' variables (and any `let`/`var` of their own);
    `scalars`: the names of the f32 scalars the rule reads, in info order."""
    k = len(operands)
    buffers = []
    lines = ["  let n = info[0];\n", "  if (gi >= n) { return; }\n"]
    for j, (name, tok, written) in enumerate(operands):
        if tok not in TOKENS:
            raise ValueError(f"pyrite: internal: optimizer operand {name} has storage {tok}")
        buffers.append((f"b_{name}", STORAGE_ELEM[tok], "w" if written else "r"))
        # element j of the flat index: b[off_j + gi]
        lines.append(f"  let i_{name} = info[{1 + j}] + gi;\n")
        decl = "var" if written else "let"
        lines.append(f"  {decl} {name} = {load(f'b_{name}[i_{name}]', tok, 'f32')};\n")
    for j, s in enumerate(scalars):
        lines.append(f"  let {s} = bitcast<f32>(info[{1 + k + j}]);\n")
    lines += ["  " + line.strip() + "\n" for line in rule.strip().splitlines() if line.strip()]
    for name, tok, written in operands:
        if written:
            lines.append(f"  b_{name}[i_{name}] = {store(name, 'f32', tok, exact=True)};\n")
    text = FLAT_INDEX.format(wg=WG) + "".join(lines)
    src = header(buffers) + helpers_for(text) + ENTRY.format(wg=WG) + text + "}\n"
    return KernelSource(src, "".join(m for _, _, m in buffers))


def info_words(n_operands: int, n_scalars: int) -> int:
    return 1 + n_operands + n_scalars


@lru_cache(maxsize=256)
def update_many_kernel(operands: tuple, rule: str, scalars: tuple, count: int) -> KernelSource:
    """`update_kernel` over `count` parameters in one dispatch (PyTorch's multi-tensor apply).

    The flat index runs over the parameters one after another; parameter j owns indices
    [end_{j-1}, end_j) and has its own bindings (b_<name>_<j>: WGSL cannot index bindings, so
    the rule's text appears once a parameter, behind a chain of range tests). The scalars are
    shared: the dispatcher batches only parameters whose step scalars are equal.

    Info words (i32): [0] total elements, then per parameter j: end_j and its operands' element
    offsets (1 + k words), then the scalars (f32 bits).
    """
    k = len(operands)
    buffers = []
    for j in range(count):
        for name, tok, written in operands:
            if tok not in TOKENS:
                raise ValueError(f"pyrite: internal: optimizer operand {name} has storage {tok}")
            buffers.append((f"b_{name}_{j}", STORAGE_ELEM[tok], "w" if written else "r"))
    lines = ["  if (gi >= info[0]) { return; }\n"]
    base = 1 + count * (1 + k)
    for j, s in enumerate(scalars):
        lines.append(f"  let {s} = bitcast<f32>(info[{base + j}]);\n")
    rule_lines = ["    " + ln.strip() + "\n" for ln in rule.strip().splitlines() if ln.strip()]
    for j in range(count):
        w = 1 + j * (1 + k)
        start = "0" if j == 0 else f"info[{w - 1 - k}]"
        head = "  if" if j == 0 else "  else if"
        lines.append(f"{head} (gi < info[{w}]) {{\n    let li = gi - {start};\n")
        for i, (name, tok, written) in enumerate(operands):
            lines.append(f"    let i_{name} = info[{w + 1 + i}] + li;\n")
            decl = "var" if written else "let"
            lines.append(f"    {decl} {name} = {load(f'b_{name}_{j}[i_{name}]', tok, 'f32')};\n")
        lines += rule_lines
        for name, tok, written in operands:
            if written:
                lines.append(
                    f"    b_{name}_{j}[i_{name}] = {store(name, 'f32', tok, exact=True)};\n"
                )
        lines.append("  }\n")
    text = FLAT_INDEX.format(wg=WG) + "".join(lines)
    src = header(buffers) + helpers_for(text) + ENTRY.format(wg=WG) + text + "}\n"
    return KernelSource(src, "".join(m for _, _, m in buffers))


# ---- the rules: PyTorch's single-tensor update formulas, operation for operation -----------
# (torch/optim/{sgd,adam,rmsprop,adagrad}.py, `_single_tensor_*`). Each returns the rule's text
# and its scalar names; the flags choose the text, the numbers are all scalars. A scalar that
# torch computes on the host in double (1 - lr * wd, lr / bias_correction1) is computed there
# too and rounded once to f32, as torch's CPU kernels round a Python scalar.


def _grad_line(maximize: bool) -> str:
    return "var d = -g;" if maximize else "var d = g;"


def _lerp(start: str, end: str, w: str) -> str:
    # torch's lerp: start + w * (end - start) for |w| < 0.5, else end - (end - start) * (1 - w)
    return (
        f"select({end} - ({end} - {start}) * (1.0 - {w}), {start} + {w} * ({end} - {start}), "
        f"abs({w}) < 0.5)"
    )


@lru_cache(maxsize=64)
def sgd_rule(weight_decay: bool, momentum: bool, nesterov: bool, maximize: bool):
    """Operands p, buf (the momentum buffer, when `momentum`), g. Scalars: neg_lr, wd, mom,
    damp1 (1 - dampening), first (1.0 on the step that creates the buffer: buf = d)."""
    lines = [_grad_line(maximize)]
    if weight_decay:
        lines.append("d = d + wd * p;")
    if momentum:
        lines.append("buf = select(buf * mom + damp1 * d, d, first != 0.0);")
        lines.append("d = d + mom * buf;" if nesterov else "d = buf;")
    lines.append("p = p + neg_lr * d;")
    return "\n".join(lines), ("neg_lr", "wd", "mom", "damp1", "first")


@lru_cache(maxsize=64)
def adam_rule(weight_decay: bool, decoupled: bool, amsgrad: bool, maximize: bool):
    """Operands p, m (exp_avg), v (exp_avg_sq), vmax (max_exp_avg_sq, when `amsgrad`), g.
    Scalars: wd, decay (1 - lr * wd), w1 (1 - beta1), beta2, omb2 (1 - beta2), bc2s (the square
    root of bias_correction2), eps, neg_step (-lr / bias_correction1)."""
    lines = [_grad_line(maximize)]
    if weight_decay:
        lines.append("p = p * decay;" if decoupled else "d = d + wd * p;")
    lines.append(f"m = {_lerp('m', 'd', 'w1')};")
    lines.append("v = v * beta2 + omb2 * d * d;")
    if amsgrad:
        lines.append("vmax = max(vmax, v);")
        lines.append("let den = sqrt(vmax) / bc2s + eps;")
    else:
        lines.append("let den = sqrt(v) / bc2s + eps;")
    lines.append("p = p + neg_step * m / den;")
    scalars = ("wd", "decay", "w1", "beta2", "omb2", "bc2s", "eps", "neg_step")
    return "\n".join(lines), scalars


@lru_cache(maxsize=64)
def rmsprop_rule(weight_decay: bool, momentum: bool, centered: bool, maximize: bool):
    """Operands p, sq (square_avg), buf (momentum_buffer, when `momentum`), ga (grad_avg, when
    `centered`), g. Scalars: wd, alpha, oma (1 - alpha), eps, mom, neg_lr."""
    lines = [_grad_line(maximize)]
    if weight_decay:
        lines.append("d = d + wd * p;")
    lines.append("sq = sq * alpha + oma * d * d;")
    if centered:
        lines.append(f"ga = {_lerp('ga', 'd', 'oma')};")
        lines.append("var avg = sqrt(sq + -1.0 * ga * ga);")
    else:
        lines.append("var avg = sqrt(sq);")
    lines.append("avg = avg + eps;")
    if momentum:
        lines.append("buf = buf * mom + d / avg;")
        lines.append("p = p + neg_lr * buf;")
    else:
        lines.append("p = p + neg_lr * d / avg;")
    return "\n".join(lines), ("wd", "alpha", "oma", "eps", "mom", "neg_lr")


@lru_cache(maxsize=64)
def adagrad_rule(weight_decay: bool, maximize: bool):
    """Operands p, acc (the "sum" state), g. Scalars: wd, eps, neg_clr (-lr / (1 + (step - 1)
    * lr_decay))."""
    lines = [_grad_line(maximize)]
    if weight_decay:
        lines.append("d = d + wd * p;")
    lines += ["acc = acc + d * d;", "let den = sqrt(acc) + eps;", "p = p + neg_clr * d / den;"]
    return "\n".join(lines), ("wd", "eps", "neg_clr")


# ---- more rules (torch/optim/{adadelta,adamax,nadam,radam,asgd}.py, `_single_tensor_*`) ------


@lru_cache(maxsize=64)
def adadelta_rule(weight_decay: bool, maximize: bool):
    """Operands p, sq (square_avg), acc (acc_delta), g. Scalars: wd, rho, omr (1 - rho), eps,
    neg_lr."""
    lines = [_grad_line(maximize)]
    if weight_decay:
        lines.append("d = d + wd * p;")
    lines += [
        "sq = sq * rho + omr * d * d;",
        "let sd = sqrt(sq + eps);",
        "let delta = sqrt(acc + eps) / sd * d;",
        "acc = acc * rho + omr * delta * delta;",
        "p = p + neg_lr * delta;",
    ]
    return "\n".join(lines), ("wd", "rho", "omr", "eps", "neg_lr")


@lru_cache(maxsize=64)
def adamax_rule(weight_decay: bool, maximize: bool):
    """Operands p, m (exp_avg), u (exp_inf), g. Scalars: wd, w1 (1 - beta1), beta2, eps,
    neg_clr (-lr / bias_correction1)."""
    lines = [_grad_line(maximize)]
    if weight_decay:
        lines.append("d = d + wd * p;")
    lines += [
        f"m = {_lerp('m', 'd', 'w1')};",
        "u = max(u * beta2, abs(d) + eps);",
        "p = p + neg_clr * m / u;",
    ]
    return "\n".join(lines), ("wd", "w1", "beta2", "eps", "neg_clr")


@lru_cache(maxsize=64)
def nadam_rule(weight_decay: bool, decoupled: bool, maximize: bool):
    """Operands p, m (exp_avg), v (exp_avg_sq), g. Scalars: wd, decay (1 - lr * wd), w1,
    beta2, omb2, bc2 (bias_correction2), eps, c_g (-lr (1 - mu) / (1 - mu_product)), c_m
    (-lr mu_next / (1 - mu_product mu_next))."""
    lines = [_grad_line(maximize)]
    if weight_decay:
        lines.append("p = p * decay;" if decoupled else "d = d + wd * p;")
    lines += [
        f"m = {_lerp('m', 'd', 'w1')};",
        "v = v * beta2 + omb2 * d * d;",
        "let den = sqrt(v / bc2) + eps;",
        "p = p + c_g * d / den;",
        "p = p + c_m * m / den;",
    ]
    return "\n".join(lines), ("wd", "decay", "w1", "beta2", "omb2", "bc2", "eps", "c_g", "c_m")


@lru_cache(maxsize=64)
def radam_rule(weight_decay: bool, decoupled: bool, maximize: bool):
    """Operands p, m (exp_avg), v (exp_avg_sq), g. Scalars: wd, decay, w1, beta2, omb2, bc1,
    bc2s (sqrt of bias_correction2), eps, lr, rect (the variance rectification term) and
    rectified (1.0 once the SMA length passes 5: both from the step count, on the host)."""
    lines = [_grad_line(maximize)]
    if weight_decay:
        lines.append("p = p * decay;" if decoupled else "d = d + wd * p;")
    lines += [
        f"m = {_lerp('m', 'd', 'w1')};",
        "v = v * beta2 + omb2 * d * d;",
        "let bcm = m / bc1;",
        "let adaptive = bc2s / (sqrt(v) + eps);",
        "p = p - select(bcm * lr, bcm * lr * adaptive * rect, rectified != 0.0);",
    ]
    names = ("wd", "decay", "w1", "beta2", "omb2", "bc1", "bc2s", "eps", "lr", "rect", "rectified")
    return "\n".join(lines), names


@lru_cache(maxsize=64)
def asgd_rule(weight_decay: bool, maximize: bool):
    """Operands p, ax, g. Scalars: wd, decay (1 - lambd * eta), neg_eta, mu, averaging (0.0
    while mu is 1: ax is a copy of p)."""
    lines = [_grad_line(maximize)]
    if weight_decay:
        lines.append("d = d + wd * p;")
    lines += [
        "p = p * decay;",
        "p = p + neg_eta * d;",
        "ax = select(p, ax + (p - ax) * mu, averaging != 0.0);",
    ]
    return "\n".join(lines), ("wd", "decay", "neg_eta", "mu", "averaging")


@lru_cache(maxsize=8)
def rprop_rule(maximize: bool):
    """Operands p, prev (the last gradient used), ss (the step sizes), g. Scalars: etaminus,
    etaplus, lo, hi (step_sizes). torch's `_single_tensor_rprop`: the factor is etaplus where
    d·prev > 0, etaminus where < 0, 1 elsewhere; where it is etaminus the gradient counts as 0
    (no move now, and no sign change seen next step)."""
    lines = [
        _grad_line(maximize),
        "let s = d * prev;",
        "let f = select(select(1.0, etaminus, s < 0.0), etaplus, s > 0.0);",
        "ss = clamp(ss * f, lo, hi);",
        "d = select(d, 0.0, s < 0.0);",
        "p = p - sign(d) * ss;",
        "prev = d;",
    ]
    return "\n".join(lines), ("etaminus", "etaplus", "lo", "hi")


@lru_cache(maxsize=8)
def sparse_adam_rule(maximize: bool):
    """Operands p, m (exp_avg), v (exp_avg_sq), g, k (1.0 on the rows the gradient touches, 0.0
    elsewhere: pyrite's gradients are dense, so a sparse gradient's rows are its non-zero
    rows). Scalars: w1 (1 - beta1), omb2 (1 - beta2), eps, neg_step (-lr sqrt(bc2) / bc1).
    torch's `sparse_adam` on the rows present, operation for operation; other rows are kept."""
    lines = [
        _grad_line(maximize),
        "let um = (d - m) * w1;",
        "let uv = (d * d - v) * omb2;",
        "let num = um + m;",
        "let vn = uv + v;",
        "let live = k != 0.0;",
        "m = select(m, num, live);",
        "v = select(v, vn, live);",
        "p = select(p, p + num / (sqrt(vn) + eps) * neg_step, live);",
    ]
    return "\n".join(lines), ("w1", "omb2", "eps", "neg_step")
