"""Weight-only quantization of a model's linear layers, in torchao's API:

    import pyrite as pr
    from pyrite.quantization import quantize_, Int4WeightOnlyConfig
    quantize_(model, Int4WeightOnlyConfig(group_size=128))   # every nn.Linear, in place
    y = model(x)                                             # int4 weights, dequantized in registers

`quantize_(model, config, filter_fn=None)` replaces each `nn.Linear` that `filter_fn(module, fqn)`
accepts (default: all of them) by a `QuantizedLinear` holding its weight as int8
(`Int8WeightOnlyConfig`, symmetric, per row or per group) or int4 (`Int4WeightOnlyConfig`,
asymmetric scale and offset per group; group_size 128 by default, as torchao). Activations stay
in their float dtype. The bias stays a float Parameter; the quantized weight has no gradient,
the input does (a frozen quantized base under a trainable adapter, as in QLoRA).

Formats, rounding and kernels: ops/quantized.py and kernels/quant.py. The layer's state lives in
buffers (`qweight` int32 words, `scales`, `offsets`), so `state_dict()`, `load_state_dict()`,
`pr.save` and `pr.compile` see it like any other state.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import dtypes as D
from .nn.module import Module, Parameter
from .nn.modules.linear import Linear
from .ops.quantized import QuantizedWeight, qlinear, quantize_weight


@dataclass(frozen=True)
class Int8WeightOnlyConfig:
    """int8 weights, W = q·scale, q in [-127, 127]; one scale a row (group_size None, torchao's
    int8_weight_only) or one per `group_size` input features (a multiple of 4)."""

    group_size: int | None = None
    bits = 8


@dataclass(frozen=True)
class Int4WeightOnlyConfig:
    """int4 weights, W = q·scale + offset, q in [0, 15], per group of `group_size` input
    features (a multiple of 8; None: one group a row)."""

    group_size: int | None = 128
    bits = 4


def int8_weight_only(group_size=None) -> Int8WeightOnlyConfig:
    return Int8WeightOnlyConfig(group_size)


def int4_weight_only(group_size=128) -> Int4WeightOnlyConfig:
    return Int4WeightOnlyConfig(group_size)


class QuantizedLinear(Module):
    """y = x·Wᵀ + b with W a QuantizedWeight (pyrite.ops.quantized): in_features,
    out_features, bits, group_size as given; buffers qweight, scales (and offsets, int4); bias
    a Parameter or None. Built from a float layer by `from_float` (or `quantize_`)."""

    def __init__(self, weight: QuantizedWeight, bias=None):
        super().__init__()
        self.in_features = weight.in_features
        self.out_features = weight.out_features
        self.bits = weight.bits
        self.group_size = weight.group_size
        self.register_buffer("qweight", weight.qweight)
        self.register_buffer("scales", weight.scales)
        if weight.offsets is not None:
            self.register_buffer("offsets", weight.offsets)
        else:
            self.offsets = None
        if bias is not None and not isinstance(bias, Parameter):
            bias = Parameter(bias)
        self.bias = bias

    @classmethod
    def from_float(cls, linear, config=None) -> QuantizedLinear:
        config = config or Int8WeightOnlyConfig()
        w = quantize_weight(linear.weight.detach(), config.bits, config.group_size)
        return cls(w, linear.bias)

    @property
    def weight(self) -> QuantizedWeight:
        """The quantized weight over this layer's buffers (as they are now: after a
        load_state_dict or .to() too). Scales a float cast changed are read as float32."""

        def f32(t):
            return t if t is None or t.dtype is D.float32 else t.to(D.float32)

        return QuantizedWeight(
            self.bits,
            self.group_size,
            (self.out_features, self.in_features),
            self.qweight,
            f32(self.scales),
            f32(self.offsets),
        )

    def forward(self, input):
        return qlinear(input, self.weight, self.bias)

    def extra_repr(self):
        g = "per row" if self.group_size is None else f"group_size={self.group_size}"
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}, int{self.bits}, {g}"
        )


def quantize_(model: Module, config, filter_fn=None) -> Module:
    """Replace, in place, every nn.Linear of `model` that `filter_fn(module, fqn)` accepts
    (default: every one) by a QuantizedLinear of `config` (Int8WeightOnlyConfig,
    Int4WeightOnlyConfig). A model that is itself a Linear cannot be replaced in place: use
    `QuantizedLinear.from_float`. Returns `model`."""
    if not isinstance(config, (Int8WeightOnlyConfig, Int4WeightOnlyConfig)):
        raise TypeError(
            "pyrite: quantize_(): config must be Int8WeightOnlyConfig or Int4WeightOnlyConfig "
            f"(or int8_weight_only() / int4_weight_only()), not {type(config).__name__}"
        )
    if isinstance(model, Linear):
        raise TypeError(
            "pyrite: quantize_(): the model is itself a Linear and cannot be replaced in place; "
            "use pyrite.quantization.QuantizedLinear.from_float(model, config)"
        )
    accept = filter_fn or (lambda m, fqn: isinstance(m, Linear))
    todo = [
        (name, m)
        for name, m in model.named_modules()
        if name and isinstance(m, Linear) and accept(m, name)
    ]
    for name, m in todo:
        model.set_submodule(name, QuantizedLinear.from_float(m, config))
    return model


__all__ = [
    "Int4WeightOnlyConfig",
    "Int8WeightOnlyConfig",
    "QuantizedLinear",
    "QuantizedWeight",
    "int4_weight_only",
    "int8_weight_only",
    "qlinear",
    "quantize_",
    "quantize_weight",
]
