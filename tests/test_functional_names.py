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
linear bilinear pad pdist gumbel_softmax
""".split()
# torch.nn.functional's other public functions: convolution, pooling and resampling (another
# area's: ops/conv.py, ops/pool.py, ops/resample.py), and the few not in pyrite yet, with why
ELSEWHERE = set(
    """
adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d
adaptive_max_pool1d_with_indices adaptive_max_pool2d adaptive_max_pool2d_with_indices
adaptive_max_pool3d adaptive_max_pool3d_with_indices affine_grid avg_pool1d avg_pool2d avg_pool3d
channel_shuffle native_channel_shuffle conv1d conv2d conv3d conv_tbc conv_transpose1d
conv_transpose2d conv_transpose3d fold unfold fractional_max_pool2d
fractional_max_pool2d_with_indices fractional_max_pool3d fractional_max_pool3d_with_indices
grid_sample interpolate upsample upsample_bilinear upsample_nearest lp_pool1d lp_pool2d lp_pool3d
max_pool1d max_pool1d_with_indices max_pool2d max_pool2d_with_indices max_pool3d
max_pool3d_with_indices max_unpool1d max_unpool2d max_unpool3d pixel_shuffle pixel_unshuffle
""".split()
)
NOT_YET = {
    "multi_head_attention_forward": "nn.MultiheadAttention's body: comes with the modules",
    "linear_cross_entropy": "torch 2.13's fused linear + cross_entropy (chunked options)",
    "grouped_mm": "grouped GEMM (torch 2.13, CUDA-oriented)",
    "scaled_grouped_mm": "scaled (fp8) grouped GEMM",
    "scaled_mm": "scaled (fp8) GEMM",
}
# helpers of torch's own module, not ops
TORCH_INTERNALS = {
    "assert_int_or_pair",
    "boolean_dispatch",
    "handle_torch_function",
    "has_torch_function",
    "has_torch_function_unary",
    "has_torch_function_variadic",
}


def test_every_public_functional_name_is_accounted_for():
    """Each public function of torch.nn.functional is this area's, another area's, or listed
    in NOT_YET with the reason: a name torch adds shows up here."""
    public = [
        n
        for n in dir(TF)
        if not n.startswith("_")
        and (inspect.isfunction(getattr(TF, n)) or inspect.isbuiltin(getattr(TF, n)))
        and getattr(getattr(TF, n), "__module__", "") != "typing"
    ]
    assert len(public) > 120, "the walk found torch.nn.functional's functions"
    unknown = sorted(
        n
        for n in public
        if n not in AREA and n not in ELSEWHERE and n not in NOT_YET and n not in TORCH_INTERNALS
    )
    assert not unknown, f"torch.nn.functional names no area claims: {unknown}"


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
