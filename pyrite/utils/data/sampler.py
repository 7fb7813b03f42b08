"""Samplers, as torch.utils.data.sampler: which indices a DataLoader reads, in which order.

Random samplers draw on the host from a `pyrite.Generator` (utils/data/_random.py): with
`generator=None` they use the default generator, so `pr.manual_seed(s)` fixes every shuffle.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable

import numpy as np

from ...tensor import Tensor
from . import _random

__all__ = [
    "BatchSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
]


class Sampler:
    """Base class of samplers: an iterable of dataset indices (or of lists of them, for a batch
    sampler). Subclasses define `__iter__`, and `__len__` where the length is known."""

    def __init__(self, data_source=None) -> None:
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1, in order."""

    def __init__(self, data_source) -> None:
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


def _positive_int(value, name) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value > 0


class RandomSampler(Sampler):
    """Indices in random order: a permutation (or `num_samples // n` whole permutations and a
    part of one) without replacement, or `num_samples` uniform draws with replacement.

    Args:
        data_source: the dataset (anything with `__len__`).
        replacement (bool): draw with replacement. Default: False.
        num_samples (int): how many indices to draw. Default: len(data_source).
        generator (pyrite.Generator): the stream to draw from (None: the default generator).
    """

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError(
                f"replacement should be a boolean value, but got replacement={self.replacement}"
            )
        if not _positive_int(self.num_samples, "num_samples"):
            raise ValueError(
                "num_samples should be a positive integer value, but got "
                f"num_samples={self.num_samples}"
            )

    @property
    def num_samples(self) -> int:
        if self._num_samples is None:
            return len(self.data_source)
        return self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        k = self.num_samples
        if self.replacement:
            yield from _random.randint(n, k, self.generator)
            return
        for _ in range(k // n):
            yield from _random.randperm(n, self.generator)
        if k % n:
            yield from _random.randperm(n, self.generator)[: k % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in random order (without replacement)."""

    def __init__(self, indices, generator=None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in _random.randperm(len(self.indices), self.generator):
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """`num_samples` indices in [0, len(weights)), index i with probability proportional to
    weights[i] (torch.multinomial's rule), with or without replacement."""

    def __init__(self, weights, num_samples, replacement=True, generator=None) -> None:
        if not _positive_int(num_samples, "num_samples"):
            raise ValueError(
                f"num_samples should be a positive integer value, but got num_samples={num_samples}"
            )
        if not isinstance(replacement, bool):
            raise ValueError(
                f"replacement should be a boolean value, but got replacement={replacement}"
            )
        w = weights.float().numpy() if isinstance(weights, Tensor) else np.asarray(weights)
        w = np.asarray(w, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(
                f"weights should be a 1d sequence but given weights have shape {tuple(w.shape)}"
            )
        self.weights = w
        self.num_samples = int(num_samples)
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        w = self.weights
        if (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
            raise RuntimeError(
                "pyrite: invalid multinomial distribution (sum of probabilities <= 0)"
            )
        if not self.replacement and self.num_samples > np.count_nonzero(w):
            raise RuntimeError(
                "pyrite: cannot sample n_sample > prob_dist.size(-1) samples without replacement"
            )
        rng = _random.host_rng(self.generator, self.num_samples)
        yield from rng.choice(
            len(w), size=self.num_samples, replace=self.replacement, p=w / w.sum()
        ).tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of `batch_size` (the last one shorter unless
    `drop_last`).

    Example::

        >>> list(BatchSampler(SequentialSampler(range(10)), batch_size=3, drop_last=False))
        [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    """

    def __init__(self, sampler: Iterable, batch_size: int, drop_last: bool) -> None:
        if not _positive_int(batch_size, "batch_size"):
            raise ValueError(
                f"batch_size should be a positive integer value, but got batch_size={batch_size}"
            )
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
