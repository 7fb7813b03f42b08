"""linear and bilinear: GEMMs (ops/matmul.py; linear adds its bias in the GEMM epilogue)."""

from __future__ import annotations

from ..autograd import forwards
from ..errors import ShapeError
from ..ops import matmul as _matmul
from ._common import need_tensor


@forwards
def linear(input, weight, bias=None):
    """input @ weight.T + bias."""
    return _matmul.linear(input, weight, bias)


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = Σ_ij x1[..., i]·weight[o, i, j]·x2[..., j] + bias[o].

    One GEMM x1 (B, in1) @ weight as (in1, out·in2), then a map multiplying by x2 broadcast over
    out and a sum over in2: B·out·in2 floats in between (torch's _trilinear holds as many)."""
    for what, t in (("input1", input1), ("input2", input2), ("weight", weight)):
        need_tensor("bilinear", what, t)
    if weight.ndim != 3:
        raise ShapeError(
            f"pyrite: bilinear(): weight must be 3-D (out, in1, in2), got {tuple(weight._shape)}"
        )
    if input1.ndim != input2.ndim:
        raise ShapeError(
            f"pyrite: bilinear(): input dimensions do not match: got {input1.ndim} and "
            f"{input2.ndim}"
        )
    for d in range(input1.ndim - 1):
        if input1._shape[d] != input2._shape[d]:
            raise ShapeError(
                f"pyrite: bilinear(): input batch dimensions do not match at dim {d}: got "
                f"{input1._shape[d]} and {input2._shape[d]}"
            )
    out_f, in1, in2 = weight._shape
    if input1._shape[-1] != in1:
        raise ShapeError(
            f"pyrite: bilinear(): input1 size does not match weight size: got "
            f"{input1._shape[-1]} but expected {in1}"
        )
    if input2._shape[-1] != in2:
        raise ShapeError(
            f"pyrite: bilinear(): input2 size does not match weight size: got "
            f"{input2._shape[-1]} but expected {in2}"
        )
    if bias is not None and (bias.ndim != 1 or bias._shape[0] != out_f):
        raise ShapeError(
            f"pyrite: bilinear(): bias size does not match weight size: got "
            f"{bias._shape[-1] if bias.ndim else 1} but expected {out_f}"
        )
    lead = tuple(input1._shape[:-1])
    x1 = input1.reshape(-1, in1)  # (B, in1)
    x2 = input2.reshape(-1, 1, in2)  # (B, 1, in2)
    w = weight.permute(1, 0, 2).reshape(in1, out_f * in2)
    t = _matmul.matmul(x1, w).reshape(-1, out_f, in2)  # (B, out, in2)
    # operators, not fused maps: they record, so the whole is differentiable as it stands
    y = (t * x2).sum(-1)  # (B, out)
    if bias is not None:
        y = y + bias
    return y.reshape(*lead, out_f)


__all__ = ["bilinear", "linear"]
