"""Count the annotations that mention ``Any``, per package (the house's typing
measure: issue "The house", acceptance "Any in annotations").

An annotation is a function parameter's, a return's or an annotated
assignment's; it counts once however many ``Any`` it holds.

    .venv/bin/python scripts/count_any.py [--files] [PACKAGE ...]
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGES = ("ground", "switches", "testbed", "hosts", "experiments", "scripts")


def _mentions_any(node: ast.expr | None) -> bool:
    if node is None:
        return False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == "Any":
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "Any":
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and "Any" in sub.value:
            try:
                if _mentions_any(ast.parse(sub.value, mode="eval").body):
                    return True
            except SyntaxError:
                pass
    return False


def annotations_of(tree: ast.AST) -> Iterator[ast.expr | None]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg):
                if arg is not None:
                    yield arg.annotation
            yield node.returns
        elif isinstance(node, ast.AnnAssign):
            yield node.annotation


def count_file(path: Path) -> int:
    tree = ast.parse(path.read_text(), filename=str(path))
    return sum(1 for ann in annotations_of(tree) if _mentions_any(ann))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("packages", nargs="*", default=list(PACKAGES))
    ap.add_argument("--files", action="store_true", help="per file, most first")
    args = ap.parse_args(argv)
    total = 0
    for pkg in args.packages:
        root = Path(pkg)
        if not root.exists():
            print(f"count_any: {pkg}: no such package", file=sys.stderr)
            return 2
        per_file = {p: count_file(p) for p in sorted(root.rglob("*.py"))}
        n = sum(per_file.values())
        total += n
        print(f"{pkg:12} {n:5}")
        if args.files:
            for p, c in sorted(per_file.items(), key=lambda kv: -kv[1]):
                if c:
                    print(f"    {c:4}  {p}")
    print(f"{'total':12} {total:5}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
