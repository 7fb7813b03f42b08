"""GGUF files (llama.cpp's checkpoint format) read into pyrite: `pyrite.io.load_gguf`.

The file is parsed by the `gguf` package (llama.cpp's own Python reader, `pip install gguf`; an
optional dependency, imported only here), which maps it and dequantizes every block format it
knows in numpy. What pyrite adds:

- shapes in PyTorch's order: GGUF lists a tensor's dims innermost first (ggml's ne[0] is the
  row length), so a linear weight stored (ne0 = in, ne1 = out) comes back (out, in), the shape
  `nn.Linear.weight` has;
- the three block formats pyrite's quantized kernels take stay packed (`QuantizedWeight`, group
  size 32, the GGUF block): Q8_0 (int8 q, f16 scale d: w = q·d), Q4_0 (4-bit q, f16 d:
  w = (q - 8)·d, so scale d and offset -8·d, exact in float32), Q4_1 (4-bit q, f16 d and m:
  w = q·d + m). `qlinear(x, w)` and `QuantizedLinear(w)` run them without a float copy;
- every other block format (the K-quants, IQ*, TQ*, MXFP4, ...) is dequantized by `gguf` on the
  host into `dtype` (float32 unless asked), since pyrite has no kernel for its layout;
- F32, F16 and BF16 tensors keep their dtype (BF16 as its raw bits, never widened), integer
  ones become int32 after a range check (pyrite's integers), F64 float32;
- errors: a file that is not GGUF, truncated or damaged raises `CheckpointError` naming it.

A Llama-family file's attention Q and K weights are stored as llama.cpp's converter permuted
them: each head's rows in the interleaved-pairs order of GGUF's rotary embedding (`rope` on
(x[2i], x[2i+1])), not Hugging Face's half-split order. Use them with an interleaved rotary
embedding, or undo the permutation with `unpermute_qk`.
"""

from __future__ import annotations

import math
import os

import numpy as np

from .. import dtypes as D
from ..ops.quantized import QuantizedWeight
from ..tensor import Tensor
from ._host import host_to_tensor
from .errors import CheckpointError

# GGUF block formats kept packed: name -> (bits, how a block's values become QuantizedWeight's)
_KEPT = {"Q8_0": 8, "Q4_0": 4, "Q4_1": 4}
_BLOCK = 32  # the elements of a Q8_0 / Q4_0 / Q4_1 block: QuantizedWeight's group size
# Files at least this large show a progress bar while their tensors go to the device.
PROGRESS_BYTES = 1 << 30


def _gguf():
    try:
        import gguf
    except ImportError as e:
        raise ImportError(
            "pyrite: reading GGUF files needs the `gguf` package (llama.cpp's reader): "
            "pip install 'pyrite[gguf]' (or pip install gguf)"
        ) from e
    return gguf


class GGUFFile:
    """What `load_gguf` read: `metadata` (key -> value: numbers, strings, bools, lists),
    `tensors` (name -> pyrite Tensor, or QuantizedWeight for Q8_0 / Q4_0 / Q4_1 2-D tensors
    when kept packed), and `types` (name -> the tensor's GGUF type name: "F32", "Q4_K", ...)."""

    def __init__(self, path, metadata, tensors, types):
        self.path = path
        self.metadata = metadata
        self.tensors = tensors
        self.types = types

    @property
    def architecture(self):
        """`general.architecture` ("llama", "qwen2", "gpt2", ...), or None."""
        return self.metadata.get("general.architecture")

    def state_dict(self) -> dict:
        """name -> float tensor for every tensor (packed weights dequantized on the device:
        one kernel each, float32), in the file's order."""
        return {
            k: (v.dequantize() if isinstance(v, QuantizedWeight) else v)
            for k, v in self.tensors.items()
        }

    def __repr__(self):
        kinds = {}
        for t in self.types.values():
            kinds[t] = kinds.get(t, 0) + 1
        what = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        return f"GGUFFile({self.path!r}, {self.architecture or 'no architecture'}, {what})"


def _field_value(field, gguf):
    """A metadata field as a Python value (a list for arrays; strings decoded)."""
    v = field.contents()
    if field.types and field.types[0] == gguf.GGUFValueType.BOOL:
        return bool(v)
    if isinstance(v, list) and field.types[-1] == gguf.GGUFValueType.BOOL:
        return [bool(x) for x in v]
    return v


def _packed(name, raw, qtype, shape) -> QuantizedWeight:
    """A Q8_0 / Q4_0 / Q4_1 tensor's blocks ((out, in / 32 · block bytes), uint8) as a
    QuantizedWeight of group size 32."""
    N, K = shape
    blocks = np.ascontiguousarray(raw).reshape(N, K // _BLOCK, -1)
    d = blocks[..., :2].copy().view(np.float16)[..., 0].astype(np.float32)
    if qtype == "Q8_0":
        q = blocks[..., 2:].copy().view(np.int8).reshape(N, K)
        return QuantizedWeight.from_values(q, d, bits=8, group_size=_BLOCK)
    if qtype == "Q4_0":
        nib, offsets = blocks[..., 2:], -8.0 * d
    else:  # Q4_1: its minimum m after d
        nib = blocks[..., 4:]
        offsets = blocks[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
    # a block's 16 bytes: element j in byte j's low nibble, element j + 16 in its high one
    q = np.concatenate([nib & 0x0F, nib >> 4], axis=-1).reshape(N, K)
    return QuantizedWeight.from_values(q, d, offsets, bits=4, group_size=_BLOCK)


def _to_tensor(name, rt, qtype, shape, dtype, gguf, what) -> Tensor:
    raw = rt.data
    if qtype == "BF16":
        bits = np.ascontiguousarray(raw).view(np.uint16).reshape(shape)
        t = host_to_tensor(bits, True, what)
        return t if dtype is None else t.to(dtype)
    if qtype in ("F32", "F16", "F64", "I8", "I16", "I32", "I64"):
        arr = np.asarray(raw).reshape(shape)
        t = host_to_tensor(arr, False, what)
        return t if dtype is None or t.dtype.kind != "f" else t.to(dtype)
    try:
        arr = gguf.quants.dequantize(np.asarray(raw), rt.tensor_type)
    except NotImplementedError as e:
        raise CheckpointError(
            f"pyrite: load_gguf: {what} is of type {qtype}, which the installed gguf package "
            f"cannot dequantize ({e})"
        ) from None
    t = host_to_tensor(np.asarray(arr, np.float32).reshape(shape), False, what)
    return t if dtype is None or dtype is D.float32 else t.to(dtype)


def load_gguf(path, *, dequantize: bool = False, dtype=None, progress=None) -> GGUFFile:
    """Read a GGUF file (llama.cpp's format) into pyrite tensors.

    Args:
        path: the file (str or os.PathLike).
        dequantize: False (default) keeps Q8_0 / Q4_0 / Q4_1 weights of 2 dims packed, as
            `QuantizedWeight`s for `pyrite.ops.quantized.qlinear` and
            `pyrite.quantization.QuantizedLinear`; True makes every tensor a float tensor.
        dtype: the float dtype dequantized tensors take, and float tensors are cast to
            (default: float32 for dequantized blocks; F16 / BF16 / F32 tensors keep theirs).
        progress: show a progress bar (tqdm) while tensors go to the device; None shows one
            for files of PROGRESS_BYTES (1 GiB) and more.

    Returns:
        GGUFFile: `.metadata`, `.tensors`, `.types`, `.architecture`, `.state_dict()`.

    Raises:
        FileNotFoundError: no file at `path`.
        pyrite.io.CheckpointError: not a GGUF file, truncated, damaged, or of a tensor type
            the installed `gguf` package does not know.
        ImportError: the `gguf` package is not installed.

    Example::

        >>> gg = pr.io.load_gguf("tinyllama-q4_0.gguf")
        >>> gg.metadata["llama.block_count"], gg.types["blk.0.attn_q.weight"]
        (22, 'Q4_0')
        >>> layer = pr.quantization.QuantizedLinear(gg.tensors["blk.0.attn_q.weight"])
    """
    gguf = _gguf()
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"pyrite: load_gguf: no file at {path!r}")
    dt = None if dtype is None else D.from_any(dtype)
    if dt is not None and dt.kind != "f":
        raise TypeError(f"pyrite: load_gguf: dtype must be a float dtype, not {dt!r}")
    try:
        reader = gguf.GGUFReader(path)
    except (ValueError, IndexError, KeyError, OverflowError) as e:
        raise CheckpointError(
            f"pyrite: load_gguf: {path!r} is not a readable GGUF file ({e})"
        ) from None
    end = os.path.getsize(path)
    metadata = {
        k: _field_value(f, gguf) for k, f in reader.fields.items() if not k.startswith("GGUF.")
    }
    tensors, types = {}, {}
    total = sum(int(t.n_bytes) for t in reader.tensors)
    show = total >= PROGRESS_BYTES if progress is None else bool(progress)
    items = reader.tensors
    if show:
        from tqdm.auto import tqdm

        items = tqdm(items, desc=f"load_gguf {os.path.basename(path)}", unit="tensor")
    for rt in items:
        name, qtype = rt.name, rt.tensor_type.name
        what = f"tensor {name!r} of {path!r}"
        if rt.data_offset + int(rt.n_bytes) > end or rt.data.nbytes < int(rt.n_bytes):
            raise CheckpointError(
                f"pyrite: load_gguf: {what} runs past the end of the file ({end} bytes): the "
                "file is truncated"
            )
        shape = tuple(int(n) for n in reversed(rt.shape.tolist()))
        if math.prod(shape) != int(rt.n_elements):
            raise CheckpointError(f"pyrite: load_gguf: {what} has a damaged shape {shape}")
        types[name] = qtype
        if qtype in _KEPT and len(shape) == 2 and not dequantize:
            tensors[name] = _packed(name, rt.data, qtype, shape)
        else:
            tensors[name] = _to_tensor(name, rt, qtype, shape, dt, gguf, what)
    return GGUFFile(path, metadata, tensors, types)


def unpermute_qk(weight, n_head: int):
    """A Llama-family Q or K weight (or bias) as llama.cpp's converter stored it in GGUF
    (each head's rows in interleaved rotary pairs) back in Hugging Face's order (each head's
    first half, then its second), for a model with a half-split rotary embedding.

    The converter maps rows (head, 2, dim / 2) -> (head, dim / 2, 2); this is its inverse.
    `weight`: (n_head · head_dim, ...) Tensor; `n_head`: the heads of that projection (K's
    `n_head_kv` under grouped-query attention)."""
    rows = weight.shape[0]
    if n_head < 1 or rows % (2 * n_head):
        raise ValueError(
            f"pyrite: unpermute_qk: {rows} rows do not split into {n_head} heads of an even size"
        )
    rest = tuple(weight.shape[1:])
    w = weight.reshape(n_head, rows // n_head // 2, 2, *rest)
    return w.transpose(1, 2).reshape(rows, *rest)
