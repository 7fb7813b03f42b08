"""Randomized differential fuzz of pyrite's function transforms (pr.func: vmap, grad,
grad_and_value, vjp, jvp, linearize, jacrev, jacfwd, hessian, functional_call,
stack_module_state; pr.autograd.functional; pr.autograd.forward_ad) against torch 2.13 CPU
(session 46): values, shapes, dtypes, pytree structure, and whether each side raises.

A case is plain data drawn per seed: a small random function (a "program") and a transform
applied to it. The program takes a main input x (1-3 dims of sizes 1, 2, 3, 5, now and then
0) and up to three extra inputs, passed flat (f(x, e0, e1)), as a dict (f(x, {"e0": .., ..}))
or a tuple (f(x, (e0, e1))); it runs 1-6 steps on a running tensor h from a menu: elementwise
math (sin, cos, tanh, sigmoid, exp(h/2), h², softplus, log1p(h²), clamp), products with an
extra input (h·e, h + e with e of h's shape or broadcasting with 1s), matmul with an extra
(h @ e, e of shape (h[-1], k)), reductions with a dim (sum / mean keepdim or not, logsumexp),
softmax, indexing (a strided slice, select, an integer index tensor), cat / stack with a
function of h, where(h > 0, h, h/2), vector_norm over a dim, transpose and flatten; and
returns a tensor, a tuple, a dict ({"a": h, "b": sin h}), a tuple with an integer output ((h,
(h > 0).long()): forward mode gives it a zero tangent, reverse mode refuses it) or a 0-d
scalar (sum of h², for the scalar-output transforms). The transforms: grad / grad_and_value
(argnums int, negative or a tuple, has_aux), vjp (cotangents drawn; has_aux), jvp (tangents
drawn; has_aux), linearize, jacrev / jacfwd (argnums, has_aux, pytree outputs), hessian, vmap
(in_dims: int, negative, None, a nested tuple / dict matching the arguments; out_dims int,
negative or a tuple; a nested vmap; chunk_size; a keyword argument passed through; randomness
error / same / different with a random op inside), vmap(grad(f)), vmap(jacrev(f)),
jacrev(jacfwd(f)), torch.autograd.functional jacobian / hessian / vjp / jvp / hvp / vhp
(create_graph, strict, vectorize, strategy), forward_ad (make_dual / unpack_dual), and small
models (Linear, Tanh, a tied Linear, BatchNorm1d in eval mode): functional_call with a dict of
parameters and buffers (strict, tie_weights), stack_module_state + vmap(functional_call) over
an ensemble, and per-sample gradients vmap(grad(loss), in_dims=(None, 0, 0)). Now and then an
invalid argument: a batch size that differs between inputs, an in_dim out of range or on a
non-tensor, an in_dims structure that does not match, a list in_dims, an out_dim out of
range, a non-scalar output to grad, argnums out of range or repeated, has_aux with a single
output, a tangent or cotangent of another shape, a missing key under strict=True, a value
for each of two tied names (the same tensor or not), out_dims None for a mapped output, a list
of inputs or a v of another shape for autograd.functional.

The case runs on torch float64 (the reference, on the same float32-rounded inputs), torch
float32 and pyrite float32. Compared: the result's pytree structure (tuple / list / dict and
its keys, a non-tensor leaf's value), each tensor leaf's shape and dtype (pyrite's against
torch float32's), and values:
    max|pyrite - ref| <= 4·max|torch32 - ref| + c·u·scale,   u = 2^-24,
    c = 16·(depth + 2)·(n + 1)
per leaf, normwise, with depth the program's steps (+1 per derivative order taken: the
gradient of a composition of `depth` float32-rounded ops, each with relative error u and a
condition number of order one on the drawn values, accumulates about depth·u relative error;
a sum or matmul over n terms adds n·u: n is the largest dim drawn) and scale = max|ref| of the
leaf (and, for a derivative, at least max|ref| over every leaf of the same result and at
least 1: a derivative entry that cancels to near zero is judged at the size of its
neighbours, and one that cancels exactly, a Hessian of softmax(..).sum() say, at the size of
its terms, of order one for standard-normal inputs and these ops). The 4·|torch32 - ref| term
keeps torch's own float32 spread as a guide. Non-numbers must sit at the same places.

Raising: where torch float32 raises and pyrite does not, or the other way, it is a failure;
both raising is agreement (the type is not compared: torch's vmap raises ValueError or
RuntimeError by the path, pyrite's errors derive from both). Integer outputs compare pyrite's
int32 with torch's int64 (DESIGN.md: pyrite's integer type).

Classified, counted but not failures:
- intentional: randomness 'different' / 'same': the numbers drawn differ from torch's
  (another generator); compared are the structure, shapes and dtypes, that 'same' gives every
  batch element equal numbers and 'different' not (batch > 1).
- intentional, not drawn: vmap runs the function once per element (pyrite/_vmap.py's
  docstring), so `.item()` and data-dependent control flow, which torch's vmap refuses, work;
  and an in-place change of an unmapped input is refused for a batch of two or more (the loop
  would repeat it; torch applies it once). float64 inputs are not drawn (pyrite narrows them
  to float32, DESIGN.md).
- torch_bug: torch's forward mode (jvp, linearize, jacfwd, hessian, forward_ad) gives a 0-d
  float32 tensor times a Python float a float64 tangent (jvp of lambda x: x[0] * 0.5 at a
  float32 x: float64; the same through jacrev: float32); the values are compared. Where that
  tangent meets a float32 one (stack, cat) torch raises "expected scalar type Double but found
  Float": pyrite's Jacobians are then checked against torch's jacrev (jacrev(jacrev(f)) for a
  Hessian), a jvp's result only for not raising.
- torch_bug: jacrev / jacfwd with an int argnums selecting an argument that holds no tensor
  (an empty dict or tuple), or argnums selecting no element at all, raise from inside torch
  (treespec unflatten, cat of no tensors, an index out of bounds; grad returns the empty
  structure): pyrite must give that empty structure / empty blocks.
- torch_bug: hessian / jacrev(jacfwd(f)) of an input with no element raises from inside
  (select(): index 0 out of range): pyrite's blocks must be empty.
- torch_bug: vmap over a batch of size 0 raises from inside for some functions (an integer
  index, chunk_size, a per-sample gradient through BatchNorm): pyrite's result is checked
  against torch's for a batch of one, the shapes equal but the mapped dim 0.
- torch_bug: autograd.functional with vectorize=True or forward-mode raises from inside on an
  empty tensor (an index out of bounds, an ambiguous reshape): checked against torch's
  vectorize=False loop; where that raises too ("stack expects a non-empty TensorList": the
  Jacobian of an output of no element) pyrite's blocks must be empty.
- torch_bug: autograd.functional.jacobian(strategy="forward-mode") nests its blocks in lists,
  where its documentation (and its reverse mode) gives tuples: compared with lists as tuples.
- torch_bug: forward mode gives a mean over an empty dim a NaN tangent (0/0 in the tangent's
  arithmetic); the output does not depend on the input (it has no element), the tangent is
  0, as pyrite's reverse-mode one: compared with torch's NaNs read as 0.
Worked around on the torch side (the reference is torch's documented meaning):
- torch.func.jacfwd with a negative argnums returns zeros (jacfwd(lambda x, y: (x*x*y).sum(),
  argnums=-1)(x, y) is 0, argnums=1 gives x*x), and so does hessian (jacfwd(jacrev)): torch
  gets the argnums made non-negative.
- vmap with chunk_size and a 1-tuple out_dims for a tensor output asserts inside ("flat_out_dims
  must not be None"; without chunk_size torch takes it): torch gets the int.
- vmap pairs a dict in_dims with the input dict by position, not key (in_dims
  ({"b": 0, "a": None},) for {"a": .., "b": ..} maps "a"): torch gets the dict in the input's
  key order; pyrite matches by key (pyrite/_pytree.py).
Fixed by the lead after the run: functional_call(strict=True, tie_weights=True) refused a
dict giving one name of tied weights (it now spreads the tied values before its strict check,
as torch).
Known and open (counted as "known"):
- vmap with out_dims None for a mapped output whose elements happen to be equal (or a batch
  of one) is taken (pyrite/_vmap.py: the loop sees the per-element values only, and refuses
  those that differ); torch refuses it.

    .venv/bin/python scripts/fuzz_func.py --seeds 0:100 [--show 17] [--verbose]
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import torch

import pyrite as pr

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import fuzz_driver  # noqa: E402

U = 2.0**-24
SIZES = (1, 2, 3, 5)
UNARY = ("sin", "cos", "tanh", "sigmoid", "exph", "sq", "softplus", "log1psq", "clamp")


# ---- drawing ------------------------------------------------------------------------------------
class Gen(fuzz_driver.Draws):
    def size(self, zero=0.03):
        return 0 if self.chance(zero) else self.pick(SIZES)

    def shape(self, lo=1, hi=3, zero=0.03):
        return [self.size(zero) for _ in range(lo + self.r(hi - lo + 1))]

    def arr(self, shape):
        return self.rng.standard_normal(shape).astype(np.float32)

    # a program on the running tensor h: steps, extras' shapes; h's shape tracked
    def program(self, xshape, nsteps=None, scalar=False, max_numel=40):
        steps, extras = [], []
        shape = list(xshape)
        nsteps = 1 + self.r(5) if nsteps is None else nsteps
        for _ in range(nsteps):
            step, new = self.step(shape, extras)
            if step is None or int(np.prod(new)) > max_numel:
                continue
            steps.append(step)
            shape = new
        if self.chance(0.3) or not steps:
            steps.append(("un", self.pick(UNARY)))
        return {"steps": steps, "extras": extras, "out_shape": shape}

    def step(self, shape, extras):
        nd = len(shape)
        kinds = ["un", "un", "bin", "where", "cat", "stack"]
        if nd >= 1:
            kinds += ["mm", "sum", "mean", "softmax", "lse", "slice", "select", "norm", "index"]
        if nd >= 2:
            kinds += ["T", "flat"]
        if len(extras) >= 3:
            kinds = [k for k in kinds if k not in ("bin", "mm")]
        k = self.pick(kinds)
        d = self.r(nd) - (nd if self.chance(0.3) else 0) if nd else 0
        if k == "un":
            return ("un", self.pick(UNARY)), shape
        if k == "bin":
            eshape = [1 if self.chance(0.25) else s for s in shape]
            if eshape and self.chance(0.2):
                eshape = eshape[1:]  # (fewer dims: broadcast on the left)
            extras.append(eshape)
            return ("bin", self.pick(("mul", "add")), len(extras) - 1), shape
        if k == "mm":
            kk = self.pick(SIZES)
            extras.append([shape[-1], kk])
            return ("mm", len(extras) - 1), shape[:-1] + [kk]
        if k == "where":
            return ("where",), shape
        if k in ("cat", "stack"):
            if k == "cat" and nd == 0:
                return None, shape
            dd = self.r(nd + (k == "stack")) - (nd + (k == "stack") if self.chance(0.3) else 0)
            new = list(shape)
            if k == "cat":
                new[dd] *= 2
            else:
                new.insert(dd % (nd + 1), 2)
            return (k, dd), new
        if k in ("sum", "mean", "lse", "norm"):
            keep = k != "lse" and self.chance(0.3)
            new = list(shape)
            if keep:
                new[d] = 1
            else:
                del new[d]
            return (k, d, keep), new
        if k == "softmax":
            return ("softmax", d), shape
        if k == "slice":
            start = self.r(max(shape[d], 1))
            stp = 1 + self.r(2)
            new = list(shape)
            new[d] = len(range(start, shape[d], stp))
            return ("slice", d, start, stp), new
        if k == "select":
            if shape[d] == 0:
                return None, shape
            new = list(shape)
            del new[d]
            return ("select", d, self.r(shape[d]) - (shape[d] if self.chance(0.3) else 0)), new
        if k == "index":
            if shape[0] == 0:
                return None, shape
            idx = [self.r(shape[0]) for _ in range(1 + self.r(3))]
            return ("index", idx), [len(idx)] + shape[1:]
        if k == "T":
            new = list(shape)
            new[0], new[-1] = new[-1], new[0]
            return ("T",), new
        if k == "flat":
            return ("flat",), [int(np.prod(shape))]
        raise AssertionError(k)


def _unary(T, name, h):
    if name == "sin":
        return h.sin()
    if name == "cos":
        return h.cos()
    if name == "tanh":
        return h.tanh()
    if name == "sigmoid":
        return h.sigmoid()
    if name == "exph":
        return (h * 0.5).exp()
    if name == "sq":
        return h * h
    if name == "softplus":
        return T.nn.functional.softplus(h)
    if name == "log1psq":
        return (h * h).log1p()
    if name == "clamp":
        return h.clamp(-0.5, 0.7)
    raise AssertionError(name)


def run_program(T, prog, h, extras):
    """The program's running tensor after its steps (T: torch or pyrite)."""
    for st in prog["steps"]:
        k = st[0]
        if k == "un":
            h = _unary(T, st[1], h)
        elif k == "bin":
            e = extras[st[2]]
            h = h * e if st[1] == "mul" else h + e
        elif k == "mm":
            h = h @ extras[st[1]]
        elif k == "where":
            h = T.where(h > 0, h, h * 0.5)
        elif k == "cat":
            h = T.cat([h, h.sin()], st[1])
        elif k == "stack":
            h = T.stack([h, h * h], st[1])
        elif k == "sum":
            h = h.sum(st[1], keepdim=st[2])
        elif k == "mean":
            h = h.mean(st[1], keepdim=st[2])
        elif k == "lse":
            h = h.logsumexp(st[1])
        elif k == "norm":
            h = T.linalg.vector_norm(h, dim=st[1], keepdim=st[2])
        elif k == "softmax":
            h = h.softmax(st[1])
        elif k == "slice":
            sl = [slice(None)] * h.dim()
            sl[st[1]] = slice(st[2], None, st[3])
            h = h[tuple(sl)]
        elif k == "select":
            h = h.select(st[1], st[2])
        elif k == "index":
            h = h[T.tensor(st[1])]
        elif k == "T":
            h = h.transpose(0, -1)
        elif k == "flat":
            h = h.reshape(-1)
        else:
            raise AssertionError(k)
    return h


def _finish(T, h, form):
    if form == "tensor":
        return h
    if form == "scalar":
        return (h * h).sum()
    if form == "tuple":
        return (h, h.tanh() * 2)
    if form == "dict":
        return {"a": h, "b": h.sin()}
    if form == "mixed":
        return (h, (h > 0).long())
    raise AssertionError(form)


def make_fn(T, case, form=None, aux=None):
    """The case's program as a Python function of (x, *packed extras) in the case's packing."""
    prog, pack = case["prog"], case["pack"]
    form = case["form"] if form is None else form
    aux = case.get("aux", False) if aux is None else aux

    def body(x, extras, kw=1.0):
        h = run_program(T, prog, x * kw if kw != 1.0 else x, extras)
        out = _finish(T, h, form)
        if aux:
            return out, {"h": h.detach() * 2 if False else h * 2}
        return out

    if pack == "flat":

        def f(x, *es, **kw):
            return body(x, list(es), **kw)

    elif pack == "dict":

        def f(x, p, **kw):
            return body(x, [p[f"e{i}"] for i in range(len(p))], **kw)

    else:

        def f(x, p, **kw):
            return body(x, list(p), **kw)

    return f


def packed_args(T, case, arrays, dtype):
    """(x, *extras) packed as the case packs them, as tensors of T."""
    t = [T.tensor(a, dtype=dtype) for a in arrays]
    x, es = t[0], t[1:]
    if case["pack"] == "flat":
        return (x, *es)
    if case["pack"] == "dict":
        return (x, {f"e{i}": e for i, e in enumerate(es)})
    return (x, tuple(es))


def tdtype(T, name):
    return getattr(T, name)


# ---- cases --------------------------------------------------------------------------------------
TRANSFORMS = (
    "grad",
    "grad_and_value",
    "vjp",
    "jvp",
    "linearize",
    "jacrev",
    "jacfwd",
    "hessian",
    "vmap",
    "vmap",
    "vmap",
    "vmap_nested",
    "vmap_grad",
    "vmap_jacrev",
    "jacrev_jacfwd",
    "af_jacobian",
    "af_hessian",
    "af_vjp",
    "af_jvp",
    "af_hvp",
    "af_vhp",
    "fwad",
    "model_call",
    "model_ensemble",
    "model_persample",
    "vmap_random",
)


def build(seed) -> dict:
    g = Gen(seed)
    tr = g.pick(TRANSFORMS)
    case = {"seed": seed, "transform": tr, "bad": None}
    if tr.startswith("model"):
        return _build_model(g, case)
    small = tr in ("jacrev", "jacfwd", "hessian", "vmap_jacrev", "jacrev_jacfwd") or tr.startswith(
        "af_"
    )
    xshape = g.shape(1, 2 if small else 3, zero=0.02)
    if small:
        xshape = [min(s, 3) for s in xshape]
    if tr == "vmap_nested":
        xshape[0] = max(xshape[0], 1)  # (the inner vmap maps x's dim 0: the program sees the rest)
    prog = g.program(xshape[1:] if tr == "vmap_nested" else xshape, max_numel=12 if small else 40)
    case.update(prog=prog, xshape=xshape)
    scalar_tr = tr in ("grad", "grad_and_value", "hessian", "vmap_grad", "af_hessian", "af_hvp",
                       "af_vhp")  # fmt: skip
    case["form"] = (
        "scalar" if scalar_tr else g.pick(("tensor", "tensor", "tuple", "dict", "scalar", "mixed"))
    )
    if tr.startswith("af_"):
        case["pack"] = "flat"  # (autograd.functional takes a tensor or a tuple of tensors)
        case["form"] = case["form"] if case["form"] not in ("dict", "mixed") else "tuple"
    else:
        case["pack"] = g.pick(("flat", "dict", "tuple"))
    case["aux"] = tr in ("grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd") and g.chance(
        0.3
    )
    arrays = [g.arr(xshape)] + [g.arr(s) for s in prog["extras"]]
    case["arrays"] = arrays
    nargs = 1 + (len(arrays) - 1 if case["pack"] == "flat" else 1)
    if tr in ("grad", "grad_and_value", "jacrev", "jacfwd", "vmap_grad", "vmap_jacrev", "hessian"):
        opts = [0, -nargs]
        if nargs > 1:
            opts += [1, -1, (0, 1), (1, 0), (0, -1)]
        case["argnums"] = g.pick(opts)
    if tr in ("jvp", "linearize", "vjp", "fwad") or tr.startswith("af_"):
        case["tangents"] = [g.arr(a.shape) for a in arrays]
    if tr in ("vmap", "vmap_nested", "vmap_grad", "vmap_jacrev", "vmap_random"):
        _build_vmap(g, case, nargs)
    if tr == "af_jacobian":
        case["af"] = {"vectorize": g.chance(0.3), "create_graph": g.chance(0.2),
                      "strict": g.chance(0.2)}  # fmt: skip
        if case["af"]["vectorize"] and g.chance(0.4):
            case["af"]["strategy"] = "forward-mode"
        elif g.chance(0.05):
            case["af"]["strategy"] = "forward-mode"  # (without vectorize: refused)
    elif tr.startswith("af_"):
        case["af"] = {"create_graph": g.chance(0.2), "strict": g.chance(0.2)}
        if tr == "af_hessian" and g.chance(0.3):
            case["af"]["vectorize"] = True
    if tr == "jvp" and g.chance(0.2):
        case["strict"] = True
    if g.chance(0.1):
        _draw_bad(g, case)
    return case


def _build_vmap(g, case, nargs):
    """Batched arrays and in_dims / out_dims for the vmap kinds."""
    B = 0 if g.chance(0.04) else g.pick((1, 2, 3, 5))
    case["B"] = B
    arrays = case["arrays"]
    dims = []
    batched = []
    for i, a in enumerate(arrays):
        if i > 0 and g.chance(0.35):
            dims.append(None)
            batched.append(a)
            continue
        nd = a.ndim + 1
        d = g.r(nd) - (nd if g.chance(0.3) else 0)
        dims.append(d)
        b = np.stack([g.arr(a.shape) for _ in range(B)]) if B else np.zeros((0, *a.shape), a.dtype)
        batched.append(np.moveaxis(b, 0, d % nd))
    if all(d is None for d in dims):
        pass
    case["arrays"] = batched
    case["dims_flat"] = dims
    # in_dims in the packing's structure: an int for all when they agree, else a tree
    if len(set(dims)) == 1 and dims[0] is not None and g.chance(0.5):
        in_dims = dims[0]
    elif case["pack"] == "flat":
        in_dims = tuple(dims)
    elif case["pack"] == "dict":
        rest = {f"e{i}": d for i, d in enumerate(dims[1:])}
        if len(rest) > 1 and g.chance(0.3):
            rest = dict(reversed(list(rest.items())))  # (keys in another order than the input's)
            case["in_dims_reordered"] = True
        if len(set(dims[1:])) == 1 and g.chance(0.5):
            rest = dims[1]  # (a prefix: one in_dim for the whole dict)
        in_dims = (dims[0], rest)
    else:
        rest = tuple(dims[1:])
        if len(set(dims[1:])) == 1 and g.chance(0.5):
            rest = dims[1]
        in_dims = (dims[0], rest)
    case["in_dims"] = in_dims
    # out_dims
    nested = int(case["transform"] == "vmap_nested")  # (the inner vmap's dim, in front)
    out_nd = len(case["prog"]["out_shape"]) + nested
    form = case["form"]
    if case["transform"] in ("vmap_grad", "vmap_jacrev"):
        case["out_dims"] = 0
    elif form in ("tensor", "scalar"):
        nd = (nested if form == "scalar" else out_nd) + 1
        od = g.r(nd) - (nd if g.chance(0.3) else 0)
        case["out_dims"] = (od,) if g.chance(0.15) else od
    elif form in ("tuple", "mixed"):
        nd = out_nd + 1
        case["out_dims"] = g.pick((0, (g.r(nd), -1), (0, g.r(nd))))
    else:
        case["out_dims"] = 0
    if case["transform"] == "vmap_random":
        case["randomness"] = g.pick(("error", "same", "different"))
        case["out_dims"] = 0
    if g.chance(0.2):
        case["chunk_size"] = g.pick((1, 2, 3))
    if g.chance(0.2):
        case["kw"] = 0.5 + g.r(3) * 0.25


def _draw_bad(g, case):
    tr = case["transform"]
    opts = []
    if tr in ("vmap", "vmap_nested", "vmap_grad"):
        opts += [
            "batch_mismatch",
            "in_dim_range",
            "in_dims_list",
            "in_dims_struct",
            "out_dim_range",
        ]
        if tr == "vmap" and case["B"] > 1 and case["form"] in ("tuple", "mixed"):
            opts += ["out_none"]  # (a mapped output with out_dim None: refused)
    if tr in ("grad", "grad_and_value"):
        opts += ["nonscalar", "argnum_range", "argnum_repeat"]
        if case["aux"]:
            opts += ["aux_single"]
    if tr in ("jvp", "linearize"):
        opts += ["tangent_shape"]
    if tr == "vjp":
        opts += ["cotangent_shape"]
    if tr in ("jacrev", "jacfwd"):
        opts += ["argnum_range"]
    if tr.startswith("af_"):
        opts += ["af_list", "af_v_shape"]
    if opts:
        case["bad"] = g.pick(opts)


def _build_model(g, case):
    din, dh, dout = g.pick(SIZES), g.pick((2, 3, 4)), g.pick(SIZES)
    case["dims"] = (din, dh, dout)
    case["bn"] = g.chance(0.3)
    case["tied"] = case["transform"] == "model_call" and dh == din and g.chance(0.4)
    n = 1 + g.r(3) if case["transform"] == "model_ensemble" else 1
    case["states"] = [_model_state(g, case) for _ in range(n)]
    B = 0 if g.chance(0.03) else g.pick((1, 2, 3, 5))
    case["B"] = B
    case["x"] = g.arr((B, din))
    case["y"] = g.arr((B, dout))
    case["strict"] = g.chance(0.2)
    case["tie_weights"] = not g.chance(0.25)
    case["drop"] = g.chance(0.15)  # (a parameter left out of the dict)
    case["both_tied"] = case["tied"] and g.chance(0.3)  # (a value for each tied name)
    case["same_tied"] = case["both_tied"] and g.chance(0.5)  # (the same tensor for both)
    case["ens_x_batched"] = g.chance(0.5)
    return case


def _model_state(g, case):
    din, dh, dout = case["dims"]
    st = {
        "l1.weight": g.arr((dh, din)) * 0.7,
        "l1.bias": g.arr((dh,)) * 0.3,
        "l2.weight": g.arr((dout, dh)) * 0.7,
        "l2.bias": g.arr((dout,)) * 0.3,
    }
    if case["bn"]:
        st["bn.weight"] = 1 + 0.2 * g.arr((dh,))
        st["bn.bias"] = 0.2 * g.arr((dh,))
        st["bn.running_mean"] = 0.3 * g.arr((dh,))
        st["bn.running_var"] = (1 + 0.3 * np.abs(g.arr((dh,)))).astype(np.float32)
    return st


# ---- running one side ---------------------------------------------------------------------------
def _tensors(T, arrays, dtype):
    return [T.tensor(a, dtype=dtype) for a in arrays]


def run_side(T, case, dtype_name):
    """The case's result on T (torch or pyrite) with inputs of dtype_name, or the exception."""
    dtype = getattr(T, dtype_name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ("ok", _run(T, case, dtype))
        except Exception as e:  # noqa: BLE001 (compared between the sides)
            return ("raise", e)


def _run(T, case, dtype):
    tr = case["transform"]
    if tr.startswith("model"):
        return _run_model(T, case, dtype)
    F = T.func
    bad = case["bad"]
    f = make_fn(T, case)
    args = packed_args(T, case, case["arrays"], dtype)
    nargs = len(args)
    if tr in ("grad", "grad_and_value"):
        an = case["argnums"]
        if bad == "argnum_range":
            an = nargs
        elif bad == "argnum_repeat":
            an = (0, 0 - nargs)
        fn = f
        if bad == "nonscalar":
            fn = make_fn(T, case, form="tensor")
        if bad == "aux_single":
            fn = make_fn(T, case, aux=False)
        tf = F.grad if tr == "grad" else F.grad_and_value
        return tf(fn, argnums=an, has_aux=case["aux"])(*args)
    if tr == "vjp":
        res = F.vjp(f, *args, has_aux=case["aux"])
        out = res[0]
        cts = _like(T, out, case["seed"], dtype, bad == "cotangent_shape")
        return (res[0], res[1](cts), *res[2:])
    if tr in ("jvp", "linearize"):
        tans = packed_args(T, case, case["tangents"], dtype)
        if bad == "tangent_shape":
            tans = (T.cat([tans[0], tans[0]]) if tans[0].dim() else tans[0][None], *tans[1:])
        if tr == "jvp":
            return F.jvp(f, args, tans, has_aux=case["aux"], strict=case.get("strict", False))
        out, jfn = F.linearize(f, *args)
        return out, jfn(*tans)
    if tr in ("jacrev", "jacfwd"):
        an = nargs if bad == "argnum_range" else case["argnums"]
        if T is torch and tr == "jacfwd":
            an = _nonneg(an, nargs)  # (torch 2.13's jacfwd: a negative argnum gives zeros)
        tf = F.jacrev if tr == "jacrev" else F.jacfwd
        return tf(f, argnums=an, has_aux=case["aux"])(*args)
    if tr == "hessian":
        an = case["argnums"]
        if T is torch:
            an = _nonneg(an, nargs)  # (torch's hessian is jacfwd(jacrev): the same argnums bug)
        return F.hessian(f, argnums=an)(*args)
    if tr == "jacrev_jacfwd":
        return F.jacrev(F.jacfwd(f))(*args)
    if tr == "jacrev_jacrev":  # (torch's reverse-only reference where its forward mode fails)
        an = _nonneg(case.get("argnums", 0), nargs)
        return F.jacrev(F.jacrev(f, argnums=an), argnums=an)(*args)
    if tr in ("vmap", "vmap_nested", "vmap_grad", "vmap_jacrev", "vmap_random"):
        return _run_vmap(T, case, f, args, dtype)
    if tr.startswith("af_"):
        return _run_af(T, case, f, args, dtype)
    if tr == "fwad":
        fa = T.autograd.forward_ad
        tans = _tensors(T, case["tangents"], dtype)
        with fa.dual_level():
            duals = [fa.make_dual(a, t) for a, t in zip(_tensors(T, case["arrays"], dtype), tans)]
            xs = packed_args_from(case, duals)
            out = f(*xs)
            flat = _leaves(out)
            res = []
            for o in flat:
                p, t = fa.unpack_dual(o)
                res.append((p.detach(), t))
            return res
    raise AssertionError(tr)


def _nonneg(an, nargs):
    if isinstance(an, int):
        return an % nargs if -nargs <= an < nargs else an
    return tuple(a % nargs if -nargs <= a < nargs else a for a in an)


def _empty_selection(case):
    """Whether an int argnums selects an argument holding no tensor (an empty dict / tuple)."""
    an = case.get("argnums")
    if case["bad"] or an is None:
        return False
    arrays = case["arrays"]
    if case["pack"] == "flat":
        groups = [[a] for a in arrays]
    else:
        groups = [arrays[:1], arrays[1:]]
    sel = [an] if isinstance(an, int) else list(an)
    picked = [groups[i % len(groups)] for i in sel]
    if isinstance(an, int) and not picked[0]:
        return True
    return sum(a.size for g in picked for a in g) == 0  # (no element selected at all)


def packed_args_from(case, ts):
    x, es = ts[0], ts[1:]
    if case["pack"] == "flat":
        return (x, *es)
    if case["pack"] == "dict":
        return (x, {f"e{i}": e for i, e in enumerate(es)})
    return (x, tuple(es))


def _leaves(tree):
    if isinstance(tree, dict):
        return [v for k in tree for v in _leaves(tree[k])]
    if isinstance(tree, (tuple, list)):
        return [v for t in tree for v in _leaves(t)]
    return [tree]


def _like(T, tree, seed, dtype, wrong=False):
    """Random tensors of tree's structure and shapes (cotangents); the first one's shape
    grown by one row where `wrong`."""
    rng = np.random.default_rng(seed + 7)
    first = [True]

    def mk(t):
        shape = tuple(t.shape)
        if wrong and first[0]:
            shape = (shape[0] + 1, *shape[1:]) if shape else (2,)
        first[0] = False
        return T.tensor(rng.standard_normal(shape).astype(np.float32), dtype=dtype)

    def walk(x):
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, tuple):
            return tuple(walk(v) for v in x)
        if isinstance(x, list):
            return [walk(v) for v in x]
        return mk(x)

    return walk(tree)


def _run_vmap(T, case, f, args, dtype):
    F = T.func
    tr, bad = case["transform"], case["bad"]
    in_dims, out_dims = case["in_dims"], case["out_dims"]
    kw = {}
    if "chunk_size" in case:
        kw["chunk_size"] = case["chunk_size"]
    if bad == "batch_mismatch":
        # grow the first batched input's mapped dim by one
        x = args[0]
        d0 = case["dims_flat"][0] % x.dim()
        args = (T.cat([x, x.narrow(d0, 0, 1) if x.shape[d0] else x.sum(d0, keepdim=True)], d0),
                *args[1:])  # fmt: skip
    elif bad == "in_dim_range":
        in_dims = args[0].dim() + 1 if isinstance(in_dims, int) else (args[0].dim(), *in_dims[1:])
    elif bad == "in_dims_list":
        in_dims = list(in_dims) if isinstance(in_dims, tuple) else [in_dims] * len(args)
    elif bad == "in_dims_struct":
        in_dims = (*in_dims, 0) if isinstance(in_dims, tuple) else (in_dims,) * (len(args) + 1)
    elif bad == "out_dim_range":
        out_dims = 7
    elif bad == "out_none":
        out_dims = (0, None)
    if (
        T is torch
        and case.get("in_dims_reordered")
        and isinstance(in_dims, (tuple, list))
        and isinstance(in_dims[1], dict)
    ):
        # (torch 2.13 pairs a dict's in_dims with the input's entries by position, not key)
        in_dims = type(in_dims)([in_dims[0], dict(sorted(in_dims[1].items())), *in_dims[2:]])
    if T is torch and "chunk_size" in kw and isinstance(out_dims, tuple) and len(out_dims) == 1:
        out_dims = out_dims[0]  # (torch 2.13: chunk_size with a 1-tuple out_dims asserts)
    fkw = {}
    if "kw" in case:
        fkw["kw"] = case["kw"]
    if tr == "vmap":
        return F.vmap(f, in_dims, out_dims, **kw)(*args, **fkw)
    if tr == "vmap_nested":
        # the inner vmap maps the first non-batch dim of x (if any) of each element
        inner_dims = (0,) + (None,) * (len(args) - 1)
        inner = F.vmap(f, in_dims=inner_dims)
        return F.vmap(inner, in_dims, out_dims, **kw)(*args, **fkw)
    if tr == "vmap_grad":
        return F.vmap(F.grad(f, argnums=case["argnums"]), in_dims, **kw)(*args)
    if tr == "vmap_jacrev":
        return F.vmap(F.jacrev(f, argnums=case["argnums"]), in_dims, **kw)(*args)
    if tr == "vmap_random":
        mode = case["randomness"] if "randomness" in case else "error"
        fr = _random_fn(T, f)
        return F.vmap(fr, in_dims, out_dims, randomness=mode, **kw)(*args)
    raise AssertionError(tr)


def _random_fn(T, f):
    def fr(*a, **k):
        out = f(*a, **k)
        r = T.rand(3)
        return out, r

    return fr


def _run_af(T, case, f, args, dtype):
    A = T.autograd.functional
    tr, o = case["transform"], dict(case["af"])
    single = len(args) == 1
    inputs = args[0] if single and case["seed"] % 2 == 0 else tuple(args)
    tans = _tensors(T, case["tangents"], dtype)
    if case["bad"] == "af_list":
        inputs = list(args)  # (torch takes a Tensor or a tuple: a list is refused)
    elif case["bad"] == "af_v_shape":
        tans[0] = (
            T.cat([tans[0].reshape(-1), tans[0].reshape(-1)[:1]]) if tans[0].numel() else T.ones(1)
        )
    v_in = tans[0] if not isinstance(inputs, tuple) else tuple(tans)
    if tr == "af_jacobian":
        return A.jacobian(f, inputs, **o)
    if tr == "af_hessian":
        return A.hessian(f, inputs, **o)
    if tr == "af_vjp":
        with T.no_grad():
            out = f(*(inputs if isinstance(inputs, (tuple, list)) else (inputs,)))
        v = _like(T, out, case["seed"], dtype, case["bad"] == "af_v_shape")
        return A.vjp(f, inputs, v, **o)
    if tr == "af_jvp":
        return A.jvp(f, inputs, v_in, **o)
    if tr == "af_hvp":
        return A.hvp(f, inputs, v_in, **o)
    if tr == "af_vhp":
        return A.vhp(f, inputs, v_in, **o)
    raise AssertionError(tr)


# ---- models -------------------------------------------------------------------------------------
_NETS: dict = {}


def _module(T, case):
    """A fresh module of the case's architecture (one class per T and architecture: an
    ensemble's models must be of one class)."""
    key = (T.__name__, case["dims"], case["bn"], case["tied"])
    if key not in _NETS:
        _NETS[key] = _net_class(T, case)
    m = _NETS[key]()
    m.eval()
    return m


def _net_class(T, case):
    din, dh, dout = case["dims"]
    nn = T.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = nn.Linear(din, dh)
            self.bn = nn.BatchNorm1d(dh) if case["bn"] else None
            self.l2 = nn.Linear(dh, dout)
            if case["tied"]:
                self.l0 = nn.Linear(din, dh)
                self.l0.weight = self.l1.weight

        def forward(self, x):
            if case["tied"]:
                x = self.l0(x).tanh()
            h = self.l1(x)
            if self.bn is not None:
                h = self.bn(h)
            return self.l2(h.tanh())

    return Net


def _run_model(T, case, dtype):
    F = T.func
    tr = case["transform"]
    models = []
    for st in case["states"]:
        m = _module(T, case)
        with T.no_grad():
            for k, v in st.items():
                slot = m.get_parameter(k) if "running" not in k else m.get_buffer(k)
                slot.copy_(T.tensor(v))
        if case["tied"]:
            with T.no_grad():
                m.l0.bias.copy_(T.tensor(st["l1.bias"]) * 0.5)
        m.to(dtype)
        models.append(m)
    x = T.tensor(case["x"], dtype=dtype)
    y = T.tensor(case["y"], dtype=dtype)
    m0 = models[0]
    if tr == "model_call":
        params = {k: T.tensor(v, dtype=dtype) * 1.25 for k, v in case["states"][0].items()}
        if case["tied"] and case["drop"]:
            params.pop("l1.weight")
        elif case["drop"]:
            params.pop("l2.bias")
        if case["tied"] and not case["drop"]:
            params["l0.bias"] = params["l1.bias"] * 0.5
        if case["both_tied"] and "l1.weight" in params:
            w = params["l1.weight"]
            params["l0.weight"] = w if case["same_tied"] else w * 0.5
        out = F.functional_call(m0, params, (x,), strict=case["strict"],
                                tie_weights=case["tie_weights"])  # fmt: skip
        after = m0(x)  # (the module's own tensors are back)
        return out, after
    if tr == "model_ensemble":
        params, buffers = F.stack_module_state(models)

        def call(p, b, xx):
            return F.functional_call(m0, (p, b), (xx,))

        if case["ens_x_batched"]:
            xs = (
                x[None].expand(len(models), *x.shape)
                * T.arange(1, len(models) + 1, dtype=dtype)[:, None, None]
            )
            out = F.vmap(call)(params, buffers, xs)
        else:
            out = F.vmap(call, in_dims=(0, 0, None))(params, buffers, x)
        loss = (out * out).sum()
        g = T.autograd.grad(loss, list(params.values()))
        return out, sorted(params), sorted(buffers), list(g)
    if tr == "model_persample":
        params = {k: v.detach() for k, v in m0.named_parameters()}
        buffers = {k: v.detach() for k, v in m0.named_buffers()}

        def loss(p, xx, yy):
            pred = F.functional_call(m0, (p, buffers), (xx[None],))
            return ((pred - yy[None]) ** 2).mean()

        return F.vmap(F.grad(loss), in_dims=(None, 0, 0))(params, x, y)
    raise AssertionError(tr)


# ---- comparing ----------------------------------------------------------------------------------
def _structure(tree, T):
    """The tree's structure as plain data: ("t", shape, dtype) for a tensor leaf."""
    if isinstance(tree, dict):
        return ("dict", tuple((k, _structure(v, T)) for k, v in tree.items()))
    if isinstance(tree, tuple):
        return ((type(tree).__name__ if hasattr(tree, "_fields") else "tuple"),
                tuple(_structure(v, T) for v in tree))  # fmt: skip
    if isinstance(tree, list):
        return ("list", tuple(_structure(v, T) for v in tree))
    if isinstance(tree, T.Tensor):
        name = str(tree.dtype).replace("torch.", "").replace("pyrite.", "")
        return ("t", tuple(tree.shape), "int32" if name == "int64" else name)  # (pyrite's int)
    if tree is None:
        return ("None",)
    return ("py", type(tree).__name__, tree if not isinstance(tree, float) else round(tree, 5))


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().to(torch.float64).numpy(force=True)  # (a ZeroTensor too)
    return np.asarray(t.detach().numpy(), dtype=np.float64)


def _tensor_leaves(tree, T):
    if isinstance(tree, dict):
        return [v for k in tree for v in _tensor_leaves(tree[k], T)]
    if isinstance(tree, (tuple, list)):
        return [v for x in tree for v in _tensor_leaves(x, T)]
    return [tree] if isinstance(tree, T.Tensor) else []


def _depth(case):
    tr = case["transform"]
    order = 1
    if tr in ("hessian", "jacrev_jacfwd", "af_hessian", "af_hvp", "af_vhp"):
        order = 2
    if tr in ("vmap", "vmap_nested", "vmap_random", "model_call"):
        order = 0
    steps = len(case["prog"]["steps"]) if "prog" in case else 4
    return steps + order


def _n(case):
    if "prog" in case:
        return max([max(a.shape, default=1) for a in case["arrays"]] + [1])
    return max(case["dims"])


def compare(ref, t32, got, case, nan_as_zero=False):
    """(ok, detail) for the three results' trees (`nan_as_zero`: torch's NaN tangents of an
    empty reduction read as the 0 they are)."""
    sref, sgot = _structure(t32, torch), _structure(got, pr)
    sgot_cmp = _dtype_free(sgot)
    if _dtype_free(sref) != sgot_cmp:
        return False, f"structure: torch {sref} pyrite {sgot}"
    note = ""
    if sref != sgot:
        if not (_forward_mode(case) and _f64_only(sref, sgot)):
            return False, f"dtypes: torch {sref} pyrite {sgot}"
        note = "torch_bug"
    L64, L32, LP = (_tensor_leaves(ref, torch), _tensor_leaves(t32, torch),
                    _tensor_leaves(got, pr))  # fmt: skip
    c = 16 * (_depth(case) + 2) * (_n(case) + 1)
    rs, ts, gs = [_np(a) for a in L64], [_np(a) for a in L32], [_np(a) for a in LP]
    if nan_as_zero:
        gs = [np.where(np.isnan(r) & np.isnan(g), 0.0, g) if r.shape == g.shape else g
              for r, g in zip(rs, gs)]  # fmt: skip
        rs, ts = (
            [np.where(np.isnan(a), 0.0, a) for a in rs],
            [np.where(np.isnan(a), 0.0, a) for a in ts],
        )
    allscale = max([float(np.nanmax(np.abs(np.where(np.isfinite(r), r, 0)), initial=0)) for r in rs]
                   + [0.0])  # fmt: skip
    for i, (r, t, g) in enumerate(zip(rs, ts, gs)):
        if r.dtype == bool or L32[i].dtype in (torch.int64, torch.int32, torch.bool):
            if not np.array_equal(r, g):
                return False, f"leaf {i}: integer values differ"
            continue
        fin = np.isfinite(r)
        if not np.array_equal(fin, np.isfinite(g)) and not np.array_equal(
            np.isfinite(t), np.isfinite(g)
        ):
            return False, f"leaf {i}: non-numbers at other places"
        if not fin.any():
            continue
        rr, gg = r[fin], g[fin]
        tt = np.where(np.isfinite(t[fin]), t[fin], rr)
        scale = float(np.abs(rr).max())
        if _derivative(case):
            scale = max(scale, allscale, 1.0)
        err = float(np.abs(gg - rr).max())
        tol = 4 * float(np.abs(tt - rr).max()) + c * U * scale
        if not err <= tol:
            return (
                False,
                f"leaf {i} shape {r.shape}: max err {err:.3g} > tol {tol:.3g} (scale {scale:.3g})",
            )
    return True, note


def _forward_mode(case):
    """Whether torch computes the case in forward mode (its jvp, jacfwd, hessian, forward_ad)."""
    tr = case["transform"]
    return tr in ("jvp", "linearize", "jacfwd", "hessian", "jacrev_jacfwd", "fwad") or (
        tr == "af_jacobian" and case["af"].get("strategy") == "forward-mode"
    )


def _f64_only(sref, sgot):
    """Whether the two structures differ only in leaves torch has as float64, pyrite float32."""
    if isinstance(sref, tuple) and sref and sref[0] == "t":
        return sref == sgot or (
            sref[:2] == sgot[:2] and sref[2] == "float64" and sgot[2] == "float32"
        )
    if isinstance(sref, tuple) and isinstance(sgot, tuple) and len(sref) == len(sgot):
        return all(_f64_only(a, b) for a, b in zip(sref, sgot))
    return sref == sgot


def _derivative(case):
    return case["transform"] not in ("vmap", "vmap_nested", "vmap_random", "model_call")


def _dtype_free(s):
    if isinstance(s, tuple) and s and s[0] == "t":
        return ("t", s[1])
    if isinstance(s, tuple):
        return tuple(_dtype_free(v) for v in s)
    return s


def check(case):
    tr = case["transform"]
    r64 = run_side(torch, case, "float64")
    r32 = run_side(torch, case, "float32")
    rp = run_side(pr, case, "float32")
    if tr in ("jacrev", "jacfwd", "vmap_jacrev") and _empty_selection(case):
        jac = rp[1][0] if rp[0] == "ok" and case["aux"] else rp[1]
        if (
            r32[0] == "raise"
            and rp[0] == "ok"
            and all(t.numel() == 0 for t in _tensor_leaves(jac, pr))
        ):
            return "torch_bug", EMPTY_SELECTION
    if tr in ("hessian", "jacrev_jacfwd") and case["arrays"][0].size == 0:
        if r32[0] == "raise" and rp[0] == "ok":
            if all(t.numel() == 0 for t in _tensor_leaves(rp[1], pr)):
                return "torch_bug", EMPTY_HESSIAN
    if tr.startswith("af_") and r32[0] == "raise" and rp[0] == "ok":
        if any(a.size == 0 for a in case["arrays"]) and (
            case["af"].get("vectorize") or case["af"].get("strategy")
        ):
            # torch's vectorized path fails on empty tensors: its loop is the reference
            plain = dict(
                case, af={k: v for k, v in case["af"].items() if k not in ("vectorize", "strategy")}
            )
            p64, p32 = run_side(torch, plain, "float64"), run_side(torch, plain, "float32")
            if p64[0] == "ok" and p32[0] == "ok":
                ok, detail = compare(
                    _lists_as_tuples(p64[1]), _lists_as_tuples(p32[1]), rp[1], case
                )
                return ("torch_bug", EMPTY_VECTORIZED) if ok else ("fail", detail)
            r32 = p32
        if "non-empty TensorList" in str(r32[1]):
            if any(t.numel() == 0 for t in _tensor_leaves(rp[1], pr)):
                return "torch_bug", EMPTY_AF
    if _forward_mode(case) and r32[0] == "raise" and rp[0] == "ok":
        if "expected scalar type" in str(r32[1]) and not case["bad"]:
            return _check_by_reverse_mode(case, rp[1])
    if case["bad"] == "out_none" and r32[0] == "raise" and rp[0] == "ok":
        return _check_out_none(case)
    if case.get("B") == 0 and r32[0] == "raise" and rp[0] == "ok":
        return _check_empty_batch(case, rp[1])
    if r32[0] == "raise" and rp[0] == "raise":
        return "ok", f"both raise: {type(r32[1]).__name__} / {type(rp[1]).__name__}"
    if r32[0] == "raise":
        return "fail", f"torch raises {type(r32[1]).__name__}: {r32[1]}; pyrite does not"
    if rp[0] == "raise":
        return "fail", f"pyrite raises {type(rp[1]).__name__}: {rp[1]}; torch does not"
    if r64[0] == "raise":
        return "fail", f"harness: torch float64 raises {r64[1]!r}"
    if tr == "vmap_random" and case.get("randomness", "error") != "error":
        return _check_random(r32[1], rp[1], case)
    if tr == "af_jacobian" and case["af"].get("strategy") == "forward-mode":
        if _structure(r32[1], torch) != _structure(rp[1], pr):
            r64 = ("ok", _lists_as_tuples(r64[1]))
            r32 = ("ok", _lists_as_tuples(r32[1]))
            ok, detail = compare(r64[1], r32[1], rp[1], case)
            return ("torch_bug", LIST_JACOBIAN) if ok else ("fail", detail)
    ok, detail = compare(_as64(r64[1]), r32[1], rp[1], case)
    if not ok and _forward_mode(case) and any(a.size == 0 for a in case.get("arrays", ())):
        if compare(r64[1], r32[1], rp[1], case, nan_as_zero=True)[0]:
            return "torch_bug", EMPTY_TANGENT
    if not ok:
        return "fail", detail
    if detail == "torch_bug":
        return "torch_bug", F64_TANGENT
    return "ok", ""


F64_TANGENT = (
    "torch's forward mode gives a float64 tangent for a 0-d float32 tensor times a Python float "
    "(pyrite's, float32, is checked by value)"
)


EMPTY_SELECTION = (
    "torch's jacrev / jacfwd with an int argnums selecting an argument with no tensor (an "
    "empty dict or tuple), or a tuple argnums selecting no element, raise from inside "
    "(treespec unflatten, cat of no tensors, an index out of bounds); grad "
    "returns the empty structure, and pyrite's jacobians are that empty structure"
)


EMPTY_HESSIAN = (
    "torch's hessian / jacrev(jacfwd(f)) of an input with no element raises from inside "
    "(select(): index 0 out of range); the Hessian is an empty tensor, pyrite's is"
)


EMPTY_TANGENT = (
    "torch's forward mode gives a NaN tangent for a mean over an empty dim (0/0 in the "
    "tangent's arithmetic); the output does not depend on the input (it has no element), "
    "the tangent is 0, as pyrite's (checked with torch's NaNs read as 0)"
)


EMPTY_AF = (
    "torch's autograd.functional jacobian / hessian of an output (or gradient) with no "
    "element raise from inside (stack expects a non-empty TensorList); the block is an empty "
    "tensor, pyrite's is"
)
EMPTY_VECTORIZED = (
    "torch's autograd.functional with vectorize=True (or forward-mode) raises from inside on "
    "a tensor with no element (index out of bounds, an ambiguous reshape); pyrite's result is "
    "checked against torch's vectorize=False loop"
)
LIST_JACOBIAN = (
    "torch's autograd.functional.jacobian with strategy='forward-mode' nests its blocks in "
    "lists (its _jacfwd builds them so); its documented result, and pyrite's, is tuples "
    "(compared with torch's lists read as tuples)"
)
EMPTY_BATCH = (
    "torch's vmap over a batch of size 0 raises from inside for some functions (an integer "
    "index, chunk_size, a per-sample gradient through BatchNorm); pyrite's result is checked "
    "against torch's for a batch of one (the same shapes with the mapped dim 0)"
)


F64_RAISE = (
    "torch's forward mode raises 'expected scalar type Double but found Float' where its "
    "float64 tangent of a 0-d tensor times a Python float meets a float32 one (stack, cat); "
    "pyrite's Jacobians are checked against torch's reverse mode (jacrev), a jvp's only for "
    "not raising"
)


def _check_by_reverse_mode(case, got):
    tr = case["transform"]
    rev = {"hessian": "jacrev_jacrev", "jacrev_jacfwd": "jacrev_jacrev", "jacfwd": "jacrev"}
    if tr not in rev:
        return "torch_bug", F64_RAISE
    alt = dict(case, transform=rev[tr])
    r64, r32 = run_side(torch, alt, "float64"), run_side(torch, alt, "float32")
    if r64[0] == "raise" or r32[0] == "raise":
        return "fail", f"harness: torch's reverse mode raises too: {r32[1]!r}"
    ok, detail = compare(r64[1], r32[1], got, case)
    return ("torch_bug", F64_RAISE) if ok else ("fail", detail)


OUT_NONE_EQUAL = (
    "a mapped output with out_dim None whose elements are all equal passes pyrite's vmap "
    "(pyrite/_vmap.py: the loop sees values only); torch refuses it"
)


def _check_out_none(case):
    """pyrite took out_dims (0, None) where torch refused: known only where the second output
    is equal in every element (torch's, mapped with out_dims (0, 0))."""
    mapped = dict(case, bad=None, out_dims=(0, 0))
    r = run_side(torch, mapped, "float32")
    if r[0] == "raise":
        return "fail", f"harness: torch raises with out_dims (0, 0): {r[1]!r}"
    second = _np(r[1][1])
    if all(np.array_equal(second[0], second[i], equal_nan=True) for i in range(len(second))):
        return "known", OUT_NONE_EQUAL
    return "fail", "vmap took out_dims None for an output that differs between elements"


def _lists_as_tuples(tree):
    if isinstance(tree, (list, tuple)) and not hasattr(tree, "_fields"):
        return tuple(_lists_as_tuples(x) for x in tree)
    return tree


def _one_at(shape, d):
    return shape[:d] + (1,) + shape[d + 1 :]


def _check_empty_batch(case, got):
    """torch raised on a batch of size 0: pyrite's result against torch's for a batch of one
    (zeros), shape by shape, with one dim of torch's 1 being pyrite's 0."""
    one = dict(case)
    if "prog" in case:
        one["arrays"] = [
            a if d is None else np.zeros(_one_at(a.shape, d % a.ndim), a.dtype)
            for a, d in zip(case["arrays"], case["dims_flat"])
        ]  # fmt: skip
    else:
        one["x"] = np.zeros((1, *case["x"].shape[1:]), np.float32)
        one["y"] = np.zeros((1, *case["y"].shape[1:]), np.float32)
        one["B"] = 1
    r1 = run_side(torch, one, "float32")
    if r1[0] == "raise":
        return "fail", f"torch raises for a batch of 0 and of 1 ({r1[1]!r}); pyrite does not"
    a, b = _structure(r1[1], torch), _structure(got, pr)

    def agree(x, y):
        if isinstance(x, tuple) and x and x[0] == "t":
            if (
                not (isinstance(y, tuple) and y and y[0] == "t")
                or x[2] != y[2]
                or len(x[1]) != len(y[1])
            ):
                return False
            diff = [i for i, (p, q) in enumerate(zip(x[1], y[1])) if p != q]
            return len(diff) <= 1 and all(x[1][i] == 1 and y[1][i] == 0 for i in diff)
        if isinstance(x, tuple) and isinstance(y, tuple) and len(x) == len(y):
            return all(agree(p, q) for p, q in zip(x, y))
        return x == y

    if not agree(a, b):
        return "fail", f"empty batch: torch (batch of 1) {a} pyrite {b}"
    return "torch_bug", EMPTY_BATCH


def _as64(tree):
    """torch float64 results as they are (their dtype is compared through torch float32's)."""
    return tree


def _check_random(t32, got, case):
    mode = case["randomness"]
    sref, sgot = _structure(t32, torch), _structure(got, pr)
    if sref != sgot:
        return "fail", f"structure: torch {sref} pyrite {sgot}"
    r = _np(got[1])
    B = case["B"]
    od = case["out_dims"]
    if isinstance(od, tuple):
        od = od[-1] if isinstance(od[-1], int) else 0
    if B > 1 and od is not None:
        rows = np.moveaxis(r, od % r.ndim, 0) if r.ndim else r
        same = all(np.array_equal(rows[0], rows[i]) for i in range(1, B))
        if mode == "same" and not same:
            return "fail", "randomness='same' gave different numbers per element"
        if mode == "different" and same:
            return "fail", "randomness='different' gave the same numbers per element"
    return "intentional", f"randomness={mode!r}: numbers from another generator; shapes agree"


def describe(case) -> str:
    keys = [k for k in case if k not in ("arrays", "tangents", "states", "x", "y", "prog")]
    lines = [
        f"seed {case['seed']}: {case['transform']} "
        + ", ".join(f"{k}={case[k]!r}" for k in keys if k not in ("seed", "transform"))
    ]
    if "prog" in case:
        lines.append(
            f"  steps {case['prog']['steps']} extras {case['prog']['extras']} "
            f"-> {case['prog']['out_shape']}"
        )
        lines.append("  arrays " + ", ".join(str(a.shape) for a in case["arrays"]))
    else:
        lines.append(f"  models {len(case['states'])} x {case['x'].shape}")
    return "\n".join(lines)


def main(argv=None):
    return fuzz_driver.run(__doc__, build, check, describe, argv)


if __name__ == "__main__":
    sys.exit(main())
