"""pyrite.linalg: torch.linalg's names, on the device and batched over leading dims.

    import pyrite as pr
    x = pr.linalg.solve(A, b)              # or: from pyrite import linalg
    Q, R = pr.linalg.qr(A)
    L, info = pr.linalg.cholesky_ex(A)     # no readback: info stays on the device

float32 (float64 narrowed; torch's CPU refuses half for these too); complex64 for inv,
inv_ex, solve, the norms and vecdot (ops/complex_linalg.py, through the real embedding). No
eigensolver for general matrices: `eig` and `eigvals` raise (use `eigh` for symmetric ones).
Kernels and their sizes: kernels/linalg.py and ops/linalg.py.
"""

from __future__ import annotations

from .errors import LinAlgError
from .ops.linalg_norms import (
    cross,
    diagonal,
    matmul,
    matrix_norm,
    multi_dot,
    norm,
    tensordot,
    vander,
    vecdot,
    vector_norm,
)
from .ops.linalg_solve import (
    cholesky,
    cholesky_ex,
    det,
    inv,
    inv_ex,
    lu,
    lu_factor,
    lu_factor_ex,
    lu_solve,
    matrix_exp,
    matrix_power,
    slogdet,
    solve,
    solve_ex,
    solve_triangular,
    tensorinv,
    tensorsolve,
)
from .ops.linalg_spectral import (
    cond,
    eig,
    eigh,
    eigvals,
    eigvalsh,
    householder_product,
    lstsq,
    matrix_rank,
    pinv,
    qr,
    svd,
    svdvals,
)

__all__ = [
    "LinAlgError",
    "cholesky",
    "cholesky_ex",
    "cond",
    "cross",
    "det",
    "diagonal",
    "eig",
    "eigh",
    "eigvals",
    "eigvalsh",
    "householder_product",
    "inv",
    "inv_ex",
    "lstsq",
    "lu",
    "lu_factor",
    "lu_factor_ex",
    "lu_solve",
    "matmul",
    "matrix_exp",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "multi_dot",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_ex",
    "solve_triangular",
    "svd",
    "svdvals",
    "tensordot",
    "tensorinv",
    "tensorsolve",
    "vander",
    "vecdot",
    "vector_norm",
]

# Backward rules (ops/linalg_grads.py; the LU family and householder_product in
# ops/linalg_grads_lu.py); the other functions whose kernels factor a work buffer in place are
# OPAQUE: they run unrecorded and their backward raises (pyrite/autograd.install).
# The composites of recorded ops (norms, matmul, multi_dot, matrix_power, ...) need neither.
from .ops.linalg_grads import LINALG  # noqa: E402
from .ops.linalg_grads_lu import LINALG as LU_LINALG  # noqa: E402

GRADS = {**LINALG, **LU_LINALG}

OPAQUE = frozenset(
    (
        "cholesky",
        "cholesky_ex",
        "det",
        "eig",
        "eigh",
        "eigvals",
        "eigvalsh",
        "householder_product",
        "inv",
        "inv_ex",
        "lstsq",
        "lu",
        "lu_factor",
        "lu_factor_ex",
        "lu_solve",
        "matrix_exp",
        "matrix_rank",
        "pinv",
        "qr",
        "slogdet",
        "solve",
        "solve_ex",
        "solve_triangular",
        "svd",
        "svdvals",
    )
)
