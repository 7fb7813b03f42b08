"""torch's top-level linear-algebra names and Tensor methods (torch.inverse, torch.svd with its
old signature, torch.cholesky, x.det(), x.norm(), ...), over ops/linalg.py and
ops/linalg_norms.py; `pyrite.linalg` (pyrite/linalg.py) is the torch.linalg namespace."""

from __future__ import annotations

from .linalg_norms import cross_top as cross
from .linalg_norms import norm_top as norm
from .linalg_norms import tensordot
from .linalg_solve import _cholesky_top as cholesky
from .linalg_solve import _lu_top as lu
from .linalg_solve import _slogdet_top as slogdet
from .linalg_solve import (
    cholesky_inverse,
    cholesky_solve,
    det,
    inverse,
    logdet,
    lu_unpack,
    matrix_exp,
    matrix_power,
)
from .linalg_spectral import _qr_top as qr
from .linalg_spectral import _svd_top as svd
from .linalg_spectral import geqrf, pinverse
from .linalg_spectral import householder_product as orgqr

__all__ = [
    "cholesky",
    "cholesky_inverse",
    "cholesky_solve",
    "cross",
    "det",
    "geqrf",
    "inverse",
    "logdet",
    "lu",
    "lu_unpack",
    "matrix_exp",
    "matrix_power",
    "norm",
    "orgqr",
    "pinverse",
    "qr",
    "slogdet",
    "svd",
    "tensordot",
]


def _matrix_power(self, n):
    return matrix_power(self, n)


METHODS = {
    "cholesky": cholesky,
    "cholesky_inverse": cholesky_inverse,
    "cholesky_solve": cholesky_solve,
    "cross": cross,
    "det": det,
    "geqrf": geqrf,
    "orgqr": orgqr,
    "inverse": inverse,
    "logdet": logdet,
    "lu": lu,
    "matrix_exp": matrix_exp,
    "matrix_power": _matrix_power,
    "norm": norm,
    "pinverse": pinverse,
    "qr": qr,
    "slogdet": slogdet,
    "svd": svd,
}

# Backward rules (ops/linalg_grads.py; lu, lu_unpack, orgqr and geqrf's refusal in
# ops/linalg_grads_lu.py); the factorizations without one run unrecorded and their backward
# raises (OPAQUE: pyrite/autograd.install).
from .linalg_grads import TOP  # noqa: E402
from .linalg_grads_lu import TOP as LU_TOP  # noqa: E402

GRADS = {**TOP, **LU_TOP}

OPAQUE = frozenset(
    (
        "cholesky",
        "det",
        "geqrf",
        "inverse",
        "logdet",
        "lu",
        "lu_unpack",
        "orgqr",
        "pinverse",
        "qr",
        "slogdet",
        "svd",
    )
)
