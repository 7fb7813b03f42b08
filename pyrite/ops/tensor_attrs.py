"""Tensor attributes ported code reads, with PyTorch's values for a dense CPU/CUDA tensor
(is_sparse, is_quantized, is_mps, ... are all False: pyrite has only dense, unquantized tensors
on one WebGPU device), output_nr, name, record_stream (nothing to record: one queue),
to_dense (itself), const_data_ptr, and the host-callback methods apply_ / map_.

apply_ and map_ run the Python callable on the host, as torch's CPU-only methods do: the tensor
is read back (one sync and a transfer of its bytes), the callable runs once per element in
Python (~0.1-1 µs each), and the result is uploaded into the tensor. Use them for small tensors
or one-off setup, never in a training loop.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..tensor import Tensor

_FALSE_FLAGS = (
    "is_sparse",
    "is_sparse_csr",
    "is_quantized",
    "is_mps",
    "is_xpu",
    "is_mkldnn",
    "is_nested",
    "is_vulkan",
    "is_xla",
    "is_ipu",
    "is_maia",
    "is_mtia",
)


def is_distributed(self) -> bool:
    """False, as torch's for every tensor it makes today."""
    return False


def _output_nr(self) -> int:
    # which output of its grad_fn this tensor is (0 for a leaf, as torch)
    return getattr(self, "_out_nr", 0) if self.grad_fn is not None else 0


def _check_host_callback(self, name):
    if self.requires_grad:
        raise RuntimeError(
            f"pyrite: can't call {name}() on a tensor that requires grad; use "
            f"t.detach().{name}(...) instead"
        )


def _write_back(self, values: np.ndarray):
    from .creation import tensor

    self.copy_(tensor(values, dtype=self.dtype))
    return self


def apply_(self, callable):
    """In place: every element x becomes callable(x) (a Python number), run on the host."""
    _check_host_callback(self, "apply_")
    a = self.numpy()
    out = np.array([callable(v) for v in a.reshape(-1).tolist()]).astype(a.dtype)
    return _write_back(self, out.reshape(a.shape))


def map_(self, tensor, callable):
    """In place: self[i] = callable(self[i], tensor[i]), `tensor` broadcast to self's shape,
    run on the host."""
    _check_host_callback(self, "map_")
    a = self.numpy()
    b = np.broadcast_to(
        np.asarray(tensor.numpy() if isinstance(tensor, Tensor) else tensor), a.shape
    )
    pairs = zip(a.reshape(-1).tolist(), b.reshape(-1).tolist())
    out = np.array([callable(x, y) for x, y in pairs]).astype(a.dtype)
    return _write_back(self, out.reshape(a.shape))


class UntypedStorage:
    """What `Tensor.untyped_storage()` returns (torch.UntypedStorage, the bytes under a tensor
    and all its views), for what scripts ask of it: `nbytes()` / `size()` / `len()` (the
    bytes of the elements the storage was made for, as torch counts them: a view reports its
    base's), `data_ptr()` (equal for every view of one tensor, and equal to the base's
    `data_ptr()`: the storage's identity, not an address), `element_size()` (1), `device`,
    `tolist()` (its bytes, read back) and `==` between two of them. It cannot be resized or
    shared; views and tensors are made from tensors, not from it."""

    __slots__ = ("_storage", "_dtype")

    def __init__(self, storage, dtype):
        self._storage = storage
        self._dtype = dtype

    def nbytes(self) -> int:
        return self._storage.logical_nbytes

    def size(self) -> int:
        return self._storage.logical_nbytes

    __len__ = size

    def element_size(self) -> int:
        return 1

    def data_ptr(self) -> int:
        return id(self._storage) << 32  # Tensor.data_ptr()'s storage term (ops/misc.py)

    @property
    def device(self):
        from ..tensor import _DEVICE

        return _DEVICE

    @property
    def is_cuda(self) -> bool:
        return False

    def tolist(self) -> list:
        """The storage's bytes as torch lays them out (little-endian elements of the dtype it
        was made with), read back from the device."""
        n = self.nbytes() // self._dtype.itemsize
        flat = Tensor._make(self._storage, (n,), (1,), 0, self._dtype)
        if self._dtype.numpy_dtype is None:  # bfloat16: its bit patterns
            flat = flat.view(D.int16)
        return flat.numpy().view(np.uint8).tolist()

    def __eq__(self, other):
        return isinstance(other, UntypedStorage) and other._storage is self._storage

    def __hash__(self):
        return id(self._storage)

    def __repr__(self):
        return f"pyrite.UntypedStorage(device={self.device}) of size {self.nbytes()}"


def untyped_storage(self) -> UntypedStorage:
    return UntypedStorage(self._storage, self.dtype)


untyped_storage._pyrite_plain = True  # (autograd.plain: a bf16 self is not widened first)


def record_stream(self, stream):
    """Nothing to do: the device runs one queue, in order, and the buffer pool keeps a freed
    buffer from uploads until the work recorded before it is submitted (backend/pool.py), which
    is what torch's record_stream asks of its allocator for a second stream."""


def to_dense(self, dtype=None, *, masked_grad=None):
    """The tensor itself (pyrite's are all dense), as torch's for a strided tensor; with
    `dtype`, `self.to(dtype)`."""
    return self if dtype is None else self.to(dtype)


def const_data_ptr(self) -> int:
    """data_ptr() (torch's read-only spelling)."""
    return self.data_ptr()


__all__: list = []
METHODS = {
    **{
        flag: property(lambda self: False, doc="False: pyrite tensors are dense and unquantized")
        for flag in _FALSE_FLAGS
    },
    "is_distributed": is_distributed,
    "output_nr": property(_output_nr),
    # torch's Tensor.name: None (the name of a tensor in a traced graph; unused here)
    "name": property(lambda self: None),
    "apply_": apply_,
    "map_": map_,
    "untyped_storage": untyped_storage,
    "record_stream": record_stream,
    "to_dense": to_dense,
    "const_data_ptr": const_data_ptr,
}
