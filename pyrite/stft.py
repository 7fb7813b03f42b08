"""torch.stft / torch.istft: short-time Fourier transforms of real signals, built from views
(`unfold` frames), pyrite.fft's rfft/irfft and `F.fold`'s overlap-add, so autograd runs through
both. Real floating inputs only (a complex signal raises ComplexError, an integer one torch's
RuntimeError); a complex window gives the two-sided complex spectrum, as torch's;
`return_complex=False` gives the (..., 2) real view, as torch's deprecated form. istft checks
torch's frequency count (n_fft // 2 + 1 one-sided, n_fft two-sided) and hop_length <=
win_length, and inverts a two-sided spectrum into a real signal as torch does: from its first
n_fft // 2 + 1 bins through irfft (the rest ignored, so a non-Hermitian one is not its ifft's
real part)."""

from __future__ import annotations

from . import dtypes as D
from . import fft as _fft
from .ops import complex as _cx
from .tensor import Tensor


def _window(window, n_fft, win_length):
    """The window zero-padded to n_fft, centred (torch's rule); ones when None."""
    from .ops.combine import cat
    from .ops.creation import ones, zeros

    if window is None:
        window = ones(win_length)
    if window.ndim != 1 or window._shape[0] != win_length:
        raise RuntimeError(
            f"pyrite: stft: expected a 1D window tensor of size equal to win_length="
            f"{win_length}, but got window with size {tuple(window._shape)}"
        )
    if win_length < n_fft:
        left = (n_fft - win_length) // 2
        right = n_fft - win_length - left  # (zeros by cat: a complex window has no pad)
        window = cat([zeros(left, dtype=window.dtype), window, zeros(right, dtype=window.dtype)])
    return window


def _lengths(n_fft, hop_length, win_length):
    hop = n_fft // 4 if hop_length is None else int(hop_length)
    win = n_fft if win_length is None else int(win_length)
    if n_fft <= 0 or hop <= 0 or not 0 < win <= n_fft:
        raise RuntimeError(
            f"pyrite: stft: expected 0 < n_fft, 0 < hop_length and 0 < win_length <= n_fft, "
            f"but got n_fft={n_fft}, hop_length={hop}, win_length={win}"
        )
    return hop, win


def stft(
    input,
    n_fft,
    hop_length=None,
    win_length=None,
    window=None,
    center=True,
    pad_mode="reflect",
    normalized=False,
    onesided=None,
    return_complex=None,
):
    """(..., n_fft // 2 + 1, n_frames) complex spectrum of a real 1-D or 2-D (batch, time)
    signal: frames every hop_length samples, each times the window, rfft'd (fft'd when
    onesided=False)."""
    from .ops.pad import pad

    if not isinstance(input, Tensor):
        raise TypeError(f"pyrite: stft(): expected a Tensor, got {type(input).__name__}")
    if input.dtype is D.complex64:
        raise _cx.ComplexError("pyrite: stft of a complex signal is not supported yet")
    if return_complex is None:
        raise RuntimeError(
            "pyrite: stft requires the return_complex parameter be given for real inputs, and "
            "will further require that return_complex=True in a future PyTorch release."
        )
    if input.dtype.kind != "f":
        raise RuntimeError(
            f"pyrite: stft: expected a tensor of floating point or complex values, got "
            f"{input.dtype!r}"
        )
    if input.ndim not in (1, 2):
        raise RuntimeError(f"pyrite: stft: expected a 1D or 2D tensor, got {input.ndim}D")
    hop, win = _lengths(n_fft, hop_length, win_length)
    complex_window = isinstance(window, Tensor) and window.dtype is D.complex64
    if complex_window and onesided:
        raise RuntimeError("pyrite: Cannot have onesided output if window or input is complex")
    x = input if input.dtype is D.float32 else input.to(D.float32)
    x = x.unsqueeze(0) if input.ndim == 1 else x  # (B, L)
    if center:
        p = n_fft // 2
        x = pad(x.unsqueeze(1), (p, p), mode=pad_mode).squeeze(1)
    if x._shape[-1] < n_fft:
        raise RuntimeError(
            f"pyrite: stft: input of {x._shape[-1]} samples (padded) is shorter than n_fft={n_fft}"
        )
    frames = x.unfold(-1, n_fft, hop) * _window(window, n_fft, win)  # (B, n_frames, n_fft)
    one = (not complex_window) if onesided is None else bool(onesided)
    norm = "ortho" if normalized else None
    spec = _fft.rfft(frames, norm=norm) if one else _fft.fft(frames, norm=norm)
    spec = spec.transpose(-1, -2)  # (B, F, n_frames)
    if input.ndim == 1:
        spec = spec[0]
    return spec if return_complex else _cx.view_as_real(spec)


def istft(
    input,
    n_fft,
    hop_length=None,
    win_length=None,
    window=None,
    center=True,
    normalized=False,
    onesided=None,
    length=None,
    return_complex=False,
):
    """The signal whose stft is `input` ((..., F, n_frames) complex): each frame's inverse DFT
    times the window, overlap-added and divided by the summed squared window (torch's least
    squares inverse)."""
    from .nn.functional import fold
    from .ops.combine import cat
    from .ops.creation import zeros

    if not isinstance(input, Tensor) or input.dtype is not D.complex64:
        raise RuntimeError("pyrite: istft requires a complex-valued input tensor")
    if return_complex:
        raise _cx.ComplexError("pyrite: istft(return_complex=True) is not supported yet")
    if isinstance(window, Tensor) and window.dtype is D.complex64:
        raise RuntimeError("pyrite: Complex windows are incompatible with return_complex=False")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"pyrite: istft: expected a 2D or 3D tensor, got {input.ndim}D")
    hop, win = _lengths(n_fft, hop_length, win_length)
    if hop > win:
        raise RuntimeError(
            f"pyrite: istft: expected 0 < hop_length <= win_length, but got hop_length={hop}, "
            f"win_length={win}"
        )
    spec = input.unsqueeze(0) if input.ndim == 2 else input  # (B, F, n_frames)
    B, F, T = spec._shape
    one = (F != n_fft) if onesided is None else bool(onesided)
    want = n_fft // 2 + 1 if one else n_fft
    if F != want:
        rule = "n_fft / 2 + 1 when onesided=True" if one else "n_fft when onesided=False"
        raise RuntimeError(
            f"pyrite: istft: expected the frequency dimension (3rd to the last) of the input "
            f"tensor to match {rule}, but got {F}"
        )
    norm = "ortho" if normalized else None
    spec = spec.transpose(1, 2)  # (B, T, F)
    if not one:  # (torch: a real result reads the first n_fft // 2 + 1 bins only)
        spec = spec[..., : n_fft // 2 + 1]
    frames = _fft.irfft(spec, n_fft, norm=norm)
    w = _window(window, n_fft, win)
    frames = frames * w  # (B, T, n_fft)
    total = n_fft + hop * (T - 1)

    def overlap_add(cols):  # (B, n_fft, T) -> (B, total)
        return fold(cols, (1, total), (1, n_fft), stride=(1, hop)).reshape(cols._shape[0], total)

    y = overlap_add(frames.transpose(1, 2))
    env = overlap_add((w * w).reshape(1, n_fft, 1).expand(1, n_fft, T))[0]
    start = n_fft // 2 if center else 0
    end = total - (n_fft // 2 if center else 0)
    if length is not None:
        end = min(start + int(length), total)
    y, env = y[:, start:end], env[start:end]
    if float(env.abs().min()) < 1e-11:
        raise RuntimeError("pyrite: istft: window overlap add min: 0 (the NOLA condition fails)")
    y = y / env
    if length is not None and y._shape[1] < int(length):
        y = cat([y, zeros(B, int(length) - y._shape[1])], 1)
    return y[0] if input.ndim == 2 else y


__all__ = ["stft", "istft"]
