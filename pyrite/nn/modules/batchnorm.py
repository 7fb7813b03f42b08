"""torch.nn.modules.batchnorm's names: the batch-norm layers of norm.py and their bases
(`isinstance(m, nn.modules.batchnorm._BatchNorm)` holds for BatchNorm1d/2d/3d and
SyncBatchNorm), and SyncBatchNorm, which on the one device here is batch norm."""

from __future__ import annotations

from .norm import BatchNorm1d, BatchNorm2d, BatchNorm3d, _BatchNorm, _NormBase  # noqa: F401

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm"]


class SyncBatchNorm(_BatchNorm):
    """Batch normalisation of (N, C, *) over every dim but C. With one process there is no
    other replica to share statistics with (as torch's, without a process group), so it is
    BatchNorm for any number of dims; `process_group` is accepted and unused."""

    def __init__(
        self,
        num_features,
        eps=1e-5,
        momentum=0.1,
        affine=True,
        track_running_stats=True,
        process_group=None,
        device=None,
        dtype=None,
        *,
        bias=True,
    ):
        super().__init__(
            num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias
        )
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """`module` with every batch-norm layer in it made a SyncBatchNorm holding the same
        parameters and running statistics (the module itself when it is one)."""
        out = module
        if isinstance(module, _BatchNorm):
            out = cls(
                module.num_features,
                module.eps,
                module.momentum,
                module.affine,
                module.track_running_stats,
                process_group,
            )
            if module.affine:
                out.weight = module.weight
                out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out
