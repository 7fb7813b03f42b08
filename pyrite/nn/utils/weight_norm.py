"""torch.nn.utils.weight_norm / spectral_norm, the older hook-based forms (the parametrization
forms: nn/utils/parametrizations.py). weight_norm keeps `<name>_g` and `<name>_v` parameters,
spectral_norm `<name>_orig` and the power iteration's `<name>_u`, `<name>_v` buffers (torch's
state-dict keys); a forward pre-hook recomputes `<name>` before each call."""

from __future__ import annotations

from ...autograd import no_grad
from ..module import Parameter
from .parametrizations import _norm_except_dim, _normalize


class WeightNorm:
    def __init__(self, name, dim):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return v * (g / _norm_except_dim(v, self.dim))

    @staticmethod
    def apply(module, name, dim):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(
                    f"Cannot register two weight_norm hooks on the same parameter {name}"
                )
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        with no_grad():
            g = _norm_except_dim(weight, fn.dim)
        module.register_parameter(name + "_g", Parameter(g.detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        with no_grad():
            weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """w = g·v/‖v‖ recomputed before each forward from parameters `<name>_g`, `<name>_v` (the
    norm over every dim but `dim`; dim=None: over all of w)."""
    WeightNorm.apply(module, name, dim)
    return module


def _remove(module, kind, name, what):
    """Undo weight_norm / spectral_norm: its hook's final weight becomes a plain parameter."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, kind) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"{what} of '{name}' not found in {module}")


def remove_weight_norm(module, name="weight"):
    return _remove(module, WeightNorm, name, "weight_norm")


class SpectralNorm:
    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        if n_power_iterations <= 0:
            raise ValueError(
                "Expected n_power_iterations to be positive, but got "
                f"n_power_iterations={n_power_iterations}"
            )
        self.name = name
        self.dim = dim
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(_normalize(mat.transpose(0, 1) @ u, self.eps))
                    u.copy_(_normalize(mat @ v, self.eps))
        u, v = u.clone(), v.clone()
        sigma = (u * (mat @ v)).sum()
        return weight / sigma

    def remove(self, module):
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, module.training))

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps):
        from ...ops.creation import randn

        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(
                    f"Cannot register two spectral_norm hooks on the same parameter {name}"
                )
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        with no_grad():
            mat = fn.reshape_weight_to_matrix(weight)
            h, w = mat.shape
            u = _normalize(randn(h).to(weight.dtype), fn.eps)
            v = _normalize(randn(w).to(weight.dtype), fn.eps)
        delattr(module, fn.name)
        module.register_parameter(fn.name + "_orig", weight)
        setattr(module, fn.name, weight.detach())
        module.register_buffer(fn.name + "_u", u)
        module.register_buffer(fn.name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """w / σ(w) recomputed before each forward (one power-iteration step a call in training
    mode) from `<name>_orig` and buffers `<name>_u`, `<name>_v`; dim defaults to 1 for
    transposed convolutions, else 0."""
    if dim is None:
        from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d

        transposed = (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)
        dim = 1 if isinstance(module, transposed) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name="weight"):
    return _remove(module, SpectralNorm, name, "spectral_norm")


__all__ = ["remove_spectral_norm", "remove_weight_norm", "spectral_norm", "weight_norm"]
