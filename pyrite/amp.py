"""Mixed precision as PyTorch scripts spell it: `autocast` and `GradScaler` (torch.amp,
torch.cuda.amp, torch.autocast), so a script using them runs unchanged.

`autocast` is honoured as a scope but computes in float32: pyrite's GEMMs and convolutions have
no float16 path yet (README), so the region runs at full precision — the results are those of
an autocast that chose float32 everywhere, which is always allowed numerically, and no op's
dtype changes. `is_autocast_enabled()` reports the scope, as torch's.

`GradScaler` is the real thing: it multiplies the loss by the scale, unscales the gradients
before the step, skips the step when a gradient is inf/NaN (one readback a step, as torch's
`step()` reads `found_inf` on CUDA), and grows or backs off the scale by torch's rule
(growth_factor every growth_interval finite steps, backoff_factor on an overflow). Its misuse
raises torch's AssertionErrors: unscale_/step/update before the first `scale()`, a `step()` on an
optimizer none of whose parameters has a gradient ("No inf checks were recorded for this
optimizer."), an `update()` with no such check since the last one.
"""

from __future__ import annotations

import functools
import threading

from . import dtypes as D
from .errors import warn as _warn

_state = threading.local()  # .modes: {device_type: (enabled, dtype)}, per thread as torch's


def _default_dtype(device_type):
    return D.bfloat16 if device_type == "cpu" else D.float16


def _mode(device_type):
    modes = getattr(_state, "modes", None)
    if modes is None:
        modes = _state.modes = {}
    return modes, modes.get(device_type, (False, None))


def is_autocast_enabled(device_type=None) -> bool:
    """Whether an enabled autocast scope of `device_type` is in force (None: "cuda", as
    torch's): an inner `autocast(enabled=False)` turns it off, and a scope of one device type
    leaves the others alone."""
    return _mode("cuda" if device_type is None else device_type)[1][0]


def get_autocast_dtype(device_type="cuda"):
    """The dtype of device_type's scope (kept through a disabled inner one), else torch's
    default for it (bfloat16 on "cpu", else float16)."""
    return _mode(device_type)[1][1] or _default_dtype(device_type)


def get_autocast_gpu_dtype():
    return get_autocast_dtype("cuda")


def get_autocast_cpu_dtype():
    return get_autocast_dtype("cpu")


def set_autocast_enabled(device_type, enabled=None):
    """torch.set_autocast_enabled(device_type, enabled), or the old (enabled) form for "cuda":
    turn autocast on or off for a device type outside any `with` (what autocast's __enter__
    does; its __exit__ restores)."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    modes, (_, dtype) = _mode(device_type)
    modes[device_type] = (bool(enabled), dtype or _default_dtype(device_type))


def set_autocast_dtype(device_type, dtype):
    """torch.set_autocast_dtype: the dtype a device type's autocast reports."""
    modes, (enabled, _) = _mode(device_type)
    modes[device_type] = (enabled, dtype)


def is_autocast_cpu_enabled() -> bool:
    return is_autocast_enabled("cpu")


def set_autocast_cpu_enabled(enabled):
    set_autocast_enabled("cpu", enabled)


def set_autocast_cpu_dtype(dtype):
    set_autocast_dtype("cpu", dtype)


def set_autocast_gpu_dtype(dtype):
    set_autocast_dtype("cuda", dtype)


def is_autocast_cache_enabled() -> bool:
    return getattr(_state, "cache", True)


def set_autocast_cache_enabled(enabled):
    """Accepted (pyrite's autocast casts nothing, so there is no cast cache)."""
    _state.cache = bool(enabled)


def clear_autocast_cache():
    """Accepted: there is no cast cache to clear."""


class autocast:
    """torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None): a scope for
    one device type (see the module docstring: pyrite computes inside it in float32).
    dtype=None keeps the device type's current autocast dtype; enabled=False turns autocast
    off inside (`is_autocast_enabled()` is False there), as torch's."""

    def __init__(self, device_type="cuda", dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(
                f"pyrite: expected device_type to be a str, got {type(device_type).__name__}"
            )
        self.device_type, self.dtype, self.enabled = device_type, dtype, bool(enabled)

    def __enter__(self):
        modes, prev = _mode(self.device_type)
        self._prev = prev
        modes[self.device_type] = (self.enabled, self.dtype or get_autocast_dtype(self.device_type))
        return self

    def __exit__(self, *exc):
        _mode(self.device_type)[0][self.device_type] = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.dtype, self.enabled):
                return fn(*args, **kwargs)

        return wrapper


def is_autocast_available(device_type) -> bool:
    """Whether autocast can run on device_type: pyrite's scope runs anywhere."""
    return isinstance(device_type, str)


def _cast(value, dtype):
    """value with its floating tensors (in containers too) cast to dtype, as torch.amp's."""
    from .tensor import Tensor

    if isinstance(value, Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, dict):
        return {k: _cast(v, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype) for v in value)
    return value


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator for a custom autograd Function's forward (torch.amp.custom_fwd): records the
    autocast state on ctx for custom_bwd; with cast_inputs, inside autocast, runs forward with
    autocast off on its floating inputs cast to cast_inputs."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        in_autocast = is_autocast_enabled(device_type)
        if cast_inputs is None or not in_autocast:
            ctx._fwd_used_autocast = in_autocast and cast_inputs is None
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        with autocast(device_type=device_type, enabled=False):
            return fwd(*_cast(args, cast_inputs), **_cast(kwargs, cast_inputs))

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorator for a custom autograd Function's backward (torch.amp.custom_bwd): runs it
    under the autocast state its forward ran in."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        used = getattr(ctx, "_fwd_used_autocast", False)
        with autocast(device_type=device_type, enabled=used, dtype=getattr(ctx, "_dtype", None)):
            return bwd(*args, **kwargs)

    return decorate_bwd


class GradScaler:
    """torch.amp.GradScaler(device="cuda", init_scale=2**16, growth_factor=2.0,
    backoff_factor=0.5, growth_interval=2000, enabled=True)."""

    def __init__(
        self,
        device="cuda",
        init_scale=2.0**16,
        growth_factor=2.0,
        backoff_factor=0.5,
        growth_interval=2000,
        enabled=True,
    ):
        if growth_factor <= 1.0:
            raise ValueError("pyrite: The growth factor must be > 1.0.")
        if backoff_factor >= 1.0:
            raise ValueError("pyrite: The backoff factor must be < 1.0.")
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        # torch makes its scale tensor at the first scale() call, and unscale_/step/update
        # before it raise; the scale itself is kept here as a float from the start
        self._scale_made = False
        # id(optimizer) -> {"unscaled", "stepped", "found_inf"}: found_inf stays None when the
        # optimizer had no gradient to check (torch's empty found_inf_per_device)
        self._per_optimizer = {}

    # ---- scaling -------------------------------------------------------------------------
    def scale(self, outputs):
        if not self._enabled:
            return outputs
        self._scale_made = True
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if outputs.dtype in (D.float16, D.bfloat16):
            # torch multiplies by its float32 scale tensor, so the product is float32 (a
            # float16 loss times 2**16 would overflow to inf)
            outputs = outputs.float()
        return outputs * self._scale

    def _check_scale(self, funcname):
        if not self._scale_made:
            raise AssertionError(
                f"pyrite: Attempted {funcname} but _scale is None.  This may indicate your "
                "script did not use scaler.scale(loss or outputs) earlier in the iteration."
            )

    def _state_of(self, optimizer):
        return self._per_optimizer.setdefault(
            id(optimizer), {"unscaled": False, "stepped": False, "found_inf": None}
        )

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale, in place, and note whether any is
        inf/NaN (one readback for all of them)."""
        if not self._enabled:
            return
        self._check_scale("unscale_")
        st = self._state_of(optimizer)
        if st["stepped"]:
            raise RuntimeError("pyrite: unscale_() is being called after step().")
        if st["unscaled"]:
            raise RuntimeError(
                "pyrite: unscale_() has already been called on this optimizer since the last "
                "update()."
            )
        from . import no_grad
        from .ops.elementwise import isfinite

        inv = 1.0 / self._scale
        finite = None
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.grad.mul_(inv)
                    ok = isfinite(p.grad).all()
                    finite = ok if finite is None else finite & ok
        st["found_inf"] = None if finite is None else not bool(finite.item())
        st["unscaled"] = True

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step() unless an unscaled gradient was inf/NaN; returns its result."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError(
                "pyrite: Closure use is not currently supported if GradScaler is enabled."
            )
        self._check_scale("step")
        st = self._state_of(optimizer)
        if st["stepped"]:
            raise RuntimeError("pyrite: step() has already been called since the last update().")
        if not st["unscaled"]:
            self.unscale_(optimizer)
        if st["found_inf"] is None:  # no parameter of the optimizer had a gradient
            raise AssertionError("pyrite: No inf checks were recorded for this optimizer.")
        st["stepped"] = True
        if st["found_inf"]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        """Grow the scale after growth_interval finite steps, back off after an overflow."""
        if not self._enabled:
            return
        self._check_scale("update")
        if new_scale is not None:
            self._scale = float(new_scale.item() if hasattr(new_scale, "item") else new_scale)
        else:
            checks = [st["found_inf"] for st in self._per_optimizer.values()]
            if all(found is None for found in checks):
                raise AssertionError("pyrite: No inf checks were recorded prior to update.")
            if any(checks):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._per_optimizer = {}

    # ---- inspection and checkpoints --------------------------------------------------------
    def get_scale(self) -> float:
        return self._scale if self._enabled else 1.0

    def is_enabled(self) -> bool:
        return self._enabled

    def get_growth_factor(self):
        return self._growth_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def state_dict(self) -> dict:
        if not self._enabled:
            return {}
        return {
            "scale": self._scale,
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._growth_tracker,
        }

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if not state_dict:
            raise RuntimeError(
                "pyrite: The source state dict is empty, possibly because it was saved from a "
                "disabled instance of GradScaler."
            )
        s = state_dict["scale"]
        self._scale = float(s.item() if hasattr(s, "item") else s)
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        t = state_dict["_growth_tracker"]
        self._growth_tracker = int(t.item() if hasattr(t, "item") else t)


def _deprecated(make, device_type, message):
    """A torch.{cuda,cpu}.amp spelling: warn as torch does, then `make(device_type, ...)`."""

    def spelling(*args, **kwargs):
        _warn(message, FutureWarning)
        return make(device_type, *args, **kwargs)

    return spelling


_cuda_grad_scaler = _deprecated(
    GradScaler,
    "cuda",
    "pyrite: torch.cuda.amp.GradScaler(args...) is deprecated. Please use "
    "torch.amp.GradScaler('cuda', args...) instead.",
)


class _CudaAmp:
    """torch.cuda.amp: autocast and GradScaler as the deprecated spellings."""

    autocast = staticmethod(lambda *a, **k: autocast("cuda", *a, **k))
    GradScaler = staticmethod(_cuda_grad_scaler)
    custom_fwd = staticmethod(
        lambda fwd=None, *, cast_inputs=None: custom_fwd(
            fwd, device_type="cuda", cast_inputs=cast_inputs
        )
    )
    custom_bwd = staticmethod(lambda bwd=None: custom_bwd(bwd, device_type="cuda"))


_cpu_autocast = _deprecated(
    autocast,
    "cpu",
    "pyrite: `torch.cpu.amp.autocast(args...)` is deprecated. Please use "
    "`torch.amp.autocast('cpu', args...)` instead.",
)
_cpu_grad_scaler = _deprecated(
    GradScaler,
    "cpu",
    "pyrite: torch.cpu.amp.GradScaler(args...) is deprecated. Please use "
    "torch.amp.GradScaler('cpu', args...) instead.",
)


class _CpuAmp:
    """torch.cpu.amp: autocast and GradScaler as the deprecated spellings."""

    autocast = staticmethod(_cpu_autocast)
    GradScaler = staticmethod(_cpu_grad_scaler)


class cpu:
    """`pr.cpu` as ported scripts call it (torch.cpu): `pr.cpu.amp.autocast()` (a CPU
    bfloat16 autocast scope, which pyrite computes in float32 as every autocast: see above),
    and the host's device queries. pyrite has one device, which serves "cpu" too."""

    amp = _CpuAmp

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def current_device() -> str:
        return "cpu"

    @staticmethod
    def synchronize(device=None) -> None:
        from .runtime import synchronize

        synchronize()
