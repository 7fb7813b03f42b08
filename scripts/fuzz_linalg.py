"""Randomized differential fuzz of pyrite's linear algebra (pyrite.linalg.* and the top-level
names: pr.det, pr.svd, Tensor.cholesky, ...) against torch 2.13 CPU (session 46): values,
shapes, dtypes, gradients, and whether each side raises.

A case is plain data drawn per seed: one operation of torch.linalg or its classic aliases
(solve, solve_ex, solve_triangular, torch.triangular_solve, lstsq with every driver, inv,
inv_ex, det, slogdet, logdet, cholesky, cholesky_ex, cholesky_solve, cholesky_inverse, qr in
every mode and torch.qr, geqrf, ormqr, householder_product, svd (full_matrices), svdvals,
torch.svd (some, compute_uv), eigh and eigvalsh (UPLO), eig / eigvals, lu, lu_factor,
lu_factor_ex, lu_solve (left, adjoint), lu_unpack, torch.lu, matrix_norm / vector_norm /
linalg.norm / torch.norm (every ord, dims, keepdim, dtype), cond, matrix_rank (tol / atol /
rtol / hermitian), pinv and pinverse, matrix_power (negative too), matrix_exp, multi_dot,
chain_matmul, linalg.matmul, tensordot, cross, vecdot, vander, tensorinv, tensorsolve,
diagonal, trace, svd_lowrank and pca_lowrank), now and then as a Tensor method (x.inverse(),
x.cross(y, dim=...)) or with out= (empty, resized; or of the result's shape); batch shapes
((), (1,), (2,), (3,), (2, 1), now and then (0,)) broadcast between the operands where the op
broadcasts; square and tall/wide matrices of sizes 0, 1, 2, 3, 5, 7, now and then 17, and
67, 97 or 131 for the blocked LU / Cholesky paths (ops/linalg.py: LU above 64, Cholesky above
128); conditioning chosen on purpose: well-conditioned (singular values in [0.5, 2] times a
power of two), moderately ill-conditioned (kappa drawn in [1e3, 3e4], singular values
log-spaced), Gaussian, exactly singular (a zero row, which stays exactly zero through any
elimination, or a zero column j, whose U[j, j] is exactly 0: a zero pivot in every rounding;
a repeated row is not one, LAPACK's multiplier x·fl(1/x) may miss 1), and exactly
rank-deficient (a product of small-integer factors, exact in float32); symmetric inputs with a
chosen eigenvalue gap (or a repeated eigenvalue), and SPD / not positive-definite ones (a
negative diagonal entry k: the leading minor k + 1 is the first that fails), with junk in the
triangle not read (or, now and then, in the one read). Inputs are contiguous, transposed
(stored transposed and viewed through .mT) or strided (every other element of a larger
buffer); float32, now and then float64 (pyrite narrows it, DESIGN: float64 is stored as
float32), complex64 for the ops pyrite's complex linear algebra covers (inv, inv_ex, solve,
the norms, vecdot) and, to be refused, for a few others, float16 for any op (torch's CPU
refuses it for the factorizations, takes it for matrix_exp, the norms and products), int (to
be refused; matrix_power takes it), a NaN or an inf for the norms, products and views; now and
then an invalid argument (a bad UPLO, mode, ord, driver, ind, shape).

The case runs on torch float64 (the reference, on the same float32-rounded inputs), torch
float32 (how far float32 rounding alone moves it) and pyrite float32. Compared: each raw
output's shape and dtype (pyrite's dtype against torch float32's: int64 is pyrite's int32),
and "readouts": the raw outputs where they are unique, and gauge-invariant quantities for the
decompositions (eigenvectors: V*V elementwise and V diag(w) V^T; singular vectors: the
rank-one terms u_i v_i^T, U_k diag(S) Vh_k, and U's orthogonality; QR: Q·D and D·R with
D = sign(diag R), Q's complement as a projector for mode 'complete'; LU: P, L and U, pivots
exactly). Gradients: the loss sum_k <W_k, readout_k> (W_k Gaussian, drawn from the seed),
backward, the leaves' gradients compared; a loss built from gauge-invariant readouts is
well-defined where torch documents the decomposition's gradient as such (distinct
eigenvalues / singular values; full rank for QR; constant rank for pinv / lstsq).

Tolerance. A readout must satisfy, normwise,
    max|pyrite - ref| <= K·u·kappa·scale + 4·max|torch32 - ref|,  u = 2^-24, K = 16·(n + 2)
(n the largest matrix dimension), with kappa and scale from the operation's perturbation
theory, computed in float64 from the input: solve / inv / lstsq's X (full-rank square) and
the lu/cholesky factors: kappa = cond(A), scale = max|X| (|dX|/|X| <= n·u·kappa for a
backward-stable solve); lstsq of a tall A: kappa = cond(A)^2 (Wedin: the residual's term);
det: kappa = cond(A), scale |det| (d det = det·tr(A^-1 dA)), or for a singular A scale
sigma_1·prod_{i<n} sigma_i (the adjugate's norm times ||dA||); slogdet's log|det| absolutely
within kappa·n·u; eigenvalues and singular values: absolutely within n·u·||A||_2 (Weyl),
kappa = 1, scale ||A||_2; eigen/singular vector readouts: kappa = ||A||_2 / gap (Davis-Kahan,
Wedin), the gap including sigma_min for a non-square A; QR's Q·D, D·R: kappa = cond(A);
matrix_exp: kappa = 1 + ||A||_2; matrix_power(A, p): kappa = |p| (p > 0, scale the power of
|A|) or |p|·cond(A) (p < 0); norms, products, cross, vecdot: kappa = 1 with the scale of the
absolute terms; QR (and its gradient) moves with ||A||_2 / sigma_min(A's first k columns)
(a wide A's square part); svd_lowrank / pca_lowrank's leading r singular values and U S V^T
of an exactly rank-r input: kappa = sigma_1 / sigma_r; float16 operands: u = 2^-11.
Gradients use the same rule with kappa_grad = kappa for first-order quantities,
kappa·cond(A) where the gradient applies the inverse twice (inv, solve, det, pinv, lstsq,
cond), and (||A|| / gap)^2 for eigen/singular vectors (gaps enter squared), times
||A|| / gap for the singular-value-based norms and cond (the gradient of sigma_i is u_i v_i^T);
the scale max(max|grad_ref|, max|value| / max|input|) (an exactly zero gradient made of
cancelling terms, cond's of a 1x1 matrix, is judged by the gradient's natural size). The 4·|torch32 -
ref| term keeps torch's own float32 spread as a guide: pyrite may be no worse than 4x torch.
Non-numbers (NaN, +-inf) must sit at the same places. Integer outputs (rank, pivots, info)
must be equal.

Raising: where torch float32 raises and pyrite does not, or the other way, it is a failure;
both raising is agreement, except that torch's LinAlgError must be pyrite's LinAlgError
(code catching torch.linalg.LinAlgError ports to pyrite.linalg.LinAlgError), and both must
raise in the same phase (forward or backward); where the raise comes at backward, the
forward's values are still compared. Both sides' _ex info codes must be equal.

Classified, counted but not failures:
- intentional: float64 inputs or dtype=torch.float64: pyrite narrows to float32 (DESIGN.md,
  dtypes.py "float64 is stored as float32"): the output dtype is float32 where torch's is
  float64; values are compared with the float32 tolerance. A float64 operand beside a float32
  one is accepted (one dtype in pyrite) where torch refuses the mixture.
- intentional: complex64 input to a factorization other than inv / inv_ex / solve / norms /
  vecdot: pyrite raises a clear DtypeError or ComplexError (ops/linalg.py: float32;
  ops/complex_linalg.py covers those through the real embedding).
- intentional: linalg.svd's driver= is accepted and ignored (svd's docstring: code written for
  CUDA ports); torch's CPU refuses it.
- intentional: an empty input with a bad dtype or argument (an int matrix, driver='bad'):
  pyrite checks dtypes and arguments first; torch skips its checks when there is no element.
- intentional: out= with an input that requires grad: pyrite.linalg refuses it for every
  function torch refuses it for in general; torch's pinv takes it on some argument paths
  (atol / rtol given), pyrite refuses there too. (torch's composites that take it,
  matrix_norm, linalg.norm, cond, tensorinv, tensorsolve, pyrite takes too.)
- intentional: an inf into an SVD-based op: pyrite gives NaN for that matrix (_svd_parts'
  docstring); torch's LAPACK returns NaN or fails to converge (LinAlgError), by the matrix.
- torch_bug: torch 2.13's det gradient of an exactly singular matrix is 0; the derivative is
  the cofactor matrix adj(A)^T (nonzero for rank n - 1). pyrite's is checked against the
  float64 cofactors instead (with the loss's weight).
- torch_bug: lstsq of an n = 0 system returns residuals 0 in torch; they are ||B||^2 per
  column (the solution is empty, A X - B = -B). pyrite's are checked against that.
- known: an LU pivot decided by rounding (torch float32's pivots differ from its float64's):
  P, L, U and the compact LU may then differ; not seen in the seeds run.
- Non-numbers where torch float32 has them too (a value past float32's range: a 97x97
  determinant's pivot product overflows to inf before a zero pivot makes it NaN) pass, and no
  gradient is compared there; a float64 reference value past float32's range counts as inf.
Worked around on the torch side, for torch 2.13 bugs (the reference is torch's definition):
- linalg.cond's backward for p in ('fro', 1, -1, inf, -inf) raises (its own in-place
  masked_fill_ on inv_ex's output): torch computes matrix_norm(A, p)·matrix_norm(inv(A), p).
- linalg.lstsq with a batch of matrices B of one dim fewer than A broadcasts A's batch against
  B's leading dims (A (1, 3, 2), B (3, 3) gave a (3, 2, 3) solution repeated; A (3, 5, 2),
  B (5, 2) raised): torch gets B[None].
- torch's float16 matrix_exp overflows its Pade coefficients (inf for ||A|| ~ 1): the float64
  reference judges; torch float32's non-numbers give no spread.
- torch's linalg.eig corrupts its heap on a NaN input ("Intel oneMKL ERROR: Parameter 3 was
  incorrect on entry to DGEBAL", then free() aborts): non-finite inputs go only to the norms,
  products and views (NONFINITE_OK).
Fixed after the run (session 46, by the lead): torch.triangular_solve had no gradient (it
called the unrecorded solve) and its cloned_coefficient kept A's batch shape.
Known and open (counted as "known", described in the session-46 report):
- linalg.eig / linalg.eigvals: no eigensolver for general matrices (DtypeError).
- linalg.vecdot of complex64 operands with out= raises ComplexError (ops/complex_products.py's
  vecdot refuses out=; torch takes it).
- out= with an input that requires grad is accepted by pyrite's top-level names (pr.cholesky_
  solve, pr.cholesky_inverse, ...): ops/outarg.py's with_out, which handles out= for every
  exported function, has no such check (pyrite.linalg's own _out has it).
- torch.linalg.ldl_factor / ldl_factor_ex / ldl_solve are not in pyrite (not drawn).

    .venv/bin/python scripts/fuzz_linalg.py --seeds 0:100 [--show 17] [--verbose]
"""

from __future__ import annotations

import math
import sys
import warnings

import numpy as np
import torch

import pyrite as pr

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import fuzz_driver  # noqa: E402

U32 = 2.0**-24
U16 = 2.0**-11
SIZES = (1, 2, 3, 5, 7)
BATCHES = ((), (), (1,), (2,), (3,), (2, 1))
INF = math.inf


# ---- drawing ------------------------------------------------------------------------------------
class Gen(fuzz_driver.Draws):
    def size(self):
        if self.chance(0.03):
            return 0
        return 17 if self.chance(0.04) else self.pick(SIZES)

    def batch(self):
        return (0,) if self.chance(0.03) else self.pick(BATCHES)

    def layout(self, ndim=2):
        if ndim < 2:
            return self.pick(("c", "c", "s"))
        return self.pick(("c", "c", "c", "t", "s"))

    def orth(self, n):
        if n == 0:
            return np.zeros((0, 0))
        q, r = np.linalg.qr(self.rng.standard_normal((n, n)))
        return q * np.sign(np.where(np.diag(r) == 0, 1, np.diag(r)))

    def svals(self, k, cls):
        if cls == "well":
            s = self.rng.uniform(0.5, 2.0, k)
        else:  # ill: kappa in [1e3, 3e4], log-spaced
            kap = 10 ** self.rng.uniform(3, 4.5)
            s = np.logspace(0, -math.log10(kap), k) if k > 1 else np.ones(1)
        return np.sort(s)[::-1] * 2.0 ** self.r(7) / 8

    def mat(self, batch, m, n, cls):
        """(*batch, m, n) float32 of the conditioning class cls."""
        out = np.empty((*batch, m, n))
        for idx in np.ndindex(*batch):
            out[idx] = self._one(m, n, cls)
        return out.astype(np.float32)

    def _one(self, m, n, cls):
        k = min(m, n)
        if cls in ("well", "ill"):
            if k == 0:
                return np.zeros((m, n))
            s = self.svals(k, cls)
            return self.orth(m)[:, :k] @ np.diag(s) @ self.orth(n)[:k, :]
        if cls == "rankdef":
            r = max(0, k - 1 - self.r(2))
            X = self.rng.integers(-3, 4, (m, r)).astype(float)
            Y = self.rng.integers(-3, 4, (r, n)).astype(float)
            return X @ Y
        a = self.rng.standard_normal((m, n))
        if cls == "singular" and m >= 1 and n >= 1:
            # a zero row (stays exactly zero through any elimination: 0 - l·p with l = 0)
            # or a zero column j (U[j, j] = 0 - sum of l·0 exactly): an exactly zero pivot in
            # every rounding (a repeated row is not: LAPACK's l = x·fl(1/x) may miss 1)
            if self.chance(0.5):
                a[self.r(m)] = 0.0
            else:
                a[:, self.r(n)] = 0.0
        elif cls == "singular":
            a[...] = 0.0
        return a

    def sym(self, batch, n, gap):
        """Symmetric (*batch, n, n), eigenvalues in [-1, 1]·2^e with min gap `gap` (relative to
        the largest |eigenvalue|), or a repeated eigenvalue (gap 0)."""
        out = np.empty((*batch, n, n))
        for idx in np.ndindex(*batch):
            if gap > 0:
                lam = np.sort(self.rng.uniform(-1, 1, n))
                lam = lam + gap * 2 * np.arange(n)  # gaps >= 2·gap before the rescale
                lam = lam / max(1.0, np.abs(lam).max(initial=0))
            else:
                lam = np.sort(self.rng.uniform(-1, 1, n))
                if n > 1:
                    lam[1] = lam[0]
            Q = self.orth(n)
            out[idx] = Q @ np.diag(lam) @ Q.T * 2.0 ** (self.r(5) - 2)
        a = out.astype(np.float32)
        return ((a + np.swapaxes(a, -1, -2)) / 2).astype(np.float32)

    def spd(self, batch, n, cls):
        out = np.empty((*batch, n, n))
        for idx in np.ndindex(*batch):
            s = self.svals(n, cls) if n else np.zeros(0)
            Q = self.orth(n)
            out[idx] = Q @ np.diag(s) @ Q.T
        a = out.astype(np.float32)
        return ((a + np.swapaxes(a, -1, -2)) / 2).astype(np.float32)

    def cond_class(self, singular=True):
        opts = ["well", "well", "ill", "gauss"]
        if singular:
            opts.append("singular")
        return self.pick(opts)


def _inp(a, layout="c", grad=False, kind=None):
    layout = layout if a.ndim >= 2 or layout != "t" else "c"
    if a.ndim == 0:
        layout = "c"
    return {"a": a, "layout": layout, "grad": grad, "kind": kind}


def _bcast_pair(g):
    """Two batch shapes that broadcast (now and then one of them empty)."""
    a = g.batch()
    opts = [a, a, (), (1,) * len(a)]
    if a == (2, 1):
        opts += [(3,), (2, 4)]
    if a == (3,):
        opts += [(2, 1)]
    return a, g.pick(opts)


# ---- per-op generators: each returns (inputs, kw, meta) ----------------------------------------
def gen_solve(g, op):
    cls = g.cond_class()
    bA, bB = _bcast_pair(g)
    n, bA = _big(g, g.size(), bA)
    bB = bB if bA else ()
    A = g.mat(bA, n, n, cls)
    left = op == "solve_triangular" or not g.chance(0.25)
    shape = g.pick(("vec1", "vecb", "mat", "mat"))
    k = g.pick((1, 2, 3))
    if not left:
        shape = "mat"
    if shape == "vec1":
        B = g.rng.standard_normal((n,))
    elif shape == "vecb":
        B = g.rng.standard_normal((*bA, n))
    else:
        B = g.rng.standard_normal((*bB, n, k) if left else (*bB, k, n))
    kw = {"left": left}
    if op == "solve_ex":
        kw["check_errors"] = g.chance(0.3)
    if g.chance(0.04):  # B with the wrong number of rows
        B = g.rng.standard_normal((*bB, n + 1, k))
    ins = [_inp(A, g.layout(), True), _inp(B.astype(np.float32), g.layout(B.ndim), True)]
    return ins, kw, {"cls": cls, "grad": cls != "singular"}


def _big(g, n, b):
    """Now and then a matrix past the blocked paths' thresholds (LU above 64, Cholesky above
    128: ops/linalg.py), unbatched."""
    if g.chance(0.04):
        return g.pick((67, 97, 131)), ()
    return n, b


def gen_inv(g, op):
    n, b = _big(g, g.size(), g.batch())
    cls = g.cond_class()
    A = g.mat(b, n, n, cls)
    kw = {"check_errors": g.chance(0.3)} if op == "inv_ex" else {}
    if g.chance(0.04):
        A = g.mat(b, n, n + 1, "gauss")
    return [_inp(A, g.layout(), True)], kw, {"cls": cls, "grad": cls != "singular"}


def gen_det(g, op):
    n, b = _big(g, g.size(), g.batch())
    cls = g.cond_class()
    A = g.mat(b, n, n, cls)
    meta = {"cls": cls, "grad": cls != "singular" or op == "det", "entry": g.pick(("la", "top"))}
    if op != "det":
        meta["entry"] = g.pick(("la", "top", "method")) if op == "slogdet" else "top"
    if op == "det" and g.chance(0.3):
        meta["entry"] = "method"
    return [_inp(A, g.layout(), True)], {}, meta


def gen_tri(g, op):
    n = g.size()
    bA, bB = _bcast_pair(g)
    upper, unit = g.chance(0.5), g.chance(0.3)
    A = g.rng.standard_normal((*bA, n, n)) * 0.4 / math.sqrt(max(n, 1))
    d = g.rng.uniform(0.5, 2.0, (*bA, n)) * g.pick((1, -1))
    idx = np.arange(n)
    A[..., idx, idx] = d
    garbage = g.rng.standard_normal((*bA, n, n)) * 3  # the other triangle: must be ignored
    tri = np.triu(A) if upper else np.tril(A)
    A = tri + (np.tril(garbage, -1) if upper else np.triu(garbage, 1))
    k = g.pick((1, 2, 4))
    left = True if op == "triangular_solve" else g.chance(0.7)
    B = g.rng.standard_normal((*bB, n, k) if left else (*bB, k, n))
    kw = {"upper": upper, "unitriangular": unit}
    if op == "solve_triangular":
        kw["left"] = left
    else:
        kw["transpose"] = g.chance(0.4)
    ins = [
        _inp(A.astype(np.float32), g.layout(), True),
        _inp(B.astype(np.float32), g.layout(), True),
    ]
    return ins, kw, {"cls": "tri"}


def gen_lstsq(g, op):
    m, n = g.size(), g.size()
    bA, bB = _bcast_pair(g)
    driver = g.pick((None, "gels", "gelsy", "gelsd", "gelss"))
    cls = g.pick(("well", "well", "ill", "gauss", "rankdef"))
    if cls == "rankdef" and driver in (None, "gels"):
        driver = "gelsd"
    if cls == "ill" and m != n:
        cls = "well"  # (kappa^2 of a tall 3e4 system is past float32)
    A = g.mat(bA, m, n, cls)
    k = g.pick((1, 2))
    B = g.rng.standard_normal((*bB, m, k)).astype(np.float32)
    kw = {"driver": driver}
    if cls == "rankdef":
        kw["rcond"] = 1e-4
    elif g.chance(0.2):
        kw["rcond"] = g.pick((None, 1e-6, -1.0))
    if g.chance(0.03):
        kw["driver"] = "gelsx"
    meta = {"cls": cls, "grad": cls != "rankdef" and (driver != "gels" or m >= n)}
    return [_inp(A, g.layout(), True), _inp(B, g.layout(), True)], kw, meta


def gen_chol(g, op):
    n, b = _big(g, g.size(), g.batch())
    cls = g.pick(("well", "well", "ill", "notpd"))
    A = g.spd(b, n, "well" if cls == "notpd" else cls)
    meta = {"cls": cls, "grad": cls != "notpd"}
    if cls == "notpd" and n:
        kk = g.r(n)
        A[..., kk, kk] = -g.rng.uniform(0.5, 2.0)
        meta["kk"] = kk
    kw = {"upper": g.chance(0.4)}
    if g.chance(0.3):  # junk in the triangle not read (lower: the upper one; upper: the lower)
        junk = g.rng.standard_normal(A.shape).astype(np.float32)
        A = A + (np.tril(junk, -1) if kw["upper"] else np.triu(junk, 1))
        meta["junk"] = "unread"
    elif g.chance(0.1):  # or in the triangle read: a non-symmetric matrix, which one is read
        junk = g.rng.standard_normal(A.shape).astype(np.float32) * 0.1
        A = A + (np.triu(junk, 1) if kw["upper"] else np.tril(junk, -1))
        meta["junk"] = "read"
    if op == "cholesky_ex":
        kw["check_errors"] = g.chance(0.3)
    meta["entry"] = g.pick(("la", "la", "top")) if op == "cholesky" else "la"
    return [_inp(A, g.layout(), True)], kw, meta


def gen_chol_solve(g, op):
    n = g.size()
    bL, bB = _bcast_pair(g)
    cls = g.pick(("well", "ill"))
    A = g.spd(bL, n, cls).astype(np.float64)
    L = np.linalg.cholesky(A) if n else A
    upper = g.chance(0.4)
    F = np.swapaxes(L, -1, -2) if upper else L
    ins = [_inp(F.astype(np.float32), g.layout(), True)]
    if op == "cholesky_solve":
        k = g.pick((1, 2, 3))
        B = g.rng.standard_normal((*bB, n, k)).astype(np.float32)
        ins.insert(0, _inp(B, g.layout(), True))
    return ins, {"upper": upper}, {"cls": cls}


def gen_qr(g, op):
    m, n = g.size(), g.size()
    b = g.batch()
    cls = g.pick(("well", "well", "ill", "gauss"))
    A = g.mat(b, m, n, cls)
    if op == "qr":
        kw = {"mode": g.pick(("reduced", "reduced", "complete", "r"))}
        if g.chance(0.03):
            kw["mode"] = "full"
    else:
        kw = {"some": g.chance(0.6)}
    mode = kw.get("mode", "reduced" if kw.get("some", True) else "complete")
    grad = mode != "r" and not (mode == "complete" and m > n)
    return [_inp(A, g.layout(), True)], kw, {"cls": cls, "grad": grad or g.chance(0.2)}


def gen_eigh(g, op):
    n, b = g.size(), g.batch()
    gap = g.pick((0.3 / max(n, 1), 1e-2, 1e-3, 0.0 if op == "eigvalsh" or n < 2 else 1e-2))
    A = g.sym(b, n, gap)
    UPLO = g.pick(("L", "U", "L"))
    if g.chance(0.4):  # the triangle UPLO does not name is never read
        junk = g.rng.standard_normal(A.shape).astype(np.float32)
        A = A + (np.triu(junk, 1) if UPLO == "L" else np.tril(junk, -1))
    if g.chance(0.03):
        UPLO = "X"
    return [_inp(A, g.layout(), True)], {"UPLO": UPLO}, {"gap": gap, "uplo": UPLO}


def gen_svd(g, op):
    m, n = g.size(), g.size()
    b = g.batch()
    cls = g.pick(("well", "well", "ill", "gauss", "rankdef"))
    A = g.mat(b, m, n, cls)
    if op == "svd":
        kw = {"full_matrices": g.chance(0.5)}
        if g.chance(0.1):
            kw["driver"] = g.pick(("gesvd", "gesvdj", "bad"))
    elif op == "svd_top":
        kw = {"some": g.chance(0.5), "compute_uv": g.chance(0.85)}
    else:
        kw = {}
    return [_inp(A, g.layout(), True)], kw, {"cls": cls, "grad": cls != "rankdef"}


def gen_pinv(g, op):
    m, n = g.size(), g.size()
    b = g.batch()
    herm = op == "pinv" and g.chance(0.3)
    if herm:
        n = m
        A = g.sym(b, n, 1e-2)
        cls = "herm"
    else:
        cls = g.pick(("well", "well", "ill", "rankdef"))
        A = g.mat(b, m, n, cls)
    kw = {}
    if op == "pinv":
        kw["hermitian"] = herm
        if cls == "rankdef":
            kw[g.pick(("rtol", "atol", "rcond"))] = 1e-3
        elif g.chance(0.3):
            kw[g.pick(("rtol", "atol"))] = g.pick((0.0, 1e-7))
    else:
        kw["rcond"] = 1e-3 if cls == "rankdef" else 1e-15
    return [_inp(A, g.layout(), True)], kw, {"cls": cls, "grad": cls in ("well", "herm")}


def gen_rank(g, op):
    m, n = g.size(), g.size()
    b = g.batch()
    herm = g.chance(0.25)
    if herm:
        n = m
        A = g.sym(b, n, 1e-2)
        if n > 1 and g.chance(0.5):  # rank n - 1: one eigenvalue exactly zero
            a64 = A.astype(np.float64)
            w, V = np.linalg.eigh(a64)
            np.put_along_axis(w, np.argmin(np.abs(w), -1)[..., None], 0.0, -1)
            A = (V @ (w[..., None] * np.swapaxes(V, -1, -2))).astype(np.float32)
            A = ((A + np.swapaxes(A, -1, -2)) / 2).astype(np.float32)
            kwt = {"rtol": 1e-3}
        else:
            kwt = {}
        cls = "herm"
    else:
        cls = g.pick(("well", "rankdef", "rankdef", "ill"))
        A = g.mat(b, m, n, cls)
        kwt = {}
        if cls in ("rankdef", "ill"):
            kwt = g.pick(
                ({"rtol": 1e-2}, {"atol": 1e-2}, {"tol": 1e-2}, {"atol": 0.0, "rtol": 1e-2})
            )
    kw = {"hermitian": herm, **kwt}
    return [_inp(A, g.layout(), False)], kw, {"cls": cls}


def gen_cond(g, op):
    n, b = g.size(), g.batch()
    p = g.pick((None, 2, -2, "fro", "nuc", INF, -INF, 1, -1))
    cls = g.pick(("well", "well", "ill", "gauss"))
    m = n if p not in (None, 2, -2) or g.chance(0.5) else g.size()
    A = g.mat(b, m, n, cls)
    return [_inp(A, g.layout(), True)], {"p": p}, {"cls": cls}


ORDS_V = (2, 1, INF, -INF, 0, 3, 0.5, -1, 1.5)
ORDS_M = ("fro", "nuc", INF, -INF, 1, -1, 2, -2)


def gen_norm(g, op):
    nd = 1 + g.r(4) if op != "matrix_norm" else 2 + g.r(2)
    shape = tuple(g.pick((1, 2, 3, 5)) for _ in range(nd))
    if g.chance(0.03):
        shape = shape[:-1] + (0,)
    kind = "c64" if g.chance(0.15) else ("f16" if op == "vector_norm" and g.chance(0.15) else None)
    a = g.rng.standard_normal(shape) * 2.0 ** (g.r(5) - 2)
    if g.chance(0.15):
        a[a < -0.8] = 0.0
    if kind == "c64":
        a = (a + 1j * g.rng.standard_normal(shape)).astype(np.complex64)
    else:
        a = a.astype(np.float16 if kind == "f16" else np.float32)
    kw = {"keepdim": g.chance(0.3)}
    if op == "vector_norm":
        kw["ord"] = g.pick(ORDS_V)
        if g.chance(0.5):
            kw["dim"] = g.pick((-1, 0, (0, -1), [nd - 1], None)) if nd > 1 else g.pick((0, -1))
    elif op == "matrix_norm":
        kw["ord"] = g.pick(ORDS_M)
        kw["dim"] = g.pick(((-2, -1), (0, 1), (-1, 0), (-1, -2)))
        if g.chance(0.03):
            kw["dim"] = (0, 0)
    elif op == "norm":  # torch.linalg.norm
        nd2 = nd
        choice = g.r(3)
        if choice == 0:
            kw["ord"] = None
        elif choice == 1 and nd2 in (1, 2):
            kw["ord"] = g.pick(ORDS_V if nd2 == 1 else ORDS_M)
        else:
            if nd2 >= 2 and g.chance(0.5):
                kw["dim"] = (0, -1)
                kw["ord"] = g.pick(ORDS_M + (None,))
            else:
                kw["dim"] = g.pick((0, -1))
                kw["ord"] = g.pick(ORDS_V + (None,))
    else:  # torch.norm (p=)
        kw["p"] = g.pick(("fro", "fro", 2, 1, INF, 3, "nuc" if nd == 2 else 2))
        if g.chance(0.5):
            kw["dim"] = g.pick((0, -1, (0, -1) if nd > 1 else 0))
            if kw["p"] == "nuc" and not isinstance(kw["dim"], tuple):
                kw["dim"] = None
    if g.chance(0.15) and kind is None:
        kw["dtype"] = g.pick(("float64", "float32"))
    meta = {"kind": kind}
    return [_inp(a, g.layout(nd), True, kind)], kw, meta


def gen_matrix_power(g, op):
    n, b = g.size(), g.batch()
    p = g.pick((-3, -2, -1, 0, 1, 2, 3, 5))
    cls = g.pick(("well", "well", "ill" if p < 0 else "gauss"))
    A = g.mat(b, n, n, cls)
    kind = None
    if p >= 0 and g.chance(0.15):
        A = g.rng.integers(-3, 4, (*b, n, n)).astype(np.int64)
        kind = "int"
    elif cls == "well":  # ||A|| near 1: the powers stay in range
        A = (A / max(1e-30, float(np.abs(A).max(initial=0)) or 1.0)).astype(np.float32)
    return [_inp(A, g.layout(), kind is None, kind)], {"n": p}, {"cls": cls, "p": p}


def gen_matrix_exp(g, op):
    n, b = g.size(), g.batch()
    s = g.pick((0.01, 0.5, 2.0, 6.0))
    A = g.rng.standard_normal((*b, n, n)) * s / math.sqrt(max(n, 1))
    return [_inp(A.astype(np.float32), g.layout(), True)], {}, {}


def gen_multi_dot(g, op):
    k = 2 + g.r(4)
    dims = [g.size() for _ in range(k + 1)]
    ins = []
    for i in range(k):
        shape = (dims[i], dims[i + 1])
        if i == 0 and g.chance(0.3):
            shape = (dims[1],)
        if i == k - 1 and g.chance(0.3):
            shape = (dims[i],)
        a = g.rng.standard_normal(shape).astype(np.float32)
        ins.append(_inp(a, g.layout(len(shape)), True))
    if g.chance(0.04):
        ins[-1] = _inp(g.rng.standard_normal((dims[-2] + 1, 2)).astype(np.float32))
    return ins, {}, {}


def gen_cross(g, op):
    nd = 1 + g.r(3)
    shape = [g.pick((1, 2, 3, 4)) for _ in range(nd)]
    d = g.r(nd)
    shape[d] = 3
    s2 = list(shape)
    if nd > 1 and g.chance(0.4):
        j = g.pick([i for i in range(nd) if i != d])
        s2[j] = 1
    kind = "c64" if op == "vecdot" and g.chance(0.25) else None
    if op == "vecdot":
        shape[d] = s2[d] = g.pick((1, 3, 5))
    arrs = []
    for s in (shape, s2):
        a = g.rng.standard_normal(s)
        if kind:
            a = a + 1j * g.rng.standard_normal(s)
        arrs.append(a.astype(np.complex64 if kind else np.float32))
    if g.chance(0.5):
        arrs.reverse()
    kw = {"dim": g.pick((d, d - nd))}
    if op == "cross" and g.chance(0.03):
        arrs[1] = arrs[1][..., :2] if arrs[1].shape[-1] > 2 else arrs[1]
    ins = [_inp(a, g.layout(nd), True, kind) for a in arrs]
    return ins, kw, {"kind": kind}


def gen_householder(g, op):
    n = g.size()
    m = n + g.pick((0, 0, 1, 3))
    b = g.batch()
    k = g.r(n + 1)
    V = g.rng.standard_normal((*b, m, n)) * 0.5
    tri = np.tril(V, -1)
    norms = 1 + (tri[..., :, :k] ** 2).sum(-2)  # ||v_i||^2 with v_i[i] = 1
    tau = g.rng.uniform(0.2, 1.0, (*b, k)) * 2 / norms  # (near-reflections: tau = 2/||v||^2)
    ins = [_inp(V.astype(np.float32), g.layout(), True)]
    ins.append(_inp(tau.astype(np.float32), "c", g.chance(0.6)))
    return ins, {}, {}


def gen_tensorinv(g, op):
    if op == "tensorinv":
        first = g.pick(((2, 3), (6,), (3, 2), (5,), (1, 5)))
        n = int(np.prod(first))
        second = g.pick(((n,), (1, n)) + (((2, n // 2),) if n % 2 == 0 else ()))
        M = g.mat((), n, n, g.pick(("well", "gauss")))
        A = M.reshape(*first, *second)
        ind = len(first)
        if g.chance(0.05):
            ind = 0
        return [_inp(A, g.layout(A.ndim), True)], {"ind": ind}, {}
    xshape = g.pick(((2, 3), (6,), (5,), (3, 1)))
    n = int(np.prod(xshape))
    bshape = g.pick(((n,), (2, n // 2) if n % 2 == 0 else (n, 1)))
    M = g.mat((), n, n, g.pick(("well", "gauss")))
    A = M.reshape(*bshape, *xshape)
    kw = {}
    if A.ndim >= 3 and g.chance(0.3):  # dims: move one of B's dims to the end
        # (tensorsolve moves dims=(0,) to the end: A's leading dims are then B's shape)
        A = np.moveaxis(M.reshape(*bshape, *xshape), len(bshape), 0).copy()
        kw["dims"] = (0,)
    B = g.rng.standard_normal(bshape).astype(np.float32)
    return [_inp(A, g.layout(A.ndim), True), _inp(B, g.layout(B.ndim), True)], kw, {}


def gen_lu(g, op):
    m, n = g.size(), g.size()
    if op in ("lu_solve",):
        m = n
    bA, bB = _bcast_pair(g)
    if g.chance(0.04):
        m = n = g.pick((67, 97))
        bA = bB = ()
    cls = g.cond_class(singular=op != "lu_solve")
    A = g.mat(bA, m, n, cls)
    kw = {}
    ins = [_inp(A, g.layout(), cls != "singular")]
    if op == "lu_solve":
        left, adjoint = g.chance(0.7), g.chance(0.4)
        k = g.pick((1, 2, 3))
        B = g.rng.standard_normal((*bB, n, k) if left else (*bB, k, n)).astype(np.float32)
        ins.append(_inp(B, g.layout(), True))
        kw = {"left": left, "adjoint": adjoint}
    elif op == "lu_factor_ex":
        kw = {"check_errors": g.chance(0.3)}
    elif op == "lu_top":
        kw = {"get_infos": g.chance(0.5)}
    if op in ("lu", "lu_factor", "lu_factor_ex") and g.chance(0.04):
        kw["pivot"] = False  # (torch's CPU has no LU without pivoting: refused by both)
    return ins, kw, {"cls": cls, "grad": cls != "singular"}


def gen_diag(g, op):
    nd = 2 + g.r(2)
    shape = tuple(g.pick((1, 2, 3, 5)) for _ in range(nd))
    a = g.rng.standard_normal(shape).astype(np.float32)
    if op == "trace":
        a = a.reshape(shape[0], -1)
        return [_inp(a, g.layout(), True)], {}, {}
    d1, d2 = g.pick(((-2, -1), (0, 1), (1, 0), (0, -1)))
    kw = {"offset": g.pick((0, 0, 1, -1, 2, -4)), "dim1": d1, "dim2": d2}
    return [_inp(a, g.layout(nd), True)], kw, {}


def gen_geqrf(g, op):
    m, n = g.size(), g.size()
    b = g.batch()
    A = g.mat(b, m, n, g.pick(("well", "gauss")))
    ins = [_inp(A, g.layout(), op == "geqrf")]
    kw = {}
    if op == "ormqr":
        left, trans = g.chance(0.5), g.chance(0.5)
        k = g.pick((1, 2, 3))
        C = g.rng.standard_normal((*b, m, k) if left else (*b, k, m)).astype(np.float32)
        ins.append(_inp(C, g.layout(), True))
        kw = {"left": left, "transpose": trans}
    elif op == "lu_unpack":
        kw = {"unpack_data": g.chance(0.8), "unpack_pivots": g.chance(0.8)}
    return ins, kw, {"cls": "gauss", "grad": op != "lu_unpack"}


def gen_products(g, op):
    if op == "chain_matmul":
        k = 1 + g.r(4)
        dims = [g.size() for _ in range(k + 1)]
        ins = [
            _inp(g.rng.standard_normal((dims[i], dims[i + 1])).astype(np.float32), g.layout(), True)
            for i in range(k)
        ]
        return ins, {}, {}
    if op == "vander":
        x = g.rng.uniform(-1.5, 1.5, (*g.batch(), g.size())).astype(np.float32)
        kw = {"N": g.pick((None, 1, 2, 3, 6))}
        return [_inp(x, g.layout(x.ndim), True)], kw, {}
    if op == "linalg_matmul":
        n, k, m = g.size(), g.size(), g.size()
        bA, bB = _bcast_pair(g)
        sa = g.pick(((*bA, n, k), (k,)))
        sb = g.pick(((*bB, k, m), (k,), (*bB, k, m)))
        ins = [
            _inp(g.rng.standard_normal(s).astype(np.float32), g.layout(len(s)), True)
            for s in (sa, sb)
        ]
        return ins, {}, {}
    # tensordot
    a_shape = [g.pick((1, 2, 3, 4)) for _ in range(1 + g.r(3))]
    d = g.r(len(a_shape) + 1)
    contracted = a_shape[len(a_shape) - d :]
    b_shape = contracted + [g.pick((1, 2, 3)) for _ in range(g.r(3))]
    if g.chance(0.5) or d == 0:
        dims = d
    else:
        dims = (list(range(len(a_shape) - d, len(a_shape))), list(range(d)))
    ins = [
        _inp(g.rng.standard_normal(sh).astype(np.float32), g.layout(len(sh)), True)
        for sh in (tuple(a_shape), tuple(b_shape))
    ]
    return ins, {"dims": dims}, {}


def gen_eig(g, op):
    n, b = g.size(), g.batch()
    return [_inp(g.mat(b, n, n, "gauss"), g.layout(), False)], {}, {}


def gen_lowrank(g, op):
    m, n = g.pick((3, 5, 7, 17)), g.pick((3, 5, 7, 17))
    b = g.pick(((), (2,)))
    r = 1 + g.r(min(m, n, 4))
    q = min(m, n, r + 1 + g.r(3))
    out = np.empty((*b, m, n))
    for idx in np.ndindex(*b):
        X = g.rng.integers(-3, 4, (m, r)).astype(float)
        Y = g.rng.integers(-3, 4, (r, n)).astype(float)
        out[idx] = X @ Y
    kw = {"q": q, "niter": g.pick((0, 1, 2, 4))}
    if op == "pca_lowrank":
        kw["center"] = g.chance(0.5)
        if kw["center"] and q < min(m, n):
            kw["q"] = q = min(m, n, q + 1)  # (centering adds at most one to the rank)
    return [_inp(out.astype(np.float32), "c", False)], kw, {"r": r}


GENS = {
    "solve": gen_solve,
    "solve_ex": gen_solve,
    "solve_triangular": gen_tri,
    "triangular_solve": gen_tri,
    "lstsq": gen_lstsq,
    "inv": gen_inv,
    "inv_ex": gen_inv,
    "det": gen_det,
    "slogdet": gen_det,
    "logdet": gen_det,
    "cholesky": gen_chol,
    "cholesky_ex": gen_chol,
    "cholesky_solve": gen_chol_solve,
    "cholesky_inverse": gen_chol_solve,
    "qr": gen_qr,
    "qr_top": gen_qr,
    "eigh": gen_eigh,
    "eigvalsh": gen_eigh,
    "svd": gen_svd,
    "svdvals": gen_svd,
    "svd_top": gen_svd,
    "pinv": gen_pinv,
    "pinverse": gen_pinv,
    "matrix_rank": gen_rank,
    "cond": gen_cond,
    "vector_norm": gen_norm,
    "matrix_norm": gen_norm,
    "norm": gen_norm,
    "norm_top": gen_norm,
    "matrix_power": gen_matrix_power,
    "matrix_exp": gen_matrix_exp,
    "multi_dot": gen_multi_dot,
    "cross": gen_cross,
    "vecdot": gen_cross,
    "householder_product": gen_householder,
    "tensorinv": gen_tensorinv,
    "tensorsolve": gen_tensorinv,
    "lu": gen_lu,
    "lu_factor": gen_lu,
    "lu_factor_ex": gen_lu,
    "lu_solve": gen_lu,
    "lu_top": gen_lu,
    "diagonal": gen_diag,
    "trace": gen_diag,
    "geqrf": gen_geqrf,
    "ormqr": gen_geqrf,
    "lu_unpack": gen_geqrf,
    "chain_matmul": gen_products,
    "vander": gen_products,
    "linalg_matmul": gen_products,
    "tensordot": gen_products,
    "eig": gen_eig,
    "eigvals": gen_eig,
    "svd_lowrank": gen_lowrank,
    "pca_lowrank": gen_lowrank,
}
# functions of several outputs whose out= (a tuple) both libraries take
OUT_TUPLE = (
    "eigh",
    "qr",
    "slogdet",
    "svd",
    "lu_factor",
    "lu_factor_ex",
    "inv_ex",
    "solve_ex",
    "cholesky_ex",
    "lu",
)
# single-output functions whose out= both libraries take (torch.linalg's and torch's names)
OUT_OK = {
    "solve": "la",
    "inv": "la",
    "det": "la",
    "cholesky": "la",
    "matrix_norm": "la",
    "vector_norm": "la",
    "norm": "la",
    "cross": "la",
    "vecdot": "la",
    "pinv": "la",
    "matrix_power": "la",
    "multi_dot": "la",
    "eigvalsh": "la",
    "svdvals": "la",
    "cond": "la",
    "matrix_rank": "la",
    "householder_product": "la",
    "tensorinv": "la",
    "tensorsolve": "la",
    "lu_solve": "la",
    "solve_triangular": "la",
    "cholesky_solve": "top",
    "cholesky_inverse": "top",
    "linalg_matmul": "la",
}
COMPLEX_OK = ("inv", "inv_ex", "solve")


def build(seed) -> dict:
    g = Gen(seed)
    op = g.pick(tuple(GENS))
    ins, kw, meta = GENS[op](g, op)
    case = {"seed": seed, "op": op, "inputs": ins, "kw": kw, "meta": meta}
    if (op in OUT_OK or op in OUT_TUPLE) and g.chance(0.12):
        meta["out"] = g.pick(("empty", "empty", "shaped"))
        if meta.get("entry") in ("top", "method"):
            meta["entry"] = "la"
        if g.chance(0.6):  # (inputs that require grad make out= refused: values otherwise)
            for i in ins:
                i["grad"] = False
    if op in COMPLEX_OK and g.chance(0.2):  # complex64 operands of the same conditioning
        for i in ins:
            a = i["a"]
            scale = 0.3 * np.abs(a).max(initial=0)
            i["a"] = (a + 1j * g.rng.standard_normal(a.shape) * scale).astype(np.complex64)
            i["kind"] = "c64"
        case["meta"]["cls"] = case["meta"].get("cls", "gauss") + "+c"
    elif op in ("det", "qr", "cholesky", "eigvalsh", "svdvals", "lstsq") and g.chance(0.04):
        for i in ins:
            i["a"] = (i["a"] + 0.5j * i["a"]).astype(np.complex64)
            i["kind"] = "c64"
        case["meta"]["complex_refused"] = True
    elif op not in ("matrix_power",) and g.chance(0.04):  # int input: refused by both
        i = ins[0]
        if i["kind"] is None:
            i["a"] = np.round(i["a"]).astype(np.int64)
            i["kind"] = "int"
            i["grad"] = False
    elif g.chance(0.06):
        i = ins[0]
        if i["kind"] is None:
            i["kind"] = "f64"  # drawn float32, given as float64
    elif g.chance(0.03):  # float16: torch's CPU refuses it for the factorizations
        for i in ins:
            if i["kind"] is None and i["a"].dtype == np.float32:
                i["a"] = i["a"].astype(np.float16)
                i["kind"] = "f16"
        meta["kind"] = "f16"
    elif op in NONFINITE_OK and g.chance(0.1) and ins[0]["a"].size and ins[0]["kind"] is None:
        a = ins[0]["a"].copy()  # a NaN or an inf
        a.reshape(-1)[g.r(a.size)] = g.pick((np.nan, np.inf, -np.inf))
        ins[0]["a"] = a
        meta["nonfinite"] = True
    if op in METHODS and g.chance(0.3):
        meta["entry"] = "method"
    return case


# ops drawn now and then with a NaN or an inf in their first input: the norms (svd-based ones
# too: a NaN raises in both), products and views; not the factorizations, whose non-finite
# results are LAPACK's pivoting accidents, nor matrix_exp (pyrite makes all of a non-finite
# matrix's exponential NaN, its docstring; torch's squarings leave zeros and infs) (and torch 2.13's eig corrupts its heap on a NaN:
# "Intel oneMKL ERROR: Parameter 3 was incorrect on entry to DGEBAL", then free() aborts)
NONFINITE_OK = (
    "vector_norm",
    "matrix_norm",
    "norm",
    "norm_top",
    "cross",
    "vecdot",
    "multi_dot",
    "diagonal",
    "trace",
    "svdvals",
    "linalg_matmul",
)


# Tensor methods drawn now and then in place of the function (x.inverse(), x.cross(y, dim=...))
METHODS = {
    "inv": lambda xs, kw: xs[0].inverse(),
    "pinverse": lambda xs, kw: xs[0].pinverse(**kw),
    "matrix_power": lambda xs, kw: xs[0].matrix_power(kw["n"]),
    "matrix_exp": lambda xs, kw: xs[0].matrix_exp(),
    "qr_top": lambda xs, kw: xs[0].qr(**kw),
    "svd_top": lambda xs, kw: xs[0].svd(**kw),
    "norm_top": lambda xs, kw: xs[0].norm(**kw),
    "cross": lambda xs, kw: xs[0].cross(xs[1], **kw),
    "lu_top": lambda xs, kw: xs[0].lu(**kw),
    "cholesky_solve": lambda xs, kw: xs[0].cholesky_solve(xs[1], **kw),
    "cholesky_inverse": lambda xs, kw: xs[0].cholesky_inverse(**kw),
    "triangular_solve": lambda xs, kw: xs[1].triangular_solve(xs[0], **kw),
    "geqrf": lambda xs, kw: xs[0].geqrf(),
    "trace": lambda xs, kw: xs[0].trace(),
    "diagonal": lambda xs, kw: xs[0].diagonal(**kw),
}


# ---- running --------------------------------------------------------------------------------
def _arr(a, kind, lib):
    """The numpy array a library gets: torch float64 widens floats and complexes."""
    if lib == "t64":
        if a.dtype in (np.float32, np.float16):
            return a.astype(np.float64)
        if a.dtype == np.complex64:
            return a.astype(np.complex128)
    if kind == "f64":
        return a.astype(np.float64)
    return a


def _tensor(T, a):
    if T is torch:
        return torch.tensor(a)
    return pr.tensor(a)


def make(T, inp, lib):
    a = _arr(inp["a"], inp["kind"], lib)
    lay = inp["layout"]
    if lay == "t":
        leaf = _tensor(T, np.ascontiguousarray(np.swapaxes(a, -1, -2)))
    elif lay == "s":
        big = np.zeros(a.shape[:-1] + (2 * a.shape[-1] + 1,), a.dtype)
        big[..., 1::2] = a
        leaf = _tensor(T, big)
    else:
        leaf = _tensor(T, a)
    if inp["grad"] and inp["kind"] != "int":
        leaf.requires_grad_(True)
    if lay == "t":
        view = leaf.transpose(-2, -1)
    elif lay == "s":
        view = leaf[..., 1::2]
    else:
        view = leaf
    return leaf, view


def _dt(T, name):
    return getattr(T, name)


def call(T, op, xs, kw, meta, lib=""):
    """The op's raw output (a tensor or a tuple of them); with meta["out"], through out=: an
    empty tensor (resized) or one of the result's shape, which must be what is returned."""
    if meta.get("out"):
        return _call_out(T, op, xs, kw, meta, lib)
    return _call(T, op, xs, kw, meta, lib)


def _call_out(T, op, xs, kw, meta, lib):
    with torch.no_grad() if T is torch else pr.no_grad():
        probe = _call(T, op, [x.detach() for x in xs], kw, meta, lib)

    def one(p):
        return T.empty(0 if meta["out"] == "empty" else tuple(p.shape), dtype=p.dtype)

    o = tuple(one(p) for p in probe) if isinstance(probe, tuple) else one(probe)
    kw = dict(kw, out=o)
    res = _call(T, op, xs, kw, meta, lib)
    same = all(r is q for r, q in zip(res, o)) if isinstance(o, tuple) else res is o
    if not same:
        raise AssertionError(f"{op}(out=...) returned other tensors than out")
    return res


def _call(T, op, xs, kw, meta, lib=""):
    L = T.linalg
    kw = dict(kw)
    if meta.get("entry") == "method" and op in METHODS and "out" not in kw:
        if "dtype" in kw:
            kw["dtype"] = _dt(T, "float64" if lib == "t64" else kw["dtype"])
        return METHODS[op](xs, kw)
    if "dtype" in kw:  # (the reference computes in float64 whatever dtype asks)
        kw["dtype"] = _dt(T, "float64" if lib == "t64" else kw["dtype"])
    if op == "lstsq" and T is torch and _lstsq_quirk(xs[0].shape, xs[1].shape):
        # torch 2.13 broadcasts A's batch against B's leading dims for a batch of matrices B
        # of one dim fewer than A (a repeated solution, or a refusal): given as B[None]
        return L.lstsq(xs[0], xs[1].unsqueeze(0), **kw)
    if op in ("solve", "solve_ex", "solve_triangular", "lstsq", "inv", "inv_ex"):
        return getattr(L, op)(*xs, **kw)
    if op == "triangular_solve":
        return T.triangular_solve(xs[1], xs[0], **kw)
    if op in ("det", "slogdet", "logdet"):
        entry = meta.get("entry", "la")
        if entry == "la":
            return getattr(L, op)(xs[0])
        if entry == "method":
            return getattr(xs[0], op)()
        return getattr(T, op)(xs[0])
    if op == "cholesky":
        if meta.get("entry") == "top":
            return T.cholesky(xs[0], upper=kw["upper"])
        return L.cholesky(xs[0], **kw)
    if op in ("cholesky_ex", "eigh", "eigvalsh", "svd", "svdvals", "pinv", "matrix_rank"):
        return getattr(L, op)(xs[0], **kw)
    if op == "cholesky_solve":
        return T.cholesky_solve(xs[0], xs[1], **kw)
    if op == "cholesky_inverse":
        return T.cholesky_inverse(xs[0], **kw)
    if op == "qr":
        return L.qr(xs[0], **kw)
    if op == "qr_top":
        return T.qr(xs[0], **kw)
    if op == "svd_top":
        return T.svd(xs[0], **kw)
    if op == "pinverse":
        return T.pinverse(xs[0], **kw)
    if op == "cond":
        p = kw["p"]
        grad = xs[0].requires_grad and xs[0].numel() > 0
        if T is torch and p in ("fro", 1, -1, INF, -INF) and grad:
            # torch 2.13's cond backward raises for these (its own in-place masked_fill_ on
            # inv_ex's output): its definition ||A||·||A^-1||, for the invertible A drawn
            res = L.matrix_norm(xs[0], p) * L.matrix_norm(L.inv(xs[0]), p)
            if kw.get("out") is not None:  # (torch's cond takes out= with grad: a copy)
                return kw["out"].resize_(res.shape).copy_(res)
            return res
        return L.cond(xs[0], **kw)
    if op in ("vector_norm", "matrix_norm", "norm"):
        return getattr(L, op)(xs[0], **kw)
    if op == "norm_top":
        return T.norm(xs[0], **kw)
    if op == "matrix_power":
        return L.matrix_power(xs[0], kw["n"])
    if op == "matrix_exp":
        return L.matrix_exp(xs[0])
    if op == "multi_dot":
        return L.multi_dot(xs)
    if op in ("cross", "vecdot"):
        return getattr(L, op)(xs[0], xs[1], **kw)
    if op == "householder_product":
        return L.householder_product(xs[0], xs[1])
    if op == "tensorinv":
        return L.tensorinv(xs[0], **kw)
    if op == "tensorsolve":
        return L.tensorsolve(xs[0], xs[1], **kw)
    if op in ("lu", "lu_factor", "lu_factor_ex"):
        return getattr(L, op)(xs[0], **kw)
    if op == "lu_top":
        return T.lu(xs[0], **kw)
    if op == "lu_solve":
        LU, piv = L.lu_factor(xs[0])
        return L.lu_solve(LU, piv, xs[1], **kw)
    if op == "diagonal":
        return L.diagonal(xs[0], **kw)
    if op == "trace":
        return T.trace(xs[0])
    if op == "geqrf":
        return T.geqrf(xs[0])
    if op == "ormqr":
        a, tau = T.geqrf(xs[0])
        return T.ormqr(a, tau, xs[1], **kw)
    if op == "lu_unpack":
        LU, piv = L.lu_factor(xs[0])
        return T.lu_unpack(LU, piv, **kw)
    if op == "chain_matmul":
        return T.chain_matmul(*xs)
    if op == "vander":
        return L.vander(xs[0], **kw)
    if op == "linalg_matmul":
        return L.matmul(xs[0], xs[1], **kw)
    if op == "tensordot":
        return T.tensordot(xs[0], xs[1], **kw)
    if op in ("eig", "eigvals"):
        return getattr(L, op)(xs[0])
    if op in ("svd_lowrank", "pca_lowrank"):
        if T is torch:
            torch.manual_seed(0)
        else:
            pr.manual_seed(0)
        return getattr(T, op)(xs[0], **kw)
    raise AssertionError(op)


def _mT(t):
    return t.transpose(-2, -1)


def _lstsq_quirk(sa, sb) -> bool:
    """B of one dim fewer than A that is not a batch of vectors (A's shape without its last)."""
    return len(sb) == len(sa) - 1 and len(sb) >= 2 and tuple(sb) != tuple(sa[:-1])


def _sgn(T, d):
    """sign(d) with 0 -> 1 (a gauge fix that is constant a.e.)."""
    s = d.detach().sign()
    return s + (s == 0).to(s.dtype)


def readout(T, op, out, xs, kw, meta) -> dict:
    """Name -> tensor: the raw outputs where unique, gauge-invariant quantities otherwise."""
    if op in ("solve_ex", "inv_ex", "cholesky_ex", "lu_factor_ex"):
        vals = {"info": out[-1]}
        if meta.get("cls") in ("singular", "notpd") or bool((out[-1] != 0).any()):
            return vals  # (the factors of a failed factorization are LAPACK's leftovers)
        if op == "lu_factor_ex":
            vals.update(LU=out[0], pivots=out[1])
            return vals
        vals["X"] = out[0]
        return vals
    if op in ("solve", "inv", "matrix_exp", "matrix_power", "cholesky_solve", "cholesky_inverse"):
        return {"X": out}
    if op == "triangular_solve":
        return {"X": out[0], "A": out[1]}
    if op in ("solve_triangular", "cholesky", "pinv", "pinverse", "cond", "multi_dot"):
        return {"X": out}
    if op in ("det", "logdet"):
        return {"X": out}
    if op == "slogdet":
        return {"sign": out[0], "logabsdet": out[1]}
    if op == "lstsq":
        sol, res, rank, sv = out
        return {"X": sol, "residuals": res, "rank": rank, "S": sv}
    if op in ("qr", "qr_top"):
        Q, R = out
        m, n = xs[0].shape[-2], xs[0].shape[-1]
        k = min(m, n)
        d = _sgn(T, R.diagonal(0, -2, -1)[..., :k])
        vals = {"DR": R[..., :k, :] * d.unsqueeze(-1), "R_shape": R}
        if Q.numel() or Q.ndim > 1:
            Qk = Q[..., :, :k]
            vals["QD"] = Qk * d.unsqueeze(-2)
            if Q.shape[-1] > k:
                Q2 = Q[..., :, k:]
                vals["Qperp"] = Q2 @ _mT(Q2)
                vals["QtQ"] = _mT(Q) @ Q
        return vals
    if op == "eigh":
        w, V = out
        vals = {"w": w, "rec": (V * w.unsqueeze(-2)) @ _mT(V), "VtV": _mT(V) @ V}
        if meta["gap"] > 0:
            vals["V2"] = V * V
        return vals
    if op == "eigvalsh":
        return {"w": out}
    if op in ("svd", "svd_top"):
        U, S, Vx = out
        if op == "svd_top" and not kw.get("compute_uv", True):
            return {"S": S, "U": U, "V": Vx}
        Vh = _mT(Vx) if op == "svd_top" else Vx
        k = S.shape[-1]
        Uk, Vhk = U[..., :, :k], Vh[..., :k, :]
        vals = {"S": S, "rec": (Uk * S.unsqueeze(-2)) @ Vhk, "UtU": _mT(U) @ U}
        vals["VVt"] = Vh @ _mT(Vh)
        if meta.get("cls") != "rankdef":
            # u_i v_i^T for each i: (*, k, m, n)
            vals["uv"] = _mT(Uk).unsqueeze(-1) * Vhk.unsqueeze(-2)
        return vals
    if op == "svdvals":
        return {"S": out}
    if op == "matrix_rank":
        return {"rank": out}
    if op in ("vector_norm", "matrix_norm", "norm", "norm_top", "cross", "vecdot"):
        return {"X": out.resolve_conj() if T is torch else out}
    if op in ("householder_product", "tensorinv", "tensorsolve", "diagonal", "trace"):
        return {"X": out}
    if op in ("lu", "lu_top", "lu_factor"):
        if op == "lu":
            P, Lf, Uf = out
            return {"P": P, "L": Lf, "U": Uf, "PLU": P @ Lf @ Uf}
        vals = {"LU": out[0], "pivots": out[1]}
        if op == "lu_top" and kw.get("get_infos"):
            vals["info"] = out[2]
        return vals
    if op in ("lu_solve", "chain_matmul", "vander", "linalg_matmul", "tensordot", "ormqr"):
        return {"X": out}
    if op == "geqrf":
        return {"a": out[0], "tau": out[1]}
    if op == "lu_unpack":
        return {"P": out[0], "L": out[1], "U": out[2]}
    if op in ("eig", "eigvals"):
        w = out[0] if op == "eig" else out
        return {"w_sorted": T.view_as_real(w.resolve_conj() if T is torch else w)}
    if op in ("svd_lowrank", "pca_lowrank"):
        Uq, S, V = out
        r = meta["r"]
        return {"S_r": S[..., :r], "rec": (Uq * S.unsqueeze(-2)) @ _mT(V)}
    raise AssertionError(op)


GRAD_KEYS = {
    "geqrf": ("a",),
    "qr": ("DR", "QD"),
    "qr_top": ("DR", "QD"),
    "eigh": ("w", "V2"),
    "svd": ("S", "uv"),
    "svd_top": ("S", "uv"),
    "lu": ("L", "U"),
    "lu_top": ("LU",),
    "lu_factor": ("LU",),
    "lu_factor_ex": ("LU",),
    "slogdet": ("logabsdet",),
    "lstsq": ("X",),
    "triangular_solve": ("X",),
    "solve_ex": ("X",),
    "inv_ex": ("X",),
    "cholesky_ex": ("X",),
}
NO_GRAD = ("matrix_rank", "eig", "eigvals", "svd_lowrank", "pca_lowrank")


def _np(t):
    t = t.detach()
    if isinstance(t, torch.Tensor):
        t = t.resolve_conj()
    if t.is_complex():
        return t.numpy().astype(np.complex128)
    if t.dtype == (torch.bool if isinstance(t, torch.Tensor) else pr.bool):
        return t.numpy().astype(np.int64)
    return t.numpy().astype(np.float64) if t.dtype.is_floating_point else t.numpy().astype(np.int64)


def _flat(out):
    return list(out) if isinstance(out, tuple) else [out]


def _dtname(t):
    return str(t.dtype).replace("torch.", "").replace("pyrite.", "")


class Run:
    """A case on one library ("t64", "t32", "pr"): raw output shapes and dtypes, readouts,
    gradients; or the error raised and where."""

    def __init__(self, case, lib):
        self.case, self.lib = case, lib
        self.T = pr if lib == "pr" else torch
        self.error = None
        self.raw = []
        self.vals = {}
        self.grads = []

    def go(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                self._go()
            except _Phase as e:
                self.error = e.args
        return self

    def _go(self):
        c, T = self.case, self.T
        op, kw, meta = c["op"], c["kw"], c["meta"]
        made = [self.phase("inputs", lambda i=i: make(T, i, self.lib)) for i in c["inputs"]]
        leaves = [m[0] for m in made]
        xs = [m[1] for m in made]
        out = self.phase("forward", lambda: call(T, op, xs, kw, meta, self.lib))
        self.raw = [(tuple(t.shape), _dtname(t)) for t in _flat(out)]
        vals = self.phase("readout", lambda: readout(T, op, out, xs, kw, meta))
        self.vals = {k: _np(v) for k, v in vals.items()}
        if not self.wants_grad(leaves, vals):
            return
        keys = GRAD_KEYS.get(op, ("X",))
        keys = [k for k in keys if k in vals and vals[k].requires_grad]
        if not keys:
            return
        loss = None
        for i, k in enumerate(keys):
            v = vals[k]
            if v.is_complex():
                v = T.view_as_real(v.resolve_conj() if T is torch else v)
            rng = np.random.default_rng([c["seed"], i])
            w = rng.standard_normal(tuple(v.shape))
            w = _tensor(T, w.astype(np.float64 if self.lib == "t64" else np.float32))
            term = (v * w).sum()
            loss = term if loss is None else loss + term
        self.phase("backward", lambda: loss.backward())
        for leaf in leaves:
            gr = leaf.grad
            if gr is not None and gr.is_complex():
                gr = T.view_as_real(gr.resolve_conj() if T is torch else gr)
            self.grads.append(None if gr is None else _np(gr))

    def wants_grad(self, leaves, vals):
        c = self.case
        if c["op"] in NO_GRAD or not c["meta"].get("grad", True):
            return False
        if c["meta"].get("kind") == "f16":
            return False
        if not any(getattr(leaf, "requires_grad", False) for leaf in leaves):
            return False
        # a non-finite reference value: no gradient to compare
        return all(np.isfinite(v).all() for v in self.vals.values() if v.dtype.kind in "fc")

    def phase(self, name, fn):
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 (both sides' errors are the subject)
            raise _Phase(name, type(e), str(e)[:300]) from None


class _Phase(Exception):
    pass


# ---- tolerances ------------------------------------------------------------------------------
def _svals64(a):
    a = np.asarray(a, np.complex128 if np.iscomplexobj(a) else np.float64)
    if a.size == 0:
        return np.zeros(a.shape[:-2] + (0,))
    if not np.isfinite(a).all():  # (a NaN or inf input: its results are compared as
        return np.ones(a.shape[:-2] + (min(a.shape[-2:]),))  # non-numbers, finite ones freely)
    return np.linalg.svd(a, compute_uv=False)


def _kappa(a):
    """The largest condition number over the batch (inf for a singular matrix)."""
    s = _svals64(a)
    if s.size == 0:
        return 1.0
    lo = s[..., -1]
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.where(lo > 0, s[..., 0] / np.where(lo > 0, lo, 1), np.inf)
    k = np.where(s[..., 0] == 0, 1.0, k)
    return float(k.max())


def _svd_gap_kappa(a):
    """sigma_1 / (the smallest gap between singular values, sigma_min too for a non-square
    matrix): how much the singular vectors, and so the gradients of singular values, move."""
    s = _svals64(a)
    if s.size == 0:
        return 1.0
    gaps = [np.abs(np.diff(s, axis=-1)).min()] if s.shape[-1] > 1 else []
    if a.shape[-1] != a.shape[-2]:
        gaps.append(s[..., -1].min())
    gap = min(gaps) if gaps else np.inf
    return float(max(1.0, s.max() / gap)) if gap > 0 else np.inf


def _norm2(a):
    s = _svals64(a)
    return float(s.max()) if s.size else 0.0


def _view(inp):
    return inp["a"]


def budgets(case, ref):
    """{readout: (kappa, scale or None, u)} and the gradient kappa (see the docstring)."""
    op, meta, kw = case["op"], case["meta"], case["kw"]
    ins = case["inputs"]
    a0 = _view(ins[0]).astype(np.complex128 if ins[0]["kind"] == "c64" else np.float64)
    u = U16 if meta.get("kind") == "f16" else U32  # (float16 operands: its rounding)
    b = {}
    gk = 1.0
    kap = _kappa(a0) if a0.ndim >= 2 and op not in ("multi_dot",) else 1.0
    kapf = kap if math.isfinite(kap) else 1.0
    if op in ("solve", "solve_ex", "inv", "inv_ex", "tensorinv", "tensorsolve"):
        if op in ("tensorinv", "tensorsolve"):  # (the matrix: A's elements, square)
            side = int(round(math.sqrt(a0.size)))
            kapf = _kappa(a0.reshape(side, side)) if a0.size else 1.0
        b = {"X": (kapf, None)}
        gk = kapf * kapf
    elif op in ("solve_triangular", "triangular_solve"):
        A = a0.copy()
        A = np.triu(A) if kw["upper"] else np.tril(A)
        if kw["unitriangular"]:
            idx = np.arange(A.shape[-1])
            A[..., idx, idx] = 1
        kapf = _kappa(A)
        b = {"X": (kapf, None), "A": (1.0, None)}
        gk = kapf * kapf
    elif op == "lstsq":
        m, n = a0.shape[-2], a0.shape[-1]
        if meta["cls"] == "rankdef" and a0.size:
            s = _svals64(a0)
            kapf = float((s[..., 0] / np.where(s > 1e-3 * s[..., :1], s, np.inf).min(-1)).max())
        k2 = kapf * kapf if m != n else kapf
        b = {"X": (k2, None), "residuals": (k2, None), "S": (1.0, None)}
        gk = k2 * kapf
    elif op in ("det", "logdet", "slogdet"):
        s = _svals64(a0)
        n = a0.shape[-1]
        if n and s.size:
            adj = float((s[..., 0] * np.prod(s[..., :-1], -1)).max())
            dmax = float(np.abs(ref.vals.get("X", np.zeros(1))).max())
            b = {"X": (1.0, max(adj, dmax)), "logabsdet": (kapf, 1.0), "sign": (0.0, 1.0)}
            if op == "logdet":
                b["X"] = (kapf, 1.0)
        gk = kapf
    elif op in ("cholesky", "cholesky_ex", "cholesky_solve", "cholesky_inverse"):
        if op in ("cholesky_solve", "cholesky_inverse"):
            kapf = _kappa(a0) ** 2
        b = {"X": (kapf, None)}
        gk = kapf * kapf
    elif op in ("qr", "qr_top"):
        # Q and R (and their gradient) move with the first k columns' conditioning (a wide
        # A's square part A1: torch documents the gradient as defined where A1 is full rank)
        k = min(a0.shape[-2:])
        kapf = 1.0
        if k and a0.size:
            s1 = _svals64(a0)[..., 0]
            sk = _svals64(a0[..., :, :k])[..., -1]
            kapf = float(np.max(s1 / np.maximum(sk, 1e-300), initial=1.0))
        b = {"DR": (kapf, None), "QD": (kapf, None), "Qperp": (kapf, None), "QtQ": (1.0, 1.0)}
        gk = kapf * kapf
    elif op in ("eigh", "eigvalsh"):
        A = np.tril(a0) + np.swapaxes(np.tril(a0, -1), -1, -2)
        if meta["uplo"] in ("U", "u"):
            A = np.triu(a0) + np.swapaxes(np.triu(a0, 1), -1, -2)
        nrm = _norm2(A)
        w = np.linalg.eigvalsh(A) if A.size else np.zeros(1)
        gaps = np.diff(w, axis=-1) if w.shape[-1] > 1 else np.full(1, np.inf)
        gap = float(gaps.min()) if gaps.size else np.inf
        kv = max(1.0, nrm / gap) if gap > 0 else np.inf
        b = {"w": (1.0, nrm), "rec": (1.0, nrm), "VtV": (1.0, 1.0), "V2": (kv, 1.0)}
        gk = kv * kv
    elif op in ("svd", "svdvals", "svd_top"):
        s = _svals64(a0)
        nrm = float(s.max()) if s.size else 0.0
        m, n = a0.shape[-2], a0.shape[-1]
        gaps = [np.abs(np.diff(s, axis=-1)).min() if s.shape[-1] > 1 else np.inf]
        if m != n and s.size:
            gaps.append(s[..., -1].min())
        gap = float(min(gaps)) if s.size else np.inf
        kv = max(1.0, nrm / gap) if gap > 0 else np.inf
        b = {"S": (1.0, nrm), "rec": (1.0, nrm), "UtU": (1.0, 1.0), "VVt": (1.0, 1.0)}
        b.update(uv=(kv, 1.0), U=(0.0, 1.0), V=(0.0, 1.0))
        gk = kv * kv
    elif op in ("pinv", "pinverse"):
        if meta["cls"] == "rankdef" and a0.size:
            s = _svals64(a0)
            kapf = float((s[..., 0] / np.where(s > 1e-3 * s[..., :1], s, np.inf).min(-1)).max())
        b = {"X": (kapf, None)}
        gk = kapf * kapf
    elif op == "cond":
        b = {"X": (kapf, None)}
        gk = kapf * kapf * _svd_gap_kappa(a0)
    elif op == "matrix_power":
        p = kw["n"]
        if p >= 0:
            absA = np.abs(a0)
            P = np.broadcast_to(np.eye(a0.shape[-1]), a0.shape).copy()
            for _ in range(p):
                P = P @ absA
            b = {"X": (max(p, 1), float(P.max()) if P.size else 0.0)}
        else:
            b = {"X": (abs(p) * kapf, None)}
        gk = (abs(p) + 1) * kapf * (kapf if p < 0 else 1)
    elif op == "matrix_exp":
        b = {"X": (1.0 + _norm2(a0), None)}
        gk = 1.0 + _norm2(a0)
    elif op in ("lu", "lu_factor", "lu_factor_ex", "lu_top", "lu_solve"):
        b = {k: (kapf, None) for k in ("L", "U", "LU", "X")}
        b["PLU"] = (1.0, None)
        gk = kapf * kapf
    elif op in ("geqrf", "ormqr"):
        b = {"a": (kapf, None), "tau": (kapf, None), "X": (kapf, None)}
        gk = kapf * kapf
    elif op == "lu_unpack":
        b = {k: (kapf, None) for k in ("L", "U")}
    elif op in ("svd_lowrank", "pca_lowrank"):
        A = a0
        if kw.get("center"):
            A = a0 - a0.mean(-2, keepdims=True)
        s = _svals64(A)
        r = meta["r"]
        kl = float((s[..., 0] / np.maximum(s[..., r - 1], 1e-300)).max())
        b = {"S_r": (kl, float(s.max())), "rec": (kl, float(s.max()))}
    elif op in ("chain_matmul", "linalg_matmul", "tensordot"):
        b = {"X": (len(ins), _abs_product_scale(op, ins, kw))}
    elif op == "householder_product":
        b = {"X": (4.0, None)}
        gk = 4.0
    elif op == "multi_dot":
        P = None
        for i in ins:
            a = np.abs(i["a"].astype(np.float64))
            a = a[None, :] if (P is None and a.ndim == 1) else a
            P = a if P is None else P @ a
        b = {"X": (len(ins), float(np.max(P)) if P.size else 0.0)}
    elif op in ("cross", "vecdot"):
        sc = float(np.abs(ins[0]["a"]).max(initial=0) * np.abs(ins[1]["a"]).max(initial=0))
        b = {"X": (1.0, sc * max(ins[0]["a"].shape[kw["dim"]], 2))}
    elif op in ("matrix_norm", "norm", "norm_top") and a0.ndim >= 2:
        b = {"X": (1.0, None)}
        o = kw.get("ord", kw.get("p"))
        dim = kw.get("dim")
        if o in (2, -2, "nuc") and (dim is None or isinstance(dim, tuple)):
            d = (-2, -1) if dim is None else dim
            gk = _svd_gap_kappa(np.moveaxis(a0, d, (-2, -1))) if len(d) == 2 else 1.0
    return b, gk, u


def _abs_product_scale(op, ins, kw):
    """max of the product of |operands| (the sum of |terms| bounds a product's rounding)."""
    A = [np.abs(i["a"].astype(np.float64)) for i in ins]
    if op == "chain_matmul":
        P = A[0]
        for a in A[1:]:
            P = P @ a
        return float(P.max(initial=0))
    if op == "linalg_matmul":
        return float(np.max(np.matmul(A[0], A[1]), initial=0))
    return float(np.max(np.tensordot(A[0], A[1], kw["dims"]), initial=0))


# ---- comparing ------------------------------------------------------------------------------
def _close(p, r, t, kappa, scale, u, n):
    """'' or what differs (see the docstring's rule)."""
    if p.shape != r.shape:
        return f"shape {p.shape} vs {r.shape}"
    if p.size == 0:
        return ""
    if r.dtype.kind in "iub":
        if not np.array_equal(p, r):
            return f"values {p.ravel()[:8]} vs {r.ravel()[:8]}"
        return ""
    if r.dtype.kind == "f":  # (a value past float32's range is inf in any float32 result)
        big = np.isfinite(r) & (np.abs(r) > np.finfo(np.float32).max)
        r = np.where(big, np.sign(r) * np.inf, r)
    fin_r = np.isfinite(r)
    fin_p = np.isfinite(p)
    if not np.array_equal(fin_r, fin_p):
        # (torch float32's own non-numbers at the same places: float32's range, as a product
        # of pivots that overflows to inf before a zero pivot makes it NaN)
        same_t = t is not None and t.shape == p.shape and np.array_equal(np.isfinite(t), fin_p)
        if not same_t:
            return f"non-finite at other places: {p.ravel()[:6]} vs {r.ravel()[:6]}"
        fin_r = fin_r & fin_p
    nf = ~fin_r & ~np.isfinite(r)
    if nf.any():
        pr_, rr = p[nf], r[nf]
        same = (np.isnan(pr_) & np.isnan(rr)) | (pr_ == rr)
        if not same.all():
            return f"non-finite values differ: {pr_[:6]} vs {rr[:6]}"
    if not fin_r.any():
        return ""
    err = float(np.abs(p[fin_r] - r[fin_r]).max())
    with np.errstate(invalid="ignore"):
        ok_t = t is not None and t.shape == r.shape
        spread = float(np.abs(t[fin_r] - r[fin_r]).max()) if ok_t else 0.0
    if not math.isfinite(spread):
        spread = 0.0
    sc = scale if scale is not None and math.isfinite(scale) else None
    sc = float(np.abs(r[fin_r]).max()) if sc is None else sc
    K = 16 * (n + 2)
    allowed = K * u * kappa * sc + 4 * spread + 1e-30
    if not err <= allowed:
        return f"max err {err:.3g} > allowed {allowed:.3g} (kappa {kappa:.3g}, scale {sc:.3g})"
    return ""


def _pr_dtype(name):
    return {"float64": "float32", "int64": "int32", "complex128": "complex64"}.get(name, name)


def _size(case):
    n = 1
    for i in case["inputs"]:
        if i["a"].ndim:
            n = max(n, *i["a"].shape[-2:])
    return min(n, 64)


def check(case):
    with np.errstate(all="ignore"):
        return _check(case)


def _check(case):
    ref = Run(case, "t64").go()
    t32 = Run(case, "t32").go()
    got = Run(case, "pr").go()
    f64 = any(i["kind"] == "f64" for i in case["inputs"]) or case["kw"].get("dtype") == "float64"
    # ---- raising (a raise at backward on the side(s) that raise still compares the values)
    later = _raising(case, ref, t32, got, f64)
    if later is not None and later[0] == "now":
        return later[1]
    if ref.error is not None and ref.error[0] != "backward":
        return "skip", f"torch float64 raises where float32 does not: {ref.error}"
    res = _values(case, ref, t32, got, f64, grads=later is None)
    if later is not None and res[0] == "ok":
        return later[1]
    return res


def _raising(case, ref, t32, got, f64):
    """None (neither raises), ("now", verdict), or ("later", verdict) where the raising came
    only at backward (the forward values are compared first)."""
    st = _raise_verdict(case, ref, t32, got, f64)
    if st is None:
        return None
    phases = {e[0] for e in (t32.error, got.error) if e is not None}
    if phases == {"backward"} and st[0] != "fail":
        return ("later", st)
    return ("now", st)


def _raise_verdict(case, ref, t32, got, f64):
    meta = case["meta"]
    if t32.error is not None or got.error is not None:
        refused = got.error is not None and got.error[1].__name__ in ("DtypeError", "ComplexError")
        if meta.get("complex_refused") and refused:
            return "intentional", "complex64 input to a real-only factorization; refused"
        if t32.error is None:
            empty = any(i["a"].size == 0 for i in case["inputs"])
            if empty and got.error[1].__name__ in ("DtypeError", "ArgumentError"):
                return "intentional", "an empty input: pyrite checks dtypes and arguments first"
            cplx = any(i["kind"] == "c64" for i in case["inputs"])
            if case["op"] == "vecdot" and meta.get("out") and cplx:
                return "known", "complex64 vecdot(out=...) unsupported (complex_products; open)"
            if case["op"] in ("eig", "eigvals") and got.error[1].__name__ == "DtypeError":
                return "known", "linalg.eig / eigvals: pyrite has no general eigensolver (open)"
            if meta.get("out") and "don't support automatic differentiation" in got.error[2]:
                return "intentional", (
                    "out= with an input requiring grad: pyrite refuses for the functions "
                    "torch refuses it for in general (torch's pinv accepts it with atol/rtol)"
                )
            return "fail", f"pyrite raises ({got.error}) where torch does not"
        if got.error is None:
            msg = t32.error[2]
            inf_in = any(
                np.isinf(i["a"]).any() for i in case["inputs"] if i["a"].dtype.kind in "fc"
            )
            if (
                inf_in
                and "failed to converge" in msg
                and any(np.isnan(v).any() for v in got.vals.values() if v.dtype.kind == "f")
            ):
                return "intentional", (
                    "an inf into an SVD: NaN results in pyrite (_svd_parts' docstring); torch's "
                    "LAPACK returns NaN or fails to converge, by the matrix"
                )
            top = OUT_OK.get(case["op"]) == "top"
            if meta.get("out") and top and "don't support automatic differentiation" in msg:
                return "known", (
                    "out= with an input requiring grad accepted by pyrite's top-level names "
                    "(ops/outarg.py has no such check; open)"
                )
            if "driver=" in msg and "only supported on CUDA" in msg:
                return "intentional", "svd driver= accepted and ignored (svd's docstring)"
            if f64 and ("dtype" in msg or "double" in msg.lower()):
                return "intentional", "float64 mixed with float32: one dtype in pyrite"
            return "fail", f"pyrite accepts what torch refuses ({t32.error})"
        if issubclass(t32.error[1], torch.linalg.LinAlgError) and not issubclass(
            got.error[1], pr.linalg.LinAlgError
        ):
            return "fail", f"torch raises LinAlgError, pyrite {got.error}"
        if t32.error[0] != got.error[0] and "backward" in (t32.error[0], got.error[0]):
            return "fail", f"torch raises at {t32.error[0]}, pyrite at {got.error[0]}"
        return "ok", "both raise"
    return None


def _values(case, ref, t32, got, f64, grads=True):
    meta = case["meta"]
    # ---- shapes and dtypes
    if len(got.raw) != len(t32.raw):
        return "fail", f"outputs: {got.raw} vs torch {t32.raw}"
    for j, ((gs, gd), (ts, td)) in enumerate(zip(got.raw, t32.raw)):
        if gs != ts:
            return "fail", f"output shapes {got.raw} vs torch {t32.raw}"
        if gd != _pr_dtype(td):
            return "fail", f"output dtypes {got.raw} vs torch {t32.raw}"
    # ---- values
    b, gk, u = budgets(case, ref)
    n = _size(case)
    bad = []
    for k, r in ref.vals.items():
        if k not in got.vals:
            bad.append(f"{k}: missing")
            continue
        if k == "R_shape":
            continue
        kap, scale = b.get(k, (1.0, None))
        if not math.isfinite(kap):
            kap = 1e30
        d = _close(got.vals[k], r, t32.vals.get(k), kap, scale, u, n)
        if d:
            bad.append(f"{k}: {d}")
    if case["op"] == "lstsq" and bad and bad[0].startswith("residuals") and len(bad) == 1:
        B = case["inputs"][1]["a"].astype(np.float64)
        if case["inputs"][0]["a"].shape[-1] == 0 and not np.any(ref.vals["residuals"]):
            want = np.broadcast_to((B**2).sum(-2), got.vals["residuals"].shape)
            if not _close(got.vals["residuals"], want, None, 1.0, None, u, n):
                return "torch_bug", "lstsq residuals of an n = 0 system are 0 in torch, ||B||^2"
    pivots_differ = [x for x in bad if x.split(":")[0] in ("P", "L", "U", "LU", "pivots")]
    if pivots_differ and "pivots" in ref.vals or (pivots_differ and "P" in ref.vals):
        key = "pivots" if "pivots" in ref.vals else "P"
        if not np.array_equal(t32.vals[key], ref.vals[key]) or _pivot_near_tie(case):
            return "known", "an LU pivot decided by rounding (a near tie)"
    if bad:
        return "fail", "; ".join(bad)
    # ---- gradients (none where a value is past float32's range: there they are inf or NaN)
    torch_bug = ""
    f32max = float(np.finfo(np.float32).max)
    past = any(
        v.dtype.kind in "fc" and np.any(np.abs(v[np.isfinite(v)]) > f32max)
        for v in ref.vals.values()
    )
    # (nor where pyrite's and torch float32's values are both non-finite: float32's range)
    past = past or (ref.grads and not got.grads and not t32.grads)
    if (ref.grads or got.grads) and not past and grads:
        # a zero gradient where torch leaves None (the output does not depend on the input:
        # householder_product without reflectors, cond of an empty batch) counts as equal:
        # both mean a zero derivative
        rg = ref.grads or [None] * len(got.grads)
        if len(rg) != len(got.grads):
            return "fail", f"gradients: {len(got.grads)} vs torch's {len(ref.grads)}"
        gkap = gk if math.isfinite(gk) else 1e30
        for i, (gp, gr, gt) in enumerate(zip(got.grads, rg, t32.grads or rg)):
            if gr is None and gp is not None and not np.any(gp):
                continue
            if (gp is None) != (gr is None):
                return "fail", f"grad {i}: {'None' if gp is None else 'set'} vs torch's"
            if gr is None:
                continue
            if case["op"] == "det" and meta.get("cls") == "singular" and not np.any(gr):
                C = _cofactors(case)
                torch_bug = "torch's det gradient of an exactly singular matrix is 0"
                if np.abs(C).max(initial=0) > f32max:  # (cofactors past float32's range)
                    continue
                d = _close(gp, C, None, _kappa_n1(case), None, u, n)
                if d:
                    return "fail", f"det gradient vs float64 cofactors: {d}"
                continue
            # the gradient's natural size is at least |value| / |input| (an exactly zero
            # gradient made of cancelling terms, as cond's of a 1x1 matrix, is judged by that)
            a_max = float(np.abs(case["inputs"][i]["a"]).max(initial=0))
            v_max = max(
                (
                    float(np.abs(v[np.isfinite(v)]).max(initial=0))
                    for v in ref.vals.values()
                    if v.dtype.kind in "fc"
                ),
                default=0.0,
            )
            gsc = max(
                float(np.abs(gr[np.isfinite(gr)]).max(initial=0)), v_max / a_max if a_max else 0
            )
            d = _close(gp, gr, gt, gkap, gsc, u, n)
            if d:
                return "fail", f"grad of input {i}: {d}"
    if f64:
        return "intentional", "float64 narrowed to float32 (DESIGN: stored as float32)"
    if torch_bug:
        return "torch_bug", torch_bug + "; pyrite's checked against float64 cofactors"
    return "ok", ""


def _pivot_near_tie(case) -> bool:
    """Whether pyrite's first pivot that differs from float64 partial pivoting's was a
    candidate within float32's rounding of the largest: |best| - |chosen| <= K·u·max|A|, the
    elimination's absolute error (K = 16·(n + 2), growth taken as 1), in float64."""
    a = case["inputs"][0]["a"].astype(np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        piv = pr.linalg.lu_factor_ex(pr.tensor(case["inputs"][0]["a"])).pivots.numpy() - 1
    m, n = a.shape[-2], a.shape[-1]
    K = 16 * (max(m, n) + 2)
    for idx in np.ndindex(*a.shape[:-2]):
        A = a[idx].copy()
        scale = np.abs(A).max(initial=0)
        for k in range(min(m, n)):
            col = np.abs(A[k:, k])
            best = k + int(np.argmax(col))
            p = int(piv[idx][k])
            if abs(A[p, k]) < abs(A[best, k]) - K * U32 * scale:
                break  # (a clear choice pyrite missed: not a tie)
            if p != best:
                return True
            A[[k, p]] = A[[p, k]]
            if A[k, k] != 0:
                A[k + 1 :, k] /= A[k, k]
                A[k + 1 :, k + 1 :] -= np.outer(A[k + 1 :, k], A[k, k + 1 :])
    return False


def _cofactors(case):
    """The gradient of det at A: the cofactor matrix adj(A)ᵀ, float64 (any rank)."""
    inp = case["inputs"][0]
    a = inp["a"].astype(np.float64)
    n = a.shape[-1]
    C = np.zeros(a.shape)
    for i in range(n):
        for j in range(n):
            M = np.delete(np.delete(a, i, -2), j, -1)
            C[..., i, j] = (-1) ** (i + j) * (np.linalg.det(M) if n > 1 else 1.0)
    w = np.random.default_rng([case["seed"], 0]).standard_normal(a.shape[:-2])  # (the loss's)
    C = C * np.asarray(w)[..., None, None]
    if inp["layout"] == "t":  # (the leaf holds Aᵀ)
        C = np.swapaxes(C, -1, -2)
    elif inp["layout"] == "s":
        big = np.zeros(a.shape[:-1] + (2 * n + 1,))
        big[..., 1::2] = C
        C = big
    return C


def _kappa_n1(case):
    """sigma_1 / sigma_{n-1}: the conditioning of a rank n - 1 matrix's cofactors."""
    s = _svals64(case["inputs"][0]["a"])
    if s.shape[-1] < 2:
        return 1.0
    return float((s[..., 0] / np.maximum(s[..., -2], 1e-300)).max())


def describe(case) -> str:
    lines = [f"seed {case['seed']}: {case['op']} kw={case['kw']} meta={case['meta']}"]
    for i, inp in enumerate(case["inputs"]):
        a = inp["a"]
        lines.append(
            f"  input {i}: shape {a.shape} {a.dtype} kind={inp['kind']} layout={inp['layout']} "
            f"grad={inp['grad']}"
        )
    return "\n".join(lines)


def main(argv=None):
    return fuzz_driver.run(__doc__, build, check, describe, argv)


if __name__ == "__main__":
    sys.exit(main())
