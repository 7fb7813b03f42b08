"""Differential sweep: pyrite against torch CPU on random shapes, layouts, dtypes and arguments.

Every op in tests/sweep_ops.py runs `PYRITE_SWEEP_CASES` cases (default a few, so the file takes
well under a minute on 2 cores); each case is seeded from the op's name and its number, so a
failure reruns alone. Errors and results are compared as tests/sweep_harness.py says; the
differences pyrite documents are its allow-list (`allowed_error`, ERROR_CLASSES, EXPECT_DTYPE).

A bigger run (not part of the suite): python tests/test_sweep.py --cases 400 [--only REGEX]
"""

from __future__ import annotations

import os
import re
import sys
import zlib

import numpy as np
import pytest

from tests.sweep_harness import lacks_f16, run_case
from tests.sweep_ops import OPS

CASES = int(os.environ.get("PYRITE_SWEEP_CASES", "10"))


def case_rng(name: str, i: int):
    return np.random.default_rng([zlib.crc32(name.encode()), i])


def run_op(op, cases, start=0):
    out = []
    for i in range(start, start + cases):
        out.append(run_case(op, case_rng(op.name, i), i))
    return out


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
def test_sweep(op):
    fails = [o for o in run_op(op, CASES) if o.status == "FAIL"]
    assert not fails, "\n".join(f"case {o.case}: {o.detail}" for o in fails[:3])


# ---- what a ported script meets beyond values ---------------------------------------------------
# Each check runs the same lambda with L = torch and L = pyrite and compares what comes back
# (Sizes, dtypes and tensors by value; errors by class; warnings by category).
def _outcome(L, f):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            r = f(L)
        except Exception as e:  # noqa: BLE001
            if lacks_f16(e):
                raise  # conftest reports it skipped on a device without shader-f16
            r = ("raises", type(e))
    cats = sorted({w.category.__name__ for w in caught if issubclass(w.category, UserWarning)})
    return _plain(r), cats


def _plain(r):
    import torch

    import pyrite as pr

    if isinstance(r, (torch.Tensor, pr.Tensor)):
        return (
            "tensor",
            str(r.dtype).split(".")[-1].replace("int64", "int32"),
            tuple(r.shape),
            r.float().tolist() if r.dtype in (torch.bfloat16, pr.bfloat16) else r.tolist(),
        )
    if isinstance(r, (torch.Size, pr.Size)):
        return ("Size", tuple(r))
    if isinstance(r, (torch.dtype, pr.dtype)):
        return (
            "dtype",
            str(r).split(".")[-1].replace("int64", "int32").replace("float64", "float32"),
        )
    if isinstance(r, tuple) and r and r[0] == "raises":
        return r
    if isinstance(r, (list, tuple)):
        return (type(r).__name__, [_plain(v) for v in r])
    if isinstance(r, float):
        return ("float", round(r, 5))
    return (type(r).__name__, r)


def _same_error(t, p):
    from tests.sweep_harness import error_ok

    return t[0] == p[0] == "raises" and error_ok(t[1](), p[1]())


BEHAVIOURS = {
    # in-place ops return self
    "in-place returns self": lambda L: (
        [
            getattr(L.ones(3), m)(*a) is not None
            for m, a in [("add_", (1,)), ("clamp_", (0, 1)), ("zero_", ())]
        ]
        + [
            (
                lambda x: (
                    x.mul_(2) is x
                    and x.exp_() is x
                    and x.fill_(1) is x
                    and x.copy_(L.zeros(3)) is x
                    and x.masked_fill_(x > 0, 2) is x
                    and x.index_fill_(0, L.tensor([0]), 1) is x
                    and x.unsqueeze_(0) is x
                    and x.t_() is x
                    and x.squeeze_() is x
                    and x.uniform_() is x
                    and x.requires_grad_(False) is x
                )
            )(L.ones(3))
        ]
    ),
    "in-place on an int tensor refuses a float result": lambda L: L.ones(3, dtype=L.int32).exp_(),
    "in-place into an expanded view refuses": lambda L: L.ones(1).expand(3).add_(1),
    "in-place into an empty expanded view": lambda L: L.ones(0, 1).expand(0, 3).add_(1),
    "addmm_ in place": lambda L: (lambda x: x.addmm_(L.ones(2, 3), L.ones(3, 2)) is x and x)(
        L.ones(2, 2)
    ),
    # out=
    "out= returns out": lambda L: (lambda o: (L.add(L.ones(2), 1, out=o) is o, o))(L.empty(2)),
    "out= of a reduction": lambda L: (lambda o: (L.sum(L.ones(2, 3), 1, out=o) is o, o))(
        L.empty(2)
    ),
    "out= of a creation": lambda L: (lambda o: (L.zeros(3, out=o) is o, o))(
        L.empty(3, dtype=L.int32)
    ),
    "out= tuple of max": lambda L: (
        lambda o: (L.max(L.arange(6.0).reshape(2, 3), 1, out=o)[0] is o[0], o)
    )((L.empty(2), L.empty(2, dtype=L.int64))),
    "out= resized (warns)": lambda L: (lambda o: (L.add(L.ones(2), 1, out=o), o.shape))(L.empty(3)),
    "out= resized silently when empty": lambda L: (lambda o: (L.mul(L.ones(2), 3, out=o), o.shape))(
        L.empty(0)
    ),
    "out= refuses a float result in an int": lambda L: L.add(
        L.ones(2), 1, out=L.empty(2, dtype=L.int32)
    ),
    "out= takes an int result in a float": lambda L: L.add(
        L.ones(2, dtype=L.int32), 1, out=L.empty(2)
    ),
    # .T and friends
    "x.T of 1-D warns": lambda L: L.arange(3).T,
    "x.T of 0-D warns": lambda L: L.tensor(2.0).T,
    "x.T of 3-D": lambda L: L.zeros(2, 3, 4).T.shape,
    "x.mT of 1-D raises": lambda L: L.zeros(3).mT,
    "x.t() of 3-D raises": lambda L: L.zeros(2, 3, 4).t(),
    # reading values back
    ".item() types": lambda L: [
        L.tensor(v, dtype=d).item()
        for v, d in [
            (1, L.int32),
            (1.5, L.float32),
            (True, L.bool),
            (7, L.uint8),
            (1.5, L.float16),
            (1.5, L.bfloat16),
        ]
    ],
    ".item() of many raises": lambda L: L.ones(2).item(),
    ".tolist()": lambda L: [
        L.tensor([[1, 2]]).tolist(),
        L.tensor(3.5).tolist(),
        L.zeros(0, 2).tolist(),
        L.tensor([True]).tolist(),
        L.tensor([1.5], dtype=L.bfloat16).tolist(),
    ],
    "bool()": lambda L: [bool(L.tensor(0.0)), bool(L.tensor([2])), bool(L.tensor(float("nan")))],
    "bool() of many raises": lambda L: bool(L.ones(2)),
    "bool() of none raises": lambda L: bool(L.ones(0)),
    "len()": lambda L: [len(L.zeros(3, 2)), len(L.zeros(0))],
    "len() of 0-d raises": lambda L: len(L.tensor(1)),
    "iteration": lambda L: [t for t in L.arange(6).reshape(2, 3)],
    "iteration over 0-d raises": lambda L: list(L.tensor(1)),
    "int()/float()/complex()/index": lambda L: [
        int(L.tensor(2.7)),
        float(L.tensor(3)),
        complex(L.tensor(1.0)),
        [0, 1, 2][L.tensor(1)],
        list(range(L.tensor(3))),
    ],
    "format of 0-d": lambda L: [
        f"{L.tensor(1.5):.2f}",
        f"{L.tensor(3)}",
        "{:d}".format(L.tensor(3)),
    ],
    # shapes
    "x.shape and x.size() are Sizes": lambda L: [
        L.zeros(2, 3).shape,
        L.zeros(2, 3).size(),
        L.zeros(2, 3).size(1),
        L.zeros(2, 3).shape[1:],
        L.zeros(2, 3).shape.numel(),
        L.zeros(2, 3).shape == (2, 3),
        isinstance(L.zeros(2).shape, tuple),
    ],
    "Size arithmetic": lambda L: [
        L.zeros(2, 3).shape + (4,),
        L.Size([2, 3]) == (2, 3),
        L.zeros(2, 3).shape[-1],
    ],
    "Size in creation": lambda L: [
        L.zeros(L.zeros(2, 3).shape),
        L.ones(*L.zeros(2, 1).shape),
        L.tensor(L.zeros(2, 3).shape),
    ],
    "x.stride()": lambda L: [
        L.zeros(2, 3).stride(),
        L.zeros(2, 3).T.stride(),
        L.zeros(2, 3).stride(0),
    ],
    # dtypes
    "dtype comparisons": lambda L: [
        L.zeros(2).dtype == L.float32,
        L.zeros(2).dtype == L.float,
        L.zeros(2, dtype=L.long).dtype == L.int64,
        L.zeros(2).dtype != L.float16,
        L.zeros(2).dtype in (L.float32, L.float16),
        L.float32.is_floating_point,
        L.uint8.is_signed,
        L.int8.is_signed,
        L.bool.itemsize,
        L.float16.itemsize,
    ],
    "x.type()": lambda L: [
        L.ones(2).type().split(".")[-1],
        L.ones(2).type(L.int32).dtype,
        L.ones(2).type("torch.LongTensor").dtype,
    ],
    "tensor() of mixed nested lists": lambda L: [
        L.tensor([1, 2.5]),
        L.tensor([True, 2]),
        L.tensor([[True], [1.5]]),
        L.tensor([True, False]),
        L.tensor([]),
        L.tensor([[]]).shape,
    ],
    "tensor() of numpy scalars": lambda L: [
        L.tensor(np.float32(1.5)),
        L.tensor(np.int64(3)),
        L.tensor(np.bool_(True)),
        L.tensor([np.float32(1), np.float32(2)]),
        L.tensor(np.int16(3)),
        L.tensor(np.array(3, dtype=np.uint8)),
    ],
    "tensor() of tensors": lambda L: [
        L.tensor([L.tensor(1.0), L.tensor(2.0)]),
        L.tensor([L.tensor([1.0]), L.tensor([2.0])]),
        L.tensor([[L.tensor(1), 2]]),
    ],
    "tensor() of many-element tensors raises": lambda L: L.tensor([L.ones(2), L.ones(2)]),
    # copies
    "copy.deepcopy": lambda L: (
        lambda x: (lambda y: [y is not x, y, y.requires_grad])(__import__("copy").deepcopy(x))
    )(L.tensor([1.0, 2.0]).requires_grad_()),
    "copy.deepcopy of a view": lambda L: __import__("copy").deepcopy(
        L.arange(6).reshape(2, 3)[:, 1]
    ),
    "pickle round trip": lambda L: __import__("pickle").loads(
        __import__("pickle").dumps(
            [
                L.arange(6, dtype=L.int16).reshape(2, 3).T,
                L.tensor([1.5], dtype=L.bfloat16),
                L.float16,
                L.zeros(2, 3).shape,
            ]
        )
    ),
    # indexing forms
    "a list of lists indexes as a tuple": lambda L: L.arange(12).reshape(3, 4)[[[0, 2], [1, 1]]],
    "a list of 0-d tensors indexes as a tuple": lambda L: L.arange(12).reshape(3, 4)[
        [L.tensor(0), L.tensor(1)]
    ],
    "a 0-d bool tensor index": lambda L: [
        L.tensor(5)[L.tensor(True)],
        L.tensor(5)[L.tensor(False)],
        L.arange(2)[L.tensor(True)],
    ],
    "setitem broadcasting a leading 1": lambda L: (
        lambda a: (a.__setitem__(0, L.ones(1, 3)), a)[1]
    )(L.zeros(2, 3)),
    # operators with non-tensors
    "== None": lambda L: [L.ones(2) == None, L.ones(2) != None],  # noqa: E711
    "in": lambda L: [2 in L.arange(3), 5 in L.arange(3)],
    "numpy scalar on the left": lambda L: [
        np.float32(2) * L.ones(2),
        L.ones(2, dtype=L.float16) * np.float64(2),
    ],
}
# torch warns these once a process (TORCH_WARN_ONCE), so after the sweep has run them torch is
# silent: pyrite's warning is checked against the first time's
WARN_ONCE = {
    "x.T of 1-D warns",
    "x.T of 0-D warns",
    "a list of lists indexes as a tuple",
    "a list of 0-d tensors indexes as a tuple",
}


@pytest.mark.parametrize("name", list(BEHAVIOURS), ids=list(BEHAVIOURS))
def test_behaviour(name):
    import torch

    import pyrite as pr

    t, tw = _outcome(torch, BEHAVIOURS[name])
    p, pw = _outcome(pr, BEHAVIOURS[name])
    if t[0] == "raises" or p[0] == "raises":
        assert _same_error(t, p), f"torch {t}, pyrite {p}"
    else:
        assert p == t, f"\ntorch  {t}\npyrite {p}"
    if name in WARN_ONCE:
        assert pw == ["UserWarning"], f"warnings: pyrite {pw}"
    else:
        assert pw == tw, f"warnings: torch {tw}, pyrite {pw}"


def main(argv):
    import argparse
    import collections
    import time

    p = argparse.ArgumentParser()
    p.add_argument("--cases", type=int, default=200)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--only", default="")
    p.add_argument("--show", type=int, default=2)
    args = p.parse_args(argv)
    pat = re.compile(args.only) if args.only else None
    counts = collections.Counter()
    reasons = collections.Counter()
    t0 = time.time()
    for op in OPS:
        if pat and not pat.search(op.name):
            continue
        res = run_op(op, args.cases, args.start)
        c = collections.Counter(o.status for o in res)
        counts.update(c)
        reasons.update(o.detail for o in res if o.status == "allowed")
        fails = [o for o in res if o.status == "FAIL"]
        if fails:
            print(f"== {op.name}: {len(fails)}/{len(res)} FAIL", flush=True)
            for o in fails[: args.show]:
                print(f"  case {o.case}: {o.detail}", flush=True)
    print(f"total {sum(counts.values())} cases: {dict(counts)} in {time.time() - t0:.0f}s")
    for reason, n in reasons.most_common():
        print(f"  allowed {n:6d}: {reason}")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main(sys.argv[1:])
