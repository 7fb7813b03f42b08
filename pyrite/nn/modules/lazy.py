"""Lazy modules (torch.nn.LazyLinear, LazyConv*d, LazyConvTranspose*d, LazyBatchNorm*d,
LazyInstanceNorm*d): the input size is read from the first forward's input.

Until then the parameters are `UninitializedParameter`s (and the running statistics
`UninitializedBuffer`s): empty tensors. The first forward materialises them in place (the same
objects, so an optimizer built before it holds the real parameters), runs reset_parameters, and
the module becomes its ordinary class (LazyLinear -> Linear), as torch's. load_state_dict before
the first forward materialises them with the checkpoint's shapes.
"""

from __future__ import annotations

from ..module import Parameter, _BufferTensor
from ._util import new_empty
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .linear import Linear
from .norm import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    _zero_long,
)

__all__ = [
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "LazyConvTranspose1d",
    "LazyConvTranspose2d",
    "LazyConvTranspose3d",
    "LazyInstanceNorm1d",
    "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
    "LazyLinear",
    "UninitializedBuffer",
    "UninitializedParameter",
]


def _materialize(t, shape, cls):
    """Point t at fresh storage of `shape` (its own dtype) and make it a `cls`."""
    fresh = new_empty(*shape, dtype=t.dtype)
    t._storage, t._shape, t._strides, t._offset = (
        fresh._storage, fresh._shape, fresh._strides, fresh._offset,
    )  # fmt: skip
    t.__class__ = cls


class UninitializedParameter(Parameter):
    """A parameter whose shape is not known yet (torch.nn.UninitializedParameter)."""

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        return super().__new__(cls, new_empty(0, dtype=dtype), requires_grad)

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass  # (all in __new__)

    def materialize(self, shape, device=None, dtype=None):
        _materialize(self, tuple(shape), Parameter)

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, dtype=self.dtype)
        return memo[id(self)]

    def __repr__(self):
        return "<UninitializedParameter>"

    __str__ = __repr__


class UninitializedBuffer(_BufferTensor):
    """A buffer whose shape is not known yet (torch.nn.UninitializedBuffer)."""

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        data = new_empty(0, dtype=dtype)
        t = cls._make(data._storage, data._shape, data._strides, data._offset, data.dtype)
        t._is_buffer = True
        t.persistent = persistent
        return t

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        pass  # (all in __new__)

    def materialize(self, shape, device=None, dtype=None):
        _materialize(self, tuple(shape), _BufferTensor)

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(dtype=self.dtype, persistent=self.persistent)
        return memo[id(self)]

    def __repr__(self):
        return "<UninitializedBuffer>"

    __str__ = __repr__


def _is_lazy(t):
    return isinstance(t, (UninitializedParameter, UninitializedBuffer))


def _infer_parameters(module, args):
    module.initialize_parameters(*args)
    if module.has_uninitialized_params():
        raise RuntimeError(f"pyrite: module {module._get_name()} has not been fully initialized")
    module._initialize_hook.remove()
    del module._initialize_hook
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become


class LazyModuleMixin:
    """torch.nn.modules.lazy.LazyModuleMixin: a forward pre-hook that materialises the
    parameters from the first input, then turns the module into cls_to_become."""

    cls_to_become = None

    def _lazy_setup(self):
        self._initialize_hook = self.register_forward_pre_hook(_infer_parameters)

    def has_uninitialized_params(self):
        tensors = list(self._parameters.values()) + list(self._buffers.values())
        return any(_is_lazy(t) for t in tensors)

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        for name, t in list(self._parameters.items()) + list(self._buffers.items()):
            key = prefix + name
            if _is_lazy(t) and key in state_dict and not _is_lazy(state_dict[key]):
                t.materialize(tuple(state_dict[key].shape))
                self._lazy_sizes_from(name, tuple(state_dict[key].shape))
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )

    def _lazy_sizes_from(self, name, shape):
        """Set the inferred size attribute from a loaded tensor's shape."""

    def initialize_parameters(self, *args, **kwargs):
        raise NotImplementedError


class LazyLinear(LazyModuleMixin, Linear):
    """Linear whose in_features is the first input's last dim (torch.nn.LazyLinear)."""

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, 0, False, dtype=dtype)
        self.weight = UninitializedParameter(dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)
        self._lazy_setup()

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def _lazy_sizes_from(self, name, shape):
        if name == "weight" and len(shape) == 2:
            self.in_features = shape[1]

    def initialize_parameters(self, input, *args, **kwargs):
        if self.has_uninitialized_params():
            self.in_features = input.shape[-1]
            self.weight.materialize((self.out_features, self.in_features))
            if self.bias is not None:
                self.bias.materialize((self.out_features,))
            self.reset_parameters()


class _LazyConvMixin(LazyModuleMixin):
    def _lazy_conv_init(self, bias, dtype):
        self.weight = UninitializedParameter(dtype=dtype)
        self.out_channels = self._lazy_out_channels
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)
        self._lazy_setup()

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _lazy_sizes_from(self, name, shape):
        if name == "weight" and len(shape) >= 2:
            self.in_channels = shape[0] if self.transposed else shape[1] * self.groups

    def _get_in_channels(self, input):
        nd = len(self.kernel_size) + 1  # the channels and the spatial dims
        if input.dim() not in (nd, nd + 1):
            raise RuntimeError(
                f"Expected {nd}D (unbatched) or {nd + 1}D (batched) input to "
                f"{self.__class__.__name__}, but got input of size: {tuple(input.shape)}"
            )
        return input.shape[1] if input.dim() == nd + 1 else input.shape[0]

    def initialize_parameters(self, input, *args, **kwargs):
        if self.has_uninitialized_params():
            self.in_channels = self._get_in_channels(input)
            if self.in_channels % self.groups != 0:
                raise ValueError("in_channels must be divisible by groups")
            if self.transposed:
                shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
            else:
                shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
            self.weight.materialize(shape)
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()


def _lazy_conv(base, transposed):
    name = "Lazy" + base.__name__

    if transposed:

        def __init__(
            self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
            bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None,
        ):  # fmt: skip
            self._lazy_out_channels = out_channels
            base.__init__(
                self, 0, 0, kernel_size, stride, padding, output_padding, groups, False,
                dilation, padding_mode, dtype=dtype,
            )  # fmt: skip
            self._lazy_conv_init(bias, dtype)

    else:

        def __init__(
            self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
            bias=True, padding_mode="zeros", device=None, dtype=None,
        ):  # fmt: skip
            self._lazy_out_channels = out_channels
            base.__init__(
                self, 0, 0, kernel_size, stride, padding, dilation, groups, False,
                padding_mode, dtype=dtype,
            )  # fmt: skip
            self._lazy_conv_init(bias, dtype)

    doc = f"{base.__name__} whose in_channels is the first input's channels (torch.nn.{name})."
    return type(
        name,
        (_LazyConvMixin, base),
        {"__init__": __init__, "cls_to_become": base, "__doc__": doc, "__module__": __name__},
    )


LazyConv1d = _lazy_conv(Conv1d, False)
LazyConv2d = _lazy_conv(Conv2d, False)
LazyConv3d = _lazy_conv(Conv3d, False)
LazyConvTranspose1d = _lazy_conv(ConvTranspose1d, True)
LazyConvTranspose2d = _lazy_conv(ConvTranspose2d, True)
LazyConvTranspose3d = _lazy_conv(ConvTranspose3d, True)


class _LazyNormMixin(LazyModuleMixin):
    def __init__(
        self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
        dtype=None, *, bias=True,
    ):  # fmt: skip
        super().__init__(0, eps, momentum, False, False, dtype=dtype)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(dtype=dtype)
            self.running_var = UninitializedBuffer(dtype=dtype)
            self.num_batches_tracked = _zero_long()
        self._lazy_setup()

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def _lazy_sizes_from(self, name, shape):
        if len(shape) == 1:
            self.num_features = shape[0]

    def initialize_parameters(self, input, *args, **kwargs):
        if self.has_uninitialized_params():
            unbatched = getattr(self, "_no_batch_dim", None) == input.dim()
            self.num_features = input.shape[0] if unbatched else input.shape[1]
            for t in (self.weight, self.bias, self.running_mean, self.running_var):
                if t is not None and _is_lazy(t):
                    t.materialize((self.num_features,))
            self.reset_parameters()


def _lazy_norm(base):
    name = "Lazy" + base.__name__
    doc = f"{base.__name__} whose num_features is the first input's channels (torch.nn.{name})."
    return type(
        name,
        (_LazyNormMixin, base),
        {"cls_to_become": base, "__doc__": doc, "__module__": __name__},
    )


LazyBatchNorm1d = _lazy_norm(BatchNorm1d)
LazyBatchNorm2d = _lazy_norm(BatchNorm2d)
LazyBatchNorm3d = _lazy_norm(BatchNorm3d)
LazyInstanceNorm1d = _lazy_norm(InstanceNorm1d)
LazyInstanceNorm2d = _lazy_norm(InstanceNorm2d)
LazyInstanceNorm3d = _lazy_norm(InstanceNorm3d)
