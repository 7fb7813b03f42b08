"""DataLoader, as torch.utils.data.DataLoader: an iterable of batches from a dataset, a sampler
and a collate function, with torch's arguments, defaults and errors.

Everything runs in the main process: `num_workers > 0` is accepted (so a ported script runs) and
warned about once; `pin_memory` is accepted and ignored (a pyrite batch is uploaded to the device
when it is collated). A `TensorDataset` (or a `Subset` of one) read with the default collate_fn
is batched by one gather a tensor (`TensorDataset._batch`) instead of `batch_size` small reads.
"""

from __future__ import annotations

from pyrite.errors import warn as _warn

from ._utils.collate import default_collate, default_convert
from .dataset import IterableDataset, Subset, TensorDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]

_warned_workers = False


def get_worker_info():
    """None: pyrite loads data in the main process (torch returns None there too)."""
    return None


class _InfiniteConstantSampler(Sampler):
    """The sampler of an IterableDataset: None forever (the dataset's iterator decides)."""

    def __iter__(self):
        while True:
            yield None


class DataLoader:
    """Combines a dataset and a sampler, and iterates over batches of the dataset.

    Args:
        dataset (Dataset): a map-style dataset (`__getitem__`, `__len__`) or an
            IterableDataset.
        batch_size (int, optional): samples a batch (default: 1); None turns automatic
            batching off (each sample passes through `collate_fn`, default_convert).
        shuffle (bool, optional): reshuffle the indices every epoch (default: False).
        sampler (Sampler or Iterable, optional): the order of indices; exclusive with shuffle.
        batch_sampler (Sampler or Iterable, optional): yields lists of indices; exclusive with
            batch_size, shuffle, sampler and drop_last.
        num_workers (int, optional): accepted; pyrite loads in the main process (a warning
            says so once when it is > 0).
        collate_fn (Callable, optional): merges a list of samples into a batch
            (default: default_collate).
        pin_memory (bool, optional): accepted and ignored.
        drop_last (bool, optional): drop the last incomplete batch (default: False).
        timeout, worker_init_fn, multiprocessing_context, prefetch_factor,
            persistent_workers, pin_memory_device, in_order: accepted, checked as torch checks
            them, and otherwise unused (no worker processes).
        generator (pyrite.Generator, optional): the stream the RandomSampler shuffles with
            (default: pyrite's default generator, so `pr.manual_seed` fixes the order).

    Example::

        >>> ds = TensorDataset(pr.randn(100, 3), pr.randint(0, 2, (100,)))
        >>> for x, y in DataLoader(ds, batch_size=32, shuffle=True):
        ...     pass
    """

    _FROZEN = (
        "batch_size",
        "batch_sampler",
        "sampler",
        "drop_last",
        "dataset",
        "persistent_workers",
    )

    def __init__(
        self,
        dataset,
        batch_size=1,
        shuffle=None,
        sampler=None,
        batch_sampler=None,
        num_workers=0,
        collate_fn=None,
        pin_memory=False,
        drop_last=False,
        timeout=0,
        worker_init_fn=None,
        multiprocessing_context=None,
        generator=None,
        *,
        prefetch_factor=None,
        persistent_workers=False,
        pin_memory_device="",
        in_order=True,
    ):
        global _warned_workers
        if num_workers < 0:
            raise ValueError(
                "num_workers option should be non-negative; use num_workers=0 to disable "
                "multiprocessing."
            )
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing."
                "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor "
                "to None."
            )
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if num_workers > 0 and not _warned_workers:
            _warned_workers = True
            _warn(
                f"pyrite: DataLoader(num_workers={num_workers}): pyrite loads data in the main "
                "process (no worker processes, worker_init_fn not called): a map-style dataset's "
                "batches are the same; an IterableDataset is iterated once, as by one worker "
                "(torch's workers each iterate it, sharded by get_worker_info() or not)",
                stacklevel=2,
            )

        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            if shuffle not in (False, None):
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified shuffle option, "
                    f"but got shuffle={shuffle}"
                )
            if sampler is not None:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified sampler option, "
                    f"but got sampler={sampler}"
                )
            if batch_sampler is not None:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified batch_sampler "
                    f"option, but got batch_sampler={batch_sampler}"
                )
        else:
            shuffle = bool(shuffle)

        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, "
                    "sampler, and drop_last"
                )
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError(
                "batch_size=None option disables auto-batching and is mutually exclusive with "
                "drop_last"
            )

        if sampler is None:
            if iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self._iterable = iterable
        self._default_collate = collate_fn is None
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.__initialized = True

    def __setattr__(self, attr, val):
        if self.__dict__.get("_DataLoader__initialized") and attr in self._FROZEN:
            raise ValueError(
                f"{attr} attribute should not be set after {self.__class__.__name__} is initialized"
            )
        super().__setattr__(attr, val)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self) -> int:
        if self._iterable:
            length = len(self.dataset)
            if self.batch_size is not None:
                if self.drop_last:
                    return length // self.batch_size
                return -(-length // self.batch_size)
            return length
        return len(self._index_sampler)

    def __iter__(self):
        if self._iterable:
            return self._iter_iterable()
        return self._iter_map()

    # ---- map-style datasets ------------------------------------------------------------
    def _fast_batch(self):
        """The batched reader of a TensorDataset (or a Subset chain over one) with the default
        collate_fn: indices -> collated batch in one gather a tensor; None where there is none."""
        if not (self._auto_collation and self.collate_fn is default_collate):
            return None
        ds, maps = self.dataset, []
        while isinstance(ds, Subset):
            maps.append(ds.indices)
            ds = ds.dataset
        if type(ds) is not TensorDataset:  # a subclass may override __getitem__
            return None

        def read(indices):
            for m in maps:
                indices = [m[i] for i in indices]
            return ds._batch(indices)

        return read

    def _iter_map(self):
        fast = self._fast_batch()
        dataset, collate_fn = self.dataset, self.collate_fn
        getitems = getattr(dataset, "__getitems__", None)
        for index in self._index_sampler:
            if not self._auto_collation:
                yield collate_fn(dataset[index])
            elif fast is not None and len(index):
                yield fast(list(index))  # (an empty batch: collate_fn([]) raises, as torch's)
            elif callable(getitems):
                yield collate_fn(getitems(list(index)))
            else:
                yield collate_fn([dataset[i] for i in index])

    # ---- iterable datasets -------------------------------------------------------------
    def _iter_iterable(self):
        it = iter(self.dataset)
        if not self._auto_collation:
            for sample in it:
                yield self.collate_fn(sample)
            return
        # the batch sampler of an IterableDataset yields lists of None: only their lengths count
        for index in self.batch_sampler:
            batch = []
            for _ in index:
                try:
                    batch.append(next(it))
                except StopIteration:
                    break
            if not batch or (self.drop_last and len(batch) < len(index)):
                return
            yield self.collate_fn(batch)
            if len(batch) < len(index):
                return
