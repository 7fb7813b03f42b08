"""Complex64 index, movement and mask ops: one mechanism, the real op on each part.

An op that moves, picks or replaces elements without combining them (gather, index_select,
take, take_along_dim, masked_select, tile, rot90) commutes with taking parts:
op(z) = op(Re z) + i op(Im z). So its complex form is the real op run twice and the parts
stacked (`_by_parts`, ops/complex_parts.py): every shape rule, index check and error message
is the real op's, the values are exact, and autograd records the real ops (torch's
conjugate-Wirtinger gradient, ops/complex.py). masked_fill and index_fill fill each part with
the value's part. nonzero, argwhere and count_nonzero count z != 0 (either part nonzero).

Any other argument that is complex (an index, a mask) is refused as torch refuses it: a
RuntimeError (ComplexError is one).
"""

from __future__ import annotations

from ..tensor import Tensor
from .complex import _PYCOMPLEX, ComplexError, _is_c, _pair, as_complex
from .complex_impls import _real_fill, _write
from .complex_math import _make, _parts
from .complex_parts import _by_parts


def _no_complex_operands(name, args, kwargs):
    """torch's refusal of a complex index or mask ("gather(): Expected dtype int32/int64 for
    index", "masked_select: expected BoolTensor for mask")."""
    for a in (*args, *kwargs.values()):
        if _is_c(a):
            raise ComplexError(
                f"pyrite: {name}(): expected an integer index or a bool mask, but got a "
                "complex64 tensor (torch refuses it too)"
            )


def _partwise(name):
    """op(z, *args) = op(Re z, *args) + i op(Im z, *args)."""

    def impl(orig, z, *args, **kwargs):
        _no_complex_operands(name, args, kwargs)
        return _by_parts(orig, z, *args, **kwargs)

    return impl


# ---- fills -------------------------------------------------------------------------------------
def _value_parts(value):
    """A fill value's (real, imaginary) parts: floats, or 0-d float32 tensors (a tensor keeps
    its gradient path). A value tensor with dims is passed whole as the real part, so the real
    op raises its own error for it."""
    if isinstance(value, Tensor):
        if value.ndim:
            return value, value
        if _is_c(value):
            return _parts(value)
        return value, 0.0
    c = _PYCOMPLEX(value)
    return c.real, c.imag


def _fill_into_real(name, value, dtype):
    """A complex fill value for a real tensor: its real part when the imaginary part is 0, else
    torch's refusal ("value cannot be converted to type float without overflow")."""
    if isinstance(value, Tensor):
        if value.ndim:
            return value  # (the real op raises for a value with dims)
        value = value.item()
    if name.startswith("index_fill") and isinstance(value, _PYCOMPLEX):
        raise ComplexError(
            f"pyrite: {name}(): Converting complex Scalar to non-complex type is not supported"
        )
    return _real_fill(value, dtype)


def _mask_check(name, mask):
    if _is_c(mask):
        raise ComplexError(
            f"pyrite: {name} only supports boolean masks, but got mask with dtype complex64"
        )


def masked_fill(orig, input, mask, value):
    """Each part filled with the value's part where mask is True."""
    _mask_check("masked_fill", mask)
    if not _is_c(input):
        return orig(input, mask, _fill_into_real("masked_fill", value, input.dtype))
    vr, vi = _value_parts(value)
    re, im = _parts(input)
    return _make(orig(re, mask, vr), orig(im, mask, vi))


def index_fill(orig, input, dim, index, value):
    _no_complex_operands("index_fill", (index,), {})
    if not _is_c(input):
        return orig(input, dim, index, _fill_into_real("index_fill", value, input.dtype))
    vr, vi = _value_parts(value)
    re, im = _parts(input)
    return _make(orig(re, dim, index, vr), orig(im, dim, index, vi))


def _masked_fill_(orig, self, mask, value):
    """self.masked_fill_(mask, value): the out-of-place result written into self (a real self:
    the real op in place, with the value's real part)."""
    from . import scatter

    _mask_check("masked_fill_", mask)
    if not _is_c(self):
        return orig(self, mask, _fill_into_real("masked_fill_", value, self.dtype))
    return _write("masked_fill_", self, masked_fill(scatter.masked_fill, self, mask, value))


def _index_fill_(orig, self, dim, index, value):
    from . import scatter

    _no_complex_operands("index_fill_", (index,), {})
    if not _is_c(self):
        return orig(self, dim, index, _fill_into_real("index_fill_", value, self.dtype))
    return _write("index_fill_", self, index_fill(scatter.index_fill, self, dim, index, value))


# ---- counting nonzeros ---------------------------------------------------------------------------
def _nonzero_mask(z):
    """z != 0: either part nonzero (NaN counts as nonzero, as torch's)."""
    return _pair(z).ne(0).any(-1)


def _on_nonzero_mask(orig, z, *args, **kwargs):
    return orig(_nonzero_mask(as_complex(z)), *args, **kwargs)


def register(IMPLS):
    for name in (
        "gather", "index_select", "take", "take_along_dim", "masked_select", "tile", "rot90",
    ):  # fmt: skip
        IMPLS[name] = _partwise(name)
    IMPLS["masked_fill"] = masked_fill
    IMPLS["masked_fill_"] = _masked_fill_
    IMPLS["index_fill"] = index_fill
    IMPLS["index_fill_"] = _index_fill_
    for name in ("nonzero", "argwhere", "count_nonzero"):
        IMPLS[name] = _on_nonzero_mask
