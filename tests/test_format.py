"""Printing against PyTorch: `repr(pr.tensor(a)) == repr(torch.tensor(a))` for the same values.

The only normalisations are the differences by design (README "Differences from PyTorch"):
dtype names say `pyrite.` for `torch.`, PyTorch's int64 is pyrite's int32, and since `pyrite.` is
one character longer than `torch.`, a `dtype=` suffix may wrap onto its own line where PyTorch's
fits (or the reverse), so where a dtype suffix is printed, the suffixes' line breaks are ignored.
"""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite import backend
from pyrite import format as pformat


@pytest.fixture(autouse=True)
def _restore_printoptions():
    yield
    torch.set_printoptions(profile="default")
    pr.set_printoptions(profile="default")


def _both(**opts):
    torch.set_printoptions(**opts)
    pr.set_printoptions(**opts)


_SUFFIX_BREAK = re.compile(r",\n *(?=(?:size|dtype|requires_grad|grad_fn)=)")


def _normalised_torch(s: str) -> str:
    return s.replace("torch.int64", "torch.int32").replace("torch.", "pyrite.")


def assert_same_repr(p, t):
    want = _normalised_torch(repr(t))
    got = repr(p)
    if got != want and "dtype=" in want:
        got, want = _SUFFIX_BREAK.sub(", ", got), _SUFFIX_BREAK.sub(", ", want)
    assert got == want, f"\npyrite:\n{repr(p)}\ntorch:\n{repr(t)}"
    assert str(p) == repr(p)


def check(a):
    """a: a numpy array (float32, float16, int64 or bool): both libraries print it alike."""
    a = np.asarray(a)
    assert_same_repr(pr.tensor(a), torch.from_numpy(a.copy()))


# ---- values that choose the number style ----------------------------------------------------

SPECIAL = [np.nan, np.inf, -np.inf, -0.0, 0.0]


def _values(rng, n, kind):
    """n float32 values of one style: mixed magnitudes, integer-valued, huge, tiny, ..."""
    if kind == "normal":
        v = rng.standard_normal(n)
    elif kind == "wide":  # magnitudes spread over 10^-6 .. 10^9: scientific
        v = rng.standard_normal(n) * 10.0 ** rng.integers(-6, 10, n)
    elif kind == "scaled":  # one magnitude, anywhere from 1e-7 to 1e12
        v = rng.standard_normal(n) * 10.0 ** rng.integers(-7, 13)
    elif kind == "integer":  # integer-valued floats print as `3.`
        v = rng.integers(-(10 ** rng.integers(1, 9)), 10 ** rng.integers(1, 9), n).astype(float)
    elif kind == "ratio":  # just either side of the 1000x ratio that switches to scientific
        v = rng.choice([1.0, 999.0, 1001.0, 0.5], n) * rng.choice([1, -1], n)
    else:  # "edge": around 1e-4 and 1e8, the other two switches
        v = rng.choice([1e-4, 9.9e-5, 1.1e-4, 1e8, 9.9e7, 1.5e8, 1.0], n)
    return v.astype(np.float32)


@pytest.mark.parametrize("kind", ["normal", "wide", "scaled", "integer", "ratio", "edge"])
def test_random_floats_of_every_style(rng, kind):
    for _ in range(12):
        ndim = int(rng.integers(1, 5))
        shape = tuple(int(s) for s in rng.integers(1, 6, ndim))
        n = int(np.prod(shape))
        v = _values(rng, n, kind)
        if rng.random() < 0.5:  # NaN, inf, -0. change widths and never the style
            idx = rng.integers(0, n, max(1, n // 4))
            v[idx] = rng.choice(SPECIAL, idx.size)
        check(v.reshape(shape))


@pytest.mark.parametrize(
    "values",
    [
        [1.0, 2.5],
        [np.nan, -0.0, np.inf, 1.0],
        [np.nan, -np.inf],
        [np.nan],
        [0.0, 0.0, 0.0],
        [-0.0, 0.0],
        [-0.0, 1.0],
        [-0.0, 1.5],
        [1e-5, 1.0],
        [1e9, 1.0],
        [1e10, 1.5],
        [123456789.0],
        [1e-30, -1e30, np.nan],
        [0.1, 1000.0],
        [0.1, 100.1],
        [9.99995, 1.0],
        [-9.99995, 0.5],
        [3.0e38, -3.0e38],
        [1.4e-45],  # the smallest subnormal
    ],
)
def test_special_values_and_widths(values):
    check(np.array(values, np.float32))
    check(np.array(values, np.float32).reshape(len(values), 1))


@pytest.mark.parametrize("value", [1.5, 1.0, -0.0, np.nan, -np.inf, 1e-7, 1e12, 0.1, 12345.678])
def test_zero_d(value):
    check(np.array(value, np.float32))
    with np.errstate(over="ignore"):  # 1e12 is inf in float16
        check(np.array(value, np.float16))


def test_zero_d_integer_and_bool():
    for v in (0, 3, -7, 2**31 - 1, -(2**31)):
        check(np.array(v, np.int64))
    check(np.array(True))
    check(np.array(False))


def test_integers(rng):
    for hi in (10, 1000, 2**31 - 1):
        for shape in ((7,), (3, 5), (2, 3, 4), (20, 30)):
            check(rng.integers(-hi, hi, shape).astype(np.int64))
    check(np.arange(2000).astype(np.int64))
    check(np.arange(-50, 50).astype(np.int64).reshape(10, 10) * 1000)


def test_bools(rng):
    for shape in ((1,), (5,), (3, 4), (2, 3, 4), (40, 30)):
        check(rng.random(shape) > 0.5)
    check(np.ones(30, bool))


def test_float16(rng):
    for kind in ("normal", "wide", "integer"):
        v = np.clip(_values(rng, 30, kind), -6e4, 6e4).astype(np.float16)
        check(v)
        check(v.reshape(5, 6))
    check(np.array([65504, 1e-3, np.nan, -np.inf], np.float16))


def test_empty():
    for shape in ((0,), (0, 3), (3, 0), (2, 0, 4), (0, 0)):
        check(np.zeros(shape, np.float32))
        check(np.zeros(shape, np.int64))  # pyrite names int32 where PyTorch names int64
        check(np.zeros(shape, bool))
        check(np.zeros(shape, np.float16))


# ---- layout -------------------------------------------------------------------------------


def test_nested_brackets(rng):
    for shape in ((2, 3), (2, 3, 4), (2, 2, 3, 4), (2, 1, 2, 1, 3), (1, 1, 1)):
        check(rng.standard_normal(shape).astype(np.float32) * 1e4)


def test_long_rows_wrap(rng):
    for n in (7, 8, 9, 11, 12, 13, 40, 101):
        check(rng.standard_normal(n).astype(np.float32))
        check(rng.standard_normal((2, n)).astype(np.float32) * 1e-6)
        check(rng.integers(-(10**6), 10**6, (3, n)))


def test_summarised(rng):
    check(rng.standard_normal(1001).astype(np.float32))
    check(rng.standard_normal((40, 50)).astype(np.float32))
    check(rng.standard_normal((10, 10, 20)).astype(np.float32) * 1e3)
    check(rng.standard_normal((7, 8, 9, 10)).astype(np.float32))
    check(rng.standard_normal((2, 600)).astype(np.float32))  # one dim short, one long
    check(rng.standard_normal((1001, 1)).astype(np.float32))
    check(rng.integers(0, 10**9, (50, 50)))
    check(rng.random((40, 30)) > 0.5)
    # the style comes from the shown elements only: a huge value in the hidden middle is ignored
    v = rng.standard_normal(5000).astype(np.float32)
    v[2500] = 1e30
    check(v)


def test_non_contiguous_views(rng):
    a = rng.standard_normal((30, 40)).astype(np.float32)
    p, t = pr.tensor(a), torch.from_numpy(a)
    assert_same_repr(p.T, t.T)
    assert_same_repr(p[::3, 1::7], t[::3, 1::7])
    assert_same_repr(p[5], t[5])
    assert_same_repr(p[:, 3], t[:, 3])
    assert_same_repr(p[2, 3], t[2, 3])
    b = rng.standard_normal((3, 1, 5)).astype(np.float32)
    assert_same_repr(pr.tensor(b).expand(3, 400, 5), torch.from_numpy(b).expand(3, 400, 5))
    assert_same_repr(pr.tensor(b).permute(2, 0, 1), torch.from_numpy(b).permute(2, 0, 1))
    # negative steps are views in pyrite (PyTorch refuses them): the edges read through them too
    c = rng.standard_normal((50, 60)).astype(np.float32)
    assert_same_repr(pr.tensor(c)[::-1, ::-2], torch.from_numpy(c).flip(0, 1)[:, ::2])


def test_reads_only_the_printed_edges():
    """A 10⁹-element (expanded) tensor prints in well under a second and reads ~36 numbers."""
    row = np.arange(1000, dtype=np.float32) - 500.5
    p = pr.tensor(row).expand(10**6, 1000)
    t = torch.from_numpy(row).expand(10**6, 1000)
    dev = backend.current()
    read = dev.read
    nbytes = []

    def counting_read(buffer, offset, size):
        nbytes.append(size)
        return read(buffer, offset, size)

    dev.read = counting_read
    try:
        start = time.perf_counter()
        got = repr(p)
        elapsed = time.perf_counter() - start
    finally:
        del dev.read
    assert got == repr(t)
    assert sum(nbytes) <= 6 * 6 * 4, nbytes
    assert elapsed < 2.0  # generous for 2 shared cores; it takes milliseconds


def test_summarised_large_4d():
    a = torch.arange(2 * 30 * 40 * 50, dtype=torch.float32).reshape(2, 30, 40, 50) / 7
    assert_same_repr(pr.tensor(a.numpy()), a)


# ---- suffixes ----------------------------------------------------------------------------


def test_requires_grad_suffix_and_its_wrapping(rng):
    # every row length and a few widths, so the suffix meets the 80-column edge at every offset
    for n in [*range(1, 30), 1500]:
        for scale in (1.0, 100.0, 1e6):
            a = (rng.standard_normal(n) * scale).astype(np.float32)
            t = torch.tensor(a, requires_grad=True)
            assert_same_repr(pr.tensor(a).requires_grad_(), t)
    assert_same_repr(
        pr.tensor(np.float32(2.5)).requires_grad_(), torch.tensor(2.5).requires_grad_()
    )


def test_grad_fn_suffix():
    class AddBackward0:  # a stand-in node: the training issue brings the real ones
        pass

    a = torch.tensor([1.0, 2.0], requires_grad=True)
    t = a + 1
    p = pr.tensor([2.0, 3.0])
    p.requires_grad = True
    p.grad_fn = AddBackward0()
    assert_same_repr(p, t)


def test_dtype_suffix_after_a_long_row(rng):
    for n in (8, 9, 15, 16, 17, 30):
        check(rng.standard_normal(n).astype(np.float16))


# ---- options ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "opts",
    [
        dict(precision=2),
        dict(precision=0),
        dict(precision=8),
        dict(sci_mode=True),
        dict(sci_mode=False),
        dict(precision=2, sci_mode=True),
        dict(linewidth=40),
        dict(linewidth=10),
        dict(linewidth=120),
        dict(threshold=5),
        dict(threshold=0),
        dict(edgeitems=1, threshold=10),
        dict(edgeitems=5),
        dict(edgeitems=0),
        dict(profile="short"),
        dict(profile="full"),
        dict(profile="short", linewidth=50, precision=3),
    ],
)
def test_printoptions(rng, opts):
    _both(**opts)
    cases = [
        rng.standard_normal(12).astype(np.float32),
        rng.standard_normal((5, 7)).astype(np.float32) * 1e5,
        _values(rng, 40, "wide"),
        _values(rng, 20, "integer"),
        np.array([np.nan, -0.0, 0.0, np.inf], np.float32),
        np.zeros(4, np.float32),
        rng.standard_normal(1200).astype(np.float32),
        rng.standard_normal((30, 40)).astype(np.float32),
        rng.integers(-1000, 1000, (3, 400)),
        rng.random((2, 3, 200)) > 0.5,
        np.array(3.25, np.float32),
        np.zeros((0, 3), np.float32),
    ]
    for a in cases:
        check(a)
    assert pformat.get_printoptions() == torch._tensor_str.get_printoptions()


def test_set_printoptions_resets_sci_mode_and_ignores_unknown_profile():
    _both(sci_mode=True)
    _both(precision=3)  # every call sets sci_mode, so this one returns it to None
    _both(profile="no-such-profile")
    assert pformat.get_printoptions() == torch._tensor_str.get_printoptions()
    check(np.array([1.0, 2.0], np.float32))


def test_printoptions_context_manager():
    with pformat.printoptions(precision=1):
        assert repr(pr.tensor([1.25])) == "tensor([1.2])"
    assert repr(pr.tensor([1.25])) == "tensor([1.2500])"


# ---- format() -----------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["", ".3f", ".2e", "10.1f", "g", ">12", "+.0f"])
def test_format_zero_d(spec):
    for a in (np.float32(0.1), np.float32(-2.5), np.int64(7), np.float16(1.5)):
        want = format(torch.from_numpy(np.array(a)), spec)
        assert format(pr.tensor(np.array(a)), spec) == want
    assert f"{pr.tensor(1.5)}" == f"{torch.tensor(1.5)}" == "1.5"
    assert f"{pr.tensor(True)}" == f"{torch.tensor(True)}" == "True"


def test_format_of_a_non_zero_d_tensor(rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    assert f"{pr.tensor(a)}" == str(pr.tensor(a)) == _normalised_torch(f"{torch.from_numpy(a)}")
    for p in (pr.tensor(a), pr.tensor([1.5])):  # one element but 1-D: torch refuses a spec too
        with pytest.raises(TypeError, match="unsupported format string passed to Tensor"):
            f"{p:.3f}"
    with pytest.raises(TypeError, match="unsupported format string passed to Tensor"):
        f"{torch.tensor([1.5]):.3f}"


def test_size_repr():
    assert repr(pr.zeros(2, 3).shape) == "pyrite.Size([2, 3])"
    assert repr(pr.tensor(1.0).shape) == "pyrite.Size([])"
    assert str(pr.zeros(4).shape) == _normalised_torch(str(torch.zeros(4).shape))


def test_set_printoptions_is_exported_as_torch_does():
    assert pr.set_printoptions is pformat.set_printoptions
    assert not hasattr(torch, "get_printoptions")  # 2.13 keeps it in torch._tensor_str


def test_column_width_from_the_extremes_equals_the_width_over_all_values(rng):
    """The formatter measures only the per-sign extremes; every value's string is no wider."""
    for _ in range(30):
        v = (rng.standard_normal(200) * 10.0 ** rng.integers(-110, 110, 200)).astype(np.float64)
        v[rng.integers(0, 200, 20)] = rng.choice([9.99995, -9.99995, 9.9999999e99, 0.99999])
        for p in (0, 1, 4, 7):
            for spec in (f".{p}f", f".{p}e", ".0f"):
                want = max(len(format(x, spec)) for x in v.tolist())
                assert max(len(format(x, spec)) for x in pformat._extremes(v)) == want
