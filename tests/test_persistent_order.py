"""Device.persistent (a kernel's scratch kept for the device's life) writes its first bytes by a
queue write, which lands before the whole open batch is submitted. So the buffer it takes must
not be one an earlier command of that batch uses: a buffer released during the open batch is
exactly that. Here an upload feeds a copy, the upload's tensor dies inside the same batch, and a
new persistent buffer of its size is made: the copy must still read the uploaded values (it read
the persistent buffer's zeros before the fix: an attention's log-sum-exp sink, made this way,
zeroed a bias that load_state_dict was copying, tests/test_hunt_modules.py's
TransformerEncoderLayer case when run after another module's test)."""

from __future__ import annotations

import itertools

import numpy as np

import pyrite as pr
from pyrite import backend

_keys = itertools.count()


def test_persistent_buffer_is_not_one_the_open_batch_uses(rng):
    dev = backend.current()
    for n in (64, 1000, 4096):
        vals = rng.standard_normal(n).astype(np.float32)
        pr.synchronize()  # (a batch of its own: the copy below opens it)
        src = pr.tensor(vals)  # an upload: the queue writes it before the batch
        dst = pr.empty(n)
        dst.copy_(src)  # a recorded command that reads src's buffer
        nbytes = src._storage.buffer.size
        del src  # released while the batch is open
        st = dev.persistent(("test.persistent_order", next(_keys)), bytes(nbytes))
        np.testing.assert_array_equal(dst.numpy(), vals)
        # and the persistent buffer holds its own bytes
        got = np.frombuffer(dev.read(st.buffer, 0, nbytes), np.float32)
        np.testing.assert_array_equal(got, np.zeros(nbytes // 4, np.float32))
