"""torch.nn.utils.prune: masking a module's tensor by a pruning method.

Pruning `name` moves the parameter to `<name>_orig`, registers the mask as the buffer
`<name>_mask` (torch's state-dict keys), and makes `<name>` a plain attribute, `<name>_orig`
times the mask, recomputed by a forward pre-hook (the method object itself) before each call, so
the gradient reaches `<name>_orig` through the mask. Pruning the same tensor again gathers the
methods in a PruningContainer, which runs the newest one on the units the mask still keeps.
`remove` makes the pruning permanent: `<name>` becomes a parameter again holding the masked values.

The deterministic methods (L1Unstructured, LnStructured, CustomFromMask, Identity) give torch's
masks. RandomUnstructured and RandomStructured draw from pyrite's generator (`pr.manual_seed`
reproduces them), not torch's stream, so their masks differ from torch's for the same seed while
pruning exactly the same number of units, uniformly at random, as torch's do.
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

from ...ops.creation import ones_like, zeros_like
from ...ops.random import rand, rand_like
from .convert_parameters import parameters_to_vector

__all__ = [
    "BasePruningMethod",
    "CustomFromMask",
    "Identity",
    "L1Unstructured",
    "LnStructured",
    "PruningContainer",
    "RandomStructured",
    "RandomUnstructured",
    "custom_from_mask",
    "global_unstructured",
    "identity",
    "is_pruned",
    "l1_unstructured",
    "ln_structured",
    "random_structured",
    "random_unstructured",
    "remove",
]


# ---- the method protocol -------------------------------------------------------------------
class BasePruningMethod(ABC):
    """A way of computing a pruning mask. A subclass defines `compute_mask(t, default_mask)`
    and `PRUNING_TYPE` ("unstructured", "structured" with a `dim`, or "global"); `apply` attaches
    an instance to a module's tensor, where it serves as the forward pre-hook."""

    _tensor_name: str

    def __call__(self, module, inputs):
        # the forward pre-hook: `<name>` from the current `<name>_orig` and mask
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The new mask for tensor `t` (the importance scores), combined with `default_mask`
        (the mask already in force); same shape as `t`."""

    def apply_mask(self, module):
        """`<name>_orig` times `<name>_mask`, the pruned tensor."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned")
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune `module.<name>` by `cls(*args, **kwargs)`, on top of any pruning already
        there (then the hook becomes a PruningContainer holding both); returns the hook."""
        method = _compose(cls, module, name, *args, **kwargs)
        orig = getattr(module, name)  # (the pruned tensor, when pruned before)
        if importance_scores is not None:
            if importance_scores.shape != orig.shape:
                raise AssertionError(
                    f"importance_scores should have the same shape as parameter {name} of "
                    f"{module}, got {importance_scores.shape} vs {orig.shape}"
                )
        else:
            importance_scores = orig
        first = not isinstance(method, PruningContainer)
        if first:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone().contiguous()
        try:
            mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            if first:  # put the parameter back as it was
                orig = getattr(module, name + "_orig")
                module.register_parameter(name, orig)
                del module._parameters[name + "_orig"]
            raise
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """`t` times the mask this method computes for it (from `importance_scores` when
        given), without touching any module."""
        if importance_scores is not None:
            if importance_scores.shape != t.shape:
                raise AssertionError(
                    "importance_scores should have the same shape as tensor t, got "
                    f"{importance_scores.shape} vs {t.shape}"
                )
        else:
            importance_scores = t
        if default_mask is None:
            default_mask = ones_like(t)
        return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module) -> None:
        """Make the pruning permanent: `<name>` becomes the parameter (the one that was
        `<name>_orig`) holding the masked values; `<name>_orig` and `<name>_mask` go."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned before pruning can be removed")
        name = self._tensor_name
        weight = self.apply_mask(module)
        if hasattr(module, name):
            delattr(module, name)
        orig = module._parameters[name + "_orig"]
        orig.data = weight.detach()
        del module._parameters[name + "_orig"]
        del module._buffers[name + "_mask"]
        setattr(module, name, orig)


def _compose(cls, module, name, *args, **kwargs):
    """The new method for `module.<name>`, folded together with the pruning hook already on
    that tensor, if any (whose hook is taken off: apply registers the result)."""
    old_keys = [
        k
        for k, hook in module._forward_pre_hooks.items()
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name
    ]
    if len(old_keys) > 1:
        raise AssertionError(
            f"Avoid adding multiple pruning hooks to the same tensor {name} of module "
            f"{module}. Use a PruningContainer."
        )
    old = module._forward_pre_hooks[old_keys[0]] if old_keys else None
    for k in old_keys:
        del module._forward_pre_hooks[k]
    method = cls(*args, **kwargs)
    method._tensor_name = name
    if old is None:
        return method
    if isinstance(old, PruningContainer):
        old.add_pruning_method(method)
        return old
    container = PruningContainer(old)
    container.add_pruning_method(method)
    return container


class PruningContainer(BasePruningMethod):
    """The pruning methods applied in turn to one tensor. Its mask is the previous mask with
    the newest method run only where that mask still keeps units: unstructured methods on the
    unpruned entries, structured ones on the channels (along their `dim`) not already wholly
    pruned, global ones on everything."""

    def __init__(self, *args) -> None:
        self._pruning_methods: tuple = ()
        if len(args) == 1:
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        else:
            for method in args:
                self.add_pruning_method(method)

    def add_pruning_method(self, method) -> None:
        """Append `method`, which must act on this container's tensor."""
        if method is not None and not isinstance(method, BasePruningMethod):
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError(
                "Can only add pruning methods acting on the parameter named "
                f"'{self._tensor_name}' to PruningContainer {self}. "
                f"Found '{method._tensor_name}'"
            )
        self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        method = self._pruning_methods[-1]
        mask = default_mask
        new_mask = mask.to(dtype=t.dtype)
        kind = method.PRUNING_TYPE
        if kind == "unstructured":
            region = mask == 1
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError(
                    'Pruning methods of PRUNING_TYPE "structured" need to have the attribute '
                    "`dim` defined."
                )
            ndim = t.dim()
            dim = method.dim + ndim if method.dim < 0 else method.dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor with dimensions {ndim}")
            live = mask.sum(dim=[d for d in range(ndim) if d != dim]) != 0
            region = tuple(live if d == dim else slice(None) for d in range(ndim))
        elif kind == "global":
            region = tuple(slice(None) for _ in range(len(t.shape)))
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
        part = method.compute_mask(t[region], default_mask=mask[region])
        new_mask[region] = part.to(dtype=new_mask.dtype)
        return new_mask


# ---- the methods ---------------------------------------------------------------------------
class Identity(BasePruningMethod):
    """Prunes nothing: the mask is all ones (the tensor gets the pruning reparametrization)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


class _Unstructured(BasePruningMethod):
    """Prunes `amount` single entries (an int: that many; a float in [0, 1]: that fraction,
    rounded): those `_pruned` picks."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount

    def _pruned(self, t, k):
        """The flat indices of the k entries of `t` to prune."""
        raise NotImplementedError

    def compute_mask(self, t, default_mask):
        size = t.nelement()
        k = _compute_nparams_toprune(self.amount, size)
        _validate_pruning_amount(k, size)
        mask = default_mask.clone().contiguous()
        if k != 0:
            _check_topk_count(k)
            mask.view(-1)[self._pruned(t, k)] = 0
        return mask


class RandomUnstructured(_Unstructured):
    """Prunes `amount` entries chosen uniformly at random. Draws from pyrite's generator, not
    torch's."""

    def _pruned(self, t, k):
        return rand_like(t).reshape(-1).topk(k).indices

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(_Unstructured):
    """Prunes the `amount` entries of smallest absolute value."""

    def _pruned(self, t, k):
        return t.abs().reshape(-1).topk(k, largest=False).indices

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class _Structured(BasePruningMethod):
    """Prunes `amount` whole channels along `dim`: all but those `_kept` keeps."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1) -> None:
        _validate_pruning_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def _scores(self, t):
        """What ranks the channels, computed (and its errors raised) even when none is pruned,
        as torch's; None where the ranking is drawn only when needed."""
        return None

    def _kept(self, scores, nchannels, k):
        """The channels to keep (indices, or a bool per channel) of the `nchannels`."""
        raise NotImplementedError

    def compute_mask(self, t, default_mask):
        _validate_structured_pruning(t)
        _validate_pruning_dim(t, self.dim)
        nchannels = t.shape[self.dim]
        k = _compute_nparams_toprune(self.amount, nchannels)
        _validate_pruning_amount(k, nchannels)
        scores = self._scores(t)
        if k == 0:
            return default_mask
        mask = zeros_like(t)
        mask[_along(t, self.dim, self._kept(scores, nchannels, k))] = 1
        mask *= default_mask.to(dtype=mask.dtype)
        return mask


class RandomStructured(_Structured):
    """Prunes `amount` whole channels along `dim`, chosen uniformly at random. Draws from
    pyrite's generator, not torch's."""

    def _kept(self, scores, nchannels, k):
        prob = rand(nchannels)
        return prob > prob.kthvalue(k).values  # the k lowest draws are pruned

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(_Structured):
    """Prunes the `amount` channels along `dim` of smallest L`n` norm (the norm over every
    other dim; `n` as torch.norm's `p`)."""

    def __init__(self, amount, n, dim=-1) -> None:
        super().__init__(amount, dim)
        self.n = n

    def _scores(self, t):
        return _compute_norm(t, self.n, self.dim)

    def _kept(self, scores, nchannels, k):
        return scores.topk(nchannels - k, largest=True).indices

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(
            module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores
        )


class CustomFromMask(BasePruningMethod):
    """Prunes where the given `mask` is 0 (on top of the mask already in force)."""

    PRUNING_TYPE = "global"

    def __init__(self, mask) -> None:
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if default_mask.shape != self.mask.shape:
            raise AssertionError(
                f"default_mask shape {default_mask.shape} must match self.mask shape "
                f"{self.mask.shape}"
            )
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


# ---- the functions -------------------------------------------------------------------------
def identity(module, name):
    """Give `module.<name>` the pruning reparametrization with an all-ones mask."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    """Prune `amount` random entries of `module.<name>` (see RandomUnstructured)."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    """Prune the `amount` entries of `module.<name>` (or of `importance_scores`, same shape)
    smallest in absolute value."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    """Prune `amount` random channels of `module.<name>` along `dim`."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Prune the `amount` channels of `module.<name>` along `dim` of smallest L`n` norm."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs) -> None:
    """Prune the (module, name) pairs of `parameters` as one flattened tensor by the
    unstructured `pruning_method(**kwargs)` (L1Unstructured: the globally smallest entries),
    each then carrying its share of the mask as a CustomFromMask. `importance_scores` maps
    (module, name) to scores of that tensor's shape."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)  # (read three times below; a generator would run dry)
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    scores = parameters_to_vector(
        [importance_scores.get((m, name), getattr(m, name)) for m, name in parameters]
    )
    default_mask = parameters_to_vector([_mask_or_ones(m, name) for m, name in parameters])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(
            'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found method '
            f"{pruning_method} of type {method.PRUNING_TYPE}"
        )
    container.add_pruning_method(method)
    final_mask = container.compute_mask(scores, default_mask)
    start = 0
    for m, name in parameters:
        param = getattr(m, name)
        n = param.numel()
        # (view, not view_as: pyrite's view_as(param) would record param as an input and make
        # the mask require grad)
        custom_from_mask(m, name, mask=final_mask[start : start + n].view(param.shape))
        start += n


def _mask_or_ones(module, name):
    """The mask in force on `module.<name>`, or ones where it is not pruned."""
    mask = getattr(module, name + "_mask", None)
    return ones_like(getattr(module, name)) if mask is None else mask


def custom_from_mask(module, name, mask):
    """Prune `module.<name>` where `mask` is 0."""
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module, name):
    """Make the pruning of `module.<name>` permanent and take off its reparametrization."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(
        f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed"
    )


def is_pruned(module) -> bool:
    """Whether `module` or any submodule carries a pruning hook."""
    return any(
        isinstance(hook, BasePruningMethod)
        for _, sub in module.named_modules()
        for hook in sub._forward_pre_hooks.values()
    )


# ---- checks and helpers --------------------------------------------------------------------
def _validate_pruning_amount_init(amount) -> None:
    """amount: a non-negative int (a count) or a float in [0, 1] (a fraction)."""
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if isinstance(amount, numbers.Integral):
        bad = amount < 0
    else:
        bad = not 0.0 <= float(amount) <= 1.0
    if bad:
        raise ValueError(
            f"amount={amount} should either be a float in the range [0, 1] or a non-negative "
            "integer"
        )


def _validate_pruning_amount(amount, tensor_size) -> None:
    """A count may not exceed the units there are (a fraction never does)."""
    if isinstance(amount, numbers.Integral) and amount > tensor_size:
        raise ValueError(
            f"amount={amount} should be smaller than the number of parameters to "
            f"prune={tensor_size}"
        )


def _check_topk_count(k) -> None:
    """amount=True passes the checks as an int, and torch's topk then refuses it."""
    if isinstance(k, bool):
        raise TypeError("topk(): argument 'k' must be int, not bool")


def _validate_structured_pruning(t) -> None:
    if len(t.shape) <= 1:
        raise ValueError(
            "Structured pruning can only be applied to multidimensional tensors. Found tensor "
            f"of shape {t.shape} with {len(t.shape)} dims"
        )


def _validate_pruning_dim(t, dim) -> None:
    if dim >= t.dim():
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")


def _compute_nparams_toprune(amount, tensor_size):
    """The number of units to prune: a count as given, a fraction of tensor_size rounded (half
    to even, as Python's round)."""
    if isinstance(amount, numbers.Integral):
        return amount
    return round(amount * tensor_size)


def _compute_norm(t, n, dim):
    """The L`n` norm of each slice of t along `dim` (over every other dim)."""
    dim = range(t.dim())[dim]
    return t.norm(p=n, dim=[d for d in range(t.dim()) if d != dim])


def _along(t, dim, index):
    """An index selecting `index` (booleans or positions) along `dim`, everything elsewhere."""
    index_at = range(t.dim())[dim]
    return tuple(index if d == index_at else slice(None) for d in range(t.dim()))
