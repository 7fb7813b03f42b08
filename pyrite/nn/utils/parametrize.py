"""torch.nn.utils.parametrize: a module's tensor computed from stored originals by a chain of
modules, every time it is read.

    register_parametrization(m, "weight", P)   # m.weight is now P(m.parametrizations.weight.original)

The module's class is swapped for a subclass (named Parametrized<Class>) with a property per
parametrized tensor; the originals live in `m.parametrizations[name]` (a ParametrizationList)
as `original`, or `original0`, `original1`, ... when the first parametrization's
`right_inverse` returns several tensors (weight_norm's g and v). State-dict keys are torch's
(`parametrizations.weight.original0`), so checkpoints move between the two.
"""

from __future__ import annotations

import contextlib
import copy
import copyreg

from ...autograd import no_grad
from ...tensor import Tensor
from ..module import Parameter
from ..modules.container import ModuleDict, ModuleList

_cache_enabled = 0
_cache: dict = {}


@contextlib.contextmanager
def cached():
    """Inside, each parametrized tensor is computed once and reused (a weight read by several
    calls in one forward)."""
    global _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache.clear()


def _as_param(t, like):
    if isinstance(like, Parameter) or getattr(like, "requires_grad", False):
        return Parameter(t, requires_grad=getattr(like, "requires_grad", True))
    return t


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and its originals."""

    def __init__(self, modules, original, unsafe=False):
        super().__init__(modules)
        self.unsafe = unsafe
        first = modules[0]
        with no_grad():
            new = original
            for m in reversed(modules):  # (torch applies right_inverse last to first)
                if hasattr(m, "right_inverse"):
                    try:
                        new = m.right_inverse(new)
                    except NotImplementedError:  # as torch: taken as the identity
                        pass
        if isinstance(new, Tensor):
            self.is_tensor = True
            self.ntensors = 1
            if isinstance(original, Parameter):
                with no_grad():
                    if tuple(new.shape) == tuple(original.shape):
                        original.copy_(new)
                        self.original = original
                    else:
                        self.original = Parameter(new, requires_grad=original.requires_grad)
            else:
                self.register_buffer("original", new)
        else:
            if not isinstance(new, (tuple, list)):
                raise ValueError(
                    "'right_inverse' must return a Tensor or a Sequence of tensors "
                    f"(list, tuple...). Got {type(new).__name__}"
                )
            self.is_tensor = False
            self.ntensors = len(new)
            for i, t in enumerate(new):
                if isinstance(original, Parameter):
                    setattr(self, f"original{i}", Parameter(t, original.requires_grad))
                else:
                    self.register_buffer(f"original{i}", t)
        if not unsafe:
            out = self()
            if not isinstance(out, Tensor):
                raise ValueError(
                    f"A parametrization must return a tensor. Got {type(out).__name__}."
                )
            if tuple(out.shape) != tuple(original.shape) or out.dtype is not original.dtype:
                raise ValueError(
                    "Registering a parametrization may not change the shape or dtype of the "
                    f"tensor: {tuple(original.shape)} {original.dtype} became "
                    f"{tuple(out.shape)} {out.dtype} ({type(first).__name__}); pass "
                    "unsafe=True to allow it"
                )

    def right_inverse(self, value):
        """Set the originals so that the parametrized tensor becomes `value`."""
        with no_grad():
            for m in reversed(list(self)):
                if hasattr(m, "right_inverse"):
                    value = m.right_inverse(value)
                elif not self.unsafe:
                    raise RuntimeError(
                        f"parametrization {type(m).__name__} does not implement right_inverse."
                    )
            if self.is_tensor:
                self.original.copy_(value)
            else:
                for i, t in enumerate(value):
                    getattr(self, f"original{i}").copy_(t)

    def forward(self):
        mods = list(self)
        if self.is_tensor:
            x = mods[0](self.original)
        else:
            x = mods[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for m in mods[1:]:
            x = m(x)
        return x


def _inject_new_class(module):
    cls = module.__class__

    def getstate(self):
        raise RuntimeError(
            "Serialization of parametrized modules is only supported through state_dict()."
        )

    def default_deepcopy(self, memo):
        # a standard deepcopy (pickling is refused, copying is not: torch's rule)
        obj = memo.get(id(self))
        if obj is not None:
            return obj
        replica = self.__new__(self.__class__)
        memo[id(self)] = replica
        replica.__dict__ = copy.deepcopy(self.__dict__, memo)
        for slot in copyreg._slotnames(self.__class__):
            if hasattr(self, slot):
                setattr(replica, slot, copy.deepcopy(getattr(self, slot), memo))
        return replica

    dct = {"__getstate__": getstate}
    if not hasattr(cls, "__deepcopy__"):
        dct["__deepcopy__"] = default_deepcopy
    param_cls = type(f"Parametrized{cls.__name__}", (cls,), dct)
    module.__class__ = param_cls


def _inject_property(module, name):
    def get(self):
        plist = self.parametrizations[name]
        if _cache_enabled:
            key = (id(self), name)
            if key not in _cache:
                _cache[key] = plist()
            return _cache[key]
        return plist()

    def set_(self, value):
        self.parametrizations[name].right_inverse(value)

    setattr(module.__class__, name, property(get, set_))


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Make `module.<tensor_name>` the output of `parametrization` applied to stored originals
    (appended to the chain when the tensor is parametrized already)."""
    parametrization.train(module.training)  # (the host's mode, as torch)
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        if not unsafe:
            with no_grad():
                y = getattr(module, tensor_name)
                x = parametrization(y)
            if tuple(x.shape) != tuple(y.shape) or x.dtype is not y.dtype:
                raise ValueError(
                    "Registering a parametrization may not change the shape or dtype of the "
                    "tensor; pass unsafe=True to allow it"
                )
        plist.append(parametrization)
        plist.unsafe |= unsafe
        return module
    if tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
        return module
    raise ValueError(
        f"Module '{module}' does not have a parameter, a buffer, or a parametrized element "
        f"with name '{tensor_name}'"
    )


def is_parametrized(module, tensor_name=None) -> bool:
    params = module.__dict__.get("_modules", {}).get("parametrizations")
    if params is None or not isinstance(params, ModuleDict):
        return False
    return tensor_name is None or tensor_name in params


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Undo register_parametrization: the tensor becomes a plain parameter (or buffer) again,
    holding its current parametrized value (leave_parametrized) or its original."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                t = getattr(module, tensor_name)
            with no_grad():
                if tuple(t.shape) == tuple(original.shape):
                    original.copy_(t)
                else:
                    original = _as_param(t.detach(), original)
    else:
        if not leave_parametrized:
            raise ValueError(
                "Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is "
                "parametrized in terms of a sequence of tensors."
            )
        with no_grad():
            t = getattr(module, tensor_name)
        req = plist.original0.requires_grad if isinstance(plist.original0, Parameter) else False
        original = Parameter(t.detach(), req) if req else t.detach()
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    if isinstance(original, Parameter):
        module.register_parameter(tensor_name, original)
    else:
        module.register_buffer(tensor_name, original)
    if not module.parametrizations._modules:
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module):
    """The module's class before register_parametrization swapped it."""
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)


def transfer_parametrizations_and_params(from_module, to_module, tensor_name=None):
    """Give `to_module` the parametrizations of `from_module` (of `tensor_name` only, if
    given) and their originals (the same Parameters, shared); a parametrized name `to_module`
    lacks is first made a Parameter of from_module's current value. Returns to_module."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name)))
        for param_func in from_module.parametrizations[name]:
            register_parametrization(to_module, name, param_func)
        source, target = from_module.parametrizations[name], to_module.parametrizations[name]
        if hasattr(source, "original"):
            target.original = source.original
        else:  # original0, original1, ... (a right_inverse returning several tensors)
            num = 0
            while hasattr(source, f"original{num}"):
                setattr(target, f"original{num}", getattr(source, f"original{num}"))
                num += 1
    return to_module


__all__ = [
    "ParametrizationList",
    "cached",
    "is_parametrized",
    "register_parametrization",
    "remove_parametrizations",
    "transfer_parametrizations_and_params",
    "type_before_parametrizations",
]
