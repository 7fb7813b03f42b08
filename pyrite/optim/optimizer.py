"""`Optimizer`: PyTorch's base class — parameter groups with their own options, per-parameter
state, `zero_grad`, `add_param_group`, and `state_dict` / `load_state_dict` in PyTorch's format
(parameters replaced by integer ids; a state dict saved by torch, its tensors converted through
numpy, loads here).

The subclasses' `step()` updates each parameter with one fused dispatch (`_fused.update`) and
reads nothing back: the step count is a Python int (`state["step"]`); `state_dict()` gives it
as a 0-d float32 tensor, as torch stores it.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from itertools import chain

import numpy as np

from pyrite.errors import warn as _warn

from .. import autograd
from .. import dtypes as D
from ..compile._state import rerun_on_replay as _rerun_on_replay
from ..ops.core import empty, run_map, upload
from ..tensor import Tensor
from . import _fused
from ._hooks import hooked_load_state_dict as _hooked_load_state_dict
from ._hooks import hooked_state_dict as _hooked_state_dict
from ._hooks import hooked_step as _hooked_step
from ._hooks import new_hook_tables as _new_hook_tables
from ._hooks import run_post_hooks as _run_post_hooks
from ._hooks import run_pre_hooks as _run_pre_hooks

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Singleton for a hyperparameter a group must give (torch.optim.optimizer.required)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class _RemovableHandle:
    _next_id = 0

    def __init__(self, hooks: dict):
        self._hooks = hooks
        self.id = _RemovableHandle._next_id
        _RemovableHandle._next_id += 1

    def remove(self):
        self._hooks.pop(self.id, None)


def _typename(obj) -> str:
    if isinstance(obj, Tensor):
        return "pyrite.Tensor"
    return type(obj).__name__


def _as_device_tensor(value, like: Tensor | None) -> Tensor:
    """A fresh contiguous pyrite tensor holding `value` (a pyrite tensor, a numpy array, a
    torch tensor), in `like`'s dtype when `like` is floating point (torch casts state to the
    parameter's dtype on load)."""
    if not isinstance(value, Tensor):
        from ..ops.creation import tensor

        value = tensor(value)
    dtype = like.dtype if like is not None and like.is_floating_point() else value.dtype
    out = empty(value.shape, dtype)
    return run_map("x0", (value,), (value.dtype.ctype,), out, dtype.ctype)


def _step_value(value):
    """A loaded step count as a Python number (reading a device tensor once, at load time)."""
    if isinstance(value, Tensor):
        value = value.item()
    elif hasattr(value, "item"):  # numpy scalars and arrays, torch tensors
        value = value.item()
    value = float(value)
    return int(value) if value.is_integer() else value


class Optimizer:
    """Base class for all optimizers (PyTorch's torch.optim.Optimizer).

    Args:
        params (iterable): an iterable of tensors, of (name, tensor) pairs, or of dicts
            defining parameter groups.
        defaults (dict): the default values of the optimization options, used when a
            parameter group does not give them.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_runs_step_hooks", False):
            cls.step = _hooked_step(step)

    @property
    def _host_step_count(self) -> bool:
        """Whether this class keeps `state["step"]` as a Python number (pyrite's own optimizers,
        which implement `_step_group`): their state dicts give it as a 0-d float32 tensor, as
        torch's built-ins store it, and loading turns it back. A script's own optimizer (its
        own `step`) keeps its state's types as they are, as torch does."""
        return type(self)._step_group is not Optimizer._step_group

    def __init__(self, params, defaults: dict):
        self.defaults = defaults
        self._optimizer_step_pre_hooks: dict = OrderedDict()
        self._optimizer_step_post_hooks: dict = OrderedDict()
        _new_hook_tables(self)
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or "
                "dicts, but got " + _typename(params)
            )
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(dict(group))

    # ---- groups ----------------------------------------------------------------------------
    def add_param_group(self, param_group: dict) -> None:
        """Add a param group to the optimizer's `param_groups` (a dict with "params" and any
        options that differ from the defaults)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets will change between runs. Please use a list instead."
            )
        else:
            params = list(params)
        tensors, names = [], []
        for p in params:
            if isinstance(p, tuple):
                names.append(p[0])
                tensors.append(p[1])
            else:
                tensors.append(p)
        param_group["params"] = tensors
        if names:
            if len(names) != len(tensors):
                raise ValueError(
                    "all optimizer params should be with/without names. Some param names are "
                    "missing"
                )
            param_group["param_names"] = names
        for i, p in enumerate(tensors):
            if not isinstance(p, Tensor):
                raise TypeError(
                    "optimizer can only optimize Tensors, but one of the params is " + _typename(p)
                )
            if not self.defaults.get("differentiable", None) and not (
                p.is_leaf or getattr(p, "retains_grad", False)
            ):
                raise ValueError(
                    f"can't optimize a non-leaf Tensor (parameter {i} of the group, shape "
                    f"{tuple(p.shape)})"
                )
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(
                    "parameter group didn't specify a value of required optimization "
                    f"parameter {name}"
                )
            param_group.setdefault(name, default)
        if len(tensors) != len({id(p) for p in tensors}):
            _warn(
                "optimizer contains a parameter group with duplicate parameters; in future, "
                "this will cause an error; see github.com/pytorch/pytorch/issues/40967 for more "
                "information",
                stacklevel=3,
            )
        seen = set()
        for group in self.param_groups:
            seen.update(id(p) for p in group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                which = "with names" if "param_names" in param_group else "without names"
                raise ValueError(
                    "all optimizer param groups should be with/without names. cannot add param "
                    f"group {which} to the optimizer"
                )
        if any(id(p) in seen for p in tensors):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # ---- gradients -------------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized tensors: to None (the default), or to zeros in
        place."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if p.grad.grad_fn is not None:
                        p.grad.detach_()
                    else:
                        p.grad.requires_grad_(False)
                    p.grad.zero_()

    # ---- stepping --------------------------------------------------------------------------
    @_rerun_on_replay
    def step(self, closure=None):
        """Perform a single optimization step (subclasses implement `_step_group`).

        Args:
            closure (Callable, optional): a closure that reevaluates the model and returns
                the loss.
        """
        self._opt_called = True  # (a schedule stepped before its optimizer warns: lr_scheduler)
        hooks = not self.__dict__.get("_in_step")  # (else a subclass's step ran them: super())
        loss = None
        if closure is not None:
            with autograd.enable_grad():
                loss = closure()
        if hooks:
            _run_pre_hooks(self)
        with autograd.no_grad(), _fused.batched():
            for group in self.param_groups:
                self._step_group(group)
        if hooks:
            _run_post_hooks(self)
        return loss

    step._runs_step_hooks = True

    def _step_group(self, group: dict) -> None:
        raise NotImplementedError

    def _with_grad(self, group: dict):
        """(parameter, gradient) of the group's parameters that have one."""
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if tuple(g.shape) != tuple(p.shape):
                raise RuntimeError(
                    f"pyrite: the gradient of a parameter of shape {tuple(p.shape)} has shape "
                    f"{tuple(g.shape)}"
                )
            yield p, g

    def register_step_pre_hook(self, hook):
        """hook(optimizer, args, kwargs), called before each step."""
        return self._register("_optimizer_step_pre_hooks", hook, False)

    def register_step_post_hook(self, hook):
        """hook(optimizer, args, kwargs), called after each step."""
        return self._register("_optimizer_step_post_hooks", hook, False)

    def _register(self, name, hook, prepend):
        hooks = self.__dict__.setdefault(name, OrderedDict())
        handle = _RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer), called before `state_dict()` builds the state dict."""
        return self._register("_optimizer_state_dict_pre_hooks", hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) -> state_dict or None, called on `state_dict()`'s
        result (a returned dict replaces it)."""
        return self._register("_optimizer_state_dict_post_hooks", hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) -> state_dict or None, called before
        `load_state_dict()` loads (a returned dict is loaded instead)."""
        return self._register("_optimizer_load_state_dict_pre_hooks", hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer), called after `load_state_dict()` has loaded."""
        return self._register("_optimizer_load_state_dict_post_hooks", hook, prepend)

    # ---- state dicts -----------------------------------------------------------------------
    @_hooked_state_dict
    def state_dict(self) -> dict:
        """The optimizer's state as a dict: "state" ({parameter id: {name: value}}) and
        "param_groups" (each group's options, with "params" as the parameters' ids).

        State tensors are the live ones (as torch's); the step count is a new 0-d float32
        tensor."""
        mapping: dict[int, int] = {}
        start = 0
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            groups.append(packed)
        state = {}
        host_step = self._host_step_count
        for p, s in self.state.items():
            key = mapping[id(p)] if isinstance(p, Tensor) else p
            state[key] = {
                k: (upload(np.array(v, np.float32), D.float32) if k == "step" and host_step else v)
                for k, v in s.items()
            }
        return {"state": state, "param_groups": groups}

    @_hooked_load_state_dict
    def load_state_dict(self, state_dict: dict) -> None:
        """Load a state dict made by `state_dict()` — this optimizer's, another pyrite
        optimizer's, or torch's with its tensors converted (numpy arrays, pyrite tensors)."""
        import copy

        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for g, s in zip(groups, saved_groups):
            if len(g["params"]) != len(s["params"]):
                raise ValueError(
                    "loaded state dict contains a parameter group that doesn't match the size "
                    f"of optimizer's group ({len(s['params'])} saved, {len(g['params'])} here)"
                )
        id_map = dict(
            zip(
                chain.from_iterable(g["params"] for g in saved_groups),
                chain.from_iterable(g["params"] for g in groups),
            )
        )
        state: defaultdict = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if isinstance(k, str) and k.isdigit():  # keys that went through a text format
                k = int(k)
            if k in id_map:
                p = id_map[k]
                state[p] = {
                    name: self._load_value(p, name, x, self._host_step_count)
                    for name, x in v.items()
                }
            else:
                state[k] = v
        new_groups = []
        for g, s in zip(groups, saved_groups):
            s["params"] = g["params"]
            if "param_names" in g and "param_names" not in s:
                s["param_names"] = g["param_names"]
            for name, default in self.defaults.items():
                s.setdefault(name, default)
            self._fix_group(s)
            new_groups.append(s)
        self.state = state
        self.param_groups = new_groups
        # torch's load_state_dict ends in __setstate__, which gives the defaults a
        # "differentiable" (so a group added later has one, also in SparseAdam and LBFGS)
        self.defaults.setdefault("differentiable", False)

    def _fix_group(self, group: dict) -> None:
        """A loaded group's options made what this class needs (AdamW: decoupled decay)."""

    @staticmethod
    def _load_value(param: Tensor, key, value, host_step: bool = True):
        if key == "step" and host_step:
            return _step_value(value)
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, (list, tuple)):
            return type(value)(Optimizer._load_value(param, None, v, host_step) for v in value)
        # torch keeps a step count's dtype; other state takes the parameter's
        return _as_device_tensor(value, None if key == "step" else param)

    # ---- pickling and printing -------------------------------------------------------------
    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.defaults.setdefault("differentiable", False)  # (as torch's __setstate__)
        self.__dict__.setdefault("_optimizer_step_pre_hooks", OrderedDict())
        self.__dict__.setdefault("_optimizer_step_post_hooks", OrderedDict())
        _new_hook_tables(self)

    def __repr__(self):
        text = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"


def check_hyper(label: str, value, lo: float = 0.0) -> None:
    """torch's ValueError for a negative (or NaN) hyperparameter: "Invalid {label}: {value}"."""
    if isinstance(value, Tensor):
        raise TypeError(
            f"pyrite: a Tensor {label} is not supported (it would be read back every step); "
            "pass a float"
        )
    if not lo <= value:
        raise ValueError(f"Invalid {label}: {value}")


def check_fused(fused, foreach, differentiable) -> None:
    """torch's refusals of `fused` with `differentiable` or with `foreach` (its fused
    optimizers: SGD, Adam, AdamW, Adagrad); pyrite's update is always one fused dispatch, so
    the flags change nothing else."""
    if fused:
        if differentiable:
            raise RuntimeError("`fused` does not support `differentiable`")
        if foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
