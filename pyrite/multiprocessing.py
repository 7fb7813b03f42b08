"""torch.multiprocessing: the standard library's multiprocessing, plus `spawn` /
`start_processes` (fn(i, *args) in nprocs processes, an error naming the process that failed)
and the sharing-strategy switches.

Tensors cross process boundaries by value: a pickled tensor carries its values, dtype, shape and
requires_grad, and the receiving process uploads them to its own device (each process opens its
own WebGPU device). There is no shared memory between processes (torch's CPU tensors share
theirs through the queue): a child's in-place writes do not reach the parent's tensor, so the
sharing strategies are recorded and change nothing, and Hogwild-style training (workers updating
one model's parameters) does not share its parameters here; send results back through a Queue.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import tempfile
import warnings
from multiprocessing import *  # noqa: F403
from multiprocessing.reduction import ForkingPickler

from .tensor import Tensor

__all__ = [
    "set_sharing_strategy",
    "get_sharing_strategy",
    "get_all_sharing_strategies",
    "spawn",
    "start_processes",
    "ProcessContext",
    "ProcessException",
    "ProcessRaisedException",
    "ProcessExitedException",
    *multiprocessing.__all__,
]

# ---- sharing strategies (recorded: pyrite's tensors cross by value) ----------------------------
if sys.platform in ("darwin", "win32"):
    _sharing_strategy = "file_system"
    _all_sharing_strategies = {"file_system"}
else:
    _sharing_strategy = "file_descriptor"
    _all_sharing_strategies = {"file_descriptor", "file_system"}


def set_sharing_strategy(new_strategy):
    """Set the strategy for sharing CPU tensors (one of `get_all_sharing_strategies()`).
    Recorded only: pyrite sends tensors by value."""
    global _sharing_strategy
    if new_strategy not in _all_sharing_strategies:
        raise AssertionError(
            f"pyrite: invalid sharing strategy {new_strategy!r}, expected one of "
            f"{_all_sharing_strategies}"
        )
    _sharing_strategy = new_strategy


def get_sharing_strategy():
    """The current strategy for sharing CPU tensors."""
    return _sharing_strategy


def get_all_sharing_strategies():
    """The sharing strategies this system supports."""
    return _all_sharing_strategies


# ---- tensors through queues and pipes ----------------------------------------------------------
def _reduce_tensor(t: Tensor):
    """A tensor put on a queue: by value, as Tensor.__reduce__; a non-leaf that requires grad
    is refused, as torch's reductions refuse it (its graph cannot follow it)."""
    if t.requires_grad and t.grad_fn is not None:
        raise RuntimeError(
            "pyrite: Cowardly refusing to serialize non-leaf tensor which requires_grad, since "
            "autograd does not support crossing process boundaries.  If you just want to "
            "transfer the data, call detach() on the tensor before serializing (e.g., putting "
            "it on the queue)."
        )
    return t.__reduce__()


def init_reductions():
    """Register the tensor reducer with multiprocessing's pickler (done on import)."""
    ForkingPickler.register(Tensor, _reduce_tensor)


init_reductions()


# ---- spawn -------------------------------------------------------------------------------------
class ProcessException(Exception):
    __slots__ = ["error_index", "error_pid"]

    def __init__(self, msg: str, error_index: int, error_pid: int):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.error_pid = error_pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid)


class ProcessRaisedException(ProcessException):
    """A process failed because its function raised: the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """A process failed by a signal or a nonzero exit code."""

    __slots__ = ["exit_code"]

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        args = (self.msg, self.error_index, self.error_pid, self.exit_code, self.signal_name)
        return type(self), args


def _die_with_parent():
    """prctl(PR_SET_PDEATHSIG, SIGINT) on Linux (torch's _prctl_pr_set_pdeathsig): a child
    whose parent dies is interrupted rather than left running."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).prctl(1, int(signal.SIGINT))  # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def _wrap(fn, i, args, error_file):
    _die_with_parent()
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # SIGINT: the parent is stopping us
    except Exception:  # noqa: BLE001 - forwarded to the parent with its traceback
        import traceback

        with open(error_file, "wb") as fh:
            pickle.dump(traceback.format_exc(), fh)
        sys.exit(1)


class ProcessContext:
    """The processes `start_processes` started; `join()` waits for them."""

    def __init__(self, processes, error_files):
        self.error_files = error_files
        self.processes = processes
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self):
        return [int(p.pid) for p in self.processes]

    def join(self, timeout=None, grace_period=None):
        """Wait for a process to finish (at most `timeout` seconds). If one failed, stop the
        others and raise ProcessRaisedException (its traceback) or ProcessExitedException
        naming it. True once every process has finished."""
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(self.sentinels.keys(), timeout=timeout)
        error_index = None
        for sentinel in ready:
            index = self.sentinels.pop(sentinel)
            process = self.processes[index]
            process.join()
            if process.exitcode != 0:
                error_index = index
                break
        if error_index is None:
            return not self.sentinels
        self._stop_others(grace_period)
        failed = self.processes[error_index]
        if not os.access(self.error_files[error_index], os.R_OK):
            code = failed.exitcode
            if code < 0:
                try:
                    name = signal.Signals(-code).name
                except ValueError:
                    name = f"<Unknown signal {-code}>"
                raise ProcessExitedException(
                    f"process {error_index:d} terminated with signal {name}",
                    error_index,
                    failed.pid,
                    code,
                    name,
                )
            raise ProcessExitedException(
                f"process {error_index:d} terminated with exit code {code:d}",
                error_index,
                failed.pid,
                code,
            )
        with open(self.error_files[error_index], "rb") as fh:
            trace = pickle.load(fh)
        msg = f"\n\n-- Process {error_index:d} terminated with the following error:\n" + trace
        raise ProcessRaisedException(msg, error_index, failed.pid)

    def _stop_others(self, grace_period):
        """SIGTERM, then SIGKILL for those still running after the grace period (30 s)."""
        if grace_period is not None:
            for p in self.processes:
                p.join(grace_period)
        for p in self.processes:
            if p.is_alive():
                p.terminate()
        for p in self.processes:
            p.join(30 if grace_period is None else grace_period)
            if p.is_alive():
                p.kill()
                p.join()


class SpawnContext(ProcessContext):
    def __init__(self, processes, error_files):
        warnings.warn("SpawnContext is renamed to ProcessContext since 1.4 release.", stacklevel=2)
        super().__init__(processes, error_files)


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Start `nprocs` processes with `start_method`, process i calling fn(i, *args) (fn must
    be defined at a module's top level, to be pickled). join=True waits for them all and raises
    if one fails; join=False returns their ProcessContext."""
    ctx = multiprocessing.get_context(start_method)
    error_files, processes = [], []
    for i in range(nprocs):
        # a file for the child's traceback: its existence says the child raised
        tf = tempfile.NamedTemporaryFile(prefix="pyrite-errorfile-", suffix=".pickle", delete=False)
        tf.close()
        os.unlink(tf.name)
        process = ctx.Process(target=_wrap, args=(fn, i, args, tf.name), daemon=daemon)
        process.start()
        error_files.append(tf.name)
        processes.append(process)
    context = ProcessContext(processes, error_files)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Spawn `nprocs` processes that run fn(i, *args), i the process index, as
    torch.multiprocessing.spawn: with join=True, wait for all of them; if one fails, the others
    are stopped and ProcessRaisedException (with the failed process's traceback) or
    ProcessExitedException names it. Always the 'spawn' start method (use start_processes for
    another)."""
    if start_method != "spawn":
        warnings.warn(
            f"This method only supports start_method=spawn (got: {start_method}).\n"
            "To use a different start_method use:\n\t\t"
            " torch.multiprocessing.start_processes(...)",
            FutureWarning,
            stacklevel=2,
        )
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")
