"""The import rule of docs/architecture.md, checked on the source: imports go down the
layers only, no module imports another in a circle, no module reaches into another
module's private names, and names are imported from the module where they live.

For the layers, only imports that run when a module is imported count (module level,
outside ``if TYPE_CHECKING:``): an import inside a function is a deliberate late binding.
For circles every import counts, wherever it is: a circle hidden behind
``TYPE_CHECKING`` or a late import still ties the two modules together.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

BACKEND = Path(__file__).resolve().parents[1] / "backend"

# docs/architecture.md, "Layers": a package may import the ones below it, never above.
LAYERS = {
    "cli": 6,
    "web": 5,
    "engine": 4,
    "longterm": 3,
    "hippocampus": 3,
    "config": 2.5,  # config/, personas.py, persona_import.py: settings and cards
    "llm": 2,
    "embeddings": 2,
    "reranking": 2,
    "stores": 2,
    "sessions": 2,
    "memory": 1,
    "leaf": 0,  # clock.py, storable_text.py, runtime.py, data_dir_lock.py
}
SETTINGS_MODULES = {"config", "personas", "persona_import"}
# Adapters beside each other, by design (docs/architecture.md, "The import rule").
ALLOWED_SIDEWAYS = {("stores.change_feed", "sessions.db")}
# Private attributes of third-party objects that are their public API (SQLAlchemy's
# ``Row._mapping``) or that we read on purpose (llama.cpp's context, chromadb's session).
THIRD_PARTY_PRIVATE = {"_mapping", "_ctx", "_session"}
# Modules that are their part's public face on purpose, handing on types that live beside
# them (docs/architecture.md, "Where each concern lives"): callers may import those there.
FACADES = {"engine.turn", "longterm.memory", "sessions.store"}
# Where the callers are: the backend itself, its tests and the benches.
CALLERS = [BACKEND, BACKEND.parent / "tests", BACKEND.parent / "bench"]


def _modules() -> dict[str, Path]:
    found = {}
    for path in BACKEND.rglob("*.py"):
        rel = path.relative_to(BACKEND).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts) or "__init__"] = path
    return found


MODULES = _modules()


def _group(module: str) -> str:
    top = module.split(".")[0]
    if top == "__main__":
        return "cli"  # ``python -m backend``: the command line
    if top in SETTINGS_MODULES:
        return "config"
    return top if top in LAYERS else "leaf"


def _layer(module: str) -> float:
    return LAYERS[_group(module)]


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The module a ``from`` import names, relative ones (``from . import x``) resolved."""
    if node.level == 0:
        return node.module or ""
    package = ["backend", *module.split(".")] if module != "__init__" else ["backend"]
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def _imported(module: str, path: Path, nodes: list[ast.stmt]) -> set[str]:
    """The backend modules the import statements ``nodes`` of ``module`` name.

    ``from backend.x import y`` names the module ``x.y`` when y is one, else ``x`` (a
    package's ``__init__``), one name at a time: ``from backend.config import Settings``
    beside ``from backend.config.errors import ConfigError`` names both.
    """
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, path, node)
            for alias in node.names:
                inner = f"{source}.{alias.name}"
                names.add(inner if inner.removeprefix("backend.") in MODULES else source)
    return {
        n.removeprefix("backend.")
        for n in names
        if n.startswith("backend.") and n.removeprefix("backend.") in MODULES
    }


def _runtime_imports(module: str, path: Path) -> set[str]:
    """The backend modules ``path`` imports at import time."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[ast.stmt] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
                continue
            if isinstance(node, (ast.If, ast.Try, ast.With)):
                for block in ("body", "orelse", "finalbody", "handlers"):
                    for child in getattr(node, block, []):
                        visit(child.body if isinstance(child, ast.ExceptHandler) else [child])
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)

    visit(tree.body)
    return _imported(module, path, found)


def _all_imports(module: str, path: Path) -> set[str]:
    """The backend modules ``path`` imports anywhere: for types only, in functions, too."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    return _imported(module, path, nodes)


GRAPH = {name: _runtime_imports(name, path) for name, path in MODULES.items()}
EVERY_IMPORT = {name: _all_imports(name, path) for name, path in MODULES.items()}


def test_imports_go_down_the_layers() -> None:
    wrong = []
    for module, imported in GRAPH.items():
        for target in imported:
            if _group(target) == _group(module) or (module, target) in ALLOWED_SIDEWAYS:
                continue
            if _layer(target) >= _layer(module):
                wrong.append(f"{module} (layer {_layer(module)}) imports {target}")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_import_circles() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def connect(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in EVERY_IMPORT.get(node, ()):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in EVERY_IMPORT:
        if node not in index:
            connect(node)
    assert not cycles, cycles


def test_no_module_reads_another_modules_private_names() -> None:
    wrong = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        local = {
            node.name
            for node in ast.walk(tree)
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("backend"):
                wrong += [
                    f"{module}:{node.lineno} imports {a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            if node.attr.startswith("__") or node.attr in THIRD_PARTY_PRIVATE:
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and (owner.id in {"self", "cls"} or owner.id in local):
                continue
            wrong.append(f"{module}:{node.lineno} reads {ast.unparse(node)}")
    assert not wrong, "\n".join(sorted(wrong))


@cache
def _defined(path: Path) -> set[str]:
    """The names a module binds itself at its top level: not the ones it imports."""
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.If, ast.Try)):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return names


def test_names_are_imported_from_where_they_live() -> None:
    """``from backend.x import name`` names the module that defines ``name``, a package (its
    ``__init__`` is its API) or a facade: no import path kept only for older callers."""
    wrong = []
    for root in CALLERS:
        for path in root.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                    continue
                source = node.module.removeprefix("backend.")
                target = MODULES.get(source)
                if not node.module.startswith("backend.") or target is None:
                    continue
                if target.name == "__init__.py" or source in FACADES:
                    continue
                defined = _defined(target)
                wrong += [
                    f"{path.relative_to(root.parent)}:{node.lineno} imports {alias.name} "
                    f"from {node.module}"
                    for alias in node.names
                    if alias.name not in defined and f"{source}.{alias.name}" not in MODULES
                ]
    assert not wrong, "\n".join(sorted(wrong))
