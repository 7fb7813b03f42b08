"""Regressions from scripts/fuzz_modules_api.py (session 45): the nn.Module API against torch."""

from __future__ import annotations

import copy
import pathlib
import pickle

import numpy as np
import pytest
import torch

import pyrite as pr
from tests import fuzzing

_SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "fuzz_modules_api.py"


def _fuzz():
    return fuzzing.load_script("fuzz_modules_api")


@pytest.mark.parametrize("seed", [1, 7, 126])
def test_fuzz_seeds(seed):
    f = _fuzz()
    status, detail = f.check(f.Gen(seed).build())
    assert status in ("ok", "intentional", "known"), f"seed {seed}: {detail}"


def test_parametrization_takes_host_training_mode():
    # seed 126: torch calls parametrization.train(module.training) on registration
    for T in (torch, pr):
        lin = T.nn.Linear(3, 3)
        lin.eval()
        T.nn.utils.parametrizations.orthogonal(lin)
        assert not lin.parametrizations.weight[0].training, T.__name__


def test_deepcopy_of_parametrized_module():
    # seeds 10, 15, 31: pickling is refused, deepcopy is not (torch's default_deepcopy)
    lin = pr.nn.Linear(3, 3)
    pr.nn.utils.parametrizations.weight_norm(lin)
    seq = pr.nn.Sequential(lin)
    c = copy.deepcopy(seq)
    assert type(c[0]).__name__ == "ParametrizedLinear"
    assert list(c.state_dict()) == list(seq.state_dict())
    np.testing.assert_allclose(c[0].weight.numpy(), lin.weight.numpy(), rtol=1e-6)
    assert c[0].parametrizations.weight.original0 is not lin.parametrizations.weight.original0
    with pytest.raises(RuntimeError, match="Serialization of parametrized"):
        pickle.dumps(seq)


def _log_hook(calls):
    def hook(module, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
        calls.append((type(module).__name__, prefix, strict))

    return hook


def test_load_state_dict_pre_hook_gets_module_positionally():
    calls = []
    lin = pr.nn.Linear(2, 2)
    lin.register_load_state_dict_pre_hook(_log_hook(calls))
    lin.load_state_dict(lin.state_dict())
    assert calls == [("Linear", "", True)]


def test_load_state_dict_size_mismatch_for_0d_buffer():
    bn = pr.nn.BatchNorm1d(4)
    sd = bn.state_dict()
    sd["num_batches_tracked"] = pr.zeros(7)
    with pytest.raises(RuntimeError, match="size mismatch for num_batches_tracked"):
        bn.load_state_dict(sd, strict=False)


def test_register_state_dict_post_hook_exists():
    seen = []
    lin = pr.nn.Linear(2, 2)
    lin.register_state_dict_post_hook(lambda m, sd, prefix, meta: seen.append(list(sd)))
    lin.state_dict()
    assert seen == [["weight", "bias"]]


def test_multihead_attention_runs_with_its_unused_separate_weights_deleted(rng):
    """torch's MultiheadAttention.forward reads q/k/v_proj_weight only when they are used
    (kdim/vdim differ from embed_dim): deleting the unused None entries keeps it running."""
    x = rng.standard_normal((3, 1, 8)).astype(np.float32)
    tm, pm = torch.nn.MultiheadAttention(8, 2), pr.nn.MultiheadAttention(8, 2)
    pm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    outs = []
    for T, m in ((torch, tm), (pr, pm)):
        del m.q_proj_weight, m.k_proj_weight, m.v_proj_weight
        outs.append(m(T.tensor(x), T.tensor(x), T.tensor(x))[0].detach().numpy())
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-6)
