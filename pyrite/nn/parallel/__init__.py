"""torch.nn.parallel for one device: DataParallel calls the module it wraps (there are no
replicas to scatter to); DistributedDataParallel exists for `isinstance` unwrapping and, as
torch's without a process group, refuses to be built (pyrite.distributed is not available)."""

from __future__ import annotations

from ..module import Module

__all__ = ["DataParallel", "DistributedDataParallel"]


class DataParallel(Module):
    """`DataParallel(module)`: `.module` is the wrapped module and the forward is its forward,
    so the state_dict's keys are prefixed "module." as torch's. `device_ids`, `output_device`
    and `dim` are accepted (one device)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.device_ids = [0] if device_ids is None else list(device_ids)
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


class DistributedDataParallel(Module):
    def __init__(self, module, *args, **kwargs):
        raise RuntimeError(
            "pyrite: DistributedDataParallel needs a process group, and pyrite.distributed is "
            "not available (one process, one device): use the module itself, or DataParallel"
        )


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """torch.nn.parallel.data_parallel: `module(*inputs, **module_kwargs)` on the one device."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    return module(*inputs, **(module_kwargs or {}))
