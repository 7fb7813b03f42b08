"""pyrite.optim: PyTorch's optimizers and learning-rate schedules.

    opt = pr.optim.AdamW(model.parameters(), lr=3e-4)
    sched = pr.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=1000)
    loss.backward(); opt.step(); sched.step(); opt.zero_grad()

Each optimizer updates a parameter and its state with one fused WGSL dispatch
(kernels/optim.py) and reads nothing back to the host.
"""

from __future__ import annotations

from . import lr_scheduler
from .adagrad import Adagrad
from .adam import Adam
from .adamw import AdamW
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Adagrad", "Adam", "AdamW", "Optimizer", "RMSprop", "SGD", "lr_scheduler"]

# ---- further optimizers (optim2) ---------------------------------------------------------------
from .adadelta import Adadelta  # noqa: E402
from .adamax import Adamax  # noqa: E402
from .asgd import ASGD  # noqa: E402
from .lbfgs import LBFGS  # noqa: E402
from .nadam import NAdam  # noqa: E402
from .radam import RAdam  # noqa: E402
from .rprop import Rprop  # noqa: E402

__all__ += ["ASGD", "Adadelta", "Adamax", "LBFGS", "NAdam", "RAdam", "Rprop"]

from . import swa_utils  # noqa: E402

__all__ += ["swa_utils"]

# ---- Adafactor and SparseAdam (breadth) --------------------------------------------------------
from .adafactor import Adafactor  # noqa: E402
from .sparse_adam import SparseAdam  # noqa: E402

__all__ += ["Adafactor", "SparseAdam"]

# ---- Muon (torch 2.9's torch.optim.Muon) ------------------------------------------------------
from .muon import Muon  # noqa: E402

__all__ += ["Muon"]
