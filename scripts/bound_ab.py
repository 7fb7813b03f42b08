"""The operators' bound plans (ops/bound.py) on and off in one process: the bench's chain of
1,000 dependent adds, timed to completion (as `pyrite bench --only overhead`), and its host
share alone (the time to record the chain, before the synchronisation), alternating on and off
three times. `PYRITE_BACKEND=wgpu|dawn python scripts/bound_ab.py`"""

import statistics
import time

import pyrite as pr
from pyrite.ops import bound

CHAIN = 1000


def chain(x):
    y = x
    for _ in range(CHAIN):
        y = y + 1
    return y


def timed(x, reps=7):
    whole, host = [], []
    for _ in range(reps):
        pr.synchronize()
        t0 = time.perf_counter()
        y = chain(x)
        t1 = time.perf_counter()
        pr.synchronize()
        t2 = time.perf_counter()
        del y
        host.append((t1 - t0) / CHAIN * 1e6)
        whole.append((t2 - t0) / CHAIN * 1e6)
    return statistics.median(whole), statistics.median(host)


def switch(on):
    for methods in bound.OPERATORS.values():
        for meth in methods:
            f = getattr(pr.Tensor, meth)
            slow = getattr(f, "_pyrite_bound", None)
            if not on and slow is not None:
                setattr(pr.Tensor, meth, slow)
    if on:
        bound.install(pr.Tensor)


def main():
    from pyrite import backend

    dev = backend.current()
    print(f"{dev.name} ({dev.impl}); µs an add: to completion / recording alone")
    x = pr.ones(1024)
    chain(x)
    pr.synchronize()
    for _ in range(3):
        for on in (True, False):
            switch(on)
            chain(x)  # (warm: plans, pool)
            whole, host = timed(x)
            print(f"  bound {'on ' if on else 'off'}: {whole:6.2f} / {host:6.2f}")
    switch(True)


if __name__ == "__main__":
    main()
