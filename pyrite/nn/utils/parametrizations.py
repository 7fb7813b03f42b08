"""torch.nn.utils.parametrizations: weight_norm, spectral_norm and orthogonal (nn/utils/
_orthogonal.py) as parametrizations (nn/utils/parametrize.py), with torch's state-dict keys
(`parametrizations.weight.original0` = g, `original1` = v; spectral norm's `original` and the
power iteration's `parametrizations.weight.0._u`, `._v`)."""

from __future__ import annotations

from ...autograd import no_grad
from ..module import Module
from . import parametrize


def _norm_except_dim(v, dim):
    """torch's norm_except_dim: ‖v‖₂ over every dim but `dim` (keepdim), or over all of v when
    dim is -1 or None."""
    if dim is None or dim == -1 or v.ndim <= 1 and dim != 0:
        return v.norm(2)
    d = dim % v.ndim
    return v.norm(2, dim=[i for i in range(v.ndim) if i != d], keepdim=True)


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_v * (weight_g / _norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight):
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """w = g·v/‖v‖ (the norm over every dim but `dim`): parametrizes `module.<name>` by its
    magnitude g (`original0`) and direction v (`original1`)."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(
                "Dimension out of range (expected to be in range of "
                f"[-{ndim}, {ndim - 1}] but got {dim})"
            )
        if n_power_iterations <= 0:
            raise ValueError(
                "Expected n_power_iterations to be positive, but got "
                f"n_power_iterations={n_power_iterations}"
            )
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            mat = self._reshape_weight_to_matrix(weight)
            h, w = mat.shape
            from ...ops.creation import randn

            u = randn(h).to(weight.dtype)
            v = randn(w).to(weight.dtype)
            self.register_buffer("_u", _normalize(u, eps))
            self.register_buffer("_v", _normalize(v, eps))
            self._power_method(mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, mat, n):
        with no_grad():
            for _ in range(n):
                self._u = _normalize(mat @ self._v, self.eps)
                self._v = _normalize(mat.transpose(0, 1) @ self._u, self.eps)

    def forward(self, weight):
        if weight.ndim == 1:
            return _normalize(weight, self.eps)
        mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(mat, self.n_power_iterations)
        u = self._u.clone()
        v = self._v.clone()
        sigma = (u * (mat @ v)).sum()
        return weight / sigma

    def right_inverse(self, value):
        return value


def _normalize(x, eps):
    return x / x.norm(2).clamp(min=eps)


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """w / σ(w), σ the largest singular value of w as a (dim, rest) matrix, estimated by power
    iteration (one step a forward in training mode; dim defaults to 1 for transposed
    convolutions, else 0)."""
    weight = getattr(module, name, None)
    if weight is None:
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d

        transposed = (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)
        dim = 1 if isinstance(module, transposed) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps)
    )
    return module


from ._orthogonal import orthogonal  # noqa: E402

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]
