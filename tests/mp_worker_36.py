"""Functions the spawned processes of tests/test_api_gaps36.py run (a small module: each child
imports it, and pyrite, and nothing else)."""

from __future__ import annotations

import os

import pyrite as pr


def scale_and_report(i, x, q):
    """Process i: x arrived here by value; send back what it holds and a result computed on
    this process's own device."""
    y = x.detach() * (i + 1) + pr.ones(x.shape, dtype=x.dtype)
    q.put((i, os.getpid(), x, tuple(x.shape), str(x.dtype), x.requires_grad, y))


def fail_in_one(i, bad):
    if i == bad:
        raise ValueError(f"worker {i} failed on purpose")
