"""Shared pytest fixtures and hooks. Keep each block short and say what it is for."""

from __future__ import annotations

import pytest

from pyrite.testing.rng import SEED_ENV, rng_for

# ---- seeds (pyrite/testing/rng.py): keep this block first ---------------------------------
# `rng` is a numpy Generator seeded from the test's node id, so inputs are reproducible; a failing
# test's report ends with its seed and the command that reruns it with the same inputs.


@pytest.fixture
def rng(request):
    gen, seed = rng_for(request.node.nodeid)
    request.node.user_properties.append(("seed", seed))
    return gen


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    seeds = [value for key, value in item.user_properties if key == "seed"]
    if report.failed and seeds:
        text = f"seed={seeds[-1]}, rerun with {SEED_ENV}={seeds[-1]} pytest '{item.nodeid}'"
        if hasattr(report.longrepr, "addsection"):
            report.longrepr.addsection("pyrite seed", text)
        else:
            report.sections.append(("pyrite seed", text))
    return report


# ---- further fixtures below ---------------------------------------------------------------


# ---- a flushing GPU emulated on lavapipe (pyrite/testing/ftz.py) -----------------------------
# PYRITE_EMULATE_FTZ=1: the device's kernels flush float32 subnormals as NVIDIA's do, so the tests
# that judge a flushing device's results (tests/oracle.device_error) run that way here too.
def pytest_configure(config):
    import os

    if os.environ.get("PYRITE_EMULATE_FTZ", "") not in ("", "0"):
        from pyrite import backend
        from pyrite.testing.ftz import flushing

        if not flushing(backend.current).flushes_subnormals:
            raise RuntimeError("PYRITE_EMULATE_FTZ: the device was made before the emulation")


# ---- the loop budget (backend/quirks.py) ---------------------------------------------------
# `loop_budget(n)` makes the device plan kernels as if one invocation could loop only n times,
# so the split paths of every kernel family run at small sizes on any device. `past_budget()`
# is the planners' limit on a budget-limited device (lavapipe: a test past it fails there
# without the split), or a forced small one elsewhere so the same test still takes the split.
@pytest.fixture
def loop_budget(monkeypatch):
    from pyrite import backend

    dev = backend.current()

    def set_budget(n):
        monkeypatch.setattr(dev, "_loop_budget", n)

    return set_budget


@pytest.fixture
def past_budget(loop_budget):
    from pyrite import backend
    from pyrite.ops.core import max_loop_iterations

    def limit():
        if backend.current().loop_budget is None:
            loop_budget(4096)
        return max_loop_iterations()

    return limit


# ---- debug poisoning ----------------------------------------------------------------------
# Every kernel output is filled with NaN (0xDEADBEEF for int32, 7 for bool) before its kernel
# runs, for the whole suite, so an element a kernel forgot to write fails its parity test instead
# of reading a stale value from a recycled buffer. PYRITE_POISON=0 turns it off (to time tests).
@pytest.fixture(autouse=True, scope="session")
def _debug_poison():
    import os

    from pyrite.ops import core

    before = core.POISON
    core.set_poison(os.environ.get("PYRITE_POISON", "1") not in ("", "0"))
    yield
    core.set_poison(before)


# ---- devices without shader-f16 -----------------------------------------------------------
# float16 storage needs the WebGPU feature `shader-f16` (Dawn offers none on the H200). A test
# that stops on exactly that refusal is reported as skipped on such a device, with the reason;
# the refusal itself is asserted in test_errors.py, and the same tests run where the feature is.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    from pyrite import backend
    from pyrite.errors import DeviceError

    try:
        return (yield)
    except DeviceError as exc:
        if "shader-f16" in str(exc) and not backend.current().has_f16:
            pytest.skip(
                f"needs shader-f16, which {backend.current().name} through "
                f"{backend.current().impl} lacks"
            )
        raise


# ---- trusted kernels' index claims --------------------------------------------------------
# With PYRITE_CHECK_TRUSTED=1 the kernels built without run-time index checks (kernels/common.py
# TRUSTED) are instrumented instead (backend/trustcheck.py); each test then fails if one of
# them indexed an array out of range. tests/test_trusted_kernels.py runs a subset this way.
@pytest.fixture(autouse=True)
def _trusted_claims():
    yield
    from pyrite.backend import device

    if device.CHECK_TRUSTED:
        from pyrite import backend

        bad = backend.current().trusted_violation()
        assert bad is None, bad
