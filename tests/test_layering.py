"""Guards on the layers: app → views → backend → native, no GUI packages in backend, SQL in backend/store."""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# Lowest first: each layer may import only from the layers before it (and from itself).
LAYERS = ("native", "backend", "views", "app")
GUI_PACKAGES = ("gradio", "plotly")
STORE = ("backend", "store")

# Importing every backend module in a fresh interpreter, listing which one first loaded a GUI
# package. Modules are found with pkgutil from the folders, without importing them first, so
# the culprit is the module whose own import pulled the package in.
_IMPORT_ALL = r"""
import importlib, json, os, pkgutil, sys

root, watched = sys.argv[1], tuple(sys.argv[2:])
sys.path.insert(0, root)


def walk(folder, prefix):
    for info in pkgutil.iter_modules([folder], prefix):
        yield info.name
        if info.ispkg:
            yield from walk(os.path.join(folder, info.name.rpartition(".")[2]), info.name + ".")


def loaded():
    return {name for name in sys.modules if name.partition(".")[0] in watched}


names = ["backend", *walk(os.path.join(root, "backend"), "backend.")]
culprits = {}
for name in names:
    before = loaded()
    importlib.import_module(name)
    new = sorted(n for n in loaded() - before if "." not in n)
    if new:
        culprits[name] = new
print(json.dumps({"backend_file": sys.modules["backend"].__file__, "names": names, "culprits": culprits,
                  "loaded": sorted(n for n in loaded() if "." not in n)}))
"""


def python_files(root: Path, package: str) -> list[Path]:
    """Every Python source file of ``package`` under ``root``, sorted."""
    return sorted(path for path in (root / package).rglob("*.py") if "__pycache__" not in path.parts)


def module_name(root: Path, path: Path) -> str:
    """The dotted module name of ``path`` (``backend/store/__init__.py`` → ``backend.store``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache  # each check walks the same files
def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def imported_modules(root: Path, path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``, lazy and type-only ones included."""
    module = module_name(root, path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(_parse(path)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolved against the module's package
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.append((node.lineno, target))
    return found


def layer_violations(root: Path, layer: str) -> list[str]:
    """Imports in ``layer`` of a layer above it, as ``file:line imports module``."""
    above = set(LAYERS[LAYERS.index(layer) + 1 :])
    return [
        f"{path.relative_to(root)}:{line} imports {target}"
        for path in python_files(root, layer)
        for line, target in imported_modules(root, path)
        if target.partition(".")[0] in above
    ]


def _catches_exception(handler: ast.ExceptHandler) -> bool:
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(
        (isinstance(t, ast.Name) and t.id == "Exception")
        or (isinstance(t, ast.Attribute) and t.attr == "Exception")
        for t in types
    )


def broad_excepts(root: Path) -> list[str]:
    """Every ``except Exception`` (alone, in a tuple or as ``builtins.Exception``) in the layers."""
    return [
        f"{path.relative_to(root)}:{node.lineno}"
        for layer in LAYERS
        for path in python_files(root, layer)
        for node in ast.walk(_parse(path))
        if isinstance(node, ast.ExceptHandler) and node.type is not None and _catches_exception(node)
    ]


# A string that is a statement (the project writes SQL keywords in capitals, which prose does not).
SQL_STATEMENT = re.compile(
    r"\s*(SELECT\s.*\bFROM\s|INSERT\s+(OR\s+\w+\s+)?INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s"
    r"|CREATE\s+(OR\s+REPLACE\s+)?(TEMP\s+|TEMPORARY\s+|UNIQUE\s+)?(TABLE|VIEW|INDEX|SEQUENCE|SCHEMA|MACRO)\s"
    r"|DROP\s+(TABLE|VIEW|INDEX|SEQUENCE|SCHEMA)\s|ALTER\s+TABLE\s|WITH\s+\w+\s+AS\s*\(|PRAGMA\s"
    r"|ATTACH\s|DETACH\s|COPY\s+\w+\s+(FROM|TO)\s|CHECKPOINT\b|BEGIN\s+TRANSACTION\b)",
    re.DOTALL,
)
# DuckDB's (and DB-API's) ways to run a statement; nothing else in the project has these names.
SQL_METHODS = ("execute", "executemany", "sql")


def _literal_text(node: ast.expr) -> str | None:
    """The text of a string literal or f-string (its literal parts), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)
        )
    return None


def sql_uses(root: Path, path: Path) -> list[str]:
    """In ``path``: duckdb imports, statement-running calls and SQL statement strings."""
    where = path.relative_to(root)
    found = [
        f"{where}:{line} imports {target}"
        for line, target in imported_modules(root, path)
        if target.partition(".")[0] == "duckdb"
    ]
    for node in ast.walk(_parse(path)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            first = _literal_text(node.args[0]) if node.args else None
            is_sql_query = node.func.attr == "query" and first and SQL_STATEMENT.match(first.upper())
            if node.func.attr in SQL_METHODS or is_sql_query:
                found.append(f"{where}:{node.lineno} calls .{node.func.attr}(...)")
        elif isinstance(node, (ast.Constant, ast.JoinedStr)):
            text = _literal_text(node)
            if text and SQL_STATEMENT.match(text):
                found.append(f"{where}:{node.lineno} holds SQL {text.strip()[:40]!r}")
    return found


def _in_store(root: Path, path: Path) -> bool:
    return path.relative_to(root).parts[:2] == STORE


def sql_outside_store(root: Path) -> list[str]:
    """Every use of SQL (see sql_uses) in the layers outside backend/store/."""
    return [
        use
        for layer in LAYERS
        for path in python_files(root, layer)
        if not _in_store(root, path)
        for use in sql_uses(root, path)
    ]


def backend_gui_imports(root: Path) -> dict:
    """Import every module under ``root/backend`` in a fresh interpreter; report GUI packages it loaded."""
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL, str(root), *GUI_PACKAGES],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"importing backend failed:\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.splitlines()[-1])


def test_importing_every_backend_module_loads_no_gradio_or_plotly() -> None:
    report = backend_gui_imports(REPO_ROOT)
    assert Path(report["backend_file"]).is_relative_to(REPO_ROOT / "backend")
    # The walk reached every source file, so no module escaped the check.
    assert sorted(report["names"]) == sorted(
        module_name(REPO_ROOT, p) for p in python_files(REPO_ROOT, "backend")
    )
    assert not report["loaded"], f"backend loads {report['loaded']}; first pulled in by {report['culprits']}"


@pytest.mark.parametrize("layer", LAYERS[:-1])
def test_a_layer_imports_nothing_from_the_layers_above(layer: str) -> None:
    assert python_files(REPO_ROOT, layer), f"no sources found in {layer}/"
    violations = layer_violations(REPO_ROOT, layer)
    assert not violations, (
        f"{layer}/ may import only {', '.join(LAYERS[: LAYERS.index(layer)]) or 'no layer'}:\n"
        + "\n".join(violations)
    )


def test_no_except_exception() -> None:
    found = broad_excepts(REPO_ROOT)
    assert not found, "catch the exceptions a call can raise, not Exception:\n" + "\n".join(found)


def test_sql_runs_only_in_backend_store() -> None:
    # The scan finds the store's own imports, statements and calls, so it would find them elsewhere.
    in_store = [
        use
        for path in python_files(REPO_ROOT, "backend")
        if _in_store(REPO_ROOT, path)
        for use in sql_uses(REPO_ROOT, path)
    ]
    assert {kind for use in in_store for kind in ("imports", "calls", "holds SQL") if f" {kind} " in use} == {
        "imports",
        "calls",
        "holds SQL",
    }
    found = sql_outside_store(REPO_ROOT)
    assert not found, "only backend/store/ may hold or run SQL:\n" + "\n".join(found)


# --------------------------------------------------------------------------- the native door

DOOR_USERS = ("backend", "views", "app")
DECODER_PACKAGES = ("av", "cv2", "codec_video_prep")


def native_modules(root: Path) -> set[str]:
    """Names of the modules and packages inside ``root/native`` (sources and compiled extensions)."""
    return {
        path.name.split(".")[0]
        for path in (root / "native").iterdir()
        if path.name != "__init__.py"
        and (path.suffix in (".py", ".so", ".pyd") or (path / "__init__.py").exists())
    }


def native_door_bypasses(root: Path) -> list[str]:
    """Imports in backend/, views/ and app/ that reach a module inside native/ instead of ``native`` itself.

    Every import counts, function-level and ``TYPE_CHECKING`` ones too: ``import native.x``,
    ``from native.x import y`` and ``from native import x`` where ``x`` is a module of native/.
    """
    inside = native_modules(root)
    found = []
    for layer in DOOR_USERS:
        for path in python_files(root, layer):
            for node in ast.walk(_parse(path)):
                if isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names if alias.name.startswith("native.")]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    if node.module.startswith("native."):
                        targets = [node.module]
                    elif node.module == "native":
                        targets = [f"native.{a.name}" for a in node.names if a.name in inside]
                    else:
                        targets = []
                else:
                    targets = []
                found += [f"{path.relative_to(root)}:{node.lineno} imports {t}" for t in targets]
    return found


def test_the_upper_layers_import_native_only_through_its_door() -> None:
    found = native_door_bypasses(REPO_ROOT)
    assert not found, (
        "import native code from ``native`` itself (``from native import read_bitcost``), "
        "not from the modules behind it:\n" + "\n".join(found)
    )


def test_the_door_check_sees_every_kind_of_bypass(tmp_path: Path) -> None:
    # A small tree with one bypass of each kind the check must catch, and the imports it must allow.
    (tmp_path / "native").mkdir()
    for name in ("__init__.py", "probe.py", "side_data.py", "_kernels.cpython-311-x86_64-linux-gnu.so"):
        (tmp_path / "native" / name).write_text("")
    (tmp_path / "backend").mkdir()
    (tmp_path / "backend" / "stage.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "import native\n"
        "from native import probe_container, FFmpegError\n"
        "if TYPE_CHECKING:\n"
        "    import native.probe\n"
        "def read():\n"
        "    from native import side_data, read_bitcost\n"
        "    from native.errors import FFmpegError\n"
        "    from native import _kernels\n"
    )
    assert native_door_bypasses(tmp_path) == [
        "backend/stage.py:5 imports native.probe",
        "backend/stage.py:7 imports native.side_data",
        "backend/stage.py:8 imports native.errors",
        "backend/stage.py:9 imports native._kernels",
    ]


_IMPORT_NATIVE = """
import json, sys
import native
watched = sys.argv[1:]
print(json.dumps({"file": native.__file__, "loaded": [m for m in watched if m in sys.modules]}))
"""


def test_importing_native_loads_no_decoder() -> None:
    # The door is lazy (PEP 562): a batch re-run that skips every video imports native's names
    # inside the functions that decode, and must not pay for PyAV, OpenCV or codec-video-prep.
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_NATIVE, *DECODER_PACKAGES],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.splitlines()[-1])
    assert Path(report["file"]).is_relative_to(REPO_ROOT / "native")
    assert report["loaded"] == [], f"importing native loads {report['loaded']}"


def test_every_name_of_the_door_resolves_to_its_home() -> None:
    import native

    assert sorted(native.__all__) == sorted(native._HOMES)
    assert not set(native.__all__) & native_modules(REPO_ROOT), "a door name would shadow a module"
    for name in native.__all__:
        value = getattr(native, name)
        module = getattr(value, "__module__", None)
        if module is not None and module.startswith("native."):  # functions and classes say where they live
            assert module == f"native.{native._HOMES[name]}" or name == "FFmpegError", name
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        _ = native.no_such_name
