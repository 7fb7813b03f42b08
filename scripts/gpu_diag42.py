"""Session 42's GPU-only failures, each case alone with its numbers (run on the lent GPU:
`gpu_session.sh diag42`): complex trace/diag gradients, the matmul family's seed 3822 case 17,
and the f16 einsum of the random-shapes fuzzer."""

import sys
import traceback

import numpy as np

sys.path[:0] = [".", "tests"]

import pyrite as pr  # noqa: E402


def trace_grads():
    rng = np.random.default_rng(0)
    for shape, mt in [
        ((7, 4), True),
        ((5, 5), False),
        ((3, 11), False),
        ((13, 2), False),
        ((4, 7), False),
    ]:
        a = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
        w = rng.standard_normal(2)
        p = pr.tensor(a).requires_grad_()
        t = p.mT.trace() if mt else p.trace()
        (pr.view_as_real(t) * pr.tensor(w.astype(np.float32))).sum().backward()
        g = p.grad.numpy()
        want = np.zeros(shape, np.complex128)
        n = min(shape)
        for i in range(n):
            want[i, i] = w[0] + 1j * w[1]
        err = np.abs(g - want).max()
        print(
            f"trace{' of mT' if mt else ''} {shape}: max err {err:.3g}; diag got {g.diagonal()[:4]} want {w}"
        )


def diag_checks():
    import test_complex_breadth40 as T

    within = T._assert_within

    def shown(got, want, tol, what):  # the arrays of a failing check, whole
        try:
            within(got, want, tol, what)
        except AssertionError:
            np.set_printoptions(precision=5, linewidth=150)
            print(f"  {what}: got\n{got}\n  want\n{want}")
            raise

    T._assert_within = shown
    rng = np.random.default_rng(1)
    cases = []
    for k in (0, 2, -1):
        cases += [(f"diag(v[::2], {k})", lambda lib, v, k=k: lib.diag(v[::2], k), [(7,)], 1)]
        cases += [(f"diag(a.mT, {k})", lambda lib, a, k=k: lib.diag(a.mT, k), [(3, 5)], 1)]
        cases += [(f"a.diag({k})", lambda lib, a, k=k: a.diag(k), [(1, 1)], 1)]
    cases += [("diag_embed", lambda lib, a: lib.diag_embed(a), [(2, 3)], 1)]
    cases += [("diag_embed 1 0 2", lambda lib, a: lib.diag_embed(a, 1, 0, 2), [(3, 1, 2)], 1)]
    cases += [
        (
            "diag_embed mT",
            lambda lib, a: lib.diag_embed(a.mT, offset=-2, dim1=-1, dim2=0),
            [(5, 2)],
            1,
        )
    ]
    for shape in [(1, 1), (5, 5), (3, 11), (13, 2)]:
        cases += [(f"trace {shape}", lambda lib, a: lib.trace(a), [shape], min(shape))]
    cases += [("mT.trace (7,4)", lambda lib, a: a.mT.trace(), [(7, 4)], 4)]
    for name, op, shapes, K in cases:
        try:
            T.check(rng, op, shapes, K)
            print(f"ok   {name}")
        except AssertionError as e:
            print(f"FAIL {name}: {str(e)[:300]}")


def mm_case():
    import test_hunt_kernels38 as H

    rng = np.random.default_rng(3822)
    for i in range(18):
        try:
            kind = H._mm_case(rng)
            if i >= 15:
                print(f"case {i}: {kind}")
        except AssertionError:
            print(f"case {i} FAILED:")
            traceback.print_exc(limit=6)
            return


def einsum_f16():
    # test_fuzz_random_shapes test_matmul[204]: einsum ...a,...b,...ba->...b in f16
    rng = np.random.default_rng(5)
    for trial in range(3):
        x = rng.standard_normal(13).astype(np.float16)
        y = rng.standard_normal(4).astype(np.float16)
        z = rng.standard_normal((4, 13)).astype(np.float16)
        got = pr.einsum("...a,...b,...ba->...b", pr.tensor(x), pr.tensor(y), pr.tensor(z)).numpy()
        ref = np.einsum(
            "a,b,ba->b", x.astype(np.float64), y.astype(np.float64), z.astype(np.float64)
        )
        import torch

        tt = torch.einsum("...a,...b,...ba->...b", *(torch.tensor(v) for v in (x, y, z))).numpy()
        print("einsum f16 got", got, "\n  f64", ref, "\n  torch f16", tt)


def diag_checks_poisoned():
    from pyrite.ops import core

    core.set_poison(True)
    diag_checks()


for f in (trace_grads, diag_checks, diag_checks_poisoned, mm_case, einsum_f16):
    print(f"== {f.__name__}")
    try:
        f()
    except Exception:  # noqa: BLE001
        traceback.print_exc(limit=8)
