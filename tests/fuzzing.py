"""What the differential fuzzers' test files share: loading a fuzzer from scripts/ (the
scripts are run from the command line, not imported as a package) and a seeded run of it."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

SCRIPTS = pathlib.Path(__file__).resolve().parents[1] / "scripts"


def load_script(name: str):
    """scripts/<name>.py as a module (registered in sys.modules: dataclasses look their module
    up there; scripts/ on sys.path for their `import fuzz_driver`)."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, mod)
    spec.loader.exec_module(mod)
    return mod


def seeded_failures(fz, seeds) -> list[str]:
    """Each failing seed of fuzzer module `fz` (its `build(seed)`, or `Gen(seed).build()`, and
    `check`), with its verdict and the case described."""
    build = getattr(fz, "build", None) or (lambda seed: fz.Gen(seed).build())
    fails = []
    for seed in seeds:
        case = build(int(seed))
        status, detail = fz.check(case)
        if status == "fail":
            fails.append(f"seed {seed}: {detail}\n{fz.describe(case)}")
    return fails


def raises_alike(fn):
    """fn(T) for T in (torch, pyrite) raises in both or in neither (asserted); returns the two
    exception types (None where it did not raise)."""
    import warnings

    import torch

    import pyrite as pr

    out = []
    for T in (torch, pr):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                fn(T)
                out.append(None)
            except Exception as e:  # noqa: BLE001 (the types are compared)
                out.append(type(e))
    assert (out[0] is None) == (out[1] is None), out
    return out
