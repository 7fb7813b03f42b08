"""Every nn.functional name of this area exists where torch puts it: in pyrite.nn.functional,
at the top level (torch.selu -> pyrite.selu) and as a Tensor method (x.hardshrink()), with
torch's parameter names and defaults. Walks torch's own namespaces, so a name torch adds to
them in this area fails here until pyrite has it too. (Resampling, convolution and pooling
are tested by their own area, linalg and tensor ops by theirs.)
"""

from __future__ import annotations

import inspect
import re

import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F

# this area's part of torch.nn.functional (activations, losses, normalisation, distances,
# embeddings, dropout, attention, linear, pad, one_hot)
AREA = """
relu relu_ relu6 elu elu_ selu selu_ celu celu_ leaky_relu leaky_relu_ prelu rrelu rrelu_
threshold threshold_ glu gelu silu mish hardswish hardsigmoid logsigmoid softmin softmax
log_softmax softsign softplus tanhshrink softshrink hardshrink hardtanh hardtanh_ sigmoid tanh
pairwise_distance cosine_similarity triplet_margin_loss triplet_margin_with_distance_loss
margin_ranking_loss hinge_embedding_loss poisson_nll_loss gaussian_nll_loss ctc_loss
multilabel_soft_margin_loss multilabel_margin_loss multi_margin_loss soft_margin_loss
cosine_embedding_loss embedding embedding_bag one_hot batch_norm group_norm instance_norm
local_response_norm layer_norm rms_norm normalize mse_loss l1_loss smooth_l1_loss huber_loss
binary_cross_entropy binary_cross_entropy_with_logits kl_div nll_loss cross_entropy dropout
alpha_dropout feature_alpha_dropout dropout1d dropout2d dropout3d scaled_dot_product_attention
linear pad
""".split()
# ops of this area that torch.nn.functional has but that belong to other areas' helpers
ELSEWHERE = {"pdist", "bilinear", "gumbel_softmax", "multi_head_attention_forward"}


def test_area_names_are_torchs():
    missing = [n for n in AREA if not hasattr(TF, n)]
    assert not missing, f"names this test expects in torch.nn.functional: {missing}"


@pytest.mark.parametrize("name", AREA)
def test_functional_has(name):
    assert callable(getattr(F, name, None)), f"pyrite.nn.functional.{name} is missing"


# torch.embedding_bag returns torch's internal 4-tuple (output, offset2bag, bag_size,
# max_indices) for its backward; F.embedding_bag is the user's spelling, so only that one is here
NOT_AT_TOP = {"embedding_bag"}
TOP = [n for n in AREA if callable(getattr(torch, n, None)) and n not in NOT_AT_TOP]
TOP += [n + "_" for n in AREA if callable(getattr(torch, n + "_", None)) and n + "_" not in AREA]
TOP += ["feature_dropout", "feature_dropout_"]


@pytest.mark.parametrize("name", sorted(set(TOP)))
def test_toplevel_has(name):
    assert callable(getattr(pr, name, None)), f"pyrite.{name} (torch.{name}) is missing"


METHODS = [n for n in AREA if callable(getattr(torch.Tensor, n, None))]


@pytest.mark.parametrize("name", METHODS)
def test_tensor_method_has(name):
    assert callable(getattr(pr.Tensor, name, None)), f"Tensor.{name} is missing"


def _torch_params(fn):
    """{name: default} of a torch function: from its signature, or from its docstring's
    first line for the C builtins ("relu_(input) -> Tensor")."""
    try:
        sig = inspect.signature(fn)
        return {
            p.name: p.default
            for p in sig.parameters.values()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        }
    except (TypeError, ValueError):
        doc = (fn.__doc__ or "").strip().splitlines()
        m = re.match(r"\w+\((.*)\)", doc[0]) if doc else None
        if not m:
            return None
        out = {}
        for part in m.group(1).split(","):
            part = part.strip().lstrip("*").strip()
            if not part:
                continue
            key, _, default = part.partition("=")
            out[key.strip()] = default.strip() or inspect.Parameter.empty
        return out


@pytest.mark.parametrize("name", AREA)
def test_functional_signature_matches_torch(name):
    """The same parameter names, in the same order, with the same defaults."""
    theirs = _torch_params(getattr(TF, name))
    if theirs is None:
        pytest.skip(f"torch.nn.functional.{name} has no inspectable signature")
    mine = {
        p.name: p.default
        for p in inspect.signature(getattr(F, name)).parameters.values()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
    assert list(mine)[: len(theirs)] == list(theirs), (
        f"F.{name}: parameters {list(mine)}, torch's {list(theirs)}"
    )
    for key, default in theirs.items():
        if default is inspect.Parameter.empty or isinstance(default, str) and not default:
            continue
        got = mine[key]
        if isinstance(default, str):  # from a docstring: compare as numbers or text
            try:
                assert float(got) == float(eval(default)), f"F.{name}({key}=...)"  # noqa: S307
            except (TypeError, ValueError, NameError, SyntaxError):
                assert str(got).strip("'") == default.strip("'"), f"F.{name}({key}=...)"
            continue
        assert got == default or (got is None and default is None), (
            f"F.{name}: default {key}={got!r}, torch's {default!r}"
        )
