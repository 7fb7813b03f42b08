"""pyrite: a deep-learning framework whose every kernel is WGSL, run through WebGPU.

    import pyrite as pr
    x = pr.randn(4, 8)
    y = (x @ x.T).softmax(-1)

PyTorch's names and semantics throughout; see README.md and DESIGN.md.
"""

from __future__ import annotations

from . import backend as _backend
from . import dtypes as _dtypes
from . import ops as _ops
from .dtypes import (
    bfloat16,
    byte,
    cdouble,
    cfloat,
    char,
    complex64,
    complex128,
    double,
    dtype,
    float,
    float16,
    float32,
    float64,
    get_default_dtype,
    half,
    int,
    int8,
    int16,
    int32,
    int64,
    long,
    short,
    uint8,
)
from .dtypes import bool_ as bool
from .errors import (
    ArgumentError,
    DeviceError,
    KernelError,
    OutOfMemoryError,
    PyriteError,
    ShapeError,
)
from .ops.porting import layout, strided
from .ops.sparse_coo import sparse_coo  # torch.sparse_coo, the layout
from .tensor import Size, Tensor, device

globals().update(_ops.exported())

from . import nn, quantization, special
from .compile import compile

# torch.* spellings of nn.functional ops (torch.selu, torch.batch_norm, ...): nn/_toplevel.py
globals().update(nn.TOPLEVEL)

# torch._foreach_* (multi-tensor updates of custom optimizers and EMA helpers): ops/foreach.py
from .ops import foreach as _foreach  # noqa: E402

globals().update({_n: getattr(_foreach, _n) for _n in _foreach.__all__})

from .version import __version__  # noqa: E402  (pyrite/version.py: torch.version's names)


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def is_storage(obj) -> bool:
    """torch.is_storage: whether `obj` is a storage (x.untyped_storage(), x.storage())."""
    from .ops.legacy import TypedStorage
    from .ops.tensor_attrs import UntypedStorage

    return isinstance(obj, (TypedStorage, UntypedStorage))


def numel(input) -> int:
    return input.numel()


def is_floating_point(input) -> bool:
    return input.is_floating_point()


def result_type(a, b):
    from .ops.elementwise import result_dtype

    return result_dtype(a, b)


def promote_types(a, b):
    return _dtypes.result_type_of(_dtypes.from_any(a), _dtypes.from_any(b))


from . import (
    autograd,  # noqa: E402
    fft,  # torch.fft's namespace (pyrite/fft.py)
    linalg,  # torch.linalg's namespace (pyrite/linalg.py)
    sparse,  # torch.sparse's functions (pyrite/sparse.py)
)

# torch.linalg's and torch.special's functions are guarded as the ops are (pyrite/autograd.py):
# without a backward rule, their outputs' backward raises naming them
autograd.install([linalg, special], Tensor, any_origin=True)
# (complex tensors: ops/complex.py's guard; the Tensor methods have theirs from ops/__init__.py,
# and a second pass would put it again in front of ops/bound.py's bound operators)
_ops.complex.install([linalg, special], None)
from .stft import istft, stft  # noqa: E402  (torch.stft / torch.istft, on pyrite.fft)

Tensor.stft, Tensor.istft = stft, istft
# torch.FloatTensor, LongTensor, ...: legacy constructors and isinstance checks by dtype
from .ops.casts import LEGACY_TYPES as _LEGACY_TYPES  # noqa: E402

globals().update(_LEGACY_TYPES)
# torch.autograd.functional (jacobian, hessian, vjp, jvp, hvp, vhp): pyrite/autograd_functional.py
from . import autograd_functional as _autograd_functional  # noqa: E402

autograd.functional = _autograd_functional
__import__("sys").modules[__name__ + ".autograd.functional"] = _autograd_functional
# torch.autograd.gradcheck / gradgradcheck (and the module of that name: GradcheckError)
from . import autograd_check as _autograd_check  # noqa: E402

autograd.gradcheck = _autograd_check.gradcheck
autograd.gradgradcheck = _autograd_check.gradgradcheck
__import__("sys").modules[__name__ + ".autograd.gradcheck"] = _autograd_check
# torch.autograd.graph (saved_tensors_hooks, save_on_cpu, Node, register_multi_grad_hook)
from . import autograd_graph as _autograd_graph  # noqa: E402

autograd.graph = _autograd_graph
__import__("sys").modules[__name__ + ".autograd.graph"] = _autograd_graph
# torch.autograd.function: the module `from torch.autograd.function import ...` reads
# torch.autograd.profiler (profile, record_function: pyrite.profiler's) and torch.autograd.Variable
# (old scripts: Variable(t, requires_grad=True) is t, and every tensor is one)
from . import profiler as _profiler  # noqa: E402

autograd.profiler = __import__("types").ModuleType(__name__ + ".autograd.profiler")
autograd.profiler.profile = _profiler.profile
autograd.profiler.record_function = _profiler.record_function
__import__("sys").modules[__name__ + ".autograd.profiler"] = autograd.profiler


class _VariableMeta(type):
    def __instancecheck__(cls, instance):
        return isinstance(instance, Tensor)


class Variable(metaclass=_VariableMeta):
    """torch.autograd.Variable (deprecated there): `Variable(t, requires_grad=...)` is `t` (with
    requires_grad set where asked), and every tensor is an instance."""

    def __new__(cls, data, requires_grad=False, volatile=False):
        if requires_grad:
            data.requires_grad_(True)
        return data


autograd.Variable = Variable
del Variable, _VariableMeta
autograd.function = __import__("types").ModuleType(__name__ + ".autograd.function")
for _n in ("Function", "FunctionCtx", "once_differentiable"):
    setattr(autograd.function, _n, getattr(autograd, _n))
__import__("sys").modules[__name__ + ".autograd.function"] = autograd.function
from .autograd import (
    enable_grad,
    inference_mode,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from .format import set_printoptions


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """torch.set_anomaly_enabled: autograd.set_detect_anomaly without the context manager."""
    autograd.set_detect_anomaly(enabled, check_nan)


from .runtime import (
    accelerator,
    cuda,
    device_info,
    empty_cache,
    finfo,
    get_device_module,
    iinfo,
    max_memory_allocated,
    memory_allocated,
    memory_stats,
    set_default_dtype,
    set_default_tensor_type,
    set_device,
    synchronize,
    to_numpy,
)

# isort: split
# checkpoints (pyrite/io/) and torch.utils.data's counterpart (pyrite/utils/data/)
# ---- optimizers and schedules (pyrite/optim/) ----
# mixed precision (pyrite/amp.py) and torch.backends' switches, as training scripts spell them
from . import (
    amp,  # noqa: E402
    distributions,  # torch.distributions' families and kl_divergence
    func,  # torch.func: functional_call, grad, vjp, jacrev, jacfwd, hessian, vmap
    io,
    optim,
    profiler,  # torch.profiler's profile() and record_function (pyrite/profiler.py)
    quasirandom,  # torch.quasirandom.SobolEngine (pyrite/quasirandom.py)
    signal,  # torch.signal.windows (pyrite/signal/)
    utils,
)
from .amp import (  # noqa: E402  (torch.is_autocast_enabled() etc., as attention code asks)
    GradScaler,  # (torch.GradScaler: torch.amp.GradScaler's other name)
    autocast,
    clear_autocast_cache,
    get_autocast_cpu_dtype,
    get_autocast_dtype,
    get_autocast_gpu_dtype,
    is_autocast_cache_enabled,
    is_autocast_cpu_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_cpu_dtype,
    set_autocast_cpu_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
    set_autocast_gpu_dtype,
)
from .distributions.binomial import binomial  # noqa: E402  (torch.binomial, torch.poisson)
from .distributions.poisson import poisson  # noqa: E402
from .func import vmap  # noqa: E402  (torch.vmap, torch.func.vmap's other name)
from .io import load, save
from .runtime import backends  # noqa: E402

cuda.amp = amp._CudaAmp  # torch.cuda.amp.autocast / GradScaler (deprecated spellings)
for _name, _type in _LEGACY_TYPES.items():  # torch.cuda.FloatTensor and kin
    setattr(cuda, _name, _type)
del _name, _type
cpu = amp.cpu  # torch.cpu: torch.cpu.amp.autocast (deprecated spelling), is_available, ...

# ported scripts' boilerplate: torch.random, torch.version, torch.testing.assert_close, torch.jit's
# and torch.compiler's decorators, torch.distributed's "not here" (one process, one device)
from . import (  # noqa: E402
    compiler,
    distributed,
    jit,
    multiprocessing,  # torch.multiprocessing: the stdlib's, spawn, tensors sent by value
    onnx,  # torch.onnx.export (writing the file needs the onnx package)
    random,
    serialization,  # torch.serialization: save, load and the weights_only allowlist
    testing,
    version,
    web,  # pyrite.web.export: a compiled function as a bundle a browser runs with WebGPU
)
from .testing_tensors import make_tensor as _make_tensor  # noqa: E402

testing.make_tensor = _make_tensor  # (pyrite/testing/ itself makes no tensors: layering)

# torch.cuda, torch.cpu and torch.backends are namespaces here (classes), not modules: register
# them (and their namespaces) as modules too, so a ported script's `import torch.backends.cudnn
# as cudnn` and `from torch.cuda.amp import autocast, GradScaler` import them; and torch's file
# names nn.parameter (Parameter, Buffer)
_sys = __import__("sys")

for _path, _obj in (("cuda", cuda), ("cpu", cpu), ("backends", backends)):
    _sys.modules[f"{__name__}.{_path}"] = _obj
    for _sub in ("amp", "cudnn", "cuda", "mps"):
        if _sub in vars(_obj):
            _sys.modules[f"{__name__}.{_path}.{_sub}"] = vars(_obj)[_sub]
_sys.modules[f"{__name__}.nn.parameter"] = nn.module
nn.parameter = nn.module  # (torch.nn.parameter.Parameter as an attribute, without an import)
del _path, _obj, _sub, _sys
