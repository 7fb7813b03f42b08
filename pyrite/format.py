"""Printing tensors as PyTorch 2.13 prints them (its `torch/_tensor_str.py` is the specification).

    >>> pr.tensor([[1.0, 2.5], [float("nan"), -0.0]])
    tensor([[1.0000, 2.5000],
            [   nan, -0.0000]])

`repr(t)` == `str(t)`: `tensor(` + the values + suffixes (`size=` for empty tensors that are not
1-D, `dtype=` for dtypes other than the default float, pyrite's integer type and bool,
`grad_fn=<...>` or `requires_grad=True`). There is one device, so no `device=` suffix.

Only the elements that are printed leave the device: a summarised tensor (more elements than
`threshold`) is read through one strided view that covers its first and last `edgeitems` along
every long dimension, so printing a 10⁹-element (expanded) tensor reads a few hundred numbers.
Every number is formatted by Python's own float formatting of the stored value widened to a
double, as PyTorch's printing does, so the digits agree with PyTorch's bit for bit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math

import numpy as np

from . import dtypes as D


@dataclasses.dataclass
class _PrinterOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


PRINT_OPTS = _PrinterOptions()

# PyTorch's named profiles: (precision, threshold, edgeitems, linewidth)
_PROFILES = {
    "default": (4, 1000, 3, 80),
    "short": (2, 1000, 2, 80),
    "full": (4, math.inf, 3, 80),
}


def set_printoptions(
    precision=None,
    threshold=None,
    edgeitems=None,
    linewidth=None,
    profile=None,
    sci_mode=None,
):
    r"""Set options for printing tensors (PyTorch's ``torch.set_printoptions``).

    Args:
        precision: digits after the decimal point for floating point values (default 4).
        threshold: number of elements past which a tensor is summarised with ``...``
            (default 1000).
        edgeitems: number of items shown at the start and end of each dimension of a
            summarised tensor (default 3).
        linewidth: characters per line before rows wrap (default 80).
        profile: ``"default"``, ``"short"`` or ``"full"``: presets the four options above;
            the others given override it.
        sci_mode: ``True`` or ``False`` forces scientific notation on or off; ``None`` (the
            default) lets each tensor's values choose. Like PyTorch's, every call sets it, so a
            call without ``sci_mode`` returns it to ``None``.

    Example::

        >>> pr.set_printoptions(precision=2)
        >>> pr.tensor([1.12345])
        tensor([1.12])
        >>> pr.set_printoptions(threshold=5)
        >>> pr.arange(10)
        tensor([0, 1, 2, ..., 7, 8, 9])
        >>> pr.set_printoptions(profile="default")
    """
    if profile in _PROFILES:  # PyTorch ignores a profile it does not know
        (
            PRINT_OPTS.precision,
            PRINT_OPTS.threshold,
            PRINT_OPTS.edgeitems,
            PRINT_OPTS.linewidth,
        ) = _PROFILES[profile]
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions() -> dict:
    """The current print options, as a dict `set_printoptions(**d)` accepts (PyTorch keeps this
    in `torch._tensor_str`; 2.13 has no `torch.get_printoptions`)."""
    return dataclasses.asdict(PRINT_OPTS)


@contextlib.contextmanager
def printoptions(**kwargs):
    """Change the print options inside a `with` block (`torch._tensor_str.printoptions`)."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


# ---- reading the printed elements ----------------------------------------------------------


def _read_shown(t, summarize: bool, edge: int):
    """The elements a print shows, as a numpy array, and which dims were cut to their edges.

    A summarised dim of size n > 2·edge with stride s is read as two dims (2, edge) with strides
    ((n - edge)·s, s): one view, so one copy kernel and one readback of only the shown elements.
    """
    shape, strides = t._shape, t._strides
    cut = [summarize and n > 2 * edge for n in shape]
    if not any(cut):
        # detached, so reading never meets a future "numpy() of a tensor that requires grad"
        return t.detach()._host(), cut  # bfloat16 as float32: numpy has no bf16
    vshape, vstrides, shown = [], [], []
    for n, s, c in zip(shape, strides, cut):
        if c:
            vshape += [2, edge]
            vstrides += [(n - edge) * s, s]
            shown.append(2 * edge)
        else:
            vshape.append(n)
            vstrides.append(s)
            shown.append(n)
    view = t._view(tuple(vshape), tuple(vstrides), t._offset)
    return view._host().reshape(shown), cut


# ---- formatting numbers --------------------------------------------------------------------


def _extremes(v: np.ndarray) -> list:
    """The values whose formatted strings are the widest: per sign, the largest and smallest
    magnitude. For `.Nf` a string's length grows with |x| within a sign; for `.Ne` it grows
    with the exponent's digit count, largest at one of the magnitude extremes."""
    out = []
    for part in (v[v > 0], v[v < 0]):
        if part.size:
            out += [float(part.min()), float(part.max())]
    return out


class _Formatter:
    """PyTorch's `_Formatter`: one number style and one column width for a whole tensor, chosen
    from the nonzero finite values shown (integer floats as `1.`, scientific notation when the
    magnitudes span more than 1000x, pass 1e8 or fall below 1e-4)."""

    def __init__(self, values: np.ndarray, floating: bool):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        p = PRINT_OPTS.precision
        if values.size == 0:
            return
        if not floating:
            # integers and bools print as str(); the widest is the smallest or the largest
            lo, hi = values.min().item(), values.max().item()
            self.max_width = max(1, len(str(lo)), len(str(hi)))
            return
        v = values.astype(np.float64).reshape(-1)
        v = v[np.isfinite(v) & (v != 0)]
        if v.size == 0:
            return  # no number to choose a style from: zeros print as `0.`, NaN/inf as such
        a = np.abs(v)
        lo, hi = float(a.min()), float(a.max())
        self.int_mode = bool(np.all(v == np.ceil(v)))
        if PRINT_OPTS.sci_mode is None:
            self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4
        else:
            self.sci_mode = PRINT_OPTS.sci_mode
        ext = _extremes(v)
        if self.sci_mode:
            widths = [len(f"{x:.{p}e}") for x in ext]
        elif self.int_mode:
            widths = [len(f"{x:.0f}") + 1 for x in ext]  # + 1 for the trailing "."
        else:
            widths = [len(f"{x:.{p}f}") for x in ext]
        self.max_width = max([self.max_width, *widths])

    def strings(self, values: np.ndarray) -> list:
        """Every value of `values` (C order) formatted and right-aligned to the column width."""
        w = self.max_width
        if not self.floating:
            return [str(x).rjust(w) for x in values.reshape(-1).tolist()]
        p = PRINT_OPTS.precision
        xs = values.astype(np.float64).reshape(-1).tolist()
        if self.sci_mode:
            return [f"{x:{w}.{p}e}" for x in xs]
        if self.int_mode:
            return [(f"{x:.0f}." if math.isfinite(x) else f"{x:.0f}").rjust(w) for x in xs]
        return [f"{x:.{p}f}".rjust(w) for x in xs]


# ---- laying out the brackets ---------------------------------------------------------------


def _vector(strs: list, cut: bool, indent: int, width: int) -> str:
    edge = PRINT_OPTS.edgeitems
    if cut:
        strs = strs[:edge] + [" ..."] + strs[edge:]
    # an element takes its width plus ", "
    per_line = max(1, (PRINT_OPTS.linewidth - indent) // (width + 2))
    lines = [", ".join(strs[i : i + per_line]) for i in range(0, len(strs), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(strs: np.ndarray, cut: list, indent: int, width: int) -> str:
    """strs: an object array of formatted elements, the shape of the shown elements."""
    if strs.ndim == 0:
        return strs.item()
    if strs.ndim == 1:
        return _vector(strs.tolist(), cut[0], indent, width)
    slices = [_nested(strs[i], cut[1:], indent + 1, width) for i in range(strs.shape[0])]
    if cut[0]:
        edge = PRINT_OPTS.edgeitems
        slices = slices[:edge] + ["..."] + slices[edge:]
    # rows of a matrix on consecutive lines, matrices of a 3-D tensor a blank line apart, ...
    return "[" + ("," + "\n" * (strs.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def _tensor_str(t, indent: int) -> str:
    summarize = t.numel() > PRINT_OPTS.threshold
    edge = PRINT_OPTS.edgeitems
    if summarize and not edge and t.ndim:
        return "[...]"  # edgeitems=0 shows no element at all
    values, cut = _read_shown(t, summarize, edge)
    if t.dtype.is_complex:
        flat = _complex_strings(values)
        width = max(map(len, flat), default=1)
    else:
        fmt = _Formatter(values, t.dtype.is_floating_point)
        flat = fmt.strings(values)
        width = fmt.max_width
    strs = np.empty(len(flat), dtype=object)  # an object array so the strings index like values
    strs[:] = flat
    return _nested(strs.reshape(values.shape), cut, indent, width)


def _complex_strings(values: np.ndarray) -> list:
    """`re+imj` as torch prints complex: one formatter for the real parts, one for the
    imaginary parts, the sign between them."""
    re, im = values.real, values.imag
    res = _Formatter(re, True).strings(re)
    ims = _Formatter(im, True).strings(im)
    out = []
    for r, i in zip(res, ims):
        i = i.strip()
        out.append(f"{r}{i if i[0] in '+-' else '+' + i}j")
    return out


def _add_suffixes(body: str, suffixes: list, indent: int) -> str:
    """`, suffix` after the values, or on a new line indented under them when the line would
    pass `linewidth` (PyTorch's arithmetic, its `+ 1` included, so the breaks fall alike)."""
    parts = [body]
    last_line_len = len(body) - body.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def _grad_fn_name(grad_fn) -> str:
    # a node may name itself (`name()`, as PyTorch's C++ nodes do); otherwise its class names it
    name = getattr(grad_fn, "name", None)
    return name() if callable(name) else type(grad_fn).__name__


def format_tensor(t) -> str:
    """`repr(t)` as PyTorch writes it, with `pyrite.` dtype names."""
    cls = type(t).__name__
    # PyTorch writes `tensor(` for plain tensors and parameters, the class name for subclasses
    prefix = "tensor(" if cls in ("Tensor", "Parameter") else f"{cls}("
    indent = len(prefix)
    suffixes = []
    default = D.get_default_dtype()
    if t.numel() == 0:
        if t.ndim != 1:  # as numpy does, the size of every empty tensor but the 1-D one
            suffixes.append(f"size={tuple(t._shape)}")
        # no element shows whether an empty tensor is integer, so only the default float is
        # left unnamed
        if t.dtype is not default:
            suffixes.append(f"dtype={t.dtype!r}")
        body = "[]"
    else:
        if not PRINT_OPTS.edgeitems:
            suffixes.append(f"size={tuple(t._shape)}")
        # PyTorch leaves its default float, the complex type of that float (complex64 beside
        # float32), int64 and bool unnamed; pyrite's int32 is its int64
        if t.dtype not in (default, D.complex64, D.int64, D.bool_):
            suffixes.append(f"dtype={t.dtype!r}")
        body = _tensor_str(t, indent)
    grad_fn = getattr(t, "grad_fn", None)
    if grad_fn is not None:
        suffixes.append(f"grad_fn=<{_grad_fn_name(grad_fn)}>")
    elif getattr(t, "requires_grad", False):
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
