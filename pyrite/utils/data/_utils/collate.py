"""Collating samples into batches, as torch.utils.data._utils.collate: `default_collate`,
`default_convert`, and the extensible `collate(batch, collate_fn_map=...)`.

The types follow torch's default_collate, with pyrite's dtypes (README "Differences from
PyTorch"): Python ints become int32 tensors (pyrite's int64), floats float32 (torch: float64),
bools bool; strings and bytes stay lists; numpy arrays are stacked on the host and uploaded once
a batch (torch converts each sample); pyrite tensors are stacked on the device (one op).
"""

from __future__ import annotations

import collections.abc
import copy
import re

import numpy as np

from .... import dtypes as D
from ....tensor import Tensor

__all__ = ["collate", "default_collate", "default_collate_fn_map", "default_convert"]

np_str_obj_array_pattern = re.compile(r"[SaUO]")

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)


def _as_tensor(data):
    from ....ops.creation import as_tensor

    return as_tensor(data)


def _stack_host(batch) -> np.ndarray:
    """np.stack with torch.stack's error for unequal shapes."""
    first = batch[0].shape
    for i, b in enumerate(batch):
        if b.shape != first:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(first)} at entry 0 "
                f"and {list(b.shape)} at entry {i}"
            )
    return np.stack(batch)


def collate_tensor_fn(batch, *, collate_fn_map=None):
    from ....ops.combine import stack

    return stack(list(batch), 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    elem = batch[0]
    if np_str_obj_array_pattern.search(elem.dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(elem.dtype))
    # one upload for the batch, not one a sample
    return _as_tensor(_stack_host(batch))


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    return _as_tensor(np.asarray(batch))


def collate_float_fn(batch, *, collate_fn_map=None):
    from ....ops.creation import tensor

    return tensor(list(batch), dtype=D.float32)  # torch: float64, which pyrite stores as f32


def collate_int_fn(batch, *, collate_fn_map=None):
    from ....ops.creation import tensor

    return tensor(list(batch))  # int64 -> int32 (range-checked); all bools -> bool


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


default_collate_fn_map: dict = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def collate(batch, *, collate_fn_map=None):
    """Collate a list of samples by the type of the first: a function of `collate_fn_map`
    (looked up by exact type, then by isinstance in insertion order), else recursing into
    mappings (a batch of dicts is a dict of batches), namedtuples, and sequences (a batch of
    tuples is a list of batches, torch's rule)."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for collate_type in collate_fn_map:
            if isinstance(elem, collate_type):
                return collate_fn_map[collate_type](batch, collate_fn_map=collate_fn_map)

    if isinstance(elem, collections.abc.Mapping):
        items = {
            key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map) for key in elem
        }
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = copy.copy(elem)  # keeps the mapping's type and its attributes
                clone.update(items)
                return clone
            return elem_type(items)
        except TypeError:  # a mapping type that cannot be made from a dict
            return items
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(collate(s, collate_fn_map=collate_fn_map) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        it = iter(batch)
        elem_size = len(next(it))
        if not all(len(e) == elem_size for e in it):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [collate(s, collate_fn_map=collate_fn_map) for s in transposed]
        try:
            if isinstance(elem, collections.abc.MutableSequence):
                clone = copy.copy(elem)
                for i, samples in enumerate(transposed):
                    clone[i] = collate(samples, collate_fn_map=collate_fn_map)
                return clone
            return elem_type([collate(s, collate_fn_map=collate_fn_map) for s in transposed])
        except TypeError:
            return [collate(s, collate_fn_map=collate_fn_map) for s in transposed]
    raise TypeError(default_collate_err_msg_format.format(elem_type))


def default_collate(batch):
    """Collate a list of samples into a batch, as torch.utils.data.default_collate.

    ======================  =========================================================
    sample element          batch
    ======================  =========================================================
    pyrite Tensor           `pr.stack(batch)` (one device op)
    numpy array             stacked on the host, one upload (float64 -> float32,
                            int64 -> int32 after a range check)
    numpy scalar            a tensor of the batch
    float / int / bool      a float32 / int32 / bool tensor
    str / bytes             the list, unchanged
    Mapping                 a mapping of the same type, each key collated
    namedtuple              the namedtuple, each field collated
    tuple                   a list, each position collated (torch's rule)
    other Sequence          the same type (else a list), each position collated
    ======================  =========================================================

    Example::

        >>> default_collate([(0, np.zeros(3)), (1, np.ones(3))])
        [tensor([0, 1], dtype=pyrite.int32), tensor([[0., 0., 0.], [1., 1., 1.]])]
    """
    return collate(batch, collate_fn_map=default_collate_fn_map)


def default_convert(data):
    """Convert numpy arrays and scalars in a sample to tensors, recursing into containers and
    leaving everything else as it is: the collate_fn of a DataLoader with `batch_size=None`."""
    elem_type = type(data)
    if isinstance(data, Tensor):
        return data
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_"):
        if (
            elem_type.__name__ == "ndarray"
            and np_str_obj_array_pattern.search(data.dtype.str) is not None
        ):
            return data
        return _as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        items = {key: default_convert(data[key]) for key in data}
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)
                clone.update(items)
                return clone
            return elem_type(items)
        except TypeError:
            return items
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                for i, d in enumerate(data):
                    clone[i] = default_convert(d)
                return clone
            return elem_type([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
