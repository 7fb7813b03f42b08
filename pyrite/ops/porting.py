"""More PyTorch names a ported script meets, each a composition of existing ops:
torch.detach/detach_, the unsafe_* split spellings, constant_pad_nd, nonzero_static,
empty_permuted, is_inference, the eager control-flow operators torch.cond / torch.while_loop,
DLPack interchange (from_dlpack / to_dlpack, through NumPy on the host), the default-device
functions, and Tensor.layout / Tensor.is_cpu with torch.strided.
"""

from __future__ import annotations

import numbers

from ..tensor import Tensor


# ---- layout ----------------------------------------------------------------------------------
class layout:
    """torch.layout: pyrite has one, strided (dense tensors with strides)."""

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return f"pyrite.{self._name}"

    def __reduce__(self):
        return self._name  # (pickles as the module attribute, one object per process)


strided = layout("strided")


# ---- detach, unsafe_* ----------------------------------------------------------------------------
def detach(input):
    return input.detach()


def detach_(input):
    return input.detach_()


def unsafe_chunk(input, chunks, dim=0):
    """torch.chunk without autograd's checks on later in-place writes to the pieces (pyrite's
    pieces are views with the same checks as chunk's)."""
    return input.chunk(chunks, dim)


def unsafe_split(tensor, split_size_or_sections, dim=0):
    return tensor.split(split_size_or_sections, dim)


def unsafe_split_with_sizes(input, split_sizes, dim=0):
    from .combine import split_with_sizes

    return split_with_sizes(input, split_sizes, dim)


# ---- padding, nonzero_static, empty_permuted ----------------------------------------------------
def constant_pad_nd(input, pad, value=0):
    """F.pad(input, pad, "constant", value): torch's aten spelling (exported graphs call it)."""
    from .pad import pad as _pad

    return _pad(input, pad, "constant", value)


def nonzero_static(input, *, size, fill_value=-1):
    """nonzero(input) cut or padded to `size` rows: (size, input.ndim), rows past the count
    filled with fill_value (torch's fixed-shape nonzero for exported graphs)."""
    from .creation import full
    from .indexing import nonzero

    if not isinstance(size, numbers.Integral) or isinstance(size, bool):
        raise TypeError(
            f"pyrite: nonzero_static(): argument 'size' must be int, not {type(size).__name__}"
        )
    if size < 0:
        raise RuntimeError(
            f"pyrite: nonzero_static: 'size' must be an non-negative integer, got {size}"
        )
    nz = nonzero(input)  # (n, ndim)
    n = nz._shape[0]
    if n >= size:
        return nz[:size]
    from .combine import cat

    pad = full((size - n, input.ndim), fill_value, dtype=nz.dtype)
    return cat([nz, pad], 0)


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):  # fmt: skip
    """An uninitialised tensor of shape `size` whose memory holds its dims in the order
    `physical_layout` (outermost first): empty(size permuted).permute(inverse)."""
    from .creation import empty

    size, perm = tuple(size), tuple(physical_layout)
    if sorted(perm) != list(range(len(size))):
        raise RuntimeError(
            f"pyrite: Number of dimensions in size does not match the length of the physical_layout; "
            f"or physical_layout {list(perm)} is not a permutation of the dims of {list(size)}"
        )
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    t = empty(tuple(size[p] for p in perm), dtype=dtype).permute(inv)
    t.requires_grad = requires_grad
    return t


def is_inference(input):
    return input.is_inference()


# ---- control flow (torch.cond, torch.while_loop), run eagerly ----------------------------------
def _truth(pred):
    if isinstance(pred, Tensor):
        if pred.numel() != 1:
            raise RuntimeError(
                f"pyrite: cond: Expected pred to be bool or single-element tensor, but got a "
                f"tensor of shape {list(pred._shape)}"
            )
        return bool(pred.item())
    return bool(pred)


def cond(pred, true_fn, false_fn, operands=()):
    """true_fn(*operands) if pred else false_fn(*operands): torch.cond run eagerly (pred is read
    back once when a tensor)."""
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError(
            f"pyrite: cond: Expect operands to be a tuple or list, got {type(operands)}"
        )
    return (true_fn if _truth(pred) else false_fn)(*operands)


def while_loop(cond_fn, body_fn, carried_inputs):
    """Run body_fn while cond_fn holds, carrying a tuple of values: torch.while_loop eagerly
    (one readback per iteration for a tensor condition)."""
    if not isinstance(carried_inputs, (tuple, list)):
        raise RuntimeError(
            f"pyrite: while_loop: carried_inputs must be a tuple or list, got {type(carried_inputs)}"
        )
    carried = tuple(carried_inputs)
    while _truth(cond_fn(*carried)):
        out = body_fn(*carried)
        carried = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    return carried


# ---- DLPack ---------------------------------------------------------------------------------
def from_dlpack(ext_tensor, *, device=None, copy=None):
    """A pyrite tensor holding a copy of a DLPack-capable object's values (a NumPy array, a
    torch CPU tensor, ...): pyrite's memory is the GPU's, so the data crosses once."""
    import numpy as np

    if isinstance(ext_tensor, Tensor):
        return ext_tensor
    from .creation import tensor

    if hasattr(ext_tensor, "__dlpack__"):
        arr = np.from_dlpack(ext_tensor)
    else:  # a bare capsule (torch.utils.dlpack.to_dlpack's)
        holder = type("_Capsule", (), {})()
        holder.__dlpack__ = lambda stream=None, **_: ext_tensor
        holder.__dlpack_device__ = lambda: (1, 0)
        arr = np.from_dlpack(holder)
    return tensor(np.array(arr, copy=True))


def to_dlpack(tensor):
    """A DLPack capsule of the tensor's values (read back to host memory once)."""
    import numpy as np

    return np.ascontiguousarray(tensor.detach().numpy()).__dlpack__()


# ---- the default device ------------------------------------------------------------------------
_default_device = None


def get_default_device():
    """The device new tensors go to: the WebGPU device, or the one set_default_device named
    (every device names the one WebGPU device; see tensor.device)."""
    from ..tensor import _DEVICE

    return _default_device if _default_device is not None else _DEVICE


def set_default_device(device):
    """Accept torch's spellings ("cuda", "cpu", device objects, None); tensors still go to the one
    WebGPU device, and get_default_device returns what was set."""
    global _default_device
    from ..tensor import device as _device

    _default_device = None if device is None else _device(device)


# ---- Tensor attributes ------------------------------------------------------------------------
def _layout(self):
    return strided


def _is_cpu(self):
    return False  # a pyrite tensor's memory is the GPU's (its device is webgpu:0)


def _register_post_accumulate_grad_hook(self, hook):
    from .. import autograd

    return autograd.register_post_accumulate_grad_hook(self, hook)


# no gradient to record (autograd.install leaves these unwrapped: its guard would give detach_'s
# output a raising backward, where torch's has none)
for _f in (detach, detach_, nonzero_static, is_inference, get_default_device, set_default_device):
    _f._pyrite_plain = True

FUNCS = {
    "detach": detach,
    "detach_": detach_,
    "unsafe_chunk": unsafe_chunk,
    "unsafe_split": unsafe_split,
    "unsafe_split_with_sizes": unsafe_split_with_sizes,
    "constant_pad_nd": constant_pad_nd,
    "nonzero_static": nonzero_static,
    "empty_permuted": empty_permuted,
    "is_inference": is_inference,
    "cond": cond,
    "while_loop": while_loop,
    "from_dlpack": from_dlpack,
    "to_dlpack": to_dlpack,
    "get_default_device": get_default_device,
    "set_default_device": set_default_device,
}
__all__ = sorted(FUNCS)

METHODS = {
    "unsafe_chunk": unsafe_chunk,
    "unsafe_split": unsafe_split,
    "unsafe_split_with_sizes": unsafe_split_with_sizes,
    "nonzero_static": nonzero_static,
    "layout": property(_layout),
    "is_cpu": property(_is_cpu),
    "register_post_accumulate_grad_hook": _register_post_accumulate_grad_hook,
}
