"""Randomized differential fuzz of pyrite.fft, pr.stft / pr.istft and the window functions
against torch 2.13 CPU (session 46): values, shapes, dtypes, gradients, out=, and whether each
side raises.

A case is plain data drawn per seed, one of:
- a 1-D transform (fft, ifft, rfft, irfft, hfft, ihfft) of a float32 / complex64 input (now and
  then float64, float16, bfloat16, int32 or bool), 1-3 dims of awkward sizes (1, small primes,
  powers of two, 61 / 64 / 65 at the direct-product edge, 97 / 128 / 257 four-step or
  Bluestein, now and then 1009 or 1024 long), as a contiguous tensor, a transpose or a stepped
  slice, with n (None, shorter: cropped, longer: zero-padded), dim (negative too) and norm
  (None, "backward", "ortho", "forward");
- an n-D one (fft2 / ifft2 / rfft2 / irfft2 / hfft2 / ihfft2 / fftn / ifftn / rfftn / irfftn /
  hfftn / ihfftn) with s and dim (None, one, several, unordered, -1 in s);
- fftfreq / rfftfreq (n 0-20, d, dtype, requires_grad), fftshift / ifftshift (dims, repeated);
- stft (n_fft, hop_length, win_length, window None / hann / a random one, center, pad_mode,
  normalized, onesided, return_complex) of a 1-D or 2-D signal, and istft of a spectrum (torch's
  stft of a signal, or random) with length;
- a window: pr.hann / hamming / blackman / bartlett / kaiser_window (periodic, alpha / beta,
  dtype float32 / float64 / float16 / bfloat16), or one of pr.signal.windows' eleven (sym);
and, one case in six, an argument torch refuses (n or s not an int, n <= 0, repeated or
out-of-range dims, s longer than the input, a bad norm, a complex input to a real transform,
out= of the wrong kind; stft / istft lengths, windows, frame counts, return_complex; window
lengths and dtypes). Transforms get out= now and then (of the right or a wrong shape), and
a float32 / complex64 input requires grad a third of the time: the loss is <g, y> (the real
part of sum(conj(g)·y)) for a random cotangent g, and the input's gradient is compared.

Each case runs on torch float64 / complex128 (the reference), torch float32 (its distance is
shown beside pyrite's as a guide) and pyrite. Shapes, dtypes (float64 -> float32 and
complex128 -> complex64, pyrite's storage: README) and the raise/no-raise outcome must match.

Tolerance of a transform. A DFT along a dim of length n, scaled by s (1, 1/sqrt(n) or 1/n:
the mode's factor), has outputs of rms s·||x||_2 (Parseval: ||DFT x||_2 = sqrt(n)·||x||_2),
where x is one line of the (cropped) input. Its float32 error per output is then
    K·u·G·s·||x_line||_2,   u = 2^-24,
where G is the path's growth. torch's FFT (pocketfft / MKL) has G ~ log2(n); pyrite's paths
(pyrite/fft.py) are dot products: one product of length n <= 64 (a direct matrix DFT: a dot
of n terms of size |x_j|, whose rounding errors random-walk to ~u·sqrt(n)·||x||_2, i.e. the
c·u·n·max|x| of a matrix DFT), so G = sqrt(n); a four-step split n = n1·n2 adds its stages,
G = G(n1) + G(n2) + 1 (the twiddle); Bluestein's chirp convolution (a prime past 64) runs two
four-step DFTs of length m = 2^k >= 2n - 1 and three constant multiplies, G = 2·G(m) + 3. An
n-D transform adds G over its dims and multiplies their s. A complex-to-real one (irfft,
hfft) reads the Hermitian extension of its m = n//2 + 1 inputs, of norm <= sqrt(2)·||x||_2.
K = 8: the rms error of a direct DFT measured ~1·u·sqrt(n)·rms(y), and a max over up to 10^4
outputs sits ~4 sigma out; doubled for the composed stages. Every value also gets u·|ref|
(the result's own rounding) and, for an input of float16 / bfloat16 / integers, nothing more:
the reference transforms the same (rounded) values. The gradient is the adjoint transform of g
(same G and s) with ||g||_2 per line in place of ||x||_2, doubled (rfft's adjoint doubles the
non-edge bins of irfft's input: torch's convention, which the Hermitian half carries).
stft: each frame is an rfft of x·w (||x_frame·w||_2 <= max|w|·||x_frame||_2); istft divides
an overlap-add of ceil(n_fft/hop) windowed inverse transforms by the summed squared window
env_t, so its error at t is K·u·(G·s·sqrt(2)·max||X_frame||·max|w| + |y_t|·env_t)·frames/env_t.
fftfreq / rfftfreq must be torch's bit for bit (pyrite/fft.py's claim), fftshift / ifftshift
exact (they move values). Windows: pyrite computes in float32 (pr.*_window) or float64
(pr.signal.windows) and rounds once into the dtype; torch in the dtype itself, so: within
16·u32·(1 + beta)·max|w| + 1 ulp of the dtype of the float64 window.

Classified as intentional (pyrite's documented choices), counted but not failures:
- float16 / bfloat16 inputs to a transform (and to stft): torch CPU refuses them ("Unsupported
  dtype Half"; torch CUDA gives complex32 for powers of two only); pyrite, which has no
  complex32 (README: `.chalf()` raises), computes them in float32 and returns complex64 / float32
  (pyrite/fft.py's docstring). Their values are still compared.
- a complex signal to stft, or istft(return_complex=True): pyrite raises ComplexError (README
  "pyrite.fft": "A complex signal's stft raises"); torch computes them. Drawn now and then.
- fftshift / ifftshift of a 0-d tensor: torch raises "`shifts` required" (its roll of no dims);
  numpy returns the value, as pyrite does.
- float64 / complex128: stored and computed as float32 / complex64 (README).
Not generated, or classified, for torch 2.13 CPU's own limits:
- a transform over an input with an empty non-transformed dim: torch's MKL raises "Inconsistent
  configuration parameters"; pyrite returns the empty result (numpy agrees).
- stft of an empty batch (0, L): torch's reflect pad refuses a zero batch; pyrite returns (0, F,
  T) (with center=False torch agrees).
- pr.signal.windows.general_cosine(a=<tensor>): torch's emptiness check `if not a` raises on a
  tensor of several values; pyrite reads it as a sequence.
Found and fixed (tests/test_fuzz_fft46.py): n / s of bools or floats accepted (torch: TypeError)
and an int s refused with a raw TypeError; istft's frequency count and hop_length <= win_length
unchecked; istft of a two-sided spectrum into a real signal took its ifft's real part (torch
irffts the first n_fft // 2 + 1 bins); stft of an integer signal computed; a complex window to
stft refused (torch: the two-sided spectrum); signal.windows of a float M accepted.
Seeds 0:3000 after the fixes: no failure; the largest err / bound seen (--seeds 0:3000): 0.77
for transforms (torch float32's own distance there is about half pyrite's), 0.16 gradients,
0.20 stft, 0.07 istft, 0.49 windows.
Known and open: torch.kaiser_window(M, beta=b) with no `periodic` is refused by torch's argument
parser (its overloads take beta only after periodic); pyrite accepts it (pyrite/ops/misc.py, not
this area's files): not drawn (beta is drawn only with periodic given).

    .venv/bin/python scripts/fuzz_fft.py --seeds 0:300 [--show 17] [--verbose]
"""

from __future__ import annotations

import math
import sys
import warnings

import numpy as np
import torch

import pyrite as pr
from pyrite.ops.complex import ComplexError

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import fuzz_driver  # noqa: E402

U = 2.0**-24
K = 8.0
DIRECT_MAX = 64
ONE_D = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
N_D = tuple(
    f"{p}{s}" for s in ("2", "n") for p in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
)
C2R = ("irfft", "hfft", "irfft2", "hfft2", "irfftn", "hfftn")
R_IN = ("rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn")  # refuse complex input
SIZES = (1, 1, 2, 3, 4, 5, 7, 8, 11, 13, 16, 17, 31, 61, 64, 65, 97, 128)
LONG = (257, 1009, 1024, 130)
WINDOWS = ("hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window")
SWINDOWS = {
    "bartlett": {},
    "blackman": {},
    "cosine": {},
    "exponential": {"tau": 2.5},
    "gaussian": {"std": 1.7},
    "general_cosine": {"a": [0.46, 0.23, 0.31]},
    "general_hamming": {"alpha": 0.6},
    "hamming": {},
    "hann": {},
    "kaiser": {"beta": 8.6},
    "nuttall": {},
}
PAD_MODES = ("reflect", "reflect", "constant", "replicate", "circular")


# ---- the pyrite path's error growth -------------------------------------------------------
def growth(n: int) -> float:
    """G(n) of the docstring for pyrite/fft.py's path at length n."""
    if n <= DIRECT_MAX:
        return math.sqrt(n)
    f = next((f for f in range(min(DIRECT_MAX, n // 2), 1, -1) if n % f == 0), 0)
    if f:
        return growth(n // f) + growth(f) + 1.0
    m = 1 << (2 * n - 2).bit_length()
    return 2 * growth(m) + 3.0


def scale(norm, n, inverse) -> float:
    if norm in (None, "backward"):
        return 1.0 / n if inverse else 1.0
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    return 1.0 if inverse else 1.0 / n


# ---- drawing a case --------------------------------------------------------------------------
class Gen(fuzz_driver.Draws):
    def size(self, long_ok=True):
        if long_ok and self.chance(0.08):
            return self.pick(LONG)
        return self.pick(SIZES)

    def build(self) -> dict:
        c = {"seed": self.seed, "bad": self.chance(1 / 6)}
        kind = self.pick(
            ("1d",) * 6
            + ("nd",) * 4
            + ("freq", "shift", "stft", "stft", "istft", "istft", "window", "swindow")
        )
        c["kind"] = kind
        getattr(self, "draw_" + kind)(c)
        return c

    def dtype(self, op):
        d = self.pick(("float32", "complex64", "complex64", "float32", "float64") +
                      ("float16", "bfloat16", "int32", "bool", "complex128"))  # fmt: skip
        if op in R_IN and d.startswith("complex") and not self.chance(0.1):
            d = "float32"
        return d

    def data(self, shape, dtype, layout):
        """(array of the base, view spec): the input is base viewed by layout."""
        base_shape = list(shape)
        if layout == "t":
            base_shape[-1], base_shape[-2] = base_shape[-2], base_shape[-1]
        if layout == "step":
            base_shape[0] = 2 * base_shape[0]
        amp = float(self.pick((1.0, 1.0, 1e-3, 1e3)))
        a = self.rng.standard_normal(base_shape) * amp
        if dtype.startswith("complex"):
            a = a + 1j * self.rng.standard_normal(base_shape) * amp
        if dtype in ("int32",):
            a = self.rng.integers(-9, 10, base_shape)
        if dtype == "bool":
            a = self.rng.random(base_shape) < 0.5
        return np.asarray(a)

    def input(self, c, op, nd_min=1):
        nd = max(nd_min, self.pick((1, 2, 2, 3)))
        shape = [self.size(long_ok=nd == 1 or self.chance(0.3)) for _ in range(nd)]
        if nd > 1 and math.prod(shape) > 3000:  # (keeps a case under a second on lavapipe)
            shape = [min(s, 17) for s in shape]
        if self.chance(0.03):
            shape[self.r(nd)] = 0
        c["dtype"] = self.dtype(op)
        c["layout"] = self.pick(("c", "c", "t", "step")) if nd >= 2 else self.pick(("c", "step"))
        c["shape"] = tuple(shape)
        c["x"] = self.data(shape, c["dtype"], c["layout"])
        c["grad"] = c["dtype"] in ("float32", "complex64") and self.chance(0.35) and 0 not in shape
        c["norm"] = self.pick((None, "backward", "ortho", "forward"))
        c["out"] = self.pick((None, None, None, None, "same", "empty", "wrong"))
        c["gseed"] = self.r(2**31)

    def draw_1d(self, c):
        c["op"] = op = self.pick(ONE_D)
        self.input(c, op)
        nd = len(c["shape"])
        c["dim"] = self.r(nd) - (nd if self.chance(0.5) else 0)
        have = c["shape"][c["dim"]]
        c["n"] = self.pick((None, None, max(1, have // 2), have + self.pick((1, 3, 8)), 1))
        if c["bad"]:
            c["badarg"] = self.pick(("n0", "nfloat", "nbool", "dim", "norm", "complex", "outkind"))

    def draw_nd(self, c):
        c["op"] = op = self.pick(N_D)
        two = op.endswith("2")
        self.input(c, op, nd_min=2 if two else 1)
        nd = len(c["shape"])
        if two:
            c["dim"] = self.pick(((-2, -1), (-2, -1), (0, 1), (1, 0), (-1, -2)))
            if nd > 2 and self.chance(0.5):
                c["dim"] = self.pick(((0, 2), (2, 0), (-3, -1)))
        else:
            k = 1 + self.r(nd)
            dims = [int(v) for v in self.rng.permutation(nd)[:k]]
            c["dim"] = self.pick((None, tuple(dims), tuple(d - nd for d in dims), dims[0]))
        dims = (
            [c["dim"]] if isinstance(c["dim"], int)
            else list(c["dim"]) if c["dim"] is not None else list(range(nd))
        )  # fmt: skip
        c["s"] = None
        if self.chance(0.5):
            s = []
            for d in dims:
                have = c["shape"][d]
                s.append(self.pick((-1, have, max(1, have // 2), have + 2, 1, 5)))
            c["s"] = tuple(s)
            if c["dim"] is None and self.chance(0.5):  # s alone: its last len(s) dims
                c["s"] = c["s"][-max(1, self.r(len(s) + 1)) :]
        if c["bad"]:
            c["badarg"] = self.pick(("repeat", "s_long", "s_float", "s_len", "s0", "norm",
                                     "complex", "dim", "outkind", "s_int"))  # fmt: skip

    def draw_freq(self, c):
        c["op"] = self.pick(("fftfreq", "rfftfreq"))
        c["n"] = self.r(21)
        c["d"] = self.pick((1.0, 0.3, 2.5, -1.0, 1e-3, 7.0))
        c["fdtype"] = self.pick((None, "float32", "float16", "bfloat16", "float64"))
        c["rg"] = self.chance(0.2)
        if c["bad"]:
            c["badarg"] = self.pick(("nneg", "nfloat", "int_dtype"))

    def draw_shift(self, c):
        c["op"] = self.pick(("fftshift", "ifftshift"))
        nd = self.pick((0, 1, 2, 3))
        c["shape"] = tuple(self.size(long_ok=False) for _ in range(nd))
        c["dtype"] = self.pick(("float32", "complex64", "int32"))
        c["layout"] = "t" if nd >= 2 and self.chance(0.3) else "c"
        c["x"] = self.data(c["shape"], c["dtype"], c["layout"])
        opts = [None]
        if nd:
            opts += [self.r(nd) - nd, tuple(range(nd)), (0, 0)[: 1 + (nd > 0)], (-1, 0)]
        c["dim"] = self.pick(opts)
        if c["bad"]:
            c["badarg"] = self.pick(("dim_oob", "dim_float"))

    def draw_stft(self, c):
        c["n_fft"] = n_fft = self.pick((1, 2, 4, 5, 8, 16, 16, 31, 32, 64, 65, 100))
        c["hop"] = self.pick((None, None, 1, max(1, n_fft // 3), n_fft, n_fft + 3))
        c["win_length"] = self.pick((None, None, n_fft, max(1, n_fft - 3), max(1, n_fft // 2)))
        c["window"] = self.pick((None, "hann", "hann", "rand"))
        c["center"] = self.chance(0.7)
        c["pad_mode"] = self.pick(PAD_MODES)
        c["normalized"] = self.chance(0.3)
        c["onesided"] = self.pick((None, None, True, False))
        c["return_complex"] = self.pick((True, True, True, False))
        L = self.pick((n_fft, n_fft + 1, 2 * n_fft + 3, 3 * n_fft + 7, 301, 97))
        c["shape"] = (L,) if self.chance(0.5) else (self.pick((1, 2, 3)), L)
        c["dtype"] = self.pick(("float32",) * 8 + ("float64", "float16", "complex64"))
        c["layout"] = "step" if self.chance(0.2) else "c"
        c["x"] = self.data(c["shape"], c["dtype"], c["layout"])
        c["wrand"] = self.rng.uniform(0.2, 1.5, 200)
        c["grad"] = c["dtype"] == "float32" and self.chance(0.35)
        c["gseed"] = self.r(2**31)
        if c["bad"]:
            c["badarg"] = self.pick(("hop0", "win_long", "win_size", "rc_none", "int", "ndim3",
                                     "nfft_long", "wcomplex"))  # fmt: skip

    def draw_istft(self, c):
        self.draw_stft(c)
        c["dtype"] = "float32"
        c["x"] = self.data(c["shape"], "float32", "c")
        c["layout"] = "c"
        c["center"] = c["center"] or c["window"] is None or self.chance(0.5)
        c["return_complex"] = True
        c["random_spec"] = self.chance(0.25)
        c["length"] = self.pick((None, None, c["shape"][-1], c["shape"][-1] + 5,
                                 max(1, c["shape"][-1] // 2)))  # fmt: skip
        c["i_rc"] = self.chance(0.05)
        if c["bad"]:
            c["badarg"] = self.pick(("wrongF", "onesided_conflict", "real", "win_size", "frames0",
                                     "ndim4", "hop0"))  # fmt: skip

    def draw_window(self, c):
        c["op"] = self.pick(WINDOWS)
        c["M"] = self.pick((0, 1, 2, 3, 4, 5, 7, 8, 9, 31, 64, 257))
        c["periodic"] = self.pick((None, True, False))
        c["wdtype"] = self.pick((None, "float32", "float64", "float16", "bfloat16"))
        c["extra"] = {}
        if c["op"] == "hamming_window" and c["periodic"] is not None and self.chance(0.5):
            c["extra"] = {"alpha": 0.6, "beta": 0.3}
        if c["op"] == "kaiser_window" and c["periodic"] is not None and self.chance(0.5):
            c["extra"] = {"beta": self.pick((0.0, 5.0, 8.6, 14.0))}
        if c["bad"]:
            c["badarg"] = self.pick(("neg", "float", "int_dtype"))

    def draw_swindow(self, c):
        c["op"] = self.pick(tuple(SWINDOWS))
        c["M"] = self.pick((0, 1, 2, 3, 4, 5, 7, 8, 9, 31, 64, 257))
        c["sym"] = self.chance(0.5)
        c["wdtype"] = self.pick((None, "float32", "float64"))
        c["rg"] = self.chance(0.2)
        if c["bad"]:
            c["badarg"] = self.pick(("neg", "float", "dtype16"))


# ---- running a case in one library ------------------------------------------------------------
def _dt(L, name):
    if name is None:
        return None
    return getattr(L, name)


def make_input(L, c, ref=False, dtype=None):
    """The case's input in library L (ref: float64 / complex128 of the same values)."""
    a = c["x"]
    name = dtype or c["dtype"]
    if ref:
        if name in ("float16", "bfloat16"):
            t = torch.tensor(a, dtype=torch.float32).to(getattr(torch, name)).double()
        elif name.startswith("complex"):
            t = torch.tensor(a.astype(np.complex64)).to(torch.complex128)
        else:
            t = torch.tensor(np.asarray(a, np.float32)).double()
    else:
        if name in ("float16", "bfloat16"):
            t = L.tensor(np.asarray(a, np.float32)).to(getattr(L, name))
        elif name.startswith("complex"):
            t = L.tensor(a.astype(np.complex64))
            if name == "complex128" and L is torch:
                t = t.to(torch.complex64)
        elif name == "int32":
            t = L.tensor(a.astype(np.int32))
        elif name == "bool":
            t = L.tensor(a)
        else:
            t = L.tensor(np.asarray(a, np.float32))
    lay = c.get("layout", "c")
    if lay == "t":
        t = t.transpose(-1, -2)
    elif lay == "step":
        t = t[::2]
    return t


def _to_np(t):
    if t is None:
        return None
    if isinstance(t, torch.Tensor):
        t = t.detach()
        if t.is_conj():
            t = t.resolve_conj()
        if t.dtype in (torch.float16, torch.bfloat16):
            t = t.float()
        return t.numpy()
    if t.dtype in (pr.float16, pr.bfloat16):
        t = t.float()
    return t.detach().numpy()


def _dtname(t):
    return str(t.dtype).split(".")[-1]


def _bad_kwargs(c, kw):
    """The case's invalid argument applied to the transform's keywords."""
    b = c.get("badarg")
    if b is None:
        return kw
    kw = dict(kw)
    nd = len(c["shape"])
    if b == "n0":
        kw["n"] = 0
    elif b == "nfloat":
        kw["n"] = 4.0
    elif b == "nbool":
        kw["n"] = True
    elif b == "dim":
        kw["dim"] = nd if "s" not in kw else (0, nd)
    elif b == "norm":
        kw["norm"] = "Ortho"
    elif b == "repeat":
        kw["dim"] = (0, -nd)
    elif b == "s_long":
        kw["s"], kw["dim"] = (2,) * (nd + 1), None
    elif b == "s_float":
        kw["s"], kw["dim"] = (3.0,), (0,)
    elif b == "s_len":
        kw["s"], kw["dim"] = (3, 3), (0,)
    elif b == "s0":
        kw["s"], kw["dim"] = (0,), (0,)
    elif b == "s_int":  # (accepted by torch: an int s is (s,))
        kw["s"], kw["dim"] = 5, (nd - 1,)
    return kw


def _call_transform(L, c, x, out=None):
    op = c["op"]
    fn = getattr(L.fft, op)
    kw = {"norm": c["norm"]}
    if op in ONE_D:
        kw.update(n=c["n"], dim=c["dim"])
    else:
        kw.update(s=c["s"], dim=c["dim"])
        if op.endswith("2") and c["dim"] is None:
            del kw["dim"]
    kw = _bad_kwargs(c, kw)
    if c.get("badarg") == "complex" and op in R_IN:
        x = x.to(L.complex64) if x.dtype not in (L.complex64, L.complex128) else x
    if out is not None:
        kw["out"] = out
    return fn(x, **kw)


def _out_tensor(L, c, res_like):
    """An out= tensor for the case: of the result's dtype and shape, empty, or a wrong kind."""
    which = c["out"] if c.get("badarg") != "outkind" else "wrong"
    cplx = res_like.dtype in (torch.complex64, torch.complex128)
    if which == "wrong":
        dt = L.float32 if cplx else L.int32
        return L.empty(tuple(res_like.shape), dtype=dt)
    dt = L.complex64 if cplx else L.float32
    if which == "empty":
        return L.empty(0, dtype=dt)
    return L.empty(tuple(res_like.shape), dtype=dt)


def _outcome(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(), None
        except Exception as e:  # noqa: BLE001 (the outcome is compared)
            return None, e


def _loss(L, y, g):
    """<g, y>: sum(g·y) for a real y, Re sum(conj(g)·y) for a complex one."""
    if y.dtype in (L.complex64, getattr(L, "complex128", L.complex64)):
        if L is torch:
            y = y.resolve_conj()
        return (L.view_as_real(y) * L.view_as_real(g.to(y.dtype))).sum()
    return (y * g.to(y.dtype)).sum()


def _cot(y, seed):
    """A random cotangent of y's shape (complex for a complex y) as numpy."""
    r = np.random.default_rng(seed)
    a = r.standard_normal(tuple(y.shape))
    if y.dtype in (torch.complex64, torch.complex128):
        a = a + 1j * r.standard_normal(tuple(y.shape))
    return a


WORST: dict = {}  # the largest err / bound seen per check, for --worst


def _exceeds(err, bound, key) -> bool:
    """Whether any element of err passes its bound; records the largest ratio under key."""
    if not err.size:
        return False
    b = np.broadcast_to(bound, err.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(err == 0, 0.0, err / b)
    WORST[key] = max(WORST.get(key, 0.0), float(np.nanmax(r)))
    return not (err <= b).all()


# ---- transforms -------------------------------------------------------------------------------
def _dims_sizes(c, shape):
    """(dims, sizes) as torch resolves them for the case (valid arguments)."""
    op, nd = c["op"], len(shape)
    if op in ONE_D:
        d = c["dim"] % nd
        return [d], [shape[d] if c["n"] is None else c["n"]]
    dim, s = c["dim"], c["s"]
    if op.endswith("2") and dim is None:
        dim = (-2, -1)
    if dim is None:
        dims = list(range(nd - len(s), nd)) if s is not None else list(range(nd))
    else:
        dims = [dim % nd] if isinstance(dim, int) else [d % nd for d in dim]
    if s is None:
        sizes = [None] * len(dims)
    else:
        sizes = list(s)
    last = len(dims) - 1
    out = []
    for i, (d, n) in enumerate(zip(dims, sizes)):
        if n is None or n == -1:
            n = shape[d]
            if i == last and op.startswith(("irfft", "hfft")):
                n = 2 * (shape[d] - 1)
        out.append(n)
    return dims, out


def _line_norm(a, dims, crop):
    """max over lines (indices of the other dims) of ||a cropped to crop along dims||_2."""
    a = np.asarray(a, np.complex128)
    for d, k in zip(dims, crop):
        a = np.take(a, np.arange(min(k, a.shape[d])), axis=d)
    if a.size == 0:
        return 0.0
    other = [i for i in range(a.ndim) if i not in dims]
    a = np.transpose(a, other + list(dims)).reshape(math.prod(a.shape[i] for i in other), -1)
    return float(np.sqrt((np.abs(a) ** 2).sum(1)).max())


def _transform_bound(c, shape, dims, sizes, v, adjoint=False):
    """K·u·G·s·||v_line|| (docstring); v is the input (or, adjoint, the cotangent)."""
    op = c["op"]
    c2r = op in C2R
    # hfft scales as a forward transform, ihfft as an inverse (torch's definitions)
    inverse = op.startswith(("ifft", "irfft", "ihfft"))
    G = sum(growth(n) for n in sizes)
    s = math.prod(scale(c["norm"], n, inverse) for n in sizes)  # (n-D: the product)
    if adjoint:
        crop = [10**9] * len(dims)  # (the cotangent has the output's extents)
        extra = 2.0
    else:
        crop = list(sizes)
        if c2r:
            crop[-1] = sizes[-1] // 2 + 1
        extra = math.sqrt(2.0) if c2r else 1.0
    return K * U * G * s * extra * _line_norm(v, dims, crop)


def _expected_difference(c, got_e, ref_e, t32_e):
    """A class of difference the docstring explains, or None."""
    if got_e is None and ref_e is not None:
        msg = str(ref_e)
        if "Unsupported dtype" in msg or "doesn't support tensors of type: Half" in msg:
            return "intentional", "float16/bfloat16 input: pyrite computes in float32"
        if "Inconsistent configuration" in msg:
            return "known", "torch MKL refuses an empty batch"
        if "`shifts` required" in msg:
            return "intentional", "fftshift of a 0-d tensor: numpy returns it as pyrite does"
        if "Boolean value of Tensor" in msg:
            return "known", "torch's general_cosine refuses a tensor a (its `if not a`)"
        if "Padding size should be less" in msg and c["kind"] == "stft" and c["shape"][0] == 0:
            return "known", "torch's reflect pad refuses an empty batch"
        if "Expected 2D or 3D (batch mode) tensor with possibly 0 batch" in msg:
            return "known", "torch's reflect pad refuses an empty batch"
    if got_e is not None and ref_e is None and c.get("badarg") == "float" and c["M"] <= 1:
        return "intentional", "a float window length: torch returns early for M <= 1 unchecked"
    if got_e is not None and ref_e is None and isinstance(got_e, ComplexError):
        return "intentional", "complex stft / istft(return_complex=True) raise ComplexError"
    return None


def check_transform(c):
    shape_in = None
    ref, ref_e = _outcome(lambda: _call_transform(torch, c, make_input(torch, c, ref=True)))
    t32, t32_e = _outcome(lambda: _call_transform(torch, c, make_input(torch, c)))
    px = make_input(pr, c)
    got, got_e = _outcome(lambda: _call_transform(pr, c, px))
    if c["dtype"] in ("float16", "bfloat16") and t32_e is not None and ref_e is None:
        ref_e = t32_e  # (torch's float64 of half values runs; its half input does not)
    klass = _expected_difference(c, got_e, t32_e if t32_e is not None else ref_e, None)
    if (got_e is None) != (ref_e is None and t32_e is None):
        if klass is not None and (klass[0] != "intentional" or "float16" not in klass[1]):
            return klass
        if klass is None:
            return "fail", f"raises: torch {ref_e or t32_e!r}, pyrite {got_e!r}"
    if got_e is not None:
        if klass is not None:
            return klass
        return "ok", "both raise"
    if ref is None:  # (float16: torch refuses; compare with the float64 of the same values)
        ref, e = _outcome(
            lambda: _call_transform(torch, dict(c, badarg=None), make_input(torch, c, ref=True))
        )
        if e is not None:
            return _expected_difference(c, None, e, None) or ("fail", f"reference: {e!r}")
    gn, rn = _to_np(got), _to_np(ref)
    want_dt = {"complex128": "complex64", "float64": "float32"}.get(_dtname(ref), _dtname(ref))
    if gn.shape != rn.shape or _dtname(got) != want_dt:
        return "fail", f"shape/dtype: pyrite {gn.shape} {_dtname(got)}, torch {rn.shape} {want_dt}"
    shape_in = tuple(make_input(torch, c, ref=True).shape)
    dims, sizes = _dims_sizes(c, shape_in)
    xin = _to_np(make_input(torch, c, ref=True))
    bound = _transform_bound(c, shape_in, dims, sizes, xin) + U * np.abs(rn)
    err = np.abs(gn.astype(np.complex128) - rn)
    if _exceeds(err, bound, "transform"):
        i = int(np.argmax(err - bound))
        e32 = np.abs(_to_np(t32).astype(np.complex128) - rn).flat[i] if t32 is not None else -1
        return "fail", (
            f"values: max excess at flat {i}: err {err.flat[i]:.3g} > bound "
            f"{np.broadcast_to(bound, err.shape).flat[i]:.3g} (torch32 {e32:.3g})"
        )
    if c["out"] is not None and c.get("badarg") is None and t32_e is None:
        st = _check_out(c, px, gn, ref)
        if st is not None:
            return st
    if c["grad"] and c.get("badarg") is None:
        return _check_grad(c, dims, sizes, ref)
    return ("ok", "") if klass is None else klass


def _check_out(c, px, gn, ref):
    o = _out_tensor(pr, c, ref)
    ot = _out_tensor(torch, c, ref)
    tr, te = _outcome(lambda: _call_transform(torch, c, make_input(torch, c), out=ot))
    res, e = _outcome(lambda: _call_transform(pr, c, px, out=o))
    if (e is None) != (te is None):
        return "fail", f"out= ({c['out']}): torch {te!r}, pyrite {e!r}"
    if e is not None:
        return None
    if res is not o:
        return "fail", "out=: the result is not the out tensor"
    if tuple(o.shape) != gn.shape or not np.array_equal(_to_np(o), gn, equal_nan=True):
        return "fail", f"out=: out holds {tuple(o.shape)}, not the result {gn.shape}"
    return None


def _check_grad(c, dims, sizes, ref):
    cot = _cot(ref, c["gseed"])
    grads = []
    for L, r in ((torch, True), (pr, False)):
        x = make_input(L, c, ref=r)
        leaf = x.detach().clone() if L is torch else x.detach().contiguous()
        if c.get("layout") == "t":  # (a transposed leaf: the view itself requires grad)
            leaf = make_input(L, c, ref=r).detach()
        leaf.requires_grad_(True)
        y = _call_transform(L, c, leaf)
        g = L.tensor(cot.astype(np.complex64 if np.iscomplexobj(cot) else np.float32))
        if L is torch:
            g = g.to(torch.complex128 if np.iscomplexobj(cot) else torch.float64)
        _loss(L, y, g).backward()
        grads.append(_to_np(leaf.grad))
    rn, gn = grads
    if gn is None or gn.shape != rn.shape:
        return "fail", f"grad: pyrite {None if gn is None else gn.shape}, torch {rn.shape}"
    out_shape = tuple(ref.shape)
    bound = _transform_bound(c, out_shape, dims, sizes, cot, adjoint=True) + U * np.abs(rn)
    err = np.abs(gn.astype(np.complex128) - rn)
    if _exceeds(err, bound, "grad"):
        i = int(np.argmax(err - bound))
        return "fail", (
            f"grad: max excess at flat {i}: err {err.flat[i]:.3g} > bound "
            f"{np.broadcast_to(bound, err.shape).flat[i]:.3g} (|ref| {np.abs(rn).max():.3g})"
        )
    return "ok", "grad"


# ---- frequencies, shifts ------------------------------------------------------------------------
def check_freq(c):
    def call(L):
        n, kw = c["n"], {"d": c["d"]}
        if c["fdtype"]:
            kw["dtype"] = getattr(L, c["fdtype"])
        b = c.get("badarg")
        if b == "nneg":
            n = -1 - n
        elif b == "nfloat":
            n = float(n)
        elif b == "int_dtype":
            kw["dtype"] = L.int32
        return getattr(L.fft, c["op"])(n, requires_grad=c["rg"], **kw)

    def call_dtype(L, name):
        return getattr(L.fft, c["op"])(c["n"], d=c["d"], dtype=getattr(L, name))

    t, te = _outcome(lambda: call(torch))
    p, pe = _outcome(lambda: call(pr))
    if te is None and pe is not None and c.get("badarg") == "nneg" and c["op"] == "rfftfreq":
        return "known", "torch's rfftfreq takes n of -1..-3 (arange(n // 2 + 1)); pyrite refuses"
    if (te is None) != (pe is None):
        return "fail", f"raises: torch {te!r}, pyrite {pe!r}"
    if te is not None:
        return "ok", "both raise"
    if bool(p.requires_grad) != bool(t.requires_grad):
        return "fail", "requires_grad differs"
    want_dt = "float32" if _dtname(t) == "float64" else _dtname(t)
    if _dtname(p) != want_dt or tuple(p.shape) != tuple(t.shape):
        return "fail", f"dtype/shape: pyrite {_dtname(p)} {tuple(p.shape)}, torch {_dtname(t)}"
    if _dtname(t) == "float64":  # (float64 is float32 in pyrite: torch's float32 bits)
        t = call_dtype(torch, "float32")
    ok = np.array_equal(_to_np(p).astype(np.float32), _to_np(t).astype(np.float32), equal_nan=True)
    if not ok:
        return "fail", f"values: pyrite {_to_np(p)}, torch {_to_np(t)}"
    return "ok", ""


def check_shift(c):
    def call(L):
        x = make_input(L, c)
        dim = c["dim"]
        if c.get("badarg") == "dim_oob":
            dim = len(c["shape"]) + 1
        elif c.get("badarg") == "dim_float":
            dim = 1.0
        return getattr(L.fft, c["op"])(x, dim)

    t, te = _outcome(lambda: call(torch))
    p, pe = _outcome(lambda: call(pr))
    if (te is None) != (pe is None):
        klass = _expected_difference(c, p is not None and None, te, None) if pe is None else None
        if klass is not None:
            return klass
        return "fail", f"raises: torch {te!r}, pyrite {pe!r}"
    if te is not None:
        return "ok", "both raise"
    if not np.array_equal(_to_np(p), _to_np(t)):
        return "fail", "values differ"
    return "ok", ""


# ---- stft / istft ------------------------------------------------------------------------------
def _window(L, c, ref):
    win = c["win_length"] or c["n_fft"]
    dt = torch.float64 if ref else None
    if c["window"] is None:
        w = None
    elif c["window"] == "hann":
        w = L.tensor(torch.hann_window(win, dtype=torch.float64).numpy().astype(np.float32))
    else:
        w = L.tensor(c["wrand"][:win].astype(np.float32))
    b = c.get("badarg")
    if b == "win_size":
        w = L.ones(win + 1)
    elif b == "wcomplex":
        w = L.ones(win, dtype=L.complex64)
    if w is not None and ref and w.dtype == torch.float32:
        w = w.to(dt)
    return w


def _stft_kw(L, c, ref):
    kw = dict(
        n_fft=c["n_fft"], hop_length=c["hop"], win_length=c["win_length"],
        window=_window(L, c, ref), center=c["center"], pad_mode=c["pad_mode"],
        normalized=c["normalized"], onesided=c["onesided"], return_complex=c["return_complex"],
    )  # fmt: skip
    b = c.get("badarg")
    if b == "hop0":
        kw["hop_length"] = 0
    elif b == "win_long":
        kw["win_length"], kw["window"] = c["n_fft"] + 1, None
    elif b == "rc_none":
        kw["return_complex"] = None
    elif b == "nfft_long":
        kw["n_fft"], kw["center"], kw["window"], kw["win_length"] = (
            4 * c["shape"][-1],
            False,
            None,
            None,
        )
    return kw


def _stft_input(L, c, ref):
    b = c.get("badarg")
    x = make_input(L, c, ref=ref)
    if b == "int":
        x = L.tensor(np.asarray(c["x"] * 3, np.int32))
    elif b == "ndim3":
        x = x.reshape(1, 1, -1)
    return x


def _stft_bound(c, x, w, spec_shape):
    n_fft = c["n_fft"]
    win = c["win_length"] or n_fft
    wmax = 1.0 if w is None else float(np.abs(w).max())
    xmax = float(np.abs(x).max()) if x.size else 0.0
    s = 1 / math.sqrt(n_fft) if c["normalized"] else 1.0
    line = wmax * math.sqrt(min(win, n_fft)) * xmax
    return K * U * growth(n_fft) * s * line


def check_stft(c):
    def call(L, ref):
        x = _stft_input(L, c, ref)
        return L.stft(x, **_stft_kw(L, c, ref))

    ref, re = _outcome(lambda: call(torch, True))
    t32, te = _outcome(lambda: call(torch, False))
    got, ge = _outcome(lambda: call(pr, False))
    if c["dtype"] == "float16" and te is not None and re is None:
        re = te
    klass = _expected_difference(c, ge, te if te is not None else re, None)
    if (ge is None) != (re is None):
        if klass is not None:
            if "float16" not in klass[1]:
                return klass
        else:
            return "fail", f"raises: torch {re!r}, pyrite {ge!r}"
    elif ge is not None:
        return "ok", "both raise"
    if ref is None:
        ref = torch.stft(
            make_input(torch, c, ref=True), **_stft_kw(torch, dict(c, badarg=None), True)
        )
    gn, rn = _to_np(got), _to_np(ref)
    want_dt = {"complex128": "complex64", "float64": "float32"}.get(_dtname(ref), _dtname(ref))
    if gn.shape != rn.shape or _dtname(got) != want_dt:
        return "fail", f"shape/dtype: pyrite {gn.shape} {_dtname(got)}, torch {rn.shape} {want_dt}"
    x = _to_np(make_input(torch, c, ref=True))
    wv = _window(torch, c, True)
    w = None if wv is None else wv.numpy()
    bound = _stft_bound(c, x, w, rn.shape) + U * np.abs(rn)
    err = np.abs(gn.astype(np.complex128) - rn)
    if _exceeds(err, bound, "stft"):
        i = int(np.argmax(err - bound))
        return (
            "fail",
            f"values: err {err.flat[i]:.3g} > bound {np.broadcast_to(bound, err.shape).flat[i]:.3g}",
        )
    if c["grad"] and c.get("badarg") is None and got.numel():
        cot = _cot(ref, c["gseed"])
        grads = []
        for L, r in ((torch, True), (pr, False)):
            leaf = make_input(L, c, ref=r).detach().clone().requires_grad_(True)
            kw = _stft_kw(L, c, r)
            y = L.stft(leaf, **kw)
            g = L.tensor(cot.astype(np.complex64 if np.iscomplexobj(cot) else np.float32))
            if L is torch:
                g = g.to(torch.complex128 if np.iscomplexobj(cot) else torch.float64)
            _loss(L, y, g).backward()
            grads.append(_to_np(leaf.grad))
        rn_g, gn_g = grads
        hop = c["hop"] or c["n_fft"] // 4
        over = math.ceil(c["n_fft"] / hop) + 2  # (reflect padding folds edge frames back: +2)
        s = 1 / math.sqrt(c["n_fft"]) if c["normalized"] else 1.0
        wmax = 1.0 if w is None else float(np.abs(w).max())
        cot_r = cot if cot.ndim == rn.ndim else cot
        gl = float(np.sqrt((np.abs(cot_r) ** 2).sum(axis=-2 if np.iscomplexobj(cot) else -3)).max())
        gb = 2 * K * U * growth(c["n_fft"]) * s * wmax * gl * over + U * np.abs(rn_g)
        e = np.abs(gn_g - rn_g)
        if _exceeds(e, gb, "stft grad"):
            i = int(np.argmax(e - gb))
            return (
                "fail",
                f"grad: err {e.flat[i]:.3g} > bound {np.broadcast_to(gb, e.shape).flat[i]:.3g}",
            )
    return ("ok", "") if klass is None else klass


def _istft_args(L, c, ref):
    kw = _stft_kw(L, dict(c, badarg=None), ref)
    del kw["pad_mode"]
    kw["return_complex"] = c["i_rc"]
    kw["length"] = c["length"]
    b = c.get("badarg")
    if b == "win_size":
        kw["window"] = L.ones((c["win_length"] or c["n_fft"]) + 2)
    elif b == "hop0":
        kw["hop_length"] = 0
    elif b == "onesided_conflict":
        kw["onesided"] = kw["onesided"] not in (None, True)
    return kw


def _spectrum(c):
    """The istft input: torch's stft (complex128) of the signal, or a random spectrum."""
    kw = _stft_kw(torch, dict(c, badarg=None), True)
    kw["return_complex"] = True
    if c["onesided"] is False:
        kw["onesided"] = False
    spec = torch.stft(make_input(torch, c, ref=True), **kw).numpy()
    if c["random_spec"]:
        r = np.random.default_rng(c["gseed"])
        spec = r.standard_normal(spec.shape) + 1j * r.standard_normal(spec.shape)
    b = c.get("badarg")
    if b == "wrongF":
        spec = spec[..., :-1, :] if spec.shape[-2] > 1 else np.concatenate([spec, spec], -2)
    elif b == "frames0":
        spec = spec[..., :0]
    elif b == "ndim4":
        spec = spec[None, None] if spec.ndim == 2 else spec[None]
    elif b == "real":
        spec = spec.real
    return spec


def check_istft(c):
    try:
        spec = _spectrum(c)
    except RuntimeError as e:  # (torch's stft refuses the case's parameters: nothing to invert)
        return "skip", f"torch's stft refuses the signal's parameters; {str(e)[:60]}"

    def call(L, ref):
        a = (
            spec
            if ref
            else (spec.astype(np.complex64) if np.iscomplexobj(spec) else spec.astype(np.float32))
        )
        z = torch.tensor(a) if L is torch else pr.tensor(a)
        return L.istft(z, **_istft_args(L, c, ref))

    ref, re = _outcome(lambda: call(torch, True))
    got, ge = _outcome(lambda: call(pr, False))
    klass = _expected_difference(c, ge, re, None)
    if ge is None and re is not None and "min(): Expected reduction dim" in str(re):
        if c["n_fft"] == 1 and c["center"] and c["length"] is None:
            return "known", "torch's istft of n_fft=1 centred ends at -(n_fft // 2) = 0: empty"
    if (ge is None) != (re is None):
        return klass or ("fail", f"raises: torch {re!r}, pyrite {ge!r}")
    if ge is not None:
        return "ok", "both raise"
    gn, rn = _to_np(got), _to_np(ref)
    want_dt = {"complex128": "complex64", "float64": "float32"}.get(_dtname(ref), _dtname(ref))
    if gn.shape != rn.shape or _dtname(got) != want_dt:
        return "fail", f"shape/dtype: pyrite {gn.shape} {_dtname(got)}, torch {rn.shape} {want_dt}"
    # the docstring's bound at each t: the window's squared sum env_t, in float64
    n_fft = c["n_fft"]
    hop = c["hop"] or n_fft // 4
    wv = _window(torch, c, True)
    win = c["win_length"] or n_fft
    w = np.ones(win) if wv is None else wv.numpy()
    left = (n_fft - win) // 2
    wf = np.zeros(n_fft)
    wf[left : left + win] = w
    T = spec.shape[-1]
    total = n_fft + hop * (T - 1)
    env = np.zeros(total)
    for f in range(T):
        env[f * hop : f * hop + n_fft] += wf * wf
    start = n_fft // 2 if c["center"] else 0
    env = env[start : start + rn.shape[-1]]
    if env.shape[0] < rn.shape[-1]:  # (past the end: zeros appended, exact)
        env = np.concatenate([env, np.ones(rn.shape[-1] - env.shape[0])])
    frames = math.ceil(n_fft / hop)
    s = 1 / math.sqrt(n_fft) if c["normalized"] else 1.0 / n_fft
    xl = float(np.sqrt((np.abs(spec) ** 2).sum(-2)).max()) if spec.size else 0.0
    wmax = float(np.abs(wf).max())
    core = K * U * growth(n_fft) * s * math.sqrt(2) * xl * wmax * math.sqrt(n_fft)
    bound = K * U * frames * (core / (K * U) + np.abs(rn) * env) / env + U * np.abs(rn)
    err = np.abs(gn.astype(np.complex128) - rn)
    if _exceeds(err, bound, "istft"):
        i = int(np.argmax(err - bound))
        return (
            "fail",
            f"values: err {err.flat[i]:.3g} > bound {np.broadcast_to(bound, err.shape).flat[i]:.3g} at {i}",
        )
    return "ok", ""


# ---- windows -----------------------------------------------------------------------------------
ULP = {"float32": 2.0**-23, "float64": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}


def _window_call(L, c, dtype_name):
    b = c.get("badarg")
    M = c["M"]
    if b == "neg":
        M = -1 - M
    elif b == "float":
        M = float(M)
    if c["kind"] == "window":
        args = [M] if c["periodic"] is None else [M, c["periodic"]]
        if c["extra"] and c["op"] == "hamming_window":
            args += [c["extra"]["alpha"], c["extra"]["beta"]]
        elif c["extra"]:
            args += [c["extra"]["beta"]]
        kw = {}
        if b == "int_dtype":
            kw["dtype"] = L.int32
        elif dtype_name:
            kw["dtype"] = getattr(L, dtype_name)
        return getattr(L, c["op"])(*args, **kw)
    kw = dict(SWINDOWS[c["op"]], sym=c["sym"], requires_grad=c["rg"])
    if b == "dtype16":
        kw["dtype"] = L.float16
    elif dtype_name:
        kw["dtype"] = getattr(L, dtype_name)
    return getattr(L.signal.windows, c["op"])(M, **kw)


def check_window(c):
    dn = c["wdtype"]
    t, te = _outcome(lambda: _window_call(torch, c, dn))
    p, pe = _outcome(lambda: _window_call(pr, c, dn))
    if (te is None) != (pe is None):
        klass = _expected_difference(c, pe, te, None)
        return klass or ("fail", f"raises: torch {te!r}, pyrite {pe!r}")
    if te is not None:
        return "ok", "both raise"
    ref = _window_call(torch, dict(c, badarg=None), "float64").detach().numpy()
    want_dt = "float32" if _dtname(t) == "float64" else _dtname(t)
    if _dtname(p) != want_dt or tuple(p.shape) != tuple(t.shape):
        return (
            "fail",
            f"dtype/shape: pyrite {_dtname(p)} {tuple(p.shape)}, torch {_dtname(t)} {tuple(t.shape)}",
        )
    if c["kind"] == "swindow" and bool(p.requires_grad) != bool(t.requires_grad):
        return "fail", "requires_grad differs"
    beta = float(c.get("extra", {}).get("beta", 12.0 if c["op"] == "kaiser_window" else 0.0))
    if c["op"] == "kaiser":
        beta = 8.6
    bound = 16 * U * (1 + beta) + ULP[want_dt] * np.abs(ref)
    e = np.abs(_to_np(p).astype(np.float64) - ref)
    if _exceeds(e, bound, "window"):
        i = int(np.argmax(e - bound))
        e32 = abs(float(_to_np(t).astype(np.float64).flat[i]) - ref.flat[i])
        return (
            "fail",
            f"values: err {e.flat[i]:.3g} > bound {np.broadcast_to(bound, e.shape).flat[i]:.3g} at {i} (torch {e32:.3g})",
        )
    return "ok", ""


# ---- the driver's interface ----------------------------------------------------------------------
def check(case):
    kind = case["kind"]
    if kind in ("1d", "nd"):
        return check_transform(case)
    if kind == "freq":
        return check_freq(case)
    if kind == "shift":
        return check_shift(case)
    if kind == "stft":
        return check_stft(case)
    if kind == "istft":
        return check_istft(case)
    return check_window(case)


def describe(case) -> str:
    skip = {"x", "wrand", "seed"}
    items = ", ".join(f"{k}={v!r}" for k, v in case.items() if k not in skip)
    return f"# seed {case['seed']}: {items}"


def main(argv=None):
    rc = fuzz_driver.run(__doc__, lambda seed: Gen(seed).build(), check, describe, argv)
    print("largest err / bound:", {k: round(v, 3) for k, v in sorted(WORST.items())})
    return rc


if __name__ == "__main__":
    sys.exit(main())
