"""Datasets, as torch.utils.data.dataset: map-style `Dataset`, `IterableDataset`, `TensorDataset`
(pyrite tensors or numpy arrays), `StackDataset`, `ConcatDataset`, `ChainDataset`, `Subset`,
and `random_split`."""

from __future__ import annotations

import bisect
import itertools
import math
import numbers

import numpy as np

from pyrite.errors import warn as _warn

from ...tensor import Tensor
from . import _random

__all__ = [
    "ChainDataset",
    "ConcatDataset",
    "Dataset",
    "IterableDataset",
    "StackDataset",
    "Subset",
    "TensorDataset",
    "random_split",
]


class Dataset:
    """An abstract map-style dataset: subclasses define `__getitem__` (an index to a sample)
    and, for the default samplers, `__len__`. `a + b` is `ConcatDataset([a, b])`.

    A subclass may also define `__getitems__(indices)` returning the list of samples of a batch
    at once; the DataLoader then calls it instead of `__getitem__` once per index.
    """

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """An abstract dataset that is an iterable of samples (a stream): subclasses define
    `__iter__`. `a + b` is `ChainDataset([a, b])`."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        return ChainDataset([self, other])


def _first_dim(t) -> int:
    shape = t.shape
    if not len(shape):
        raise IndexError(
            "pyrite: TensorDataset: dimension specified as 0 but tensor has no dimensions"
        )
    return shape[0]


class TensorDataset(Dataset):
    """A dataset wrapping tensors (pyrite tensors or numpy arrays); sample `i` is
    `tuple(t[i] for t in tensors)`.

    Args:
        *tensors: tensors with the same size of the first dimension.

    Indexing with a 1-d integer tensor, list or array of indices gathers a whole batch at once
    (one device op a pyrite tensor; numpy arrays stay on the host until the batch is collated),
    which is what the DataLoader does for a TensorDataset with the default collate_fn.
    """

    def __init__(self, *tensors):
        for t in tensors:
            if not isinstance(t, (Tensor, np.ndarray)):
                raise TypeError(
                    f"pyrite: TensorDataset takes pyrite tensors or numpy arrays, not "
                    f"{type(t).__name__}"
                )
        # torch: assert all(tensors[0].size(0) == tensor.size(0) ...), "Size mismatch between
        # tensors"; an AssertionError, kept as torch raises it
        if tensors and not all(_first_dim(tensors[0]) == _first_dim(t) for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def _batch(self, indices: list):
        """The collated batch of `indices` (what default_collate of the samples gives), one
        gather a tensor: pyrite tensors are indexed by a device index tensor, numpy arrays by a
        numpy index array and uploaded once."""
        from ...ops.creation import from_host, tensor

        idx_np = np.asarray(indices, dtype=np.int64)
        idx = None
        out = []
        for t in self.tensors:
            if isinstance(t, Tensor):
                if idx is None:
                    idx = tensor(idx_np)
                out.append(t[idx])
            else:
                out.append(from_host(t[idx_np]))
        return out  # default_collate turns a batch of tuples into a list (torch's rule)

    def __len__(self):
        return _first_dim(self.tensors[0])


class StackDataset(Dataset):
    """Samples of several datasets of one length, stacked as a tuple (positional arguments) or a
    dict (keyword arguments): `StackDataset(images, texts)[i] == (images[i], texts[i])`."""

    def __init__(self, *args, **kwargs):
        if args:
            if kwargs:
                raise ValueError(
                    "Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) "
                    "like input/output, but both types are given."
                )
            self._length = len(args[0])
            if any(self._length != len(d) for d in args):
                raise ValueError("Size mismatch between datasets")
            self.datasets = args
        elif kwargs:
            tmp = list(kwargs.values())
            self._length = len(tmp[0])
            if any(self._length != len(d) for d in tmp):
                raise ValueError("Size mismatch between datasets")
            self.datasets = kwargs
        else:
            raise ValueError("At least one dataset should be passed")

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self):
        return self._length


class ConcatDataset(Dataset):
    """The concatenation of map-style datasets: index `i` runs through each in turn."""

    @staticmethod
    def cumsum(sequence):
        r, s = [], 0
        for e in sequence:
            s += len(e)
            r.append(s)
        return r

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if len(self.datasets) == 0:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        dataset_idx = bisect.bisect_right(self.cumulative_sizes, idx)
        sample_idx = idx if dataset_idx == 0 else idx - self.cumulative_sizes[dataset_idx - 1]
        return self.datasets[dataset_idx][sample_idx]


class ChainDataset(IterableDataset):
    """The chaining of iterable datasets: each one's samples in turn."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list) -> list:
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[idx] for idx in indices])
        return [self.dataset[self.indices[idx]] for idx in indices]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Split `dataset` at random into non-overlapping Subsets of the given lengths, or of the
    given fractions of its length (floor of each, the remainder dealt one at a time from the
    first split on, as torch). `generator` (a `pyrite.Generator`, the default one if None)
    makes the split reproducible.

    Example::

        >>> train, val = random_split(range(10), [0.8, 0.2], generator=pr.Generator().manual_seed(42))
    """
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        subset_lengths = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            subset_lengths.append(int(math.floor(len(dataset) * frac)))
        remainder = len(dataset) - sum(subset_lengths)
        for i in range(remainder):
            subset_lengths[i % len(subset_lengths)] += 1
        lengths = subset_lengths
        for i, length in enumerate(lengths):
            if length == 0:
                _warn(
                    f"Length of split at index {i} is 0. This might result in an empty dataset.",
                    stacklevel=2,
                )
    if any(not isinstance(n, numbers.Integral) for n in lengths):
        raise ValueError(
            f"pyrite: random_split: lengths must be integers, or fractions that sum to 1; got "
            f"{lengths}"
        )
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = _random.randperm(sum(lengths), generator)
    return [
        Subset(dataset, indices[offset - length : offset])
        for offset, length in zip(itertools.accumulate(lengths), lengths)
    ]
