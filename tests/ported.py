"""Helpers shared by the ported-program tests (tests/test_ported44.py, 45, 46): a program is
written once against a module `L` (torch or pyrite), run on torch first and on pyrite from the
same initial weights, and compared with float32-derived tolerances."""

from __future__ import annotations

import numpy as np
import torch


def same_init():
    """A hook each program calls on each model it builds, in order: torch's run records the
    initial weights, pyrite's loads them (through numpy)."""
    saved, taken = [], []

    def same_init(model):
        if isinstance(model, torch.nn.Module):
            saved.append({k: v.detach().numpy().copy() for k, v in model.state_dict().items()})
        else:
            model.load_state_dict(saved[len(taken)])
            taken.append(model)

    return same_init


def close(p, t, rtol, atol, what):
    np.testing.assert_allclose(np.asarray(p), np.asarray(t), rtol=rtol, atol=atol, err_msg=what)
