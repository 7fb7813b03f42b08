"""The import direction of DESIGN.md ("Layers, and which way imports go") and STYLE.md, checked
by parsing every module under pyrite/ with `ast` (nothing is imported, so this needs no GPU):

- `kernels/` (WGSL text) and `backend/` (wgpu calls) never import each other;
- only `backend/` imports `wgpu` or `wgpudawn`;
- `testing/` imports only numpy, the standard library and `pyrite.dtypes`, so a reference cannot
  share a bug with the code it checks;
- at module level, a layer imports only layers above it in STYLE.md's order (imports inside a
  function, or under `if TYPE_CHECKING:`, are left to review).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "pyrite"

# STYLE.md: dtypes, errors -> kernels | backend -> tensor, ops, autograd -> compile -> nn, optim
# -> io, models -> cli, bench. A module may import its own rank or lower, except where FORBIDDEN.
RANK = {
    "dtypes": 0,
    "errors": 0,
    "version": 0,  # torch.version, torch.jit, torch.distributed: import nothing from pyrite
    "jit": 0,
    "distributed": 0,
    "kernels": 1,
    "backend": 1,
    "tensor": 2,
    "ops": 2,
    "autograd": 2,
    "autograd_functional": 2,
    "random": 2,  # torch.random: the default generator (ops/)
    "compile": 3,
    "compiler": 3,  # torch.compiler: is_compiling() reads compile/_state
    "nn": 4,
    "quantization": 4,
    "optim": 4,
    "io": 5,
    "onnx": 5,  # torch.onnx.export: traces nn modules
    "models": 5,
    "web": 5,  # browser bundles: a compile recording written out
    "cli": 6,
    "bench": 6,
    "demo": 6,
    "__main__": 6,
}
FORBIDDEN = {"kernels": {"backend"}, "backend": {"kernels"}}
GPU_PACKAGES = {"wgpu", "wgpudawn"}
TESTING_ALLOWED = {"numpy", "pyrite.dtypes", "pyrite.testing"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(path: Path):
    """(imported module, line, at module level) for every import in `path`, relative ones
    resolved. `from x import y` yields x and x.y (y may be a submodule)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []

    def visit(node, top_level):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, top_level) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - child.level + 1])
                    base = f"{base}.{child.module}" if child.module else base
                else:
                    base = child.module
                found.append((base, child.lineno, top_level))
                found.extend(
                    (f"{base}.{a.name}", child.lineno, top_level)
                    for a in child.names
                    if a.name != "*"
                )
            elif isinstance(child, ast.Call) and _literal_import(child):
                found.append((_literal_import(child), child.lineno, False))
            if (
                isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                or isinstance(child, ast.If)
                and _is_type_checking(child.test)
            ):
                visit(child, False)
            else:
                visit(child, top_level)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), True)
    return found


def _literal_import(call: ast.Call) -> str | None:
    """The module of `importlib.import_module("x")` or `__import__("x")` with a literal name."""
    f = call.func
    named = (isinstance(f, ast.Name) and f.id in ("__import__", "import_module")) or (
        isinstance(f, ast.Attribute) and f.attr == "import_module"
    )
    if named and call.args and isinstance(call.args[0], ast.Constant):
        value = call.args[0].value
        return value if isinstance(value, str) and not value.startswith(".") else None
    return None


def layer(module: str) -> str | None:
    """'kernels' for pyrite.kernels.x, None for modules outside pyrite or pyrite itself."""
    parts = module.split(".")
    return parts[1] if parts[0] == "pyrite" and len(parts) > 1 else None


MODULES = sorted(ROOT.rglob("*.py"))


def _ids(paths):
    return [str(p.relative_to(ROOT.parent)) for p in paths]


def test_modules_found():
    assert MODULES, f"no modules under {ROOT}"


@pytest.mark.parametrize("path", MODULES, ids=_ids(MODULES))
def test_import_direction(path):
    me = layer(module_name(path))
    problems = []
    for target, line, top_level in imports(path):
        where = f"{path.relative_to(ROOT.parent)}:{line} imports {target}"
        root, them = target.split(".")[0], layer(target)
        if root in GPU_PACKAGES and me != "backend":
            problems.append(f"{where}: only pyrite/backend/ may import {root}")
        if them in FORBIDDEN.get(me, ()):
            problems.append(f"{where}: pyrite/{me}/ must not import pyrite/{them}/")
        if me == "testing" and root != "__future__" and not _testing_may_import(target):
            problems.append(
                f"{where}: pyrite/testing/ imports only numpy, the standard "
                "library and pyrite.dtypes"
            )
        if top_level and me in RANK and them in RANK and RANK[them] > RANK[me] and me != "testing":
            problems.append(
                f"{where}: layer '{me}' (rank {RANK[me]}) imports a later layer "
                f"'{them}' (rank {RANK[them]}) at module level; see STYLE.md"
            )
    assert not problems, "\n".join(problems)


def _testing_may_import(target: str) -> bool:
    root = target.split(".")[0]
    if root in sys.stdlib_module_names:
        return True
    return any(target == ok or target.startswith(ok + ".") for ok in TESTING_ALLOWED)


def test_checker_catches_violations(tmp_path, monkeypatch):
    """The checker itself: relative imports resolve, and each rule fires."""
    pkg = tmp_path / "pyrite"
    (pkg / "kernels").mkdir(parents=True)
    (pkg / "testing").mkdir()
    bad_kernel = pkg / "kernels" / "k.py"
    bad_kernel.write_text(
        "from ..backend import device\nimport wgpu\ndef f():\n    from .. import backend\n"
    )
    bad_testing = pkg / "testing" / "t.py"
    bad_testing.write_text("import numpy as np\nimport os\nfrom ..tensor import Tensor\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", pkg)
    got = {(t, top) for t, _, top in imports(bad_kernel)}
    assert ("pyrite.backend.device", True) in got
    assert ("wgpu", True) in got
    assert ("pyrite.backend", False) in got
    with pytest.raises(AssertionError, match="must not import pyrite/backend/"):
        test_import_direction(bad_kernel)
    with pytest.raises(AssertionError, match="imports only numpy") as err:
        test_import_direction(bad_testing)
    assert "numpy" not in str(err.value).split("imports only")[0]
