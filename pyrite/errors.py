"""pyrite's errors. Each names what was wrong and, where there is one, the way out."""


class PyriteError(RuntimeError):
    """Base for pyrite's own runtime errors."""


class ShapeError(ValueError, RuntimeError):
    """Shapes that do not broadcast, multiply or otherwise fit together. A ValueError (pyrite's
    convention) and the RuntimeError PyTorch raises for them ("The size of tensor a (3) must
    match the size of tensor b (4)"), so a ported `except RuntimeError` still catches it."""


class ArgumentError(ValueError, RuntimeError):
    """An argument's value outside what the op accepts (a negative beta, a label_smoothing
    past 1, an input length past the sequence). A ValueError, and the RuntimeError PyTorch
    raises for these checks, so a ported `except RuntimeError` still catches it."""


class DtypeError(TypeError, NotImplementedError):
    """An op refusing a dtype (subtraction or negation of bool, abs or floor of bool, frac of
    an integer). A TypeError (pyrite's convention for dtypes) and the RuntimeError torch raises
    for these (its NotImplementedError "... not implemented for 'Bool'" is one), so a ported
    `except RuntimeError` or `except NotImplementedError` still catches it."""


class IndexShapeError(ShapeError, IndexError):
    """A count or shape that does not fit an index or a mask: torch raises IndexError for some
    (index_copy's source length, put_'s element counts) and RuntimeError for others (a
    masked_fill value with dims); both, and the ShapeError pyrite raised before, catch it."""


class IndexDtypeError(DtypeError, IndexError):
    """An index of a dtype the op refuses, where torch raises IndexError (index_fill_'s
    "Expected dtype int64 for index") rather than its usual RuntimeError."""


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument of a kind torch's argument parser refuses with a TypeError (a tensor with
    dims as `full`'s fill_value), which pyrite checked as a value before."""


class ArgumentAssertionError(ArgumentError, AssertionError):
    """An argument torch checks with a Python `assert` (embedding's padding_idx past
    num_embeddings), so a ported `except AssertionError` still catches it."""


class DeviceError(PyriteError):
    """No adapter, a missing feature, or a device that was lost."""


class OutOfMemoryError(PyriteError, MemoryError):
    """A buffer larger than the device's limits or its free memory."""


class KernelError(PyriteError):
    """A kernel failed to compile or validate: a bug in pyrite, reported with its WGSL."""


class LinAlgError(PyriteError):
    """A linear-algebra routine could not complete: a singular matrix for solve or inv, one
    that is not positive-definite for cholesky (torch.linalg.LinAlgError, a RuntimeError)."""


# the tags warn_once has warned of (torch's TORCH_WARN_ONCE: once a process; a test that checks
# such a warning empties it with monkeypatch)
WARNED_ONCE: set = set()


def warn_once(tag, message, category=UserWarning):
    """warn(message) the first time `tag` is met in this process, as torch's TORCH_WARN_ONCE
    (a training loop's every call would otherwise warn)."""
    if tag not in WARNED_ONCE:
        WARNED_ONCE.add(tag)
        warn(message, category)


def warn(message, category=UserWarning, stacklevel=None):
    """warnings.warn attributed to the user's line: the first frame outside the pyrite package
    (op wrappers — autograd's, the bf16 fallback's — add frames a fixed stacklevel cannot know).
    `stacklevel` is accepted for warnings.warn's signature and ignored."""
    import os
    import sys
    import warnings

    root = os.path.dirname(os.path.abspath(__file__)) + os.sep
    level, frame = 2, sys._getframe(1)  # stacklevel 2: warn's caller
    while frame is not None and frame.f_code.co_filename.startswith(root):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)
