"""pyrite.save / pyrite.load: round trips of nested checkpoints in every dtype, torch.save files
(zip and legacy) read without torch and equal to torch's values, the restricted unpickler,
atomic saves, and the errors for missing, truncated and foreign files."""

from __future__ import annotations

import collections
import io
import os
import pickle

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite.io import CheckpointError, UnpicklingError

DTYPES = ["float32", "float16", "bfloat16", "int32", "uint8", "int8", "int16", "bool"]


def _random(rng, shape, name):
    if name == "bool":
        return pr.tensor(rng.random(shape) < 0.5)
    if name in ("float32", "float16", "bfloat16"):
        return pr.tensor(rng.standard_normal(shape).astype(np.float32)).to(getattr(pr, name))
    info = np.iinfo(getattr(np, name))
    return pr.tensor(rng.integers(info.min, info.max, size=shape, endpoint=True), dtype=name)


def _values(t):
    return t.float().numpy() if t.dtype is pr.bfloat16 else t.numpy()


def _equal(a, b):
    assert a.dtype is b.dtype and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(_values(a), _values(b))


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_every_dtype(rng, tmp_path, dtype):
    base = _random(rng, (7, 6), dtype)
    obj = {
        "model": collections.OrderedDict(
            [
                ("w", base),
                ("view", base.T[1::2]),  # non-contiguous
                ("scalar", _random(rng, (), dtype)),
                ("empty", _random(rng, (0, 3), dtype)),
            ]
        ),
        "step": 17,
        "lr": 3e-4,
        "betas": (0.9, 0.999),
        "name": "run",
        "flags": [True, None, float("inf")],
        "state": {0: {"exp_avg": _random(rng, (5,), dtype)}, 1: {}},
    }
    path = tmp_path / "ckpt.pt"
    pr.save(obj, path)
    got = pr.load(path)
    assert type(got["model"]) is collections.OrderedDict and list(got["model"]) == list(
        obj["model"]
    )
    for k, v in obj["model"].items():
        _equal(got["model"][k], v)
    _equal(got["state"][0]["exp_avg"], obj["state"][0]["exp_avg"])
    assert got["state"][1] == {} and list(got["state"]) == [0, 1]
    assert (got["step"], got["lr"], got["betas"], got["name"]) == (17, 3e-4, (0.9, 0.999), "run")
    assert got["flags"] == [True, None, float("inf")] and type(got["flags"][0]) is bool
    # a file object works the same
    buf = io.BytesIO()
    pr.save(obj, buf)
    buf.seek(0)
    _equal(pr.load(buf)["model"]["view"], obj["model"]["view"])


def test_file_is_plain_safetensors_and_shares_tensors(rng, tmp_path):
    w = _random(rng, (4, 3), "float32")
    sd = {"enc.weight": w, "dec.weight": w, "h": _random(rng, (3,), "bfloat16")}
    path = tmp_path / "m.safetensors"
    pr.save(sd, path)
    got = pr.load(path)
    assert got["dec.weight"] is got["enc.weight"]  # stored once, one tensor again
    raw_keys = set(torch_load_safetensors(path))
    assert raw_keys == {"enc.weight", "h"}
    np.testing.assert_array_equal(torch_load_safetensors(path)["enc.weight"].numpy(), w.numpy())
    # bfloat16 is BF16 in the file: torch reads the same values
    import safetensors.torch

    th = safetensors.torch.load_file(str(path))["h"]
    assert th.dtype == torch.bfloat16
    np.testing.assert_array_equal(th.float().numpy(), _values(sd["h"]))


def torch_load_safetensors(path):
    import safetensors.torch

    return safetensors.torch.load_file(str(path))


def test_foreign_safetensors(rng, tmp_path):
    import safetensors.torch

    tensors = {
        "a": torch.randn(3, 5),
        "b": torch.arange(7, dtype=torch.int64),
        "c": torch.randn(4, dtype=torch.float64),
        "d": torch.randn(2, 2).bfloat16(),
    }
    path = tmp_path / "x.safetensors"
    safetensors.torch.save_file(tensors, str(path))
    got = pr.load(path)
    assert set(got) == set(tensors)
    assert got["b"].dtype is pr.int32 and got["c"].dtype is pr.float32
    assert got["d"].dtype is pr.bfloat16
    for k, v in tensors.items():
        np.testing.assert_array_equal(
            _values(got[k]), v.float().numpy().astype(_values(got[k]).dtype)
        )


def _torch_checkpoint(seed):
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(6, 5, generator=g)
    shared = torch.randn(10, generator=g)
    f16 = torch.randn(3, 4, generator=g).half()
    obj = {
        "f32": base,
        "bf16": torch.randn(5, generator=g).bfloat16(),
        "i64": torch.randint(-(2**31), 2**31 - 1, (9,), generator=g),
        "bool": torch.rand(4, 3, generator=g) < 0.5,
        "f64": torch.randn(3, generator=g, dtype=torch.float64),
        "view": base.t()[1:, ::2],  # non-contiguous, offset into its storage
        "shared_a": shared[2:7],
        "shared_b": shared.view(2, 5),
        "param": torch.nn.Parameter(torch.randn(2, 2, generator=g)),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 4),
        "meta": {"epoch": 3, "names": ["a", "b"], "size": torch.Size([2, 3])},
    }
    from pyrite import backend

    if backend.current().has_f16:  # float16 storage needs shader-f16 (tests/conftest.py)
        obj["f16"] = f16
    return obj


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_torch_save_files(rng, tmp_path, legacy):
    obj = _torch_checkpoint(int(rng.integers(1 << 30)))
    path = tmp_path / "model.pt"
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
    with open(path, "rb") as fh:
        assert fh.read(2) == (b"PK" if not legacy else b"\x80\x02")
    got = pr.load(path)
    want = torch.load(path, weights_only=True)
    for k, v in want.items():
        if k == "meta":
            continue
        t = got[k]
        assert tuple(t.shape) == tuple(v.shape), k
        assert t.stride() == v.stride(), k  # views come back as views
        if v.dtype == torch.float16:
            assert t.dtype is pr.float16
        expect = v.detach().float().numpy() if v.dtype.is_floating_point else v.numpy()
        np.testing.assert_array_equal(
            _values(t), expect.astype(np.float32) if t.dtype.is_floating_point else expect
        )
    assert got["i64"].dtype is pr.int32 and got["f64"].dtype is pr.float32
    assert got["bf16"].dtype is pr.bfloat16 and got["bool"].dtype is pr.bool
    assert got["param"].requires_grad and not got["f32"].requires_grad
    assert got["meta"] == {"epoch": 3, "names": ["a", "b"], "size": (2, 3)}
    # a shared storage stays shared: writing through one view shows in the other
    got["shared_b"][0, 3] = 100.0
    assert got["shared_a"][1].item() == 100.0


def test_torch_int64_out_of_range(tmp_path):
    path = tmp_path / "big.pt"
    torch.save({"ids": torch.tensor([1, 2**40])}, path)
    with pytest.raises(CheckpointError, match=r"do not fit in int32.*|int32"):
        pr.load(path)


def test_torch_state_dict_into_pyrite(tmp_path):
    """A torch module's state dict loads with the same keys, shapes and values."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.BatchNorm1d(7))
    path = tmp_path / "pytorch_model.bin"
    torch.save(model.state_dict(), path)
    got = pr.load(path)
    assert list(got) == list(model.state_dict())
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(got[k].numpy(), v.numpy().astype(got[k].numpy().dtype))
    assert got["1.num_batches_tracked"].dtype is pr.int32


def test_torch_state_dict_into_pyrite_module(tmp_path):
    if not hasattr(pr.nn, "Linear"):
        pytest.skip("pyrite.nn modules are not on this branch yet")
    torch.manual_seed(1)
    tm = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.BatchNorm1d(7))
    tm.train()(torch.randn(9, 5))  # running statistics that are not the defaults
    path = tmp_path / "pytorch_model.pth"
    torch.save(tm.state_dict(), path)
    pm = pr.nn.Sequential(pr.nn.Linear(5, 7), pr.nn.BatchNorm1d(7))
    pm.load_state_dict(pr.load(path))
    for k, v in tm.state_dict().items():
        got = pm.state_dict()[k]
        np.testing.assert_array_equal(got.numpy(), v.numpy().astype(got.numpy().dtype))


def test_weights_only_false_admits_plain_objects(tmp_path):
    import argparse

    path = tmp_path / "args.pt"
    torch.save({"args": argparse.Namespace(lr=0.1), "w": torch.ones(3)}, path)
    with pytest.raises(UnpicklingError, match="argparse.Namespace"):
        pr.load(path)
    got = pr.load(path, weights_only=False)
    assert got["args"].lr == 0.1 and got["w"].tolist() == [1.0, 1.0, 1.0]


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_malicious_pickle_is_refused(tmp_path, monkeypatch, legacy):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "evil.pt"
    torch.save({"w": torch.ones(2), "x": _Evil()}, path, _use_new_zipfile_serialization=not legacy)
    ran = []
    monkeypatch.setattr(os, "system", lambda cmd: ran.append(cmd) or 0)
    with pytest.raises(UnpicklingError, match=r"GLOBAL (posix|os)\.system was not an allowed"):
        pr.load(path)
    assert not ran and not (tmp_path / "pwned").exists()
    assert isinstance(UnpicklingError("x"), pickle.UnpicklingError)


def test_torch_module_pickle_refused(tmp_path):
    path = tmp_path / "whole.pt"
    torch.save(torch.nn.Linear(2, 3), path)
    with pytest.raises(UnpicklingError, match="torch.nn.modules.linear.Linear"):
        pr.load(path)


def test_plain_pickle_and_foreign_files(tmp_path):
    p = tmp_path / "plain.pkl"
    p.write_bytes(pickle.dumps({"a": 1}, protocol=2))
    with pytest.raises(CheckpointError, match="plain.pkl.*not a torch.save file"):
        pr.load(p)
    t = tmp_path / "notes.txt"
    t.write_text("hello, this is text")
    with pytest.raises(CheckpointError, match="notes.txt.*not a checkpoint pyrite reads"):
        pr.load(t)
    e = tmp_path / "empty.pt"
    e.write_bytes(b"")
    with pytest.raises(CheckpointError, match="empty.pt.*is empty"):
        pr.load(e)
    import zipfile

    z = tmp_path / "other.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("readme.md", "x")
    with pytest.raises(CheckpointError, match="other.zip.*without data.pkl"):
        pr.load(z)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file.*nowhere.pt"):
        pr.load(tmp_path / "nowhere.pt")


@pytest.mark.parametrize("kind", ["pyrite", "zip", "legacy"])
def test_truncated_files(rng, tmp_path, kind):
    path = tmp_path / f"cut_{kind}.pt"
    if kind == "pyrite":
        pr.save({"w": _random(rng, (50, 7), "float32")}, path)
    else:
        torch.save({"w": torch.randn(50, 7)}, path, _use_new_zipfile_serialization=kind == "zip")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(CheckpointError, match=f"cut_{kind}.pt.*(truncated|damaged)"):
        pr.load(path)


@pytest.mark.parametrize("name", ["ckpt.pt", "ckpt.safetensors"])
def test_atomic_save_keeps_previous_file(rng, tmp_path, monkeypatch, name):
    """A save that fails part-way through writing (the torch.save archive streamed record by
    record, or the safetensors bytes) leaves the previous file and no temporary file."""
    import pyrite.io as pio

    path = tmp_path / name
    old = {"w": _random(rng, (3, 3), "float32")}
    pr.save(old, path)
    before = path.read_bytes()

    def fail(fh, data):
        fh.write(data[: len(data) // 2])
        raise OSError("disk full")

    if name.endswith(".pt"):
        real = pio._torch_write._record

        def fail_record(zf, fh, rec, data):  # (the first storage's record, half written)
            if "/data/" in rec:
                fail(fh, data)
            real(zf, fh, rec, data)

        monkeypatch.setattr(pio._torch_write, "_record", fail_record)
    else:
        monkeypatch.setattr(pio, "_write_all", fail)
    with pytest.raises(OSError, match="disk full"):
        pr.save({"w": _random(rng, (30, 30), "float32")}, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == [name]  # no temporary file left behind
    _equal(pr.load(path)["w"], old["w"])


def test_save_refuses_unpicklable_objects(tmp_path):
    """Objects that are not plain data are pickled (a whole model, as torch.save); what pickle
    cannot take (a local function) raises pickle's error, as torch's, and writes nothing."""
    with pytest.raises((AttributeError, pickle.PicklingError), match="pickle"):
        pr.save({"opt": {"fn": lambda: 0}}, tmp_path / "x.pt")
    assert not os.path.exists(tmp_path / "x.pt")


def test_save_into_a_missing_folder(tmp_path):
    """torch's error, naming the folder (it named pyrite's temporary file); nothing written."""
    path = tmp_path / "nope" / "a.pt"
    with pytest.raises(RuntimeError, match="Parent directory .*nope does not exist"):
        pr.save({"a": pr.ones(2)}, path)
    assert not (tmp_path / "nope").exists()
