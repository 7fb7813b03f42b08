"""`Tensor`: a device buffer viewed through shape, strides (in elements), offset and dtype.

Views (reshape of a contiguous tensor, permute, slicing, expand, ...) share the storage and change
only the view. The ops that make and transform tensors live in `pyrite/ops/`; each op module lists
its methods in `METHODS`, and `pyrite/ops/__init__.py` installs them on this class.
"""

from __future__ import annotations

import math
import struct
from functools import lru_cache

import numpy as np

from . import backend
from . import dtypes as D


@lru_cache(maxsize=4096)
def contiguous_strides(shape: tuple) -> tuple:
    strides = [1] * len(shape)
    acc = 1
    for i in range(len(shape) - 1, -1, -1):
        strides[i] = acc
        acc *= max(shape[i], 1)
    return tuple(strides)


@lru_cache(maxsize=4096)  # (kept per layout: most ops ask, of few layouts)
def _is_contiguous(shape, strides) -> bool:
    if 0 in shape:  # torch: a tensor with no elements is contiguous, whatever its strides
        return True
    acc = 1  # (a loop, not contiguous_strides + a generator)
    for i in range(len(shape) - 1, -1, -1):
        d = shape[i]
        if d != 1:
            if strides[i] != acc:
                return False
            acc *= d
    return True


class Size(tuple):
    """PyTorch's torch.Size: a tuple of ints with `numel()`."""

    def numel(self) -> int:
        return math.prod(self)

    def __repr__(self):
        return f"pyrite.Size({list(self)})"

    def __getitem__(self, item):
        r = tuple.__getitem__(self, item)
        return Size(r) if isinstance(item, slice) else r

    def __add__(self, other):  # torch.Size + tuple is a Size
        r = tuple.__add__(self, other)
        return Size(r) if isinstance(other, tuple) else r

    def __reduce__(self):
        return (Size, (tuple(self),))


def check_device(d) -> None:
    """A factory's `device=` checked as torch checks it: None, an int, a device (pyrite's, or any
    object with a str `type`, torch's included), or a string naming a device type ("cuda:0");
    anything else raises. Every device names the one WebGPU device (see `device`)."""
    if d is None or isinstance(d, (int, device)) or isinstance(getattr(d, "type", None), str):
        return
    if isinstance(d, str):
        device._parse(d)
        return
    raise TypeError(f"pyrite: device must be a device, a str or an int, not {type(d).__name__}")


class device:
    """`torch.device`'s spellings: device("cuda"), device("cuda:0"), device("cuda", 0),
    device(type="cuda", index=0), device(0), device(other_device). There is one device, the
    WebGPU one in use, so every device names it: all devices compare equal to each other and to
    the strings of a device ("cuda", "cuda:0", "cpu", "webgpu", ...), except that "meta" equals
    only "meta"; tensors and modules accept any of them.

    A device keeps the type and index it was given, so ported checks read as written:
    `device("cuda").type == "cuda"`, `str(device("cuda:0")) == "cuda:0"`. `str()` is the type
    with ":index" when an index was given ("cuda", "cuda:0", "cpu"), `repr()` is
    "device(type='cuda')" / "device(type='cuda', index=0)", both as torch's. A tensor's
    `.device` is device("webgpu", 0): type "webgpu", index 0, str "webgpu:0" (so
    `x.device.type == "cuda"` is False; compare devices, `x.device == device`, instead). An
    int is an index on the WebGPU device (torch's "the accelerator's device i"). `with
    device(...):` is accepted and changes nothing."""

    _TYPES = (
        "webgpu", "gpu", "cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip",
        "ve", "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
        "privateuseone",
    )  # fmt: skip

    def __init__(self, type="webgpu", index=None):
        if isinstance(type, device):
            if index is not None:
                raise TypeError("pyrite: device(device) takes no index")
            type, index = type.type, type.index
        elif isinstance(type, int) and not isinstance(type, bool):
            type, index = "webgpu", type if index is None else index
        elif not isinstance(type, str):
            raise TypeError(
                f"device() received an invalid combination of arguments - got "
                f"({type.__class__.__name__}), expected a device, a str or an int"
            )
        else:
            type, parsed = self._parse(type)
            if parsed is not None:
                if index is not None:
                    raise RuntimeError(
                        "type (string) must not include an index because index was passed "
                        f"explicitly: {type}:{parsed}"
                    )
                index = parsed
        if index is not None:
            index = int(index)
            if index < 0:
                raise RuntimeError("Device index must not be negative")
        self.type = type
        self.index = index

    @classmethod
    def _parse(cls, spec: str):
        """(type, index) of "cuda" / "cuda:0" / "webgpu", raising as torch.device does."""
        kind, colon, idx = spec.partition(":")
        if kind not in cls._TYPES:
            raise RuntimeError(
                f"Expected one of {', '.join(cls._TYPES)} device type at start of device "
                f"string: {spec}"
            )
        if not colon:
            return kind, None
        if not idx.isdigit() or (len(idx) > 1 and idx[0] == "0"):
            raise RuntimeError(f"Invalid device string: '{spec}'")
        return kind, int(idx)

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except RuntimeError:
                return False
        if not isinstance(other, device):
            return NotImplemented
        # "meta" (shapes without data, which pyrite has not) is the one device not the one here
        return (self.type == "meta") == (other.type == "meta")

    def __hash__(self):
        return hash("webgpu")

    def __enter__(self):  # `with torch.device("cuda"):` (the default device: there is one)
        return self

    def __exit__(self, *exc):
        return False

    def __reduce__(self):
        return (device, (self.type, self.index))


_DEVICE = device("webgpu", 0)
_F32 = struct.Struct("<f")

# Set while poisoning is on (ops/core.set_poison, the test suite): numpy() checks that a uint8 /
# int8 / int16 tensor's widened words hold values of its range, so a kernel that stores a small
# int without wrapping it (or leaves an element unwritten, still 0xDEADBEEF) fails loudly.
CHECK_SMALL_INT_RANGE = False


def _warn_scalar_of_grad(t):
    """float() or complex() of a tensor that requires grad, with grad mode on: torch 2.13's
    warning, once a process (python_variable_methods.cpp; int(), bool() and item() stay quiet)."""
    if not t.requires_grad:
        return
    from .autograd import is_grad_enabled
    from .errors import warn_once

    if is_grad_enabled():
        warn_once(
            "scalar of grad",
            "Converting a tensor with requires_grad=True to a scalar may lead to unexpected "
            "behavior.\nConsider using tensor.detach() first.",
        )


class Tensor:
    __slots__ = (
        "__weakref__",
        "_agen",  # a base's autograd generation (in-place rebases); a view's: its base's, when
        # the view's history was taken
        "_base",
        "_offset",
        "_out_nr",  # which output of grad_fn this is (set with grad_fn)
        "_shape",
        "_storage",
        "_strides",
        "_untracked",  # a .data alias: its in-place writes do not count for autograd
        "dtype",
        "grad",
        "grad_fn",
        "requires_grad",
    )
    __array_priority__ = 1000  # numpy defers to Tensor's reflected operators

    def __init__(self, *args, **kwargs):
        """torch.Tensor's legacy constructor: Tensor(2, 3) or Tensor(size) is an uninitialized
        float32 tensor of that shape (`nn.Parameter(torch.Tensor(out, in))` in older layers),
        Tensor() an empty one, Tensor(data) a copy of a sequence, array or tensor."""
        from .ops.creation import empty as _empty
        from .ops.creation import tensor as _tensor

        dtype = kwargs.get("dtype", D.float32)
        if not args:
            t = _empty(0, dtype=dtype)
        elif all(type(a) is int for a in args) and not (len(args) == 1 and args[0] < 0):
            t = _empty(*args, dtype=dtype)
        elif len(args) == 1 and isinstance(args[0], Size):
            t = _empty(*args[0], dtype=dtype)
        else:
            t = _tensor(args[0] if len(args) == 1 else list(args), dtype=dtype)
        self._adopt(t)

    def _adopt(self, t):
        for name in ("_storage", "_shape", "_strides", "_offset", "dtype"):
            object.__setattr__(self, name, getattr(t, name))
        self.requires_grad = False
        self.grad = None
        self.grad_fn = None
        self._base = None
        self._untracked = False
        self._agen = 0

    @classmethod
    def _make(cls, storage, shape, strides, offset, dtype, base=None, untracked=False, agen=0):
        t = object.__new__(cls)
        t._storage = storage
        t._shape = shape
        t._strides = strides
        t._offset = offset
        t.dtype = dtype
        t.requires_grad = False
        t.grad = None
        t.grad_fn = None
        t._base = base
        t._untracked = untracked
        # (set, not left to getattr's default: a getattr that misses an unset slot raises and
        # catches inside, ~0.4 µs on every view, which reads its base's)
        t._agen = agen
        return t

    def _view(self, shape, strides, offset):
        base = self._base
        if base is None:
            base = self
        # a view of a .data alias is one too; an in-place op recorded on the base (or another
        # view of it) since then rebases the base's history: this view's is then re-derived
        # from the base's (autograd.fresh_view). (Every tensor made sets _agen: read, not
        # getattr'd.)
        return Tensor._make(
            self._storage, shape, strides, offset, self.dtype, base, self._untracked, base._agen
        )

    # ---- metadata ------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        return Size(self._shape)

    def size(self, dim=None):
        if dim is None:
            return Size(self._shape)
        return self._shape[self._dim(dim)]

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return len(self._shape)

    ndimension = dim

    def numel(self) -> int:
        return math.prod(self._shape)

    nelement = numel

    def stride(self, dim=None):
        if dim is None:
            return tuple(self._strides)
        return self._strides[self._dim(dim)]

    def storage_offset(self) -> int:
        return self._offset

    def is_contiguous(self, memory_format=None) -> bool:
        try:
            return _is_contiguous(self._shape, self._strides)
        except TypeError:  # (a shape or strides some path left a list: not hashable)
            return _is_contiguous.__wrapped__(self._shape, self._strides)

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    @property
    def device(self):
        return _DEVICE

    @property
    def is_cuda(self):
        return False

    @property
    def is_meta(self):
        # pyrite has no data-less tensors: one made on "meta" holds real storage (tensor.device)
        return False

    @property
    def is_leaf(self):
        return self.grad_fn is None

    # ---- autograd (pyrite/autograd.py) -----------------------------------------------------
    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        from . import autograd

        autograd.backward(self, gradient, retain_graph, create_graph, inputs)

    def register_hook(self, hook):
        from . import autograd

        return autograd.register_hook(self, hook)

    def retain_grad(self):
        from . import autograd

        autograd.retain_grad(self)

    @property
    def retains_grad(self):
        from . import autograd

        return autograd.retains_grad(self)

    @property
    def _version(self):
        return self._storage.version

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    @property
    def data(self):
        # the same storage without autograd identity: in-place writes through it (and its
        # views) are neither recorded nor counted as writes, as torch's `.data` (whose version
        # counter is its own): `p.data.clamp_(...)` between a forward and its backward is allowed
        t = Tensor._make(self._storage, self._shape, self._strides, self._offset, self.dtype)
        t._untracked = True
        return t

    @data.setter
    def data(self, value):
        self._adopt_storage(value)

    def _adopt_storage(self, value):
        for name in ("_storage", "_shape", "_strides", "_offset", "dtype"):
            object.__setattr__(self, name, getattr(value, name))

    def requires_grad_(self, requires_grad=True):
        if requires_grad and self.dtype.kind not in "fc":
            raise RuntimeError(
                "pyrite: only Tensors of floating point and complex dtype can require gradients "
                f"(this one is {self.dtype!r})"
            )
        if not requires_grad and self.grad_fn is not None:
            raise RuntimeError(
                "pyrite: you can only change requires_grad flags of leaf variables. If you want "
                "to use a computed variable in a subgraph that doesn't require differentiation "
                "use var_no_grad = var.detach()."
            )
        self.requires_grad = bool(requires_grad)
        return self

    def detach(self):
        return Tensor._make(self._storage, self._shape, self._strides, self._offset, self.dtype)

    def detach_(self):
        self.grad_fn = None
        self.requires_grad = False
        return self

    def _dim(self, dim: int) -> int:
        """A dimension index made non-negative, or IndexError naming the range."""
        n = len(self._shape)
        if type(dim) is int and -n <= dim < n:  # (the common case, without the checks below)
            return dim % n
        lo, hi = (-n, n - 1) if n else (-1, 0)
        if not isinstance(dim, (int, np.integer)) or not lo <= dim <= hi:
            raise IndexError(
                f"pyrite: dimension out of range (expected to be in range of "
                f"[{lo}, {hi}], but got {dim})"
            )
        return int(dim) % max(n, 1)

    # ---- leaving the device --------------------------------------------------------------
    def _host(self) -> np.ndarray:
        """The values as a numpy array of the storage's host type: float32/16, int32 (the
        small ints too, still widened), bool, and float32 for bfloat16 (numpy has no bf16)."""
        return host_arrays((self,))[0]

    def numpy(self, *, force=False) -> np.ndarray:
        if self.dtype.numpy_dtype is None:  # PyTorch's words: numpy has no bfloat16
            raise TypeError(
                f"Got unsupported ScalarType BFloat16 (pyrite: numpy has no {self.dtype.name};"
                " use .float().numpy())"
            )
        arr = self._host()
        if arr.dtype != self.dtype.numpy_dtype:
            arr = arr.astype(self.dtype.numpy_dtype)  # the widened small ints: exact
        return arr

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def tolist(self):
        return self._host().tolist()

    def item(self):
        if self.numel() != 1:
            from .errors import ShapeError  # a ValueError, and torch's RuntimeError

            raise ShapeError(
                f"pyrite: a Tensor with {self.numel()} elements cannot be converted "
                "to a Python scalar"
            )
        if self.dtype is D.float32:  # the common case (a loss): four bytes straight to a float
            return _F32.unpack(backend.current().read(self._storage.buffer, self._offset * 4, 4))[0]
        return self._host().reshape(()).item()

    def cpu(self):
        return self

    def cuda(self, *args, **kwargs):
        return self

    def __float__(self):
        _warn_scalar_of_grad(self)
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __complex__(self):
        _warn_scalar_of_grad(self)
        return complex(self.item())

    def __index__(self):
        if self.dtype.kind != "i" or self.numel() != 1:
            raise TypeError(
                "pyrite: only integer tensors of a single element can be converted to an index"
            )
        return int(self.item())

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError(
                f"pyrite: Boolean value of Tensor with {self.numel()} elements is ambiguous"
            )
        return bool(self.item())

    def __len__(self):
        if not self._shape:
            raise TypeError("pyrite: len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("pyrite: iteration over a 0-d tensor")
        return iter(self.unbind(0))

    __hash__ = object.__hash__

    def __repr__(self):
        from .format import format_tensor

        return format_tensor(self)

    __str__ = __repr__

    def __format__(self, spec):
        # PyTorch's rule: a 0-d tensor formats as its number (`f"{t:.3f}"`, `f"{t}"` → `1.5`);
        # any other goes through object.__format__: str(t) for "", TypeError for a spec
        if not self._shape:
            return format(self.detach().item(), spec)
        return object.__format__(self, spec)

    def __reduce__(self):
        # by value: values, dtype, shape and requires_grad, as torch's pickle keeps them (a
        # non-leaf arrives as a leaf; its grad and graph stay behind); the receiver uploads the
        # values to its own device (another process's, through pyrite.multiprocessing)
        return (_rebuild_tensor, (self._host(), self.dtype, self.requires_grad))

    def __deepcopy__(self, memo):
        t = self.clone()
        t.requires_grad = self.requires_grad
        return t


def host_arrays(tensors) -> list:
    """Each tensor's values as Tensor._host() gives them, read back in one round trip (one
    copy each into the device's staging buffer and one map, while they fit)."""
    dev = backend.current()
    reads, conts = [], []
    for t in tensors:
        dt = t.dtype
        n = math.prod(t._shape)
        c = t if n == 0 or t.is_contiguous() else t.contiguous()
        conts.append(c)
        size = dt.storage_bytes
        reads.append((c._storage.buffer, c._offset * size, n * size))
    raws = dev.read_many(reads)
    out = []
    for t, raw in zip(conts, raws):
        dt, shape = t.dtype, t._shape
        if not raw:
            host = np.float32 if dt.numpy_dtype is None else dt.numpy_dtype
            out.append(np.zeros(shape, dtype=host))
            continue
        arr = np.frombuffer(bytearray(raw), dtype=dt.np).reshape(shape)
        if dt.is_bool:
            arr = arr != 0
        elif dt is D.bfloat16:
            arr = D.bf16_bits_to_f32(arr).reshape(shape)
        elif dt.min is not None and dt.bits < 32 and CHECK_SMALL_INT_RANGE:
            lo, hi = int(arr.min()), int(arr.max())
            if lo < dt.min or hi > dt.max:
                raise RuntimeError(
                    f"pyrite: internal: a {dt.name} tensor holds {lo if lo < dt.min else hi}, "
                    "outside its range: an op stored it unwrapped (or never wrote it)"
                )
        out.append(arr)
    return out


def _rebuild_tensor(host, dtype, requires_grad=False):
    """A pickled tensor rebuilt (Tensor.__reduce__)."""
    from .ops.creation import tensor as _tensor

    t = _tensor(host, dtype=dtype)
    if requires_grad:
        t.requires_grad_(True)
    return t
