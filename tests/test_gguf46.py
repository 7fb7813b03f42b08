"""pyrite.io.load_gguf: GGUF files written here by llama.cpp's own `gguf` package (GGUFWriter,
its numpy quantizers), read back by pyrite and compared with that package's own dequantization
(the reference), on awkward shapes; the packed formats through the quantized product; the
metadata's types; the Llama Q/K row order; and the refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pyrite as pr
from pyrite.io import CheckpointError
from pyrite.ops.quantized import QuantizedWeight, qlinear

gguf = pytest.importorskip("gguf")
Q = gguf.GGMLQuantizationType


def _write(path, tensors, arch="llama", meta=None):
    """A GGUF file of `tensors` (name -> (array, GGML type or None for F32/F16 arrays))."""
    w = gguf.GGUFWriter(str(path), arch)
    for key, value in (meta or {}).items():
        if isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_int64(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        elif isinstance(value, str):
            w.add_string(key, value)
        else:
            w.add_array(key, value)
    for name, (arr, qt) in tensors.items():
        w.add_tensor(name, arr, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _random_k_blocks(rng, qt, rows, cols):
    """Raw blocks of a format gguf's numpy side only dequantizes (the K-quants): random bytes,
    with each block's leading f16 scale(s) set to small finite values."""
    block, size = gguf.GGML_QUANT_SIZES[qt]
    raw = rng.integers(0, 256, (rows, cols // block, size), dtype=np.uint8)
    heads = {Q.Q4_K: (0, 2), Q.Q5_K: (0, 2), Q.Q6_K: (size - 2,), Q.Q2_K: (size - 4, size - 2)}
    for at in heads[qt]:
        raw[..., at : at + 2] = (
            rng.uniform(0.001, 0.05, raw.shape[:2]).astype(np.float16)[..., None].view(np.uint8)
        )
    return raw.reshape(rows, -1)


@pytest.mark.parametrize("qname", ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"])
@pytest.mark.parametrize("shape", [(7, 96), (1, 32), (13, 160)])
def test_each_format_reads_as_gguf_dequantizes_it(tmp_path, rng, qname, shape):
    a = (rng.standard_normal(shape) * rng.uniform(0.1, 3)).astype(np.float32)
    qt = Q[qname]
    data = {"F32": a, "F16": a.astype(np.float16)}.get(qname)
    if data is None:
        data = gguf.quants.quantize(a, qt)
    p = _write(tmp_path / "m.gguf", {"w": (data, None if qname in ("F32", "F16") else qt)})
    ref = gguf.quants.dequantize(data, qt).astype(np.float32) if data is not a else a
    g = pr.io.load_gguf(p)
    t = g.tensors["w"]
    assert g.types["w"] == qname
    if qname in ("Q8_0", "Q4_0", "Q4_1"):
        assert isinstance(t, QuantizedWeight) and t.shape == shape and t.group_size == 32
        got = t.dequantize().numpy()
        # Q4_1's q·d + m is one float32 rounding (an fma, or not) from gguf's numpy
        tol = 2 * np.finfo(np.float32).eps * np.abs(ref).max() if qname == "Q4_1" else 0.0
        np.testing.assert_allclose(got, ref, rtol=0, atol=tol)
    else:
        want_dtype = {"F16": pr.float16, "BF16": pr.bfloat16}.get(qname, pr.float32)
        assert t.dtype is want_dtype and tuple(t.shape) == shape
        np.testing.assert_array_equal(t.float().numpy(), ref)
    # dequantize=True: every tensor a float tensor of the same values
    d = pr.io.load_gguf(p, dequantize=True).tensors["w"]
    assert isinstance(d, pr.Tensor)
    np.testing.assert_allclose(d.float().numpy(), ref, rtol=0, atol=2 * np.abs(ref).max() * 2**-23)


@pytest.mark.parametrize("qname", ["Q4_K", "Q5_K", "Q6_K", "Q2_K"])
def test_k_quants_are_dequantized_on_the_host(tmp_path, rng, qname):
    qt = Q[qname]
    raw = _random_k_blocks(rng, qt, 5, 512)
    p = _write(tmp_path / "k.gguf", {"blk.0.ffn_down.weight": (raw, qt)})
    g = pr.io.load_gguf(p)
    t = g.tensors["blk.0.ffn_down.weight"]
    assert isinstance(t, pr.Tensor) and tuple(t.shape) == (5, 512) and t.dtype is pr.float32
    np.testing.assert_array_equal(t.numpy(), gguf.quants.dequantize(raw, qt))
    # dtype= casts what is dequantized
    h = pr.io.load_gguf(p, dtype=pr.bfloat16).tensors["blk.0.ffn_down.weight"]
    assert h.dtype is pr.bfloat16


@pytest.mark.parametrize("qname", ["Q8_0", "Q4_0", "Q4_1"])
@pytest.mark.parametrize("M", [1, 3, 40])
def test_packed_weights_multiply_as_their_dequantized_values(tmp_path, rng, qname, M):
    N, K = 11, 224
    w = rng.standard_normal((N, K)).astype(np.float32)
    data = gguf.quants.quantize(w, Q[qname])
    p = _write(
        tmp_path / "q.gguf",
        {"w": (data, Q[qname]), "b": (rng.standard_normal(N).astype(np.float32), None)},
    )
    g = pr.io.load_gguf(p)
    x = rng.standard_normal((M, K)).astype(np.float32)
    ref = x.astype(np.float64) @ gguf.quants.dequantize(data, Q[qname]).T.astype(np.float64)
    ref += g.tensors["b"].numpy()
    got = qlinear(pr.tensor(x), g.tensors["w"], g.tensors["b"]).numpy()
    # K float32 products summed: Higham's K·u bound on the sum of |terms|
    bound = (K + 2) * 2**-24 * (np.abs(x) @ np.abs(gguf.quants.dequantize(data, Q[qname])).T)
    assert (np.abs(got - ref) <= bound + 1e-6).all()
    layer = pr.quantization.QuantizedLinear(g.tensors["w"], g.tensors["b"])
    np.testing.assert_allclose(layer(pr.tensor(x)).numpy(), got, rtol=0, atol=1e-6)


def test_metadata_keeps_its_types(tmp_path, rng):
    meta = {
        "general.name": "tiny ünïcode",
        "llama.block_count": 3,
        "llama.attention.layer_norm_rms_epsilon": 1e-5,
        "x.flag": True,
        "tokenizer.ggml.tokens": ["<s>", "a", "▁b"],
        "tokenizer.ggml.scores": [0.0, -1.5, 2.25],
    }
    p = _write(
        tmp_path / "m.gguf", {"v": (rng.standard_normal(5).astype(np.float32), None)}, meta=meta
    )
    g = pr.io.load_gguf(p)
    assert g.architecture == "llama"
    for key, value in meta.items():
        got = g.metadata[key]
        if isinstance(value, float):
            assert got == pytest.approx(value, rel=2**-23)
        else:
            assert got == value and type(got) is type(value)
    assert not any(k.startswith("GGUF.") for k in g.metadata)
    assert "llama" in repr(g) and "F32" in repr(g)


def test_bf16_tensors_keep_their_bits(tmp_path, rng):
    bits = rng.integers(0, 2**16, (3, 8), dtype=np.uint16)
    bits[0, :3] = (0x7FC1, 0xFFA0, 0x7F81)  # NaNs with payloads
    p = _write(tmp_path / "b.gguf", {"w": (bits.view(np.uint8).reshape(3, 16), Q.BF16)})
    t = pr.io.load_gguf(p).tensors["w"]
    assert t.dtype is pr.bfloat16 and tuple(t.shape) == (3, 8)
    np.testing.assert_array_equal(pr.io._host.tensor_to_host(t), bits)


def _converter_permute(w, n_head):
    """llama.cpp convert_hf_to_gguf.py's LlamaModel.permute, as it is written there."""
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def test_llama_qk_rows_unpermute_to_hugging_face_order(tmp_path, rng):
    n_head, head_dim, d, T = 3, 8, 24, 5
    wq = rng.standard_normal((n_head * head_dim, d)).astype(np.float32)
    wk = rng.standard_normal((n_head * head_dim, d)).astype(np.float32)
    p = _write(
        tmp_path / "l.gguf",
        {"q": (_converter_permute(wq, n_head), None), "k": (_converter_permute(wk, n_head), None)},
    )
    g = pr.io.load_gguf(p)
    np.testing.assert_array_equal(pr.io.unpermute_qk(g.tensors["q"], n_head).numpy(), wq)
    # the point of GGUF's order: an interleaved rotary embedding of its rows gives the same
    # attention scores as the half-split one of Hugging Face's rows
    x = pr.tensor(rng.standard_normal((1, T, d)).astype(np.float32))
    inv = 1.0 / 10000 ** (np.arange(0, head_dim, 2) / head_dim)
    ang = np.outer(np.arange(T), inv).astype(np.float32)
    cos, sin = pr.tensor(np.cos(ang)), pr.tensor(np.sin(ang))

    def scores(q_w, k_w, interleaved):
        q = (x @ q_w.T).reshape(1, T, n_head, head_dim)
        k = (x @ k_w.T).reshape(1, T, n_head, head_dim)
        q = pr.nn.functional.apply_rotary_emb(q, cos, sin, interleaved=interleaved)
        k = pr.nn.functional.apply_rotary_emb(k, cos, sin, interleaved=interleaved)
        return pr.einsum("bthd,bshd->bhts", q, k).numpy()

    hf = scores(pr.tensor(wq), pr.tensor(wk), False)
    gg = scores(g.tensors["q"], g.tensors["k"], True)
    # each score sums head_dim products of projections that sum d products (the rotation
    # mixes two of them with |cos|, |sin| <= 1): float32 error <= c·(d + head_dim)·u·the same
    # sums of magnitudes
    xa = np.abs(x.numpy()[0])
    qa = (xa @ np.abs(wq).T).reshape(T, n_head, head_dim)
    ka = (xa @ np.abs(wk).T).reshape(T, n_head, head_dim)
    qa = qa + qa.reshape(T, n_head, 2, -1)[:, :, ::-1].reshape(T, n_head, head_dim)
    ka = ka + ka.reshape(T, n_head, 2, -1)[:, :, ::-1].reshape(T, n_head, head_dim)
    bound = 4 * (d + head_dim) * 2**-24 * np.einsum("thd,shd->hts", qa, ka)[None]
    assert (np.abs(gg - hf) <= bound).all()
    with pytest.raises(ValueError, match="heads"):
        pr.io.unpermute_qk(g.tensors["q"], 5)


def test_refusals_name_the_file(tmp_path, rng):
    with pytest.raises(FileNotFoundError):
        pr.io.load_gguf(tmp_path / "none.gguf")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file at all" * 4)
    with pytest.raises(CheckpointError, match="bad.gguf"):
        pr.io.load_gguf(bad)
    good = _write(
        tmp_path / "g.gguf", {"w": (rng.standard_normal((9, 64)).astype(np.float32), None)}
    )
    raw = good.read_bytes()
    for cut in (len(raw) - 7, len(raw) // 2, 30):
        short = tmp_path / f"short{cut}.gguf"
        short.write_bytes(raw[:cut])
        with pytest.raises(CheckpointError, match=f"short{cut}.gguf"):
            pr.io.load_gguf(short)
    with pytest.raises(TypeError, match="float dtype"):
        pr.io.load_gguf(good, dtype=pr.int32)


def test_state_dict_dequantizes_packed_weights(tmp_path, rng):
    w = rng.standard_normal((6, 64)).astype(np.float32)
    data = gguf.quants.quantize(w, Q.Q4_0)
    v = rng.standard_normal(4).astype(np.float32)
    g = pr.io.load_gguf(
        _write(tmp_path / "s.gguf", {"a.weight": (data, Q.Q4_0), "a.bias": (v, None)})
    )
    sd = g.state_dict()
    assert list(sd) == ["a.weight", "a.bias"]
    np.testing.assert_array_equal(sd["a.weight"].numpy(), gguf.quants.dequantize(data, Q.Q4_0))
    np.testing.assert_array_equal(sd["a.bias"].numpy(), v)
    assert math.prod(sd["a.weight"].shape) == 6 * 64
