"""Structure figures of the product code (app/, views/, backend/, native/), measured from syntax trees.

Prints one row per figure with its goal; ``--check`` exits 1 when a figure misses its goal.
Run from the repository root: ``python scripts/structure.py [--check] [--json]``.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("app", "views", "backend", "native")
JS_CALLS = re.compile(r"addEventListener|querySelector|getElementById")


@dataclass(frozen=True)
class Figure:
    name: str
    value: int
    goal: int
    detail: list[str]

    @property
    def met(self) -> bool:
        return self.value <= self.goal


def product_files() -> Iterator[Path]:
    for top in PRODUCT:
        yield from sorted((ROOT / top).rglob("*.py"))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def parameter_count(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names)


def imported_modules(tree: ast.Module, here: str, known: set[str]) -> set[str]:
    """Every in-repo module a file imports, anywhere in it (``TYPE_CHECKING`` and function bodies too)."""
    out: set[str] = set()
    package = here if (ROOT / Path(*here.split(".")) / "__init__.py").exists() else here.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:
                    out.add(sub)
                elif base in known:
                    out.add(base)
    out.discard(here)
    return out


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def measure() -> list[Figure]:
    files = list(product_files())
    trees = {f: parse(f) for f in files}
    names = {f: module_name(f) for f in files}
    known = set(names.values())
    rel = {f: str(f.relative_to(ROOT)) for f in files}
    upper = [f for f in files if rel[f].split("/")[0] in ("app", "views", "backend")]

    lengths = sorted(
        ((fn.end_lineno - fn.lineno + 1, f"{rel[f]}:{fn.name}") for f in upper for fn in functions(trees[f])),
        reverse=True,
    )
    wide = sorted(
        (
            (parameter_count(fn), f"{rel[f]}:{fn.name}")
            for f in upper
            for fn in functions(trees[f])
            if parameter_count(fn) > 8
        ),
        reverse=True,
    )
    big = sorted(
        ((len(f.read_text().splitlines()), rel[f]) for f in files if len(f.read_text().splitlines()) > 700),
        reverse=True,
    )
    builders = [
        f"{rel[f]}:{node.lineno}"
        for f in files
        if rel[f].startswith("backend/")
        for node in ast.walk(trees[f])
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", "")) == "RunResult"
    ]
    graph = {names[f]: imported_modules(trees[f], names[f], known) for f in files}
    inside_native = sorted(
        f"{rel[f]} -> {m}"
        for f in files
        if rel[f].startswith("backend/")
        for m in graph[names[f]]
        if m.startswith("native.")
    )
    stage_quirks = sorted(
        f"{rel[f]} -> {m}"
        for f in files
        if rel[f].startswith("backend/stages/")
        for m in graph[names[f]]
        if m == "backend.pipeline" or m.startswith("backend.pipeline.")
    )
    js = [
        f"{rel[f]}: {len(JS_CALLS.findall(f.read_text()))}"
        for f in files
        if rel[f].startswith("app/") and JS_CALLS.search(f.read_text())
    ]
    js_count = sum(len(JS_CALLS.findall(f.read_text())) for f in files if rel[f].startswith("app/"))
    ci = (ROOT / ".ci" / "run").read_text() if (ROOT / ".ci" / "run").exists() else ""
    lint_missing = int(not ("ruff check" in ci and "ruff format --check" in ci))
    return [
        Figure(
            "longest function in app/, views/, backend/ (lines)",
            lengths[0][0],
            100,
            [f"{n} {w}" for n, w in lengths[:5]],
        ),
        Figure(
            "functions with more than 8 parameters (self excluded)",
            len(wide),
            5,
            [f"{n} {w}" for n, w in wide],
        ),
        Figure(".py modules over 700 lines", len(big), 0, [f"{n} {w}" for n, w in big]),
        Figure("places in backend/ that build a RunResult", len(builders), 1, builders),
        Figure("backend imports reaching inside native/", len(inside_native), 0, inside_native[:12]),
        Figure("stage modules importing backend.pipeline", len(stage_quirks), 0, stage_quirks),
        Figure(
            "import circles (TYPE_CHECKING and function-level imports included)",
            len(circles(graph)),
            0,
            [" <-> ".join(c) for c in circles(graph)],
        ),
        Figure("JavaScript DOM calls inside app/**/*.py", js_count, 0, js),
        Figure("lint missing from .ci/run (ruff check + format --check)", lint_missing, 0, []),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--check", action="store_true", help="exit 1 when a figure misses its goal")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--detail", action="store_true", help="list what each figure counts")
    args = parser.parse_args(argv)
    figures = measure()
    if args.json:
        print(json.dumps([f.__dict__ | {"met": f.met} for f in figures], indent=1))
    else:
        for f in figures:
            print(f"{'ok  ' if f.met else 'MISS'} {f.value:>4} (goal <= {f.goal})  {f.name}")
            if args.detail or not f.met:
                for line in f.detail:
                    print(f"            {line}")
    return 1 if args.check and not all(f.met for f in figures) else 0


if __name__ == "__main__":
    raise SystemExit(main())
