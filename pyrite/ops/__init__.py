"""The ops: each module lists its public functions in `__all__` (exported as `pyrite.<name>`)
and its Tensor methods in `METHODS`, installed on `Tensor` here."""

from __future__ import annotations

import importlib
import os
import sys

from ..tensor import Tensor

# Modules in the order their methods are installed (a later one may override an earlier one).
MODULES = [
    "elementwise",
    "views",
    "creation",
    "reduce",
    "matmul",
    "conv",
    "indexing",
    "combine",
    "sorting",
    "rowops",
    "compare",
    "stats",
    # split out of the modules above when they passed ~500 lines (installed in this order)
    "casts",
    "operators",
    "pad",
    "einsum",
    "scatter",
    # issue 8, tensor ops (branch tensorops)
    "division",
    "bitwise",
    "mathops",
    "special",
    "quantiles",
    "indices",
    "misc",
    "compat",
    # spatial ops (issue 8): pools split from conv, resampling
    "pool",
    "resample",
    "fold",
    "grid",
    "unpool",
    # torch's top-level linear algebra (torch.linalg itself is pyrite/linalg.py)
    "linalg_top",
    # more of torch's names for ported scripts (porting: utilities; series: special functions)
    "porting",
    "series",
    # torch.special's Bessel J/Y/K, airy_ai, gammainc and the orthogonal polynomials
    "special_more",
    # is_sparse, is_quantized, ... (all False), output_nr, apply_ / map_
    "tensor_attrs",
    # torch names older or exported code calls: poisson/binomial, the deprecated linear algebra
    # names, convolution, the *_copy functions, the removed ones' errors
    "legacy",
    # torch names still missing after legacy (tests/test_more_names.py): svd_lowrank,
    # pca_lowrank, lobpcg; segment_reduce
    "lowrank",
    "segment",
    # complex64: view_as_real / view_as_complex, polar, complex (and the guard installed below)
    "complex",
    # sparse COO tensors, stored dense: sparse_coo_tensor, to_sparse, spmm
    "sparse_coo",
]

loaded = []
for _name in MODULES:
    try:
        _mod = importlib.import_module(f"{__name__}.{_name}")
    except ModuleNotFoundError as _exc:
        if _exc.name != f"{__name__}.{_name}":
            raise
        continue  # not written yet
    except Exception as _exc:
        # PYRITE_DEV_LENIENT=1 lets work continue while one op module is broken mid-edit
        if not os.environ.get("PYRITE_DEV_LENIENT"):
            raise
        print(f"pyrite: ops.{_name} failed to import: {_exc!r}", file=sys.stderr)
        continue
    loaded.append(_mod)
    for _meth, _fn in getattr(_mod, "METHODS", {}).items():
        setattr(Tensor, _meth, _fn)


# bfloat16 and the small ints in ops without native kernels for them: one wrapper, installed
# here over every non-native module's functions and methods (ops/fallback.py says how)
from . import fallback as _fallback  # noqa: E402

_fallback.install(loaded)

# NumPy's axis= / keepdims= for every op taking dim / keepdim, as PyTorch (ops/aliases.py)
from . import aliases as _aliases  # noqa: E402

_aliases.install(Tensor)


def exported():
    """{name: function} of every op module's public functions."""
    out = {}
    for mod in loaded:
        for name in getattr(mod, "__all__", ()):
            out[name] = getattr(mod, name)
    # torch's out= on every exported function (ops/outarg.py)
    from . import outarg

    # torch's deprecated scalar-first overloads (torch.add(x, 2, y)): ops/legacy.py
    out = _legacy._scalar_first_functions(outarg.wrap_all(_aliases.wrap_all(out)))
    # the function forms of the methods a sparse tensor keeps sparse (ops/sparse_coo.py)
    from .sparse_coo import sparse_function_forms

    return sparse_function_forms(out)


# autograd (pyrite/autograd.py): every public function and method recording its module's GRADS
# rule when an input requires grad, or guarded so a missing rule raises at backward
from .. import autograd as _autograd  # noqa: E402

# (creation and random ops make new values: their outputs never require grad, so no guard)
# namespaces: the names op modules bound by `from .views import reshape` before this ran get
# the wrapped functions too, so a composite (column_stack: reshape then cat) records every
# piece instead of only the last (its output had a grad_fn from cat and no path to the input)
_autograd.install(loaded, Tensor, skip=("creation", "random"), namespaces=[vars(m) for m in loaded])

# torch's refusal of in-place writes whose tensor arguments partially overlap self
# (`x[1:].add_(x[:-1])`, `x[1:].clamp_(max=x[:-1])`): one wrapper over every in-place method
# (ops/overlap.py, which says which methods are left out and why)
from . import overlap as _overlap  # noqa: E402

_overlap.guard_inplace_methods(Tensor)

# complex64 (ops/complex.py): one guard over every op function and Tensor method, outermost: a
# call with a complex argument goes to a composition of real ops on the real view, or raises
# naming the op; other calls pay one scan of their arguments
from . import complex as _complex  # noqa: E402

_complex.install(loaded, Tensor)

# bound plans for the arithmetic and comparison operators on plain tensors (ops/bound.py): in
# front of every wrapper above, so a call whose operand layout was seen skips them all
from . import bound as _bound  # noqa: E402

_bound.install(Tensor)

# torch's deprecated scalar-first overloads of add/sub/addcmul/addcdiv (`x.add_(1 - beta, g)`,
# ops/legacy.py) on the Tensor methods, outermost; exported() puts them on the functions
from . import legacy as _legacy  # noqa: E402

_legacy._install_scalar_first(Tensor)
