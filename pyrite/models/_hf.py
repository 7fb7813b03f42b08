"""What the Hugging Face model families share beyond generation: transformers' activation names,
reading a local checkpoint folder (config.json and its safetensors shards), and fitting a
checkpoint's keys to a model (prefixes, tied keys, old names, heads new or left out)."""

from __future__ import annotations

import glob
import json
import os
import warnings

from ..nn import functional as F


def _quick_gelu(x):
    return x * F.sigmoid(1.702 * x)


def _gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


# transformers' ACT2FN names -> pyrite functions; gelu_new, gelu_fast, gelu_accurate and
# gelu_pytorch_tanh are one formula, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), written apart
_ACTIVATIONS = {
    "gelu": F.gelu,
    "gelu_python": F.gelu,
    "gelu_new": _gelu_tanh,
    "gelu_fast": _gelu_tanh,
    "gelu_accurate": _gelu_tanh,
    "gelu_pytorch_tanh": _gelu_tanh,
    "gelu_python_tanh": _gelu_tanh,
    "gelu_10": lambda x: F.gelu(x).clamp(-10.0, 10.0),
    "quick_gelu": _quick_gelu,
    "relu": F.relu,
    "relu2": lambda x: F.relu(x).square(),
    "relu6": F.relu6,
    "leaky_relu": F.leaky_relu,
    "silu": F.silu,
    "swish": F.silu,
    "mish": F.mish,
    "tanh": F.tanh,
    "sigmoid": F.sigmoid,
    "hardswish": F.hardswish,
    "linear": lambda x: x,
}


def activation(name: str):
    """The function transformers' config name `name` (hidden_act, activation_function) means."""
    if name not in _ACTIVATIONS:
        raise NotImplementedError(
            f"pyrite: activation {name!r} is not supported ({', '.join(sorted(_ACTIVATIONS))} are)"
        )
    return _ACTIVATIONS[name]


def read_folder(path) -> tuple[dict, dict]:
    """(config.json's contents, every tensor of its *.safetensors files, or else of its
    pytorch_model*.bin files: torch.save zips, read by `pyrite.load` with weights_only) of a
    local Hugging Face checkpoint folder. No download: `path` is a folder."""
    from ..io import load

    path = os.fspath(path)
    cfg_path = os.path.join(path, "config.json")
    if not os.path.isfile(cfg_path):
        raise FileNotFoundError(f"pyrite: from_pretrained: no config.json in {path!r}")
    with open(cfg_path, encoding="utf-8") as f:
        cfg = json.load(f)
    files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
    files = files or sorted(glob.glob(os.path.join(path, "pytorch_model*.bin")))
    if not files:
        raise FileNotFoundError(
            f"pyrite: from_pretrained: no .safetensors or pytorch_model*.bin file in {path!r}"
        )
    sd = {}
    for fn in files:
        sd.update(load(fn))
    return cfg, sd


def load_checkpoint(model, sd, prefix, *, tied=(), optional=(), ignored=()):
    """Load a Hugging Face state dict into `model` whose keys start with `prefix` ("bert.",
    "transformer.") below the heads: keys saved without it (from the bare model) gain it, and
    a bare model takes a head model's keys without it. `tied`: keys the model shares with
    another (absent from saved files); `optional`: key prefixes that may stay as initialised
    (a new head); `ignored`: key prefixes of the file the model has no place for (another
    head). Anything else missing or left over raises."""
    own = set(model.state_dict())
    bare = not any(k.startswith(prefix) for k in own)
    fixed = {}
    for k, v in sd.items():
        k = k.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
            "LayerNorm.beta", "LayerNorm.bias"
        )
        if bare and k.startswith(prefix):
            k = k[len(prefix) :]
        elif not bare and k not in own and prefix + k in own:
            k = prefix + k
        fixed[k] = v
    fixed = {k: v for k, v in fixed.items() if k not in tied}
    missing, unexpected = model.load_state_dict(fixed, strict=False)
    missing = [k for k in missing if k not in tied]
    new = [k for k in missing if k.startswith(tuple(optional))]
    if new:
        warnings.warn(
            f"pyrite: from_pretrained: {type(model).__name__}'s {new} are not in the checkpoint: "
            "left as initialised (train them before use)",
            stacklevel=3,
        )
    missing = [k for k in missing if k not in new]
    unexpected = [k for k in unexpected if not k.startswith(tuple(ignored))]
    if missing or unexpected:
        raise ValueError(
            f"pyrite: from_pretrained: the checkpoint does not fit {type(model).__name__}: "
            f"missing {missing}, unexpected {unexpected}"
        )
