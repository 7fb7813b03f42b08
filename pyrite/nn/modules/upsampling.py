"""torch.nn.modules.upsampling's names (the classes live in upsample.py), for code that names a class
by its torch file (`torch.serialization.safe_globals([torch.nn.modules.upsampling.Upsample])`)."""

from .upsample import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401

__all__ = ["Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d"]
