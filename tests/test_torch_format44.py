"""pr.save writes PyTorch's torch.save zip format for plain data (pyrite/io/_torch_write.py):
torch.load (weights_only=True, and mmap=True) and pr.load read it back exactly, every dtype,
views and tied tensors sharing one storage, parameters, state-dict metadata; a pyrite model's
state dict loads into the same torch model; what is not plain data keeps pyrite's container."""

from __future__ import annotations

import collections
import io
import struct
import zipfile

import numpy as np
import pytest

import pyrite as pr

torch = pytest.importorskip("torch")

DTYPES = {  # pyrite dtype -> (torch dtype, how a random array of it is drawn)
    "float32": (torch.float32, lambda g, s: g.standard_normal(s).astype(np.float32)),
    "float16": (torch.float16, lambda g, s: g.standard_normal(s).astype(np.float16)),
    "bfloat16": (torch.bfloat16, lambda g, s: g.standard_normal(s).astype(np.float32)),
    "int32": (torch.int32, lambda g, s: g.integers(-(2**31), 2**31 - 1, s, dtype=np.int32)),
    "int16": (torch.int16, lambda g, s: g.integers(-(2**15), 2**15 - 1, s, dtype=np.int16)),
    "int8": (torch.int8, lambda g, s: g.integers(-128, 127, s, dtype=np.int8)),
    "uint8": (torch.uint8, lambda g, s: g.integers(0, 255, s, dtype=np.uint8)),
    "bool": (torch.bool, lambda g, s: g.random(s) < 0.5),
    "complex64": (
        torch.complex64,
        lambda g, s: (g.standard_normal(s) + 1j * g.standard_normal(s)).astype(np.complex64),
    ),
}


def _pr_tensor(arr, name):
    t = pr.tensor(arr)
    return t.to(getattr(pr, name)) if name == "bfloat16" else t


def _as_numpy(t):
    """Values of a torch or pyrite tensor, bfloat16 widened to float32 (exact)."""
    if str(t.dtype).endswith("bfloat16"):
        t = t.float()
    return np.asarray(t.numpy())


@pytest.mark.parametrize("name", list(DTYPES))
def test_every_dtype_and_view_through_torch_and_pyrite(rng, tmp_path, name):
    """Random values of awkward shapes, with a transposed view, a strided slice, a flipped
    (negative-stride) view, a 0-d and an empty tensor: torch.load and pr.load give them back
    bit for bit, in their dtype (torch's), shape and strides."""
    tdt, draw = DTYPES[name]
    base = _pr_tensor(draw(rng, (7, 13)), name)
    sd = collections.OrderedDict(
        base=base,
        t=base.T,
        strided=base[1:6:2, ::3],
        flipped=base.flip(1) if name != "complex64" else base[::2],
        scalar=_pr_tensor(draw(rng, ()), name),
        empty=_pr_tensor(draw(rng, (0, 5)), name),
    )
    path = tmp_path / f"x_{name}.pt"
    pr.save(sd, path)
    got_t = torch.load(path, weights_only=True)
    got_p = pr.load(path)
    assert list(got_t) == list(sd) == list(got_p)
    for k, v in sd.items():
        want = _as_numpy(v)
        assert got_t[k].dtype == tdt, k
        assert tuple(got_t[k].shape) == tuple(v.shape) == tuple(got_p[k].shape), k
        np.testing.assert_array_equal(_as_numpy(got_t[k]), want, err_msg=k)
        np.testing.assert_array_equal(_as_numpy(got_p[k]), want, err_msg=k)
        assert got_p[k].dtype is v.dtype, k
    assert tuple(got_t["t"].stride()) == (1, 13)
    assert tuple(got_p["t"].stride()) == (1, 13)


def test_records_are_aligned_and_mmap_loads(rng, tmp_path):
    """Every record's bytes start at a multiple of 64 (torch's alignment), the archive has
    torch's records, and torch.load(mmap=True) maps the storages."""
    sd = {"a": pr.tensor(rng.standard_normal(33).astype(np.float32)), "b": pr.ones(5, 3).half()}
    path = tmp_path / "ckpt.pt"
    pr.save(sd, path)
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        for info in zf.infolist():
            assert info.compress_type == zipfile.ZIP_STORED
            n, e = struct.unpack("<HH", raw[info.header_offset + 26 : info.header_offset + 30])
            assert (info.header_offset + 30 + n + e) % 64 == 0, info.filename
        assert zf.read("ckpt/version") == b"3\n" and zf.read("ckpt/byteorder") == b"little"
    assert names[0] == "ckpt/data.pkl" and "ckpt/data/0" in names and "ckpt/data/1" in names
    got = torch.load(path, mmap=True, weights_only=True)
    np.testing.assert_array_equal(got["a"].numpy(), sd["a"].numpy())
    np.testing.assert_array_equal(got["b"].float().numpy(), np.ones((5, 3)))


def test_file_objects_and_structure(rng):
    """A file object gets the archive name torch gives one; the structure around the tensors
    (nested dicts, lists, tuples, a Counter, None, strings, bytes, numbers, a dtype, a Size,
    an OrderedDict's _metadata) comes back as torch would have saved it."""
    w = pr.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    sd = collections.OrderedDict(weight=w)
    sd._metadata = collections.OrderedDict({"": {"version": 1}})
    obj = {
        "model": sd,
        "opt": {"state": {0: {"step": 7, "exp_avg": w * 0.5}}, "param_groups": [{"lr": 1e-3}]},
        "milestones": collections.Counter([30, 30, 80]),
        "pair": (1.5, None, "x", b"\x00\x01", True, 2**40, -0.0),
        "dtype": pr.bfloat16,
        "shape": w.shape,
        "np_scalar": np.float32(0.25),
    }
    buf = io.BytesIO()
    pr.save(obj, buf)
    raw = buf.getvalue()
    assert zipfile.ZipFile(io.BytesIO(raw)).namelist()[0] == "archive/data.pkl"
    got = torch.load(io.BytesIO(raw), weights_only=True)
    assert got["model"]._metadata == {"": {"version": 1}}
    np.testing.assert_array_equal(got["model"]["weight"].numpy(), w.numpy())
    np.testing.assert_array_equal(got["opt"]["state"][0]["exp_avg"].numpy(), w.numpy() * 0.5)
    assert got["opt"]["state"][0]["step"] == 7 and got["opt"]["param_groups"] == [{"lr": 1e-3}]
    assert got["milestones"] == collections.Counter([30, 30, 80])
    assert got["pair"] == (1.5, None, "x", b"\x00\x01", True, 2**40, -0.0)
    assert got["dtype"] is torch.bfloat16 and got["shape"] == torch.Size([3, 4])
    assert got["np_scalar"] == 0.25
    back = pr.load(io.BytesIO(raw))
    assert back["model"]._metadata == {"": {"version": 1}}
    assert back["dtype"] is pr.bfloat16 and tuple(back["shape"]) == (3, 4)
    assert back["pair"] == obj["pair"] and back["milestones"] == obj["milestones"]
    np.testing.assert_array_equal(back["opt"]["state"][0]["exp_avg"].numpy(), w.numpy() * 0.5)


def test_parameters_and_requires_grad():
    """A Parameter comes back a Parameter (torch's and pyrite's), requires_grad as saved."""
    p = pr.nn.Parameter(pr.ones(2, 2))
    frozen = pr.nn.Parameter(pr.zeros(3), requires_grad=False)
    leaf = pr.ones(4).requires_grad_()
    buf = io.BytesIO()
    pr.save({"p": p, "frozen": frozen, "leaf": leaf, "plain": pr.ones(1)}, buf)
    got = torch.load(io.BytesIO(buf.getvalue()), weights_only=True)
    assert isinstance(got["p"], torch.nn.Parameter) and got["p"].requires_grad
    assert isinstance(got["frozen"], torch.nn.Parameter) and not got["frozen"].requires_grad
    assert not isinstance(got["leaf"], torch.nn.Parameter) and got["leaf"].requires_grad
    assert not got["plain"].requires_grad
    back = pr.load(io.BytesIO(buf.getvalue()))
    assert isinstance(back["p"], pr.nn.Parameter) and back["p"].requires_grad
    assert isinstance(back["frozen"], pr.nn.Parameter) and not back["frozen"].requires_grad
    assert back["leaf"].requires_grad and not back["plain"].requires_grad


def _net(nn):
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
        nn.Linear(4 * 5 * 5, 7), nn.LayerNorm(7), nn.Linear(7, 2),
    )  # fmt: skip


def test_a_pyrite_models_state_dict_loads_into_torch(rng, tmp_path):
    """A pyrite model trained a step (BatchNorm's running stats and count moved) and saved with
    pr.save loads into the same torch model with load_state_dict(strict=True), and the two
    compute the same outputs (eval mode)."""
    pm = _net(pr.nn)
    x = rng.standard_normal((6, 3, 5, 5)).astype(np.float32)
    opt = pr.optim.SGD(pm.parameters(), lr=0.1)
    pm(pr.tensor(x)).square().mean().backward()
    opt.step()
    path = tmp_path / "model.pt"
    pr.save(pm.state_dict(), path)
    tm = _net(torch.nn)
    missing = tm.load_state_dict(torch.load(path, weights_only=True), strict=True)
    assert not missing.missing_keys and not missing.unexpected_keys
    assert int(tm[1].num_batches_tracked) == 1
    pm.eval()
    tm.eval()
    with torch.no_grad():
        want = tm(torch.tensor(x)).numpy()
    got = pm(pr.tensor(x)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_what_is_not_plain_data_keeps_pyrites_container(rng, tmp_path):
    """A whole Module and a numpy array are not what torch.load's weights_only rule reads:
    such a checkpoint is pyrite's safetensors container, which pr.load reads by default."""
    arr = rng.standard_normal(5)
    for obj in ({"arr": arr, "w": pr.ones(2)}, pr.nn.Linear(3, 2)):
        path = tmp_path / "obj.pt"
        pr.save(obj, path)
        assert not path.read_bytes().startswith(b"PK")
        back = pr.load(path) if isinstance(obj, dict) else pr.load(path, weights_only=False)
        if isinstance(obj, dict):
            np.testing.assert_array_equal(back["arr"], arr)
        else:
            np.testing.assert_array_equal(back.weight.detach().numpy(), obj.weight.detach().numpy())


def test_a_failed_save_leaves_the_previous_file(tmp_path, monkeypatch):
    """A save that fails while writing the zip format keeps the file that was there."""
    from pyrite.io import _torch_write

    path = tmp_path / "keep.pt"
    pr.save({"w": pr.ones(3)}, path)
    before = path.read_bytes()

    def broken(self):
        raise OSError("disk full")

    monkeypatch.setattr(_torch_write._Stored, "host", broken)
    with pytest.raises(OSError, match="disk full"):
        pr.save({"w": pr.zeros(3)}, path)
    assert path.read_bytes() == before
    np.testing.assert_array_equal(pr.load(path)["w"].numpy(), np.ones(3))
