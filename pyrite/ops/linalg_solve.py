"""torch.linalg's LU- and Cholesky-based ops: solve, inv, det, slogdet, logdet, cholesky, the
LU family (lu_factor, lu, lu_solve, lu_unpack), solve_triangular, cholesky_solve /
cholesky_inverse and matrix_power, over the factorisation drivers in ops/linalg.py.
"""

from __future__ import annotations

import math

from .. import dtypes as D
from ..errors import ArgumentError, ShapeError
from ..kernels import linalg as K
from ..tensor import Tensor
from .core import broadcast_shapes, empty
from .elementwise import as_tensor_arg
from .linalg import (
    _batch_prefix,
    _cholesky,
    _eye,
    _float_input,
    _lu,
    _lu_work,
    _matrix_input,
    _mT,
    _out,
    _outs,
    _raise_info,
    _run,
    _spans,
    _square_input,
    _swap_rows,
    _team,
    _work_copy,
    linalg_cholesky_ex,
    linalg_inv_ex,
    linalg_lu,
    linalg_lu_factor,
    linalg_lu_factor_ex,
    linalg_slogdet,
    linalg_solve_ex,
    lu_unpack_result,
    slogdet_result,
)


# ---- solve, inv ----------------------------------------------------------------------------
def _solve_shapes(A: Tensor, B: Tensor, name: str):
    """torch's rule: B is a batch of vectors when it is 1-D, or has A's shape without the last
    dimension; else a batch of matrices (n, k). Returns (batch, B as (..., n, k), vector?)."""
    n = A._shape[-1]
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B._shape == A._shape[:-1])
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.ndim < 2 or Bm._shape[-2] != n:
        k = 1 if vector else (Bm._shape[-1] if Bm.ndim else 1)
        rows = B._shape[0] if vector and B.ndim == 1 else (Bm._shape[-2] if Bm.ndim >= 2 else 1)
        raise ShapeError(
            f"pyrite: {name}: Incompatible shapes of A and B for the equation AX = B "
            f"({n}x{n} and {rows}x{k}; shapes {tuple(A._shape)} and {tuple(B._shape)})"
        )
    try:
        batch = broadcast_shapes(A._shape[:-2], Bm._shape[:-2])
    except ShapeError:
        raise ShapeError(
            f"pyrite: {name}: the batch dimensions of A {tuple(A._shape)} and B "
            f"{tuple(B._shape)} do not broadcast"
        ) from None
    return batch, Bm, vector


def _solve(A, B, left: bool, name: str):
    A = _square_input(A, name)
    B = _float_input(B, name)
    if not left:  # X A = B  <=>  Aᵀ Xᵀ = Bᵀ
        n = A._shape[-1]
        if B.ndim < 2 or (B.ndim == A.ndim - 1 and B._shape == A._shape[:-1]):
            # torch's rule: a B that is a batch of vectors (1-D, or A's shape without its last
            # dim) has no X A = B
            raise ShapeError(
                f"pyrite: {name}: Incompatible shapes of A and B for the equation XA = B "
                f"({n}x{n} and {B._shape[-1] if B.ndim else 1}x1; shapes {tuple(A._shape)} "
                f"and {tuple(B._shape)}: a batch of vectors B needs left=True)"
            )
        X, info = _solve(_mT(A), _mT(B), True, name)
        return _mT(X).contiguous(), info
    batch, Bm, vector = _solve_shapes(A, B, name)
    n = A._shape[-1]
    W = _lu_work(A.expand(*batch, n, n), Bm.expand(*batch, n, Bm._shape[-1]), batch)
    _, info = _lu(W, n)
    X = W[..., n:].contiguous()
    if vector:
        X = X.squeeze(-1)
    return X, _info_of_a(info, A, batch)


def _info_of_a(info: Tensor, A: Tensor, batch: tuple) -> Tensor:
    """info (*batch) of the broadcast systems as torch returns it: over A's batch (each copy of
    a broadcast A has the same LU, so the first copy's)."""
    a_batch = tuple(A._shape[:-2])
    if a_batch == tuple(batch):
        return info
    lead = len(batch) - len(a_batch)
    if 0 in batch[lead:] and 0 not in a_batch:  # (no copy was factored: factor A alone)
        _, info = _lu(_lu_work(A, None, a_batch), A._shape[-1])
        return info
    idx = (0,) * lead + tuple(
        slice(0, 1) if a == 1 and b != 1 else slice(None) for a, b in zip(a_batch, batch[lead:])
    )
    return info[idx].contiguous()


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    """X with A X = B (left=True) or X A = B, and LAPACK's info (0, or the first zero pivot's
    1-based index) per matrix, without reading info back unless `check_errors`."""
    X, info = _solve(A, B, left, "linalg.solve_ex")
    if not left:
        # torch's info is that of A's own LU (X A = B was solved through Aᵀ's, whose first
        # zero pivot may sit elsewhere: a zero row of A is a zero column of Aᵀ)
        A = _square_input(A, "linalg.solve_ex")
        _, info = _lu(_lu_work(A, None, A._shape[:-2]), A._shape[-1])
    if check_errors:
        _raise_info(info, A, lambda i, v: _singular_solve())
    return _outs(linalg_solve_ex, (X, info), out, "linalg.solve_ex")


def _singular_solve():
    return "pyrite: linalg.solve: The solver failed because the input matrix is singular."


def solve(A, B, *, left=True, out=None):
    """The solution X of A X = B (X A = B when left=False) for square A (*, n, n) and B (*, n)
    or (*, n, k), batch dims broadcast; LU with partial pivoting. Raises LinAlgError when a
    pivot is exactly zero, as torch does."""
    X, info = _solve(A, B, left, "linalg.solve")
    _raise_info(info, A, lambda i, v: _singular_solve())
    return _out(X, out, "linalg.solve")


def _inv(A, name: str):
    A = _square_input(A, name)
    n = A._shape[-1]
    batch = A._shape[:-2]
    W = _lu_work(A, _eye(n, n), batch)
    _, info = _lu(W, n)
    return W[..., n:].contiguous(), info


def _singular_inv(A):
    return lambda i, v: (
        f"pyrite: linalg.inv: {_batch_prefix(A, i)}The diagonal element {v} is zero, the "
        "inversion could not be completed because the input matrix is singular."
    )


def inv_ex(A, *, check_errors=False, out=None):
    """The inverse of square A (*, n, n) and info per matrix, without reading info back."""
    X, info = _inv(A, "linalg.inv_ex")
    if check_errors:
        _raise_info(info, A, _singular_inv(as_tensor_arg(A)))
    return _outs(linalg_inv_ex, (X, info), out, "linalg.inv_ex")


def inv(A, *, out=None):
    """The inverse of square A (*, n, n) by LU with partial pivoting (Gauss elimination on
    [A | I]). Raises LinAlgError for an exactly singular pivot, with torch's message."""
    X, info = _inv(A, "linalg.inv")
    _raise_info(info, A, _singular_inv(as_tensor_arg(A)))
    return _out(X, out, "linalg.inv")


def inverse(input, *, out=None):
    return inv(input, out=out)


# ---- LU factorisation as torch.linalg.lu_factor / lu / lu_solve ----------------------------------
def _lu_factor(A, pivot, name):
    A = _matrix_input(A, name)
    if not pivot:
        raise NotImplementedError(
            f"pyrite: {name}: LU without pivoting is not implemented (torch's CPU has none either)"
        )
    n = A._shape[-1]
    W = empty(A._shape, D.float32)
    if W.numel():
        _work_copy(W, A)
    piv, info = _lu(W, n)
    return A, W, piv, info


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    """LU with partial pivoting of A (*, m, n), compact as LAPACK's getrf: (LU, pivots
    (1-based int32, min(m, n) of them), info), info not read back."""
    A, LU, piv, info = _lu_factor(A, pivot, "linalg.lu_factor_ex")
    if check_errors:
        _raise_info(info, A, _zero_u(A, "linalg.lu_factor_ex"))
    return _outs(linalg_lu_factor_ex, (LU, piv + 1, info), out, "linalg.lu_factor_ex")


def _zero_u(A, name):
    return lambda i, v: (
        f"pyrite: {name}: {_batch_prefix(A, i)}U[{v},{v}] is zero and using it on "
        "lu_solve would result in a division by zero. If you still want to perform the "
        "factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)"
    )


def lu_factor(A, *, pivot=True, out=None):
    """(LU, pivots) of A (*, m, n) as lu_factor_ex; raises LinAlgError when U has an exactly
    zero diagonal element, as torch does."""
    A, LU, piv, info = _lu_factor(A, pivot, "linalg.lu_factor")
    _raise_info(info, A, _zero_u(A, "linalg.lu_factor"))
    return _outs(linalg_lu_factor, (LU, piv + 1), out, "linalg.lu_factor")


def _permutation(piv0: Tensor, m: int, batch: tuple) -> Tensor:
    """P (*batch, m, m) with A = P·L·U for 0-based swaps piv0 (*batch, k): the swaps applied
    to the identity's rows give Pᵀ."""
    S = _eye(m, m).expand(*batch, m, m).contiguous()
    _swap_rows(S, piv0.expand(*batch, piv0._shape[-1]), m, 0)
    return _mT(S)


def _unpack(LU: Tensor, piv0: Tensor, unpack_data=True, unpack_pivots=True):
    m, n = LU._shape[-2], LU._shape[-1]
    k = min(m, n)
    batch = LU._shape[:-2]
    P = _permutation(piv0, m, batch) if unpack_pivots else empty((0,), D.float32)
    if not unpack_data:
        e = empty((0,), D.float32)
        return P, e, e
    L = LU[..., :, :k].tril(-1) + _eye(m, k)
    U = LU[..., :k, :].triu()
    return P, L, U


def lu(A, *, pivot=True, out=None):
    """A = P·L·U for A (*, m, n): P (*, m, m) a permutation, L (*, m, k) unit lower, U (*, k,
    n) upper, k = min(m, n); partial pivoting as LAPACK's getrf."""
    A, LU, piv, _ = _lu_factor(A, pivot, "linalg.lu")
    return _outs(linalg_lu, _unpack(LU, piv), out, "linalg.lu")


def _lu_top(A, pivot=True, get_infos=False, out=None):
    """torch.lu (deprecated there): (LU, pivots) or (LU, pivots, infos)."""
    LU, piv, info = lu_factor_ex(A, pivot=pivot)
    res = (LU, piv, info) if get_infos else (LU, piv)
    if out is not None:
        return tuple(_out(v, o, "lu") for v, o in zip(res, out))
    return res


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """(P, L, U) from lu_factor's compact (LU, pivots) (torch.lu_unpack)."""
    LU = _matrix_input(LU_data, "lu_unpack")
    piv0 = as_tensor_arg(LU_pivots).int() - 1
    res = _unpack(LU, piv0, unpack_data, unpack_pivots)
    return _outs(lu_unpack_result, res, out, "lu_unpack")


def _rows_of_b(B: Tensor, n: int, name: str):
    """B (*, n, k) for a square A (*, n, n), as torch checks it."""
    if B._shape[-2] != n:
        raise ShapeError(
            f"pyrite: {name}: Incompatible shapes of A and B for the equation AX = B "
            f"({n}x{n} and {B._shape[-2]}x{B._shape[-1]})"
        )


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """X with A X = B (X A = B when left=False; Aᵀ in place of A when adjoint) from lu_factor's
    (LU, pivots) of a square A (*, n, n); B (*, n, k) (or (*, k, n) when left=False), batch
    dims broadcast."""
    LU = _square_input(LU, "linalg.lu_solve")
    B = _matrix_input(B, "linalg.lu_solve")
    piv0 = as_tensor_arg(pivots).int() - 1
    if not left:  # X A = B <=> Aᵀ Xᵀ = Bᵀ
        X = lu_solve(LU, pivots, _mT(B), left=True, adjoint=not adjoint)
        return _out(_mT(X).contiguous(), out, "linalg.lu_solve")
    n = LU._shape[-1]
    _rows_of_b(B, n, "linalg.lu_solve")
    batch = broadcast_shapes(LU._shape[:-2], B._shape[:-2], piv0._shape[:-1])
    k = B._shape[-1]
    LUb = LU.expand(*batch, n, n)
    if adjoint:  # Aᵀ = Uᵀ Lᵀ Pᵀ: X = P · Lᵀ⁻¹ · Uᵀ⁻¹ · B
        Y = _tri_solve(_mT(LUb), B.expand(*batch, n, k), False, False)
        Z = _tri_solve(_mT(LUb), Y, True, True)
        P = _permutation(piv0, n, batch)
        return _out(P @ Z, out, "linalg.lu_solve")
    # A⁻¹ = U⁻¹ L⁻¹ Pᵀ: the swaps on B, forward substitution with L, back substitution
    W = _lu_work(LUb, B.expand(*batch, n, k), batch)
    nb = math.prod(batch)
    if nb and n and k:
        _swap_rows(W, piv0.expand(*batch, n), n, n)
        tp, mpw = _team(max(n * (n + k) // 4, n), nb)
        tx = min(tp, 32)
        src = K.lu_kernel(tp, mpw, tx)
        info = empty((nb,), D.int32)
        bufs = [W._storage.buffer, info._storage.buffer, info._storage.buffer]
        bufs[1] = empty((nb, n), D.int32)._storage.buffer
        ld = n + k
        for mode, c0, c1 in ((1, n, n), (2, 0, n)):
            cost = lambda s, mode=mode, c0=c0, c1=c1: K.lu_step_cost(  # noqa: E731
                s, n, ld, mode, c0, c1, tp, tx
            )
            words = [n, ld, k, mode, c0, c1, n]
            _run(src, bufs, words, nb, mpw, _spans(cost, n))
    return _out(W[..., n:].contiguous(), out, "linalg.lu_solve")


# ---- triangular systems ------------------------------------------------------------------
def _tri_solve(A: Tensor, B: Tensor, upper: bool, unit: bool) -> Tensor:
    """X with A X = B for triangular A (*, n, n) (the other triangle ignored) and B (*, n, k),
    batch dims already equal: back substitution (the LU kernel's second half); a lower A is
    solved as the upper J·A·J (J reverses the order)."""
    n = A._shape[-1]
    batch = A._shape[:-2]
    if not upper:
        A = A.flip((-2, -1))
        B = B.flip((-2,))
    W = _lu_work(A, B, batch)
    if unit:
        W[..., :n].diagonal(0, -2, -1).fill_(1.0)
    if n and math.prod(batch) and B._shape[-1]:
        _lu(W, n, back_only=True)
    X = W[..., n:]
    return (X if upper else X.flip((-2,))).contiguous()


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """X with A X = B (X A = B when left=False) for triangular A (*, n, n) (only the triangle
    `upper` names is read; its diagonal taken as ones when `unitriangular`) and B (*, n, k)."""
    A = _square_input(A, "linalg.solve_triangular")
    B = _matrix_input(B, "linalg.solve_triangular")
    if not left:
        X = solve_triangular(_mT(A), _mT(B), upper=not upper, unitriangular=unitriangular)
        return _out(_mT(X).contiguous(), out, "linalg.solve_triangular")
    n = A._shape[-1]
    _rows_of_b(B, n, "linalg.solve_triangular")
    batch = broadcast_shapes(A._shape[:-2], B._shape[:-2])
    k = B._shape[-1]
    X = _tri_solve(A.expand(*batch, n, n), B.expand(*batch, n, k), bool(upper), unitriangular)
    return _out(X, out, "linalg.solve_triangular")


def cholesky_solve(B, L, upper=False, *, out=None):
    """X with A X = B where A = L Lᵀ (Uᵀ U when upper) from its Cholesky factor."""
    from .. import linalg as LA  # (recorded solves: this composite is differentiable)

    L = _square_input(L, "cholesky_solve")
    B = _matrix_input(B, "cholesky_solve")
    if upper:  # A = Uᵀ U: Uᵀ Y = B, U X = Y
        Y = LA.solve_triangular(_mT(L), B, upper=False)
        return _out(LA.solve_triangular(L, Y, upper=True), out, "cholesky_solve")
    Y = LA.solve_triangular(L, B, upper=False)
    return _out(LA.solve_triangular(_mT(L), Y, upper=True), out, "cholesky_solve")


def cholesky_inverse(L, upper=False, *, out=None):
    """inv(A) from A's Cholesky factor L (A = L Lᵀ, or Uᵀ U when upper)."""
    L = _square_input(L, "cholesky_inverse")
    n = L._shape[-1]
    eye = _eye(n, n).expand(*L._shape)
    return _out(cholesky_solve(eye, L, upper), out, "cholesky_inverse")


# ---- det, slogdet ------------------------------------------------------------------------------
def _lu_det_parts(A, name: str):
    """(diagonal of U (*, n), permutation sign (*,) float32) of A's LU factorisation."""
    from .creation import arange

    A = _square_input(A, name)
    n = A._shape[-1]
    W = _lu_work(A, None, A._shape[:-2])
    piv, _ = _lu(W, n)
    d = W.diagonal(0, -2, -1)
    swaps = (piv != arange(n, dtype=D.int32)).sum(-1)
    psign = 1.0 - 2.0 * (swaps % 2).float()
    return d, psign


def det(A, *, out=None):
    """The determinant of square A (*, n, n): the product of U's diagonal from LU with partial
    pivoting, times the permutation's sign."""
    d, psign = _lu_det_parts(A, "linalg.det")
    # an exactly zero pivot makes the determinant 0, even where the other pivots' product
    # overflows float32 (inf·0 was NaN for a singular 131x131 Gaussian matrix; torch's is 0)
    res = (psign * d.prod(-1)).masked_fill((d == 0).any(-1), 0.0)
    return _out(res, out, "linalg.det")


def _slogdet(A, name):
    d, psign = _lu_det_parts(A, name)
    sign = psign * d.sign().prod(-1)
    logabs = d.abs().log().sum(-1)
    return sign, logabs


def slogdet(A, *, out=None):
    """(sign, log|det|) of square A (*, n, n); sign 0 and logabsdet -inf when singular."""
    return _outs(linalg_slogdet, _slogdet(A, "linalg.slogdet"), out, "linalg.slogdet")


def _slogdet_top(input):
    return slogdet_result(*_slogdet(input, "slogdet"))


def logdet(input):
    """log(det(A)): nan for a negative determinant, -inf for a singular one (torch.logdet)."""
    from .elementwise import where

    sign, logabs = _slogdet(input, "logdet")
    nan = logabs * float("nan")
    return where(sign < 0, nan, logabs)


# ---- Cholesky -----------------------------------------------------------------------------
def _not_pd(A):
    return lambda i, v: (
        f"pyrite: linalg.cholesky: {_batch_prefix(A, i)}The factorization could not be "
        f"completed because the input is not positive-definite (the leading minor of order "
        f"{v} is not positive-definite)."
    )


def _chol(A, upper: bool, name: str):
    """upper=False: L from A's lower triangle; upper=True: U = Lᵀ from A's upper triangle
    (LAPACK's potrf with uplo 'U', as torch: the lower triangle of Aᵀ, factored)."""
    A = _square_input(A, name)
    if upper:
        L, info = _cholesky(_mT(A))
        return A, _mT(L).contiguous(), info
    L, info = _cholesky(A)
    return A, L, info


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    """The Cholesky factor of Hermitian positive-definite A (its lower triangle read; the
    upper one when `upper`) and info (0, or the order of the first leading minor that is not
    positive-definite)."""
    A, L, info = _chol(A, upper, "linalg.cholesky_ex")
    if check_errors:
        _raise_info(info, A, _not_pd(A))
    return _outs(linalg_cholesky_ex, (L, info), out, "linalg.cholesky_ex")


def cholesky(A, *, upper=False, out=None):
    """L with A = L Lᵀ (U with A = Uᵀ U when upper=True) for symmetric positive-definite A
    (*, n, n), reading its lower triangle (its upper one when upper=True, as torch).
    Raises LinAlgError when A is not positive-definite."""
    A, L, info = _chol(A, upper, "linalg.cholesky")
    _raise_info(info, A, _not_pd(A))
    return _out(L, out, "linalg.cholesky")


def _cholesky_top(input, upper=False, *, out=None):
    return cholesky(input, upper=upper, out=out)


# ---- matrix_power -----------------------------------------------------------------------------
def matrix_power(A, n, *, out=None):
    """A**n for square A (*, m, m) by repeated squaring: the identity for n = 0, inv(A)**|n| for
    n < 0 (raising LinAlgError when A is singular)."""
    import numbers

    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(
            f"pyrite: linalg.matrix_power(): argument 'n' must be int, not {type(n).__name__}"
        )
    A = as_tensor_arg(A)
    if A.dtype.kind == "b" or (n < 0 and A.dtype.kind != "f"):
        _float_input(A, "linalg.matrix_power")
    if A.ndim < 2 or A._shape[-1] != A._shape[-2]:
        _square_input(A.float() if A.dtype.kind != "f" else A, "linalg.matrix_power")
    m = A._shape[-1]
    n = int(n)
    if n == 0:
        from .. import autograd

        eye = _eye(m, m).to(A.dtype).expand(*A._shape).contiguous()
        if autograd.needs_grad(A):  # (the identity whatever A: a zero gradient, as torch's)
            eye = autograd.record("matrix_power", _g_zero, (A,), {}, eye)
        return _out(eye, out, "linalg.matrix_power")
    if n < 0:
        from .. import linalg as _linalg

        A = _linalg.inv(A)  # (the recorded one: its rule carries the gradient)
        n = -n
    result = None
    base = A
    while True:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if not n:
            break
        base = base @ base
    if result is A:
        result = A.clone()
    return _out(result, out, "linalg.matrix_power")


def _g_zero(ctx, g):
    from .creation import zeros

    return (zeros(*g.shape, dtype=g.dtype),)


_g_zero.saves = frozenset()


# ---- matrix_exp --------------------------------------------------------------------------------
# Scaling and squaring with the [7/7] Padé approximant, the degree Higham (2005, "The scaling
# and squaring method for the matrix exponential revisited", Table 2.3) gives for single
# precision: with ||A/2^s||_1 <= THETA_7 the approximant's backward error is below u = 2⁻²⁴.
PADE7 = (17297280.0, 8648640.0, 1995840.0, 277200.0, 25200.0, 1512.0, 56.0, 1.0)
THETA_7 = 3.925724783138660


def matrix_exp(A):
    """exp(A) for square A (*, n, n): Padé [7/7] on A/2^s, s from ||A||_1, then s squarings.
    Reads back the largest s of the batch (one number) to know how many squarings to run.

    pyrite.linalg.matrix_exp, pyrite.matrix_exp and Tensor.matrix_exp are this function
    wrapped by autograd.install, which runs it unrecorded and records linalg_grads'
    `_g_matrix_exp`. Called directly (pyrite.ops.linalg_solve.matrix_exp) it records that rule
    itself: its internals alone would give a graph through the NaN-propagating `A.sum() * 0`
    only (the LU solve is an unrecorded kernel), a silently zero gradient."""
    from .. import autograd

    A = as_tensor_arg(A)
    if A.dtype in (D.float16, D.bfloat16):
        # torch's CPU takes half and bfloat16 here (it has no LAPACK call): computed in float32
        # and rounded back, the gradient through the same casts
        _square_input(A.float(), "linalg.matrix_exp")
        return matrix_exp(A.float()).to(A.dtype)
    A = _square_input(A, "linalg.matrix_exp")
    if not autograd.needs_grad(A):
        return _matrix_exp(A)
    from .linalg_grads import _g_matrix_exp

    with autograd.no_grad():
        out = _matrix_exp(A)
    return autograd.record("matrix_exp", _g_matrix_exp, (A,), {}, out)


def _matrix_exp(A):
    from .elementwise import where

    n = A._shape[-1]
    if A.numel() == 0:
        return A.clone()
    norm1 = A.abs().sum(-2).amax(-1)  # (*,) the 1-norm: largest column sum
    s = (norm1 / THETA_7).log2().ceil().clamp(min=0.0)
    s = s.masked_fill(~s.isfinite(), 0.0)  # a zero matrix (log2(0)), NaN or inf input
    X = A / (s.exp2().unsqueeze(-1).unsqueeze(-1))
    b = PADE7
    eye = _eye(n, n)
    X2 = X @ X
    X4 = X2 @ X2
    X6 = X4 @ X2
    Uo = X @ (X6 * b[7] + X4 * b[5] + X2 * b[3] + eye * b[1])
    Ve = X6 * b[6] + X4 * b[4] + X2 * b[2] + eye * b[0]
    R, _ = _solve_raw(Ve - Uo, Ve + Uo)
    steps = int(s.amax().item()) if s.numel() else 0
    for i in range(steps):
        R = where((s > i).unsqueeze(-1).unsqueeze(-1), R @ R, R)
    # NaN or inf anywhere gives NaN, as the squarings of a non-finite matrix would
    return R + (A.sum((-2, -1), keepdim=True) * 0.0)


def _solve_raw(A, B):
    """X with A X = B, A (*, n, n) and B (*, n, k) of the same batch; info not checked."""
    n = A._shape[-1]
    W = _lu_work(A, B, A._shape[:-2])
    _, info = _lu(W, n)
    return W[..., n:].contiguous(), info


# ---- tensorinv, tensorsolve ------------------------------------------------------------------
def tensorinv(A, ind=2, *, out=None):
    """The inverse of A viewed as a matrix (prod(shape[:ind]) x prod(shape[ind:])), shaped
    shape[ind:] + shape[:ind]."""
    A = _float_input(A, "linalg.tensorinv")
    if ind <= 0:
        raise ArgumentError(
            f"pyrite: linalg.tensorinv: Expected a strictly positive integer for 'ind', but got {ind}"
        )
    rows, cols = math.prod(A._shape[:ind]), math.prod(A._shape[ind:])
    if rows != cols:
        raise ShapeError(
            f"pyrite: linalg.tensorinv: Expected self to satisfy the requirement "
            f"prod(self.shape[ind:]) == prod(self.shape[:ind]), but got {cols} != {rows}"
        )
    from .. import linalg as LA  # (the recorded inv: this composite is differentiable)

    X = LA.inv(A.reshape(rows, cols))
    return _out(X.reshape(*A._shape[ind:], *A._shape[:ind]), out, "linalg.tensorinv", True)


def tensorsolve(A, B, dims=None, *, out=None):
    """X with tensordot(A, X, X.ndim) = B: A's trailing dims (after `dims` are moved there)
    are X's shape."""
    A = _float_input(A, "linalg.tensorsolve")
    B = _float_input(B, "linalg.tensorsolve")
    if dims is not None:
        dims = [A._dim(d) for d in dims]
        A = A.movedim(dims, list(range(A.ndim - len(dims), A.ndim)))
    xshape = A._shape[B.ndim :]
    rows, cols = B.numel(), math.prod(xshape)
    if A._shape[: B.ndim] != B._shape or rows != cols:
        raise ShapeError(
            f"pyrite: linalg.tensorsolve: A of shape {tuple(A._shape)} and B of shape "
            f"{tuple(B._shape)} do not make a square system (A's leading dims must be B's shape "
            "and the rest as many elements)"
        )
    from .. import linalg as LA  # (the recorded solve: this composite is differentiable)

    X = LA.solve(A.reshape(rows, cols), B.reshape(rows))
    return _out(X.reshape(*xshape), out, "linalg.tensorsolve", True)
