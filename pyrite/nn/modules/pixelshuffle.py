"""torch.nn.modules.pixelshuffle's names (the classes live in upsample.py), for code that names a class
by its torch file (`torch.serialization.safe_globals([torch.nn.modules.pixelshuffle.PixelShuffle])`)."""

from .upsample import PixelShuffle, PixelUnshuffle  # noqa: F401

__all__ = ["PixelShuffle", "PixelUnshuffle"]
