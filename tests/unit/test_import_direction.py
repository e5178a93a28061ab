"""The packages' layers: ground imports no other package of the project
(nor scapy: the wire formats are declared without it); switches and hosts
never import testbed or experiments (the testbed uses them, not the other
way round), nor each other (what both need, such as the wire formats, is
ground's). Every module is parsed, so an import hidden inside a function,
or made with importlib, counts too. Inside testbed.runner, each module
imports only those its package lists before it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# package -> the project packages it must not import
FORBIDDEN = {
    "ground": {"switches", "hosts", "testbed", "experiments", "scapy"},
    "switches": {"testbed", "experiments", "hosts"},
    "hosts": {"testbed", "experiments", "switches"},
}


def imported_packages(source: str, filename: str = "<src>") -> list[tuple[int, str]]:
    """(line, top-level package) of every absolute import in ``source``:
    import statements anywhere, and importlib.import_module / __import__
    calls with a literal name."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
        elif isinstance(node, ast.Call) and node.args:
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            arg = node.args[0]
            if name in ("import_module", "__import__") and isinstance(arg, ast.Constant) \
                    and isinstance(arg.value, str):
                found.append((node.lineno, arg.value.split(".")[0]))
    return found


def violations(package: str) -> list[str]:
    out = []
    for path in sorted((REPO / package).rglob("*.py")):
        for line, top in imported_packages(path.read_text(), str(path)):
            if top in FORBIDDEN[package]:
                out.append(f"{path.relative_to(REPO)}:{line} imports {top}")
    return out


def test_the_scanner_sees_every_form_of_import() -> None:
    src = '''
import testbed.net
from experiments import roce_basics
from switches.node import P4Host
from . import sibling

def hidden():
    from testbed.controller import CliController
    import importlib
    importlib.import_module("testbed.runner")
    __import__("experiments.epic_tree")
'''
    assert sorted(imported_packages(src)) == [
        (2, "testbed"), (3, "experiments"), (4, "switches"), (8, "testbed"),
        (9, "importlib"), (10, "testbed"), (11, "experiments")]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_module_imports_a_package_above_it(package: str) -> None:
    assert list((REPO / package).rglob("*.py")), f"no modules under {package}/"
    assert violations(package) == []


def runner_imports(path: Path) -> set[str]:
    """The modules of testbed.runner that ``path`` imports ("__init__" for
    names taken from the package itself)."""
    here = {p.stem for p in (REPO / "testbed" / "runner").glob("*.py")}
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module == "testbed.runner":
            found |= {a.name if a.name in here else "__init__" for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("testbed.runner."):
            found.add((node.module or "").split(".")[2])
        elif isinstance(node, ast.Import):
            found |= {(a.name + ".__init__").split(".")[2] for a in node.names
                      if a.name == "testbed.runner" or a.name.startswith("testbed.runner.")}
    return found


def test_the_runners_modules_import_only_those_listed_before_them() -> None:
    """testbed/runner/__init__.py lists its modules bottom up; none imports
    one listed after it, nor the package (no cycles)."""
    init = REPO / "testbed" / "runner" / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    listed = doc[doc.index("The modules"):]
    files = {p.stem for p in init.parent.glob("*.py")} - {"__init__"}
    order: list[str] = []
    for name in re.findall(r"``(\w+)``", listed):
        if name in files and name not in order:
            order.append(name)
    assert sorted(order) == sorted(files), "a module of testbed/runner/ is not listed"
    for i, name in enumerate(order):
        above = runner_imports(init.parent / f"{name}.py") - set(order[:i])
        assert not above, f"testbed/runner/{name}.py imports {sorted(above)}"
