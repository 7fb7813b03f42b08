"""torch.nn.utils.parametrizations.orthogonal: a matrix (or a batch of them) kept orthogonal
by computing it from an unconstrained original, as torch's `_Orthogonal`, map for map:

- "matrix_exp" / "cayley": the original's lower triangle X (embedded in an n×n matrix when the
  matrix is not square) gives a skew-symmetric A = X - Xᵀ, and Q = exp(A) or the Cayley map
  (I - A/2)⁻¹(I + A/2), its first k columns;
- "householder": the product of the reflectors held below the diagonal (taus 2 / (1 + ‖v‖²)),
  its columns' signs from the original's diagonal.

With use_trivialization=True (the default) the result is `base @ Q`, `base` an orthogonal
buffer set from the value assigned (registration assigns the current weight: kept when it is
orthogonal, else its QR's Q; a wide or tall matrix is completed with random columns first), and
the original restarts at -I. State-dict keys are torch's: `parametrizations.weight.original`
and `parametrizations.weight.0.base`.

The Householder product is written here as k rank-1 updates of pyrite ops (pyrite's
linalg.householder_product has no gradient), so every map trains.
"""

from __future__ import annotations

from enum import Enum, auto

from ... import linalg as _linalg  # (the recorded ops: matrix_exp and solve differentiate)
from ...autograd import no_grad
from ...ops.combine import cat
from ...ops.creation import eye, randn, zeros, zeros_like
from ...ops.linalg_spectral import geqrf, householder_product
from ...runtime import finfo
from ...tensor import Tensor
from ..module import Module
from . import parametrize


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


def _is_orthogonal(Q) -> bool:
    n, k = Q.shape[-2], Q.shape[-1]
    eps = 10.0 * n * finfo(Q.dtype).eps
    return bool((Q.mH @ Q).allclose(eye(k, dtype=Q.dtype), atol=eps))


def _make_orthogonal(A):
    """Q of A = QR (A tall) with diag(R) >= 0."""
    X, tau = geqrf(A)
    Q = householder_product(X, tau)
    # the diagonal of X is R's: its signs make diag(R) non-negative
    return Q * X.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


def _householder_product(A, tau):
    """linalg.householder_product(A, tau), differentiable: H_0 H_1 ... H_{k-1} applied to the
    first k columns of I, H_i = I - tau_i v_i v_iᵀ, v_i = e_i + A[:, i] (A strictly lower).
    A (..., n, k), tau (..., k) -> (..., n, k)."""
    n, k = A.shape[-2], A.shape[-1]
    Q = eye(n, k, dtype=A.dtype).expand(*A.shape)
    for i in reversed(range(k)):
        v = A[..., :, i] + eye(n, dtype=A.dtype)[i]  # (..., n)
        vq = v.unsqueeze(-2) @ Q  # (..., 1, k)
        Q = Q - tau[..., i].unsqueeze(-1).unsqueeze(-1) * (v.unsqueeze(-1) @ vq)
    return Q


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        # X is tall: (..., n, k), n >= k
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:  # embedded in a square matrix
                pad = zeros((n, n - k), dtype=X.dtype).expand(*X.shape[:-2], -1, -1)
                X = cat([X, pad], dim=-1)
            A = X - X.mH  # skew-symmetric
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = _linalg.matrix_exp(A)
            else:  # the Cayley retraction (I + A/2)(I - A/2)^-1
                Id = eye(n, dtype=A.dtype)
                Q = _linalg.solve(Id + -0.5 * A, Id + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = _householder_product(A, tau)
            # X's diagonal holds 1s and -1s (not differentiated)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).detach().int().unsqueeze(-2)
        if "base" in self._buffers:
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q):
        with no_grad():
            return self._right_inverse(Q)

    def _right_inverse(self, Q):
        if tuple(Q.shape) != self.shape:
            raise ValueError(
                f"Expected a matrix or batch of matrices of shape {self.shape}. "
                f"Got a tensor of shape {tuple(Q.shape)}."
            )
        Q_init = Q
        n, k = Q.shape[-2], Q.shape[-1]
        transpose = n < k
        if transpose:
            Q = Q.mT
            n, k = k, n
        if "base" not in self._buffers:
            if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                raise NotImplementedError(
                    "It is not possible to assign to the matrix exponential or the Cayley "
                    "parametrizations when use_trivialization=False."
                )
            A, tau = geqrf(Q)
            # diag(R) > 0: the diagonal becomes R's signs, flipped where no reflection was
            # applied (tau == 0)
            sign = A.diagonal(dim1=-2, dim2=-1).sign()
            sign = sign * (1.0 - 2.0 * (tau == 0.0).to(sign.dtype))  # (..., k)
            on_diag = eye(n, k, dtype=A.dtype)  # (n, k)
            A = A * (1.0 - on_diag) + sign.unsqueeze(-2) * on_diag
            return A.mT if transpose else A
        if n == k:
            Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
        else:  # completed to an n×n orthogonal matrix with random columns
            N = randn(*Q.shape[:-2], n, n - k, dtype=Q.dtype)
            Q = _make_orthogonal(cat([Q, N], dim=-1))
        self.base = Q
        # -I: householder(zeros) would be eye; -I keeps the diagonal's signs at -1
        neg_id = zeros_like(Q_init)
        return neg_id - eye(*Q_init.shape[-2:], dtype=Q_init.dtype).expand(*Q_init.shape)


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Parametrize `module.<name>` (a matrix or batch of matrices, (..., m, n)) as an
    orthogonal one: orthonormal columns when m >= n, rows otherwise.

    Args:
        module (nn.Module): the module to parametrize.
        name (str): the tensor's name. Default: "weight".
        orthogonal_map (str): "matrix_exp", "cayley" or "householder". Default: "matrix_exp"
            for a square matrix, "householder" otherwise.
        use_trivialization (bool): keep a `base` buffer and compute base @ Q (the dynamic
            trivialization). Default: True.
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(
            f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions."
        )
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError(
            'orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
            f"Got: {orthogonal_map}"
        )
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
