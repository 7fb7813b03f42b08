"""AdaptiveLogSoftmaxWithLoss (Grave et al., "Efficient softmax approximation for GPUs"): the
frequent classes (the shortlist) and one entry per rarer cluster share a head softmax; a target
in cluster i adds its log-probability within the cluster, from a low-rank tail projection run
on the rows whose target falls there. Parameter names are torch's (`head.weight`,
`tail.0.0.weight`, `tail.0.1.weight`, ...), so a torch checkpoint loads.

The targets are read back to the host once a forward (which rows go to which cluster: torch's
`nonzero` per cluster syncs on CUDA the same way); the rows are then gathered and scattered on
the device.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ... import dtypes as D
from ...ops.combine import cat
from ...ops.creation import tensor, zeros
from .. import functional as F
from ..module import Module
from .container import ModuleList, Sequential
from .linear import Linear

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


def _index(values) -> object:
    return tensor(np.asarray(values, np.int32), dtype=D.int32)


class AdaptiveLogSoftmaxWithLoss(Module):
    """Efficient softmax approximation (torch.nn.AdaptiveLogSoftmaxWithLoss).

    Args:
        in_features (int): features of the input.
        n_classes (int): number of classes.
        cutoffs (Sequence[int]): increasing cutoffs between 1 and n_classes - 1: classes
            [0, cutoffs[0]) are the shortlist, [cutoffs[i], cutoffs[i+1]) cluster i.
        div_value (float): cluster i's projection has in_features // div_value**(i+1)
            features. Default: 4.0.
        head_bias (bool): the head has a bias. Default: False.

    forward(input, target) returns a named tuple (output, loss): output (N,) the target's
    log-probability for each row, loss the mean of -output. Shapes: input (N, in_features) and
    target (N,), or (in_features,) and a 0-d target.
    """

    def __init__(
        self,
        in_features,
        n_classes,
        cutoffs,
        div_value=4.0,
        head_bias=False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (
            cutoffs != sorted(cutoffs)
            or min(cutoffs) <= 0
            or max(cutoffs) > n_classes - 1
            or len(set(cutoffs)) != len(cutoffs)
            or any(int(c) != c for c in cutoffs)
        ):
            raise ValueError(
                "cutoffs should be a sequence of unique, positive integers sorted in an "
                "increasing order, where each value is between 1 and n_classes-1"
            )
        kw = {"device": device, "dtype": dtype}
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, **kw)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(
                Sequential(
                    Linear(in_features, hsz, bias=False, **kw), Linear(hsz, osz, bias=False, **kw)
                )
            )

    def reset_parameters(self) -> None:
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_, target_):
        targ_dim = target_.ndim
        if targ_dim == 1:
            if input_.shape[0] != target_.shape[0]:
                raise RuntimeError(
                    "Input and target should have the same size in the batch dimension."
                )
            if input_.ndim != 2:
                raise RuntimeError(
                    "1D target tensor expects 2D input tensors, but found inputs with size "
                    f"{tuple(input_.shape)}"
                )
        elif targ_dim == 0:
            if input_.ndim != 1:
                raise RuntimeError(
                    "0D target tensor expects 1D input tensors, but found inputs with size "
                    f"{tuple(input_.shape)}"
                )
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = targ_dim > 0
        input = input_ if batched else input_.unsqueeze(0)  # (N, in_features)
        target = np.asarray(target_.numpy()).reshape(-1).astype(np.int64)  # (N,) on the host
        n = target.shape[0]
        bounds = [0, *self.cutoffs]
        if n and (target.min() < 0 or target.max() >= self.n_classes):
            raise RuntimeError(
                f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                f"[{target.min()}, {target.max()}] were found. "
            )
        gather_inds = np.where(target < self.shortlist_size, target, 0)
        order, pieces = [], []
        for i in range(len(bounds) - 1):
            rows = np.nonzero((target >= bounds[i]) & (target < bounds[i + 1]))[0]
            if rows.size == 0:
                continue
            order.append(rows)
            if i == 0:
                pieces.append(zeros((rows.size,), dtype=input.dtype))
                continue
            gather_inds[rows] = self.shortlist_size + i - 1
            idx = _index(rows)
            cluster_logprob = F.log_softmax(self.tail[i - 1](input.index_select(0, idx)), dim=1)
            relative = _index(target[rows] - bounds[i]).unsqueeze(1)
            pieces.append(cluster_logprob.gather(1, relative).squeeze(1))  # (rows,)
        # the clusters' rows back in batch order: output[order[j]] = pieces[j]
        inverse = np.empty(n, np.int64)
        inverse[np.concatenate(order) if order else []] = np.arange(n)
        output = cat(pieces).index_select(0, _index(inverse)) if n else zeros((0,))
        head_logprob = F.log_softmax(self.head(input), dim=1)
        output = output + head_logprob.gather(1, _index(gather_inds).unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        if not batched:
            output = output.squeeze(0)
        return _ASMoutput(output, loss)

    def _get_full_log_prob(self, input, head_output):
        """log p of every class, (N, n_classes), from the input and the head's output."""
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, : self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            parts.append(cluster_logprob + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return cat(parts, dim=1)

    def log_prob(self, input):
        """Log-probabilities of all n_classes: (N, in_features) -> (N, n_classes)."""
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input):
        """The most probable class of each row, (N,): log_prob(input).argmax(1), with the tails
        run only on rows whose head argmax is a cluster (one readback of those rows)."""
        head_output = self.head(input)
        output = head_output.argmax(dim=1)
        outside = np.nonzero(output.numpy() >= self.shortlist_size)[0]
        if outside.size == 0:
            return output
        if outside.size == output.shape[0]:
            return self._get_full_log_prob(input, head_output).argmax(dim=1)
        idx = _index(outside)
        log_prob = self._get_full_log_prob(
            input.index_select(0, idx), head_output.index_select(0, idx)
        )
        return output.index_copy(0, idx, log_prob.argmax(dim=1).to(output.dtype))
