"""Kernel generators as text, without a GPU: the strided map's WGSL for a few requests, grid
folding arithmetic, and helper inclusion."""

from __future__ import annotations

import re

import pytest

from pyrite.kernels.common import (
    HELPERS,
    MAX_WORKGROUPS,
    WG,
    fold_grid,
    grid_for,
    header,
    helpers_for,
)
from pyrite.kernels.elementwise import map_kernel
from pyrite.kernels.random import random_kernel


def _bindings(wgsl):
    return re.findall(
        r"@binding\((\d+)\) var<storage, (read|read_write)> (\w+): array<(\w+)>", wgsl
    )


def test_map_kernel_contiguous_binary():
    src = map_kernel(
        "x0 + x1", (("f32", "f32", "c", False), ("f32", "f32", "c", False)), ("f32", "f32", "c"), 1
    )
    assert src.modes == "rrw"
    assert _bindings(src.wgsl) == [
        ("0", "read", "in0", "f32"),
        ("1", "read", "in1", "f32"),
        ("2", "read_write", "out", "f32"),
        ("3", "read", "info", "i32"),
    ]
    assert "enable f16;" not in src.wgsl
    assert "fn main(" in src.wgsl and "num_workgroups" in src.wgsl
    assert "c0" not in src.wgsl  # contiguous: no coordinates


def test_map_kernel_f16_and_rank_baked():
    src = map_kernel("x0 * s0", (("f16", "f32", "s", False),), ("f16", "f32", "c"), 3, ("f32",))
    assert src.wgsl.startswith("enable f16;")
    assert src.wgsl.count("enable f16;") == 1
    # rank 3 baked: coordinates c0..c2 and no c3
    assert all(re.search(rf"\bc{d}\b", src.wgsl) for d in range(3))
    assert not re.search(r"\bc3\b", src.wgsl)
    assert "bitcast<f32>(info[" in src.wgsl  # the f32 scalar arrives as bits
    assert "f16(" in src.wgsl and "f32(in0[" in src.wgsl
    assert _bindings(src.wgsl)[-1][2] == "info"


def test_map_kernel_aliased_input_reads_out():
    src = map_kernel("x0 + s0", (("f32", "f32", "s", True),), ("f32", "f32", "s"), 2, ("f32",))
    assert src.modes == "w"
    assert [b[2] for b in _bindings(src.wgsl)] == ["out", "info"]
    assert "in0" not in src.wgsl


def test_map_kernel_bool_and_int_conversions():
    src = map_kernel(
        "x0 < x1", (("i32", "i32", "c", False), ("i32", "i32", "0", False)), ("u32", "bool", "c"), 1
    )
    assert "select(0u, 1u" in src.wgsl
    assert "array<u32>" in src.wgsl
    src = map_kernel("x0", (("u32", "bool", "c", False),), ("f32", "f32", "c"), 1)
    assert "!= 0u" in src.wgsl


def test_map_kernel_memoised():
    a = map_kernel("x0", (("f32", "f32", "c", False),), ("f32", "f32", "c"), 1)
    b = map_kernel("x0", (("f32", "f32", "c", False),), ("f32", "f32", "c"), 1)
    assert a is b


@pytest.mark.parametrize(
    "count, want",
    [
        (0, (1, 1, 1)),
        (1, (1, 1, 1)),
        (65535, (65535, 1, 1)),
        (65536, (65535, 2, 1)),
        (65535 * 2, (65535, 2, 1)),
        (65535 * 2 + 1, (65535, 3, 1)),
        (65535 * 65535, (65535, 65535, 1)),
        (65535 * 65535 + 1, (65535, 65535, 2)),
    ],
)
def test_fold_grid(count, want):
    g = fold_grid(count)
    assert g == want
    assert max(g) <= MAX_WORKGROUPS
    assert g[0] * g[1] * g[2] >= count  # every workgroup exists (the rest return early)


def test_fold_grid_limits_and_grid_for():
    for count in (10, 999, 10**6, 10**9, 10**12):
        for limit in (16, 1000, 65535):
            if count > limit**3:
                with pytest.raises(ValueError, match="exceed"):
                    fold_grid(count, limit)
                continue
            g = fold_grid(count, limit)
            assert max(g) <= limit and g[0] * g[1] * g[2] >= count
            # no more than one partial row of x and one partial slab of y
            assert g[0] * g[1] * g[2] - count < g[0] * g[1]
    assert grid_for(WG * 65535) == (65535, 1, 1)
    assert grid_for(WG * 65535 + 1) == (65535, 2, 1)
    assert grid_for(1, 64) == (1, 1, 1)


def test_helpers_included_once_with_dependencies():
    text = helpers_for("p_tanh(x0) + p_tanh(x1)", "p_softplus(x0, 1.0, 20.0)")
    for name in ("p_tanh", "p_expm1", "p_isnan", "p_softplus", "p_log1p", "p_isinf"):
        assert text.count(f"fn {name}(") == 1, name
    # a dependency is defined before its user
    assert text.index("fn p_isnan(") < text.index("fn p_tanh(")
    assert text.index("fn p_expm1(") < text.index("fn p_tanh(")
    assert helpers_for("x0 + 1.0") == ""
    gelu = helpers_for("0.5 * x0 * p_erfc(x0 * -0.7071)")
    assert "fn p_erfc_pos(" in gelu and "fn p_erf_small(" in gelu and "fn p_erf(" not in gelu


def test_every_helper_names_only_known_helpers():
    for name, body in HELPERS.items():
        assert f"fn {name}(" in body
        for called in re.findall(r"\b(p_[a-z0-9_]+)\s*\(", body):
            assert called in HELPERS, f"{name} calls unknown {called}"


def test_header_and_random_kernel():
    h = header([("a", "f16", "r"), ("b", "i32", "w")])
    assert h.startswith("enable f16;")
    assert "@binding(2) var<storage, read> info: array<i32>;" in h
    assert "enable f16;" not in header([("a", "f32", "r")])
    src = random_kernel("normal", "f16")
    assert src.modes == "w" and "enable f16;" in src.wgsl and "philox" in src.wgsl
    assert "enable f16;" not in random_kernel("randint", "i32").wgsl
