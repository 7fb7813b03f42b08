"""torch.serialization's names: save / load (pyrite/io/) and the allowlist a weights_only load
admits beside its defaults (add_safe_globals, safe_globals, ...: pyrite/io/_pickled.py), as
scripts that save and load whole models call them:

    with torch.serialization.safe_globals([Net, torch.nn.modules.conv.Conv2d]):
        model = torch.load(f)
"""

from __future__ import annotations

from .io import load, save
from .io._pickled import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals

__all__ = [
    "add_safe_globals",
    "clear_safe_globals",
    "get_safe_globals",
    "load",
    "safe_globals",
    "save",
]
