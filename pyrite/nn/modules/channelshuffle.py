"""torch.nn.modules.channelshuffle's names (the classes live in upsample.py), for code that names a class
by its torch file (`torch.serialization.safe_globals([torch.nn.modules.channelshuffle.ChannelShuffle])`)."""

from .upsample import ChannelShuffle  # noqa: F401

__all__ = ["ChannelShuffle"]
