"""State entries that torch keeps as 0-d float32 tensors beside the step count (NAdam's
mu_product, ASGD's eta and mu): pyrite keeps them as Python numbers rounded to float32, so a
step reads nothing back, and gives them as 0-d float32 tensors in `state_dict()`, as torch."""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..ops.core import upload
from ._hooks import hooked_state_dict
from .optimizer import Optimizer, _step_value


def f32(x) -> float:
    """`x` rounded to float32, as a Python float (a value torch holds in a 0-d f32 tensor)."""
    return float(np.float32(x))


class HostScalars:
    """Mixin for an Optimizer whose `_host_scalars` state keys are host float32 numbers."""

    _host_scalars: tuple = ()

    @hooked_state_dict  # (torch's NAdam and ASGD have no override: the hooks see the result)
    def state_dict(self) -> dict:
        sd = Optimizer.state_dict(self)
        for s in sd["state"].values():
            for k in self._host_scalars:
                if k in s and not hasattr(s[k], "shape"):
                    s[k] = upload(np.array(s[k], np.float32), D.float32)
        return sd

    def _load_value(self, param, key, value, host_step=True):
        if key in self._host_scalars:
            return f32(_step_value(value))
        return Optimizer._load_value(param, key, value, host_step)
