"""pyrite's errors. Each names what was wrong and, where there is one, the way out."""


class PyriteError(RuntimeError):
    """Base for pyrite's own runtime errors."""


class ShapeError(ValueError, RuntimeError):
    """Shapes that do not broadcast, multiply or otherwise fit together. A ValueError (pyrite's
    convention) and the RuntimeError PyTorch raises for them ("The size of tensor a (3) must
    match the size of tensor b (4)"), so a ported `except RuntimeError` still catches it."""


class DeviceError(PyriteError):
    """No adapter, a missing feature, or a device that was lost."""


class OutOfMemoryError(PyriteError, MemoryError):
    """A buffer larger than the device's limits or its free memory."""


class KernelError(PyriteError):
    """A kernel failed to compile or validate: a bug in pyrite, reported with its WGSL."""


class LinAlgError(PyriteError):
    """A linear-algebra routine could not complete: a singular matrix for solve or inv, one
    that is not positive-definite for cholesky (torch.linalg.LinAlgError, a RuntimeError)."""
