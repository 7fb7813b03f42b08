"""The hooks around an optimizer's step and state dicts, as torch wraps them: a subclass's
own `step` runs the step pre/post hooks and marks the optimizer stepped (torch's
`_patch_step_function`); `state_dict` / `load_state_dict` run the state-dict hooks."""

from __future__ import annotations

import functools
from collections import OrderedDict

__all__ = ["SD_HOOKS", "hooked_load_state_dict", "hooked_state_dict", "hooked_step",
           "new_hook_tables", "run_post_hooks", "run_pre_hooks"]  # fmt: skip


def run_pre_hooks(opt) -> None:
    for hook in list(opt._optimizer_step_pre_hooks.values()):
        result = hook(opt, (), {})
        if result is not None:
            raise RuntimeError(
                "optimizer step pre-hooks that change the arguments are not supported"
            )


def run_post_hooks(opt) -> None:
    for hook in list(opt._optimizer_step_post_hooks.values()):
        hook(opt, (), {})


def hooked_step(step):
    """A subclass's own `step` wrapped as torch wraps every subclass's (its
    `_patch_step_function`): it marks the optimizer as stepped (the schedules' order warning)
    and runs the step pre- and post-hooks around it. A step called from inside another
    (`super().step()`) runs bare, so the hooks run once."""

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        if self.__dict__.get("_in_step"):
            return step(self, *args, **kwargs)
        self._opt_called = True
        run_pre_hooks(self)
        self._in_step = True
        try:
            out = step(self, *args, **kwargs)
        finally:
            self._in_step = False
        run_post_hooks(self)
        return out

    wrapper._runs_step_hooks = True
    return wrapper


SD_HOOKS = (
    "_optimizer_state_dict_pre_hooks",
    "_optimizer_state_dict_post_hooks",
    "_optimizer_load_state_dict_pre_hooks",
    "_optimizer_load_state_dict_post_hooks",
)


def _hooks(opt, name) -> list:
    return list(opt.__dict__.get(name, {}).values())


def hooked_state_dict(fn):
    """state_dict with torch's hooks around it: pre hook(optimizer), post hook(optimizer,
    state_dict) whose non-None result replaces the state dict. On the base's, as torch's (a
    script's subclass calling super().state_dict() adds its entries after the hooks), and on
    pyrite's own overrides of it, which torch's optimizers do not have. A state_dict called
    from inside another runs bare."""

    @functools.wraps(fn)
    def wrapper(self):
        if self.__dict__.get("_in_state_dict"):
            return fn(self)
        for hook in _hooks(self, "_optimizer_state_dict_pre_hooks"):
            hook(self)
        self._in_state_dict = True
        try:
            sd = fn(self)
        finally:
            self._in_state_dict = False
        for hook in _hooks(self, "_optimizer_state_dict_post_hooks"):
            out = hook(self, sd)
            if out is not None:
                sd = out
        return sd

    return wrapper


def hooked_load_state_dict(fn):
    """load_state_dict with torch's hooks around it: pre hook(optimizer, state_dict) whose
    non-None result is loaded instead, post hook(optimizer)."""

    @functools.wraps(fn)
    def wrapper(self, state_dict):
        if self.__dict__.get("_in_load_state_dict"):
            return fn(self, state_dict)
        for hook in _hooks(self, "_optimizer_load_state_dict_pre_hooks"):
            out = hook(self, state_dict)
            if out is not None:
                state_dict = out
        self._in_load_state_dict = True
        try:
            fn(self, state_dict)
        finally:
            self._in_load_state_dict = False
        for hook in _hooks(self, "_optimizer_load_state_dict_post_hooks"):
            hook(self)

    return wrapper


def new_hook_tables(opt) -> None:
    """The four state-dict hook tables on a new (or unpickled) optimizer."""
    for name in SD_HOOKS:
        opt.__dict__.setdefault(name, OrderedDict())
