"""Randomized differential fuzz of pyrite.utils.data and of pyrite's sparse COO tensors against
torch 2.13 CPU (session 46).

A case is plain data drawn per seed, one of eight kinds:
- loader: a map-style dataset of n samples (n in 0, 1, 2, 3, 5, 7, 11, 13): a TensorDataset of
  1-3 tensors (float32 / int64 / bool / float16, trailing shapes () to (2, 3)), a Dataset
  subclass whose sample i is a nested structure (dicts, namedtuples, lists, tuples of ints,
  floats, strings, bytes, numpy arrays and scalars of mixed dtypes, tensors), a Subset of a
  TensorDataset (the DataLoader's one-gather path), a ConcatDataset or a StackDataset (tuple
  or dict); a DataLoader over it with batch_size in None, 1, 2, 3, 4, 7, drop_last, shuffle,
  a sampler (SequentialSampler, a plain list, RandomSampler with or without replacement and
  num_samples, SubsetRandomSampler, WeightedRandomSampler with zero weights, with or without
  replacement), a batch_sampler (BatchSampler over one of those, or a list of lists),
  collate_fn (default, a list-returning one, default_convert), num_workers 0 (now and then 1
  or 2). Now and then an invalid combination (batch_sampler with batch_size / shuffle /
  sampler / drop_last, shuffle with a sampler, batch_size=None with drop_last, batch_size 0
  or 2.5, num_workers -1, an empty dataset shuffled).
- iterable: an IterableDataset of n samples (with __len__ right, wrong or absent), or a
  ChainDataset of two; batch_size None / k, drop_last.
- collate: default_collate of a batch of nested samples, and default_convert of one sample.
- split: random_split with int lengths or fractions (some that do not sum to 1, negative
  ones, zeros), with or without a generator.
- datasets: ConcatDataset / Subset / StackDataset / TensorDataset / ChainDataset indexing
  (negative and out-of-range indices), lengths and construction errors.
- samplers: the samplers' constructors (valid and invalid arguments) and their len().
- sparse: a COO tensor of sparse_dim 1-3 and dense_dim 0-1, sizes 1, 2, 3, 5, 7 (0 where it can
  be), nnz 0-12 with duplicate and unsorted indices (sparse_coo_tensor, size given or
  inferred) or a dense tensor's to_sparse(sparse_dim); float32 (float64, float16, int64 now
  and then); one op: to_dense, coalesce (its indices and values), the COO accessors,
  sparse * scalar, / scalar, -s, s * dense, dense * s, s + s, s - s, dense + s, t, transpose,
  index_select, sparse.sum (dims none / int / tuple), s.sum(), sparse.softmax / log_softmax,
  sparse.mm / torch.mm / spmm / @ / sparse.addmm / torch.addmm with a dense (views: a
  transposed one now and then); the result's to_dense, and where both results are sparse
  their coalesced COO form and is_coalesced.
- sparse_grad: the same with gradients: the values (or the dense tensor before to_sparse, or a
  sparse leaf made with requires_grad=True) and the dense operand require grad; the loss is
  sum(to_dense(result) * W); the leaves' gradients (to_dense'd) are compared.

What is compared: data: Python structure and types exactly (list / tuple / dict / namedtuple /
str / bytes / ndarray), tensors' dtypes (mapped: torch int64 is pyrite int32, float64
float32, README "Differences from PyTorch"), shapes and values exactly (collation copies, it
computes nothing); len() of samplers and loaders; and where one side raises and the other not
(both raising is agreement). Random samplers are not expected to give torch's indices
(pyrite's shuffles come from pr.Generator, not torch's stream: README, utils/data/_random.py),
so a random case runs pyrite's loader twice from one pr.Generator seed: the first time its
index sampler is listed, the second its batches read; the indices must obey the sampler's
law (a permutation per len(dataset) block, distinct and inside the subset or the nonzero
weights without replacement, in range with it), the batch sizes must be torch's, and each
batch must equal torch's collation of torch's dataset at those indices. random_split: the
split sizes exactly, and the indices a partition of range(n); the same generator seed twice
gives the same split.

Sparse values are compared with torch float64 (ref) and torch float32 (or float16) as a guide:
    |pyrite - ref| <= 8·K·u·S + 4·|torch32 - ref|,   u = 2^-24 (2^-11 for float16),
where K is the number of terms an output sums (nnz duplicates, the inner size of a product,
the row length of a softmax), S the same output computed on |values| and |dense operands|
(the sum's condition), and for softmax / log_softmax S = 1 + max|x| + |ref| (exp's
argument's rounding). Gradients: the same with S the gradient computed from |inputs| and |W|.
Integer values compare exactly. COO indices compare exactly.

Classified (counted, not failures):
- intentional, pyrite's documented choices (README "Differences from PyTorch", ops/sparse_coo.py,
  pyrite/sparse.py):
  * dtypes: int64 is int32, float64 float32 (a collated Python float is float32, torch float64);
    a collated int above int32's range is refused (OverflowError, naming int32).
  * results that torch keeps sparse and pyrite returns dense (sparse.sum with dims, sparse *
    sparse / dense + sparse results, softmax, ...): compared through to_dense; a result's COO
    form compared only where pyrite's is sparse too.
  * sparse_coo_tensor checks the indices against the size (torch only with check_invariants):
    pyrite refuses indices outside size.
  * pyrite computes what torch's sparse kernels refuse on CPU but the dense form defines: sparse
    softmax of float16 / integers, hybrid (dense_dim 1) mm, addmm with a sparse `input`,
    `sparse + dense` (torch: "use add(dense, sparse)"), narrow and index_select's backward,
    to_dense(dtype=), unary math on the sparse tensor.
  * torch refuses backward through sparse.sum with a dense incoming gradient and through
    index_select of a sparse tensor: compared forward only.
  * torch's sparse * sparse of uncoalesced operands gives a pattern of its algorithm's (not
    the intersection, which it gives for coalesced ones) and masks the gradient to it: values
    compared, the COO form and the gradient not (the operands are coalesced half the time).
  * torch scales uncoalesced duplicates one by one (`s / 0` of entries 0.2 and -0.5 at one
    place: inf + -inf = nan; the tensor's value there is -0.3 / 0 = -inf, pyrite's): the
    non-finite scale op coalesces first.
- workers: pyrite loads in the main process (dataloader.py); with num_workers > 0 a map-style
  dataset's batches are the same, an IterableDataset is iterated once (not per worker): for
  iterables num_workers stays 0 or 1.
Found and fixed (tests/test_fuzz_data_sparse46.py, its docstring in full): results torch keeps
sparse were dense, so to_dense no longer masked the gradient; sparse.sum / mm / addmm passed the
sparse operand's gradient unmasked; empty-nnz values got no gradient; hybrid t() and sparse /
dense transpose accepted; `s * inf` stored nan at unspecified entries; an empty batch from a
batch_sampler over a TensorDataset collated to empty tensors (torch: IndexError).
Known and open (session 46, seeds 0:3000):
- fixed by the lead after the run: pr.addmm of integer tensors with beta=0.0 returned float32
  (torch keeps the integer dtype); ops/matmul.py now casts the scalars as torch does.
- fixed by the lead after the run (not drawn here): the function forms pr.mul(s, 2) /
  pr.add(s, s2) / pr.neg(s) / pr.t(s) returned dense tensors, so `pr.mul(x.to_sparse(),
  2).to_dense()` passed the gradient unmasked; they now take the methods
  (ops/sparse_coo.sparse_function_forms; tests/test_fuzz_data_sparse46.py).

    .venv/bin/python scripts/fuzz_data_sparse.py --seeds 0:100 [--show 17] [--verbose]
"""

from __future__ import annotations

import collections
import math
import sys
import warnings

import numpy as np
import torch

import pyrite as pr

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import fuzz_driver  # noqa: E402

U32, U16 = 2.0**-24, 2.0**-11
SIZES = (0, 1, 2, 3, 5, 7, 11, 13)
NT = collections.namedtuple("NT", "a b")
KINDS = (
    "loader",
    "loader",
    "loader",
    "iterable",
    "collate",
    "split",
    "datasets",
    "samplers",
    "sparse",
    "sparse",
    "sparse_grad",
    "sparse_grad",
)
MAPPED = {"int64": "int32", "float64": "float32", "complex128": "complex64"}


# ---- drawing a case ----------------------------------------------------------------------------
class Gen(fuzz_driver.Draws):
    def build(self):
        kind = self.pick(KINDS)
        case = {"seed": self.seed, "kind": kind}
        case.update(getattr(self, "_" + kind)())
        return case

    # -- samples: nested plain data, instantiated per library by _make_sample --
    def _leaf(self, depth):
        t = self.pick(("int", "float", "bool", "str", "bytes", "nparr", "npscalar", "tensor"))
        if t == "int":
            return ("int", self.r(200) - 100)
        if t == "float":
            return ("float", float(np.float32(self.rng.standard_normal())))
        if t == "bool":
            return ("bool", self.chance(0.5))
        if t == "str":
            return ("str", "s%d" % self.r(50))
        if t == "bytes":
            return ("bytes", b"b%d" % self.r(50))
        if t == "nparr":
            dt = self.pick(("float32", "float64", "int32", "int64", "uint8", "int16", "bool"))
            shape = self.pick(((), (1,), (3,), (2, 2), (0,), (2, 1, 3)))
            return ("nparr", dt, shape)
        if t == "npscalar":
            return ("npscalar", self.pick(("float32", "float64", "int64", "int8", "bool")))
        dt = self.pick(("float32", "int64", "bool", "float16"))
        return ("tensor", dt, self.pick(((), (1,), (3,), (2, 3))))

    def _sample_spec(self, depth=0):
        if depth >= 2 or self.chance(0.45):
            return self._leaf(depth)
        c = self.pick(("dict", "list", "tuple", "nt"))
        if c == "dict":
            keys = ["k%d" % j for j in range(1 + self.r(3))]
            return ("dict", [(k, self._sample_spec(depth + 1)) for k in keys])
        if c == "nt":
            return ("nt", [self._sample_spec(depth + 1), self._sample_spec(depth + 1)])
        return (c, [self._sample_spec(depth + 1) for _ in range(1 + self.r(3))])

    def _dataset(self, n):
        kind = self.pick(("tensor", "tensor", "map", "subset", "concat", "stack"))
        spec = {"type": kind, "n": n}
        if kind == "tensor":
            spec["tensors"] = [
                (self.pick(("float32", "int64", "bool", "float16")), self.pick(((), (2,), (2, 3))))
                for _ in range(1 + self.r(3))
            ]
        elif kind == "map":
            spec["sample"] = self._sample_spec()
        elif kind == "subset":
            m = n + self.r(4)
            spec["base"] = {"type": "tensor", "n": m, "tensors": [("float32", (2,)), ("int64", ())]}
            spec["indices"] = self.rng.permutation(m)[:n].tolist()
        elif kind == "concat":
            a = self.r(n + 1)
            spec["parts"] = [a, n - a]
            spec["sample"] = self._sample_spec()
        else:
            spec["as_dict"] = self.chance(0.5)
            spec["sample"] = self._sample_spec()
        return spec

    def _loader(self):
        n = self.pick(SIZES)
        ds = self._dataset(n)
        kw = {}
        bs = self.pick((None, 1, 2, 3, 4, 7, 1, 2, 3))
        kw["batch_size"] = bs
        if bs is not None and self.chance(0.4):
            kw["drop_last"] = True
        sampler = None
        r = self.r(10)
        if r < 2:
            kw["shuffle"] = True
        elif r < 7 and n > 0:
            sampler = self._sampler_spec(n)
        batch_sampler = None
        if self.chance(0.2) and n > 0:
            inner = sampler if sampler is not None else ("seq",)
            if self.chance(0.3):
                batch_sampler = (
                    "lists",
                    [self.rng.integers(0, n, self.r(4)).tolist() for _ in range(1 + self.r(4))],
                )
            else:
                batch_sampler = ("batch", inner, 1 + self.r(4), self.chance(0.4))
            sampler = None
            kw.pop("batch_size")
            kw.pop("drop_last", None)
            kw.pop("shuffle", None)
        collate = self.pick(("default", "default", "default", "list", "convert"))
        workers = 0 if self.chance(0.88) else self.pick((1, 2))
        bad = None
        if self.chance(0.15):
            bad = self.pick(
                ("bs_with_bsampler", "shuffle_with_sampler", "none_droplast", "bs_zero",
                 "bs_float", "workers_neg", "shuffle_bsampler", "droplast_bsampler",
                 "sampler_bsampler", "prefetch")
            )  # fmt: skip
        return {
            "dataset": ds,
            "kw": kw,
            "sampler": sampler,
            "batch_sampler": batch_sampler,
            "collate": collate,
            "workers": workers,
            "bad": bad,
            "gen_seed": self.r(10_000),
        }

    def _sampler_spec(self, n):
        k = self.pick(("seq", "list", "random", "random", "subset", "weighted"))
        if k == "list":
            return ("list", self.rng.integers(0, n, self.r(2 * n + 1)).tolist())
        if k == "random":
            ns = None if self.chance(0.5) else 1 + self.r(2 * n + 3)
            return ("random", self.chance(0.5), ns)
        if k == "subset":
            return ("subset", self.rng.permutation(n)[: 1 + self.r(n)].tolist())
        if k == "weighted":
            w = self.rng.uniform(0, 2, n)
            w[self.rng.random(n) < 0.3] = 0.0
            if w.sum() == 0:
                w[self.r(n)] = 1.0
            repl = self.chance(0.6)
            ns = 1 + self.r(int(np.count_nonzero(w)) if not repl else 2 * n + 1)
            if self.chance(0.1):
                ns = int(np.count_nonzero(w)) + 1  # too many without replacement
            return ("weighted", w.astype(np.float32).tolist(), ns, repl)
        return ("seq",)

    def _iterable(self):
        n = self.pick(SIZES)
        return {
            "n": n,
            "sample": self._sample_spec(),
            "has_len": self.pick(("right", "right", "wrong", "none")),
            "chain": self.chance(0.25),
            "batch_size": self.pick((None, 1, 2, 3, 5)),
            "drop_last": self.chance(0.4),
            "workers": self.pick((0, 0, 0, 1)),
        }

    def _collate(self):
        spec = self._sample_spec()
        return {"sample": spec, "n": 1 + self.r(4), "mutate": self.chance(0.15)}

    def _split(self):
        n = self.pick(SIZES)
        k = 1 + self.r(4)
        if self.chance(0.5):
            cuts = np.sort(self.rng.integers(0, n + 1, k - 1)) if n else np.zeros(k - 1, int)
            lengths = np.diff(np.concatenate([[0], cuts, [n]])).tolist()
            if self.chance(0.15):
                lengths[self.r(k)] += self.pick((-1, 1))
        else:
            f = self.rng.dirichlet(np.ones(k))
            lengths = [float(x) for x in f]
            if self.chance(0.3):
                lengths = [round(x, 1) for x in lengths]  # may not sum to 1
            if self.chance(0.1):
                lengths[0] = -lengths[0]
        return {"n": n, "lengths": lengths, "gen": self.chance(0.6), "gen_seed": self.r(1000)}

    def _datasets(self):
        a, b = self.pick(SIZES[1:]), self.pick(SIZES)
        return {
            "a": a,
            "b": b,
            "sample": self._sample_spec(),
            "probe": [int(self.rng.integers(-(a + b) - 2, a + b + 2)) for _ in range(4)],
            "what": self.pick(("concat", "subset", "stack", "stack_dict", "tensor", "chain")),
        }

    def _samplers(self):
        return {
            "what": self.pick(("random", "weighted", "batch", "subset", "seq")),
            "n": self.pick(SIZES),
            "num_samples": self.pick((None, 0, 1, 3, -1, 2.0, 5)),
            "replacement": self.pick((True, False, 1, None)),
            "batch_size": self.pick((1, 2, 0, -1, 3.0, True, 5)),
            "drop_last": self.pick((True, False, 0)),
            "weights_shape": self.pick(((4,), (4,), (2, 2), (0,))),
        }

    # -- sparse --
    def _sparse(self):
        return self._sparse_case(grad=False)

    def _sparse_grad(self):
        return self._sparse_case(grad=True)

    def _sparse_case(self, grad):
        sd = self.pick((1, 2, 2, 2, 3))
        dd = 1 if self.chance(0.25) else 0
        sizes = [self.pick((1, 2, 3, 5, 7, 0 if self.chance(0.05) else 3)) for _ in range(sd + dd)]
        dtype = "float32"
        if not grad:
            dtype = self.pick(("float32",) * 6 + ("float64", "float16", "int64"))
        nnz = self.r(13) if all(sizes[:sd]) else 0
        idx = [self.rng.integers(0, max(s, 1), nnz).tolist() for s in sizes[:sd]]
        ops = ["to_dense", "coalesce", "mul_scalar", "div_scalar", "neg", "add_sparse",
               "sub_sparse", "dense_add", "mul_dense", "dense_mul", "sum", "s_sum", "softmax",
               "log_softmax", "index_select"]  # fmt: skip
        ops += ["mul_sparse", "add_alpha"]
        if not grad:
            ops += ["attrs", "nonfinite_scale"]
        if sd + dd == 2:
            ops += ["t", "transpose"]
        if sd == 2 and dd == 0:
            ops += ["sparse_mm", "torch_mm", "spmm", "matmul", "sparse_addmm", "torch_addmm"] * 2
        if sd >= 2:
            ops.append("transpose")
        op = self.pick(ops)
        case = {
            "sizes": sizes,
            "sd": sd,
            "dd": dd,
            "dtype": dtype,
            "make": self.pick(("coo", "coo", "coo_inferred", "to_sparse", "leaf"))
            if grad
            else self.pick(("coo", "coo", "coo_inferred", "to_sparse")),
            "idx": idx,
            "vals": self.rng.standard_normal((nnz, *sizes[sd:])).round(3).tolist(),
            "zero_frac": float(self.rng.uniform(0.2, 0.9)),
            "op": op,
            "grad": grad,
            "scalar": self.pick((2.0, -0.5, 3, 0.0, 1.5)),
            "k": self.pick((1, 2, 3, 4)),
            "dim": self.r(sd + dd),
            "dims": self.pick((None, 0, (0,), "all", "last", (0, -1))),
            "transposed_dense": self.chance(0.3),
            "ab": (self.pick((1.0, 0.5, 0.0, -2.0)), self.pick((1.0, 2.0, -0.5))),
            "seed2": self.r(1 << 30),
        }
        if case["make"] == "leaf" and op in ("index_select",):
            case["make"] = "coo"
        return case


# ---- instantiating plain data in one library ----------------------------------------------------
_NP = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64,
       "uint8": np.uint8, "int16": np.int16, "int8": np.int8, "bool": np.bool_,
       "float16": np.float16}  # fmt: skip


def _np_values(dt, shape, key):
    rng = np.random.default_rng(key)
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt in ("float32", "float64", "float16"):
        return rng.standard_normal(shape).round(2).astype(_NP[dt])
    return rng.integers(0, 100, shape).astype(_NP[dt])


def _tensor(L, dt, shape, key):
    a = _np_values(dt, shape, key)
    return L.tensor(a)


def _make_sample(L, spec, i, path=0):
    """Sample i of `spec` in library L (deterministic in i)."""
    t = spec[0]
    key = (i * 7919 + path * 104729) % (1 << 31)
    if t == "int":
        return spec[1] + i
    if t == "float":
        return spec[1] + i
    if t == "bool":
        return bool((i + spec[1]) % 2)
    if t == "str":
        return f"{spec[1]}_{i}"
    if t == "bytes":
        return spec[1] + b"_%d" % i
    if t == "nparr":
        return _np_values(spec[1], spec[2], key)
    if t == "npscalar":
        return _NP[spec[1]](_np_values(spec[1], (), key).item() if spec[1] != "bool" else i % 2)
    if t == "tensor":
        return _tensor(L, spec[1], spec[2], key)
    if t == "dict":
        return {k: _make_sample(L, s, i, path * 31 + j + 1) for j, (k, s) in enumerate(spec[1])}
    if t == "nt":
        return NT(*(_make_sample(L, s, i, path * 31 + j + 1) for j, s in enumerate(spec[1])))
    items = [_make_sample(L, s, i, path * 31 + j + 1) for j, s in enumerate(spec[1])]
    return items if t == "list" else tuple(items)


def _map_dataset(L, spec, n, offset=0):
    class MapDS(L.utils.data.Dataset):
        def __len__(self):
            return n

        def __getitem__(self, i):
            if not isinstance(i, int):
                raise TypeError(f"index {type(i).__name__}")
            if i < 0 or i >= n:
                raise IndexError(i)
            return _make_sample(L, spec, i + offset)

    return MapDS()


def _dataset(L, spec):
    D = L.utils.data
    kind, n = spec["type"], spec["n"]
    if kind == "tensor":
        return D.TensorDataset(
            *(_tensor(L, dt, (n, *sh), 11 * j + n) for j, (dt, sh) in enumerate(spec["tensors"]))
        )
    if kind == "map":
        return _map_dataset(L, spec["sample"], n)
    if kind == "subset":
        return D.Subset(_dataset(L, spec["base"]), spec["indices"])
    if kind == "concat":
        a, b = spec["parts"]
        return D.ConcatDataset(
            [_map_dataset(L, spec["sample"], a), _map_dataset(L, spec["sample"], b, a)]
        )
    first = _map_dataset(L, spec["sample"], n)
    second = D.TensorDataset(_tensor(L, "float32", (n, 2), n))
    if spec["as_dict"]:
        return D.StackDataset(x=first, y=second)
    return D.StackDataset(first, second)


def _generator(L, seed):
    return L.Generator().manual_seed(seed)


def _sampler(L, spec, ds, gen):
    D = L.utils.data
    k = spec[0]
    if k == "seq":
        return D.SequentialSampler(ds)
    if k == "list":
        return list(spec[1])
    if k == "random":
        return D.RandomSampler(ds, replacement=spec[1], num_samples=spec[2], generator=gen)
    if k == "subset":
        return D.SubsetRandomSampler(spec[1], generator=gen)
    if k == "weighted":
        w = L.tensor(np.asarray(spec[1], np.float64)) if L is torch else list(spec[1])
        return D.WeightedRandomSampler(w, spec[2], replacement=spec[3], generator=gen)
    if k == "batch":
        return D.BatchSampler(_sampler(L, spec[1], ds, gen), spec[2], spec[3])
    if k == "lists":
        return [list(b) for b in spec[1]]
    raise AssertionError(k)


def _is_random(spec):
    if spec is None:
        return False
    if spec[0] in ("random", "subset", "weighted"):
        return True
    return spec[0] == "batch" and _is_random(spec[1])


def _make_loader(L, case, gen_seed):
    D = L.utils.data
    ds = _dataset(L, case["dataset"])
    kw = dict(case["kw"])
    gen = _generator(L, gen_seed)
    if case["sampler"] is not None:
        kw["sampler"] = _sampler(L, case["sampler"], ds, gen)
    if case["batch_sampler"] is not None:
        kw["batch_sampler"] = _sampler(L, case["batch_sampler"], ds, gen)
    if kw.get("shuffle"):
        kw["generator"] = gen
    c = case["collate"]
    if c == "list":
        kw["collate_fn"] = lambda b: list(b)
    elif c == "convert":
        kw["collate_fn"] = D.default_convert
    kw["num_workers"] = case["workers"]
    bad = case["bad"]
    if bad == "bs_with_bsampler":
        kw["batch_sampler"], kw["batch_size"] = [[0]], 3
    elif bad == "shuffle_with_sampler":
        kw["shuffle"], kw["sampler"] = True, [0]
    elif bad == "none_droplast":
        kw["batch_size"], kw["drop_last"] = None, True
        kw.pop("batch_sampler", None)
    elif bad == "bs_zero":
        kw["batch_size"] = 0
        kw.pop("batch_sampler", None)
    elif bad == "bs_float":
        kw["batch_size"] = 2.5
        kw.pop("batch_sampler", None)
    elif bad == "workers_neg":
        kw["num_workers"] = -1
    elif bad == "shuffle_bsampler":
        kw["batch_sampler"], kw["shuffle"] = [[0]], True
        kw.pop("sampler", None)
    elif bad == "droplast_bsampler":
        kw["batch_sampler"], kw["drop_last"] = [[0]], True
        kw.pop("batch_size", None)
    elif bad == "sampler_bsampler":
        kw["batch_sampler"], kw["sampler"] = [[0]], [0]
        kw.pop("shuffle", None)
    elif bad == "prefetch":
        kw["num_workers"], kw["prefetch_factor"] = 0, 2
    return ds, D.DataLoader(ds, **kw)


# ---- comparing ------------------------------------------------------------------------------------
def _dt(t):
    return str(t.dtype).split(".")[-1]


def same(want, got, path="$"):
    """None where pyrite's `got` matches torch's `want` (types, mapped dtypes, shapes, values),
    else where they differ."""
    if isinstance(want, torch.Tensor):
        if not isinstance(got, pr.Tensor):
            return f"{path}: tensor vs {type(got).__name__}"
        wd = MAPPED.get(_dt(want), _dt(want))
        if wd != _dt(got):
            return f"{path}: dtype {_dt(want)} vs {_dt(got)}"
        if tuple(want.shape) != tuple(got.shape):
            return f"{path}: shape {tuple(want.shape)} vs {tuple(got.shape)}"
        w = want.to_dense() if want.is_sparse else want
        g = got.to_dense() if got.is_sparse else got
        a, b = w.detach().numpy(), np.asarray(g.detach().numpy())
        if not np.array_equal(a.astype(b.dtype) if a.dtype != b.dtype else a, b, equal_nan=True):
            return f"{path}: values {a.tolist()} vs {b.tolist()}"
        return None
    if isinstance(want, np.ndarray):
        if not isinstance(got, np.ndarray) or want.dtype != got.dtype:
            return f"{path}: ndarray {want.dtype} vs {type(got).__name__}"
        return None if np.array_equal(want, got) else f"{path}: ndarray values"
    if type(want).__name__ != type(got).__name__:
        return f"{path}: type {type(want).__name__} vs {type(got).__name__}"
    if isinstance(want, dict):
        if list(want) != list(got):
            return f"{path}: keys {list(want)} vs {list(got)}"
        for k in want:
            d = same(want[k], got[k], f"{path}[{k!r}]")
            if d:
                return d
        return None
    if isinstance(want, (list, tuple)):
        if len(want) != len(got):
            return f"{path}: len {len(want)} vs {len(got)}"
        for j, (a, b) in enumerate(zip(want, got)):
            d = same(a, b, f"{path}[{j}]")
            if d:
                return d
        return None
    if isinstance(want, float) and isinstance(got, float):
        return None if (want == got or (math.isnan(want) and math.isnan(got))) else f"{path}"
    return None if want == got else f"{path}: {want!r} vs {got!r}"


def _run(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ("ok", fn())
        except Exception as e:  # noqa: BLE001 (which side raises is compared)
            return ("raise", e)


def _raise_mismatch(name, t, p):
    if t[0] != p[0]:
        te = t[1] if t[0] == "raise" else None
        pe = p[1] if p[0] == "raise" else None
        return f"{name}: torch {'raised ' + repr(te)[:200] if te else 'ok'}, pyrite " + (
            f"raised {pe!r}"[:300] if pe else "ok"
        )
    return None


def _int32_overflow(e):
    return isinstance(e, OverflowError) and "int32" in str(e)


# ---- checks: data -----------------------------------------------------------------------------
def _index_law(spec, n, seq, kept=None):
    """Whether the flat index sequence `seq` obeys the random sampler `spec`'s law (`kept`: the
    number drop_last keeps, where it drops a tail)."""
    k = spec[0]
    if kept is not None:
        if len(seq) != kept:
            return f"{len(seq)} indices kept, want {kept}"
        full = {"random": spec[2] if spec[0] == "random" and spec[2] is not None else n,
                "weighted": spec[2] if spec[0] == "weighted" else 0}.get(k, 0)  # fmt: skip
        if k == "subset":
            ok = set(seq) <= set(spec[1]) and len(set(seq)) == len(seq)
            return None if ok else "not distinct members of the subset"
        if k in ("random", "weighted") and full > kept:
            spec = (*spec[:2], kept, *spec[3:]) if k == "random" else (*spec[:2], kept, spec[3])
    if any(not isinstance(i, int) or isinstance(i, bool) for i in seq):
        return f"indices not ints: {seq[:5]}"
    if k == "random":
        repl, ns = spec[1], spec[2] if spec[2] is not None else n
        if len(seq) != ns:
            return f"{len(seq)} indices, want {ns}"
        if any(not 0 <= i < n for i in seq):
            return "index out of range"
        if not repl:
            for s in range(0, ns, n):
                block = seq[s : s + n]
                if len(set(block)) != len(block):
                    return f"repeat in a permutation block {block}"
        return None
    if k == "subset":
        return None if sorted(seq) == sorted(spec[1]) else "not a permutation of the subset"
    if k == "weighted":
        w, ns, repl = spec[1], spec[2], spec[3]
        if len(seq) != ns:
            return f"{len(seq)} indices, want {ns}"
        if any(not (0 <= i < len(w)) or w[i] == 0 for i in seq):
            return f"index of zero weight or out of range: {seq}"
        if not repl and len(set(seq)) != len(seq):
            return "repeat without replacement"
        return None
    return None


def _check_loader(case):
    t = _run(lambda: _make_loader(torch, case, case["gen_seed"]))
    p = _run(lambda: _make_loader(pr, case, case["gen_seed"]))
    d = _raise_mismatch("construct", t, p)
    if d:
        return "fail", d
    if t[0] == "raise":
        return "ok", "both refuse the arguments"
    (tds, tl), (_, pl) = t[1], p[1]
    tlen, plen = _run(lambda: len(tl)), _run(lambda: len(pl))
    d = _raise_mismatch("len", tlen, plen)
    if d:
        return "fail", d
    if tlen[0] == "ok" and tlen[1] != plen[1]:
        return "fail", f"len(loader) {tlen[1]} vs {plen[1]}"
    random = bool(case["kw"].get("shuffle")) or _is_random(case["sampler"])
    random = random or _is_random(case["batch_sampler"])
    tb = _run(lambda: list(tl))
    if not random:
        return _same_batches(tb, _run(lambda: list(pl)), "both raise iterating")
    # random: list pyrite's index sampler from a fresh loader, then read its batches
    _, pl2 = _make_loader(pr, case, case["gen_seed"])
    idx = _run(lambda: list(pl2._index_sampler))
    pb = _run(lambda: list(pl))
    d = _raise_mismatch("iterate", tb, pb)
    if d:
        return "fail", d
    if tb[0] == "raise":
        return "ok", "both raise iterating"
    if idx[0] == "raise":
        return "fail", f"listing pyrite's sampler raised {idx[1]!r}"
    idx = idx[1]
    auto = pl.batch_size is not None or case["batch_sampler"] is not None
    t_sizes = [len(b) for b in tl._index_sampler] if auto else None
    if auto and [len(b) for b in idx] != t_sizes:
        return "fail", f"batch sizes {t_sizes} vs {[len(b) for b in idx]}"
    if not auto and len(idx) != len(tb[1]):
        return "fail", f"{len(tb[1])} samples vs {len(idx)}"
    flat = [i for b in idx for i in b] if auto else list(idx)
    spec = case["sampler"] or (case["batch_sampler"] or (None,))
    if spec[0] == "batch":
        spec = spec[1]
    if case["kw"].get("shuffle"):
        spec = ("random", False, None)
    bsp = case["batch_sampler"]
    dropped = case["kw"].get("drop_last") or (bsp is not None and bsp[0] == "batch" and bsp[3])
    kept = sum(t_sizes) if auto and dropped else None
    d = _index_law(spec, case["dataset"]["n"], flat, kept)
    if d:
        return "fail", f"sampler law: {d}"
    if len(pb[1]) != len(idx):
        return "fail", f"{len(idx)} index batches vs {len(pb[1])} batches"
    for j, b in enumerate(idx):
        want = tl.collate_fn([tds[i] for i in b]) if auto else tl.collate_fn(tds[b])
        d = same(want, pb[1][j], f"batch {j}")
        if d:
            return "fail", f"batch at indices {b}: {d}"
    return "ok", ""


def _iterable_ds(L, case):
    n, spec, has_len = case["n"], case["sample"], case["has_len"]

    class It(L.utils.data.IterableDataset):
        def __init__(self, n, offset):
            self.n, self.offset = n, offset

        def __iter__(self):
            for i in range(self.n):
                yield _make_sample(L, spec, i + self.offset)

    if has_len != "none":

        def __len__(self):
            return self.n + (2 if has_len == "wrong" else 0)

        It.__len__ = __len__
    if case["chain"]:
        a = n // 2
        return L.utils.data.ChainDataset([It(a, 0), It(n - a, a)])
    return It(n, 0)


def _check_iterable(case):
    def go(L):
        ds = _iterable_ds(L, case)
        kw = {"batch_size": case["batch_size"], "num_workers": case["workers"]}
        if case["batch_size"] is not None:
            kw["drop_last"] = case["drop_last"]
        return L.utils.data.DataLoader(ds, **kw)

    tl, pl = go(torch), go(pr)
    tlen, plen = _run(lambda: len(tl)), _run(lambda: len(pl))
    d = _raise_mismatch("len", tlen, plen)
    if d:
        return "fail", d
    if tlen[0] == "ok" and tlen[1] != plen[1]:
        return "fail", f"len {tlen[1]} vs {plen[1]}"
    return _same_batches(_run(lambda: list(tl)), _run(lambda: list(pl)), "both raise")


def _same_batches(tb, pb, both_raise):
    """The verdict on torch's and pyrite's batches (each _run's ("ok", batches) or ("raise",
    ...)): the same batches, both raising (`both_raise` the detail), or an int64 value pyrite
    refuses (its int32)."""
    d = _raise_mismatch("iterate", tb, pb)
    if d:
        if pb[0] == "raise" and _int32_overflow(pb[1]):
            return "intentional", "int64 -> int32: a value outside int32 refused"
        return "fail", d
    if tb[0] == "raise":
        return "ok", both_raise
    d = same(tb[1], pb[1])
    return ("fail", f"batches: {d}") if d else ("ok", "")


def _check_collate(case):
    for fn in ("default_collate", "default_convert"):

        def go(L, fn=fn):
            f = getattr(L.utils.data, fn)
            if fn == "default_convert":
                return f(_make_sample(L, case["sample"], 3))
            batch = [_make_sample(L, case["sample"], i) for i in range(case["n"])]
            if case["mutate"] and len(batch) > 1:
                batch[-1] = _make_sample(L, ("list", [("int", 1)]), 0)  # a mismatched sample
            return f(batch)

        t, p = _run(lambda: go(torch)), _run(lambda: go(pr))
        d = _raise_mismatch(fn, t, p)
        if d:
            if p[0] == "raise" and _int32_overflow(p[1]):
                return "intentional", "int64 -> int32: a value outside int32 refused"
            return "fail", d
        if t[0] == "ok":
            d = same(t[1], p[1])
            if d:
                return "fail", f"{fn}: {d}"
    return "ok", ""


def _check_split(case):
    n, lengths = case["n"], case["lengths"]

    def go(L, seed):
        gen = _generator(L, seed) if case["gen"] else None
        return L.utils.data.random_split(range(n), lengths, generator=gen)

    t, p = _run(lambda: go(torch, case["gen_seed"])), _run(lambda: go(pr, case["gen_seed"]))
    d = _raise_mismatch("random_split", t, p)
    if d:
        return "fail", d
    if t[0] == "raise":
        return "ok", "both refuse"
    ts, ps = [len(s) for s in t[1]], [len(s) for s in p[1]]
    if ts != ps:
        return "fail", f"split sizes {ts} vs {ps}"
    flat = [s[i] for s in p[1] for i in range(len(s))]
    if sorted(flat) != list(range(n)):
        return "fail", f"not a partition of range({n}): {flat}"
    if any(type(s).__name__ != "Subset" for s in p[1]):
        return "fail", "not Subsets"
    if case["gen"]:
        again = [list(s.indices) for s in go(pr, case["gen_seed"])]
        if again != [list(s.indices) for s in p[1]]:
            return "fail", "one generator seed gave two splits"
    return "ok", ""


def _check_datasets(case):
    a, b, spec, what = case["a"], case["b"], case["sample"], case["what"]

    def go(L):
        D = L.utils.data
        if what == "concat":
            ds = D.ConcatDataset([_map_dataset(L, spec, a), _map_dataset(L, spec, b, a)])
        elif what == "subset":
            ds = D.Subset(_map_dataset(L, spec, a), list(range(a - 1, -1, -2)) + [0])
        elif what == "stack":
            ds = D.StackDataset(_map_dataset(L, spec, a), _map_dataset(L, spec, b))
        elif what == "stack_dict":
            ds = D.StackDataset(x=_map_dataset(L, spec, a), y=_map_dataset(L, spec, a))
        elif what == "tensor":
            ds = D.TensorDataset(_tensor(L, "float32", (a, 2), 1), _tensor(L, "int64", (b,), 2))
        else:
            return len(D.ChainDataset([_iterable_ds(L, {**case, "n": a, "sample": spec,
                                                       "has_len": "right", "chain": False})]))  # fmt: skip
        out = [("len", _run(lambda: len(ds)))]
        for i in case["probe"]:
            out.append((i, _run(lambda i=i: ds[i])))
        return out

    t, p = _run(lambda: go(torch)), _run(lambda: go(pr))
    d = _raise_mismatch(what, t, p)
    if d:
        return "fail", d
    if t[0] == "raise":
        return "ok", "both refuse"
    if what == "chain":
        return ("ok", "") if t[1] == p[1] else ("fail", f"chain len {t[1]} vs {p[1]}")
    for (i, tr), (_, prr) in zip(t[1], p[1]):
        d = _raise_mismatch(f"[{i}]", tr, prr)
        if d:
            return "fail", d
        if tr[0] == "ok":
            d = same(tr[1], prr[1], f"[{i}]")
            if d:
                return "fail", d
    return "ok", ""


def _check_samplers(case):
    w, n = case["what"], case["n"]

    def go(L):
        D = L.utils.data
        ds = list(range(n))
        if w == "random":
            s = D.RandomSampler(
                ds, replacement=case["replacement"], num_samples=case["num_samples"]
            )
        elif w == "weighted":
            s = D.WeightedRandomSampler(
                np.ones(case["weights_shape"]).tolist(), case["num_samples"], case["replacement"]
            )
        elif w == "batch":
            s = D.BatchSampler(D.SequentialSampler(ds), case["batch_size"], case["drop_last"])
        elif w == "subset":
            s = D.SubsetRandomSampler(ds)
        else:
            s = D.SequentialSampler(ds)
        length = len(s)
        items = list(s) if w in ("batch", "seq") else None
        return length, items

    t, p = _run(lambda: go(torch)), _run(lambda: go(pr))
    d = _raise_mismatch(w, t, p)
    if d:
        return "fail", d
    if t[0] == "ok" and t[1] != p[1]:
        return "fail", f"{w}: {t[1]} vs {p[1]}"
    return "ok", ""


# ---- checks: sparse -------------------------------------------------------------------------------
_TDT = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
        "int64": torch.int64}  # fmt: skip


def _sp_inputs(L, case, prec, absval=False):
    """The case's sparse tensor (and its grad leaf) and dense operands in library L, values in
    `prec` ('float64' / 'float32' / the case's dtype)."""
    sizes, sd = case["sizes"], case["sd"]
    rng = np.random.default_rng(case["seed2"])
    vals = np.asarray(case["vals"], np.float64).reshape(-1, *sizes[sd:])
    if absval:
        vals = np.abs(vals)
    dt = prec
    tdt = L.int32 if (L is pr and dt == "int64") else getattr(L, dt)
    if dt == "int64":
        vals = np.round(vals * 10)
    leaf = None
    make = case["make"]
    if make == "to_sparse":
        dense = rng.standard_normal(sizes).round(3)
        dense[rng.random(sizes) < case["zero_frac"]] = 0.0
        if dt == "int64":
            dense = np.round(dense * 10)
        if absval:
            dense = np.abs(dense)
        x = L.tensor(dense.astype(np.float64), dtype=tdt)
        if case["grad"]:
            x.requires_grad_(True)
            leaf = x
        s = x.to_sparse(sd)
    else:
        idx = L.tensor(np.asarray(case["idx"], np.int64).reshape(sd, -1))
        v = L.tensor(vals, dtype=tdt)
        if case["grad"] and make != "leaf":
            v.requires_grad_(True)
            leaf = v
        size = None if make == "coo_inferred" else tuple(sizes)
        if make == "coo_inferred" and idx.shape[1] == 0:
            size = tuple(sizes)
        if size is None:
            s = L.sparse_coo_tensor(idx, v)
        else:
            s = L.sparse_coo_tensor(idx, v, size, requires_grad=(make == "leaf" and case["grad"]))
        if make == "leaf" and case["grad"]:
            leaf = s
    shape = tuple(s.shape)
    other = rng.standard_normal(shape).round(3)
    if absval:
        other = np.abs(other)
    if dt == "int64":
        other = np.round(other * 10)
    other = L.tensor(other, dtype=tdt)
    # a second sparse tensor of the same shape (for s + s2)
    nnz2 = int(rng.integers(0, 6)) if all(shape[:sd]) else 0
    idx2 = np.stack([rng.integers(0, max(n, 1), nnz2) for n in shape[:sd]]) if sd else None
    v2 = rng.standard_normal((nnz2, *shape[sd:])).round(3)
    if absval:
        v2 = np.abs(v2)
    if dt == "int64":
        v2 = np.round(v2 * 10)
    s2 = L.sparse_coo_tensor(L.tensor(idx2.astype(np.int64)), L.tensor(v2, dtype=tdt), shape)
    if case["k"] % 2 == 0:
        s2 = s2.coalesce()
    mat = mat_leaf = None
    if case["op"] in ("sparse_mm", "torch_mm", "spmm", "matmul", "sparse_addmm", "torch_addmm"):
        m = rng.standard_normal((case["k"], shape[1])).round(3)
        if absval:
            m = np.abs(m)
        if dt == "int64":
            m = np.round(m * 10)
        mat = L.tensor(m, dtype=tdt)
        if case["grad"]:
            mat.requires_grad_(True)
            mat_leaf = mat
        mat = mat.t() if case["transposed_dense"] else mat.t().contiguous()
    add = L.tensor(np.abs(rng.standard_normal((shape[0], case["k"]))) if absval else
                   rng.standard_normal((shape[0], case["k"])).round(3), dtype=tdt)  # fmt: skip
    return s, (leaf, mat_leaf), other, s2, mat, add


def _dims(case):
    sd, nd = case["sd"], case["sd"] + case["dd"]
    d = case["dims"]
    if d == "all":
        return tuple(range(sd))
    if d == "last":
        return sd - 1
    if d == (0, -1):
        return (0, sd - 1) if sd > 1 else (0,)
    return d if nd else None


def _sp_op(L, case, s, other, s2, mat, add):
    op = case["op"]
    c = case["scalar"]
    beta, alpha = case["ab"]
    if op == "to_dense":
        return s.to_dense()
    if op == "coalesce":
        return s.coalesce()
    if op == "attrs":
        c_ = s.coalesce()
        return [s.sparse_dim(), s.dense_dim(), s._nnz(), s.is_coalesced(), tuple(s.shape),
                c_.is_coalesced(), c_._nnz(), s.is_sparse, s.dim(), s.numel()]  # fmt: skip
    if op == "mul_scalar":
        return s * c
    if op == "div_scalar":
        return s / (c if c != 0 else 4.0)
    if op == "neg":
        return -s
    if op == "add_sparse":
        return s + s2
    if op == "mul_sparse":
        return s * s2
    if op == "add_alpha":
        return s.add(s2, alpha=c)  # (the method: pr.add(s, ...) is dense, Known and open)
    if op == "nonfinite_scale":  # (unspecified entries stay 0: their storage must too)
        s = s.coalesce()  # (torch scales duplicates one by one: inf - inf = nan; docstring)
        return other + (s * float("inf") if c > 0 else s / 0.0)
    if op == "sub_sparse":
        return s - s2
    if op == "dense_add":
        return other + s
    if op == "mul_dense":
        return s * other
    if op == "dense_mul":
        return other * s
    if op == "t":
        return s.t()
    if op == "transpose":
        return s.transpose(0 if case["k"] < 4 else case["dim"], case["dim"])
    if op == "index_select":
        n = s.shape[case["dim"]]
        ix = np.random.default_rng(case["seed2"]).integers(0, max(n, 1), 3 if n else 0)
        return s.index_select(case["dim"], L.tensor(ix.astype(np.int64)))
    if op == "sum":
        dims = _dims(case)
        return L.sparse.sum(s) if dims is None else L.sparse.sum(s, dims)
    if op == "s_sum":
        return s.sum()
    if op in ("softmax", "log_softmax"):
        return getattr(L.sparse, op)(s, case["dim"])
    if op == "sparse_mm":
        return L.sparse.mm(s, mat)
    if op == "torch_mm":
        return L.mm(s, mat)
    if op == "spmm":
        return L.spmm(s, mat)
    if op == "matmul":
        return s @ mat
    if op == "sparse_addmm":
        return L.sparse.addmm(add, s, mat, beta=beta, alpha=alpha)
    if op == "torch_addmm":
        return L.addmm(add, s, mat, beta=beta, alpha=alpha)
    raise AssertionError(op)


def _dense_np(x):
    if isinstance(x, (list, tuple)):
        return x
    if x.is_sparse:
        x = x.to_dense()
    return np.asarray(x.detach().to(torch.float64).numpy() if isinstance(x, torch.Tensor)
                      else x.detach().numpy().astype(np.float64))  # fmt: skip


def _terms(case):
    """K: the most terms one output sums."""
    sizes = case["sizes"]
    nnz = len(case["vals"])
    k = nnz + 2
    if case["op"] in ("softmax", "log_softmax", "sum", "s_sum"):
        k += int(np.prod(sizes))
    if "mm" in case["op"] or case["op"] == "matmul":
        k += sizes[1]
    return k


CLASSIFIED_REFUSALS = {
    # (op, torch's message fragment) -> why pyrite computes it (module docstring)
    "softmax not implemented": "intentional: torch CPU has no sparse softmax of this dtype",
    "matrices expected": "intentional: hybrid sparse mm (torch's kernel refuses dense_dim)",
    "expected strided result": "intentional: addmm with a sparse input",
    "index_add_": "intentional: index_select's backward of a sparse tensor (torch refuses)",
    "add(sparse, dense) is not supported": "intentional: sparse + dense",
    "expected grad_ Tensor to be sparse": "intentional: torch's sparse.sum backward needs sparse",
    "not implemented for 'Half'": "intentional: torch CPU float16 sparse kernel missing",
    "not implemented for 'Long'": "intentional: torch CPU integer sparse kernel missing",
    "doesn't exist for this backend": "intentional: torch's SparseCPU has no kernel",
    "Could not run": "intentional: torch's SparseCPU has no kernel",
    "can't be cast to the desired output type": "intentional: torch's sparse addmm refuses "
    "float beta / alpha with integers (its dense addmm takes them)",
}


def _classify_torch_refusal(e):
    for frag, why in CLASSIFIED_REFUSALS.items():
        if frag in str(e):
            return why
    return None


def _check_sparse(case):
    dt = case["dtype"]
    grad = case["grad"]
    flags = {}

    def go(L, prec, absval=False):
        s, leaves, other, s2, mat, add = _sp_inputs(L, case, prec, absval)
        out = _sp_op(L, case, s, other, s2, mat, add)
        flags[L.__name__] = (s.is_coalesced(), s2.is_coalesced())
        if not grad or isinstance(out, list):
            return out, None
        dense = out.to_dense() if out.is_sparse else out
        w = np.random.default_rng(case["seed2"] + 1).standard_normal(tuple(dense.shape)).round(2)
        if absval:
            w = np.abs(w)
        (dense * L.tensor(w, dtype=dense.dtype)).sum().backward()
        grads = []
        for g in leaves:
            gg = None if g is None else g.grad
            grads.append(None if gg is None else (gg.to_dense() if gg.is_sparse else gg))
        return out, grads

    ref = _run(lambda: go(torch, "float64" if dt != "int64" else "int64"))
    t32 = _run(lambda: go(torch, dt))
    p = _run(lambda: go(pr, dt))
    if ref[0] == "raise" and t32[0] == "ok":
        ref = t32  # (a float64 kernel torch lacks: float32 alone)
    if t32[0] == "raise" and ref[0] == "ok" and dt != "float64":
        why = _classify_torch_refusal(t32[1])
        if why and p[0] == "ok":
            return "intentional", why
    d = _raise_mismatch(case["op"], t32, p)
    if d:
        if t32[0] == "raise":
            why = _classify_torch_refusal(t32[1])
            if why:
                return "intentional", why
        if p[0] == "raise" and "inconsistent with indices" in str(p[1]):
            return "intentional", "pyrite checks indices against size"
        return "fail", d
    if t32[0] == "raise":
        return "ok", "both raise"
    (rout, rgr), (tout, tgr), (pout, pgr) = ref[1], t32[1], p[1]
    if isinstance(tout, list):
        return ("ok", "") if tout == pout else ("fail", f"attrs {tout} vs {pout}")
    # the result's dtype and shape
    d = same(tout, pout) if dt == "int64" and not tout.dtype.is_floating_point else None
    if d:
        return "fail", f"result: {d}"
    if MAPPED.get(_dt(tout), _dt(tout)) != _dt(pout) or tuple(tout.shape) != tuple(pout.shape):
        return (
            "fail",
            f"result dtype/shape {tout.dtype}{tuple(tout.shape)} vs {pout.dtype}{tuple(pout.shape)}",
        )
    u = U16 if dt == "float16" else U32
    absr = _run(lambda: go(torch, "float64", True))
    K = _terms(case)

    def close(name, r, t, q, a):
        r, t, q = _dense_np(r), _dense_np(t), _dense_np(q)
        if dt == "int64" and not tout.dtype.is_floating_point:
            return None if np.array_equal(r, q) else f"{name}: {r.tolist()} vs {q.tolist()}"
        S = np.abs(_dense_np(a)) if a is not None else np.abs(r)
        if case["op"] in ("softmax", "log_softmax"):
            S = 1 + np.abs(case["vals"]).max(initial=0) * 4 + np.abs(r)
        with np.errstate(invalid="ignore", over="ignore"):  # (inf - inf: nan, not close)
            tol = 8 * K * u * S + 4 * np.abs(t - r)
            bad = ~((q == r) | (np.abs(q - r) <= tol) | (np.isnan(r) & np.isnan(q)))
        if bad.any():
            j = np.argwhere(bad)[0]
            return f"{name} at {tuple(j)}: pyrite {q[tuple(j)]}, ref {r[tuple(j)]}, tol {tol[tuple(j)]}"
        return None

    aout = absr[1][0] if absr and absr[0] == "ok" else None
    d = close("value", rout, tout, pout, aout)
    if d:
        return "fail", d
    loose = case["op"] == "mul_sparse" and not all(flags.get("torch", (True, True)))
    if tout.is_sparse and pout.is_sparse and not loose:
        tc, pc = tout.coalesce(), pout.coalesce()
        if tc._indices().tolist() != pc._indices().tolist():
            return "fail", f"coalesced indices {tc._indices().tolist()} vs {pc._indices().tolist()}"
        if tout.is_coalesced() != pout.is_coalesced():
            return "fail", f"is_coalesced {tout.is_coalesced()} vs {pout.is_coalesced()}"
        d = close("coalesced values", tc._values(), tc._values(), pc._values(), None)
        if d:
            return "fail", d
        if tout.sparse_dim() != pout.sparse_dim():
            return "fail", f"sparse_dim {tout.sparse_dim()} vs {pout.sparse_dim()}"
    if grad and loose:
        return "intentional", "sparse * sparse of uncoalesced operands: torch's pattern"
    if grad:
        agr = absr[1][1] if absr and absr[0] == "ok" else [None, None]
        for name, r, t, q, a in zip(("leaf", "mat"), rgr, tgr, pgr, agr):
            if (t is None) != (q is None):
                return (
                    "fail",
                    f"{name}.grad: torch {t is None and 'None'} pyrite {q is None and 'None'}",
                )
            if t is not None:
                d = close(f"{name}.grad", r, t, q, a)
                if d:
                    return "fail", d
    return "ok", ""


CHECKS = {
    "loader": _check_loader,
    "iterable": _check_iterable,
    "collate": _check_collate,
    "split": _check_split,
    "datasets": _check_datasets,
    "samplers": _check_samplers,
    "sparse": _check_sparse,
    "sparse_grad": _check_sparse,
}


def build(seed):
    return Gen(seed).build()


def check(case):
    return CHECKS[case["kind"]](case)


def describe(case):
    return repr(case)


if __name__ == "__main__":
    sys.exit(fuzz_driver.run(__doc__, build, check, describe))
