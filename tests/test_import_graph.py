"""The house rules of issue 24, read from the source alone (nothing is imported).

* No import circles between modules of walrus_mem/ and relayer_mock/. Every import
  statement counts: module level, inside functions, and under ``if TYPE_CHECKING:``
  (a type-only dependency is still a dependency; break it with a Protocol in the
  lower module, or by passing the collaborator in). Importing ``a.b.c`` runs the
  ``__init__`` of ``a`` and ``a.b`` too, but those implicit parent imports are not
  edges: a package ``__init__`` that re-exports is fine as long as its children do
  not import it back.
* No module over ``MAX_LINES`` lines in walrus_mem/ or relayer_mock/.
* The public modules are exactly the pinned list (a module is public when no part
  of its dotted path starts with ``_``), as tests/test_exported_members.py pins
  ``walrus_mem.__all__``. walrus_mem/ keeps at most ``MAX_TOP_LEVEL_FILES`` files.
* Every private subpackage says in its ``__init__`` docstring what part of the flow
  it holds.
* No module uses another subpackage's ``_private`` names: it neither imports them
  nor reaches into ``obj._member`` where ``_member`` is a private method or attribute
  of a class defined only in another subpackage (the check is by name, from the
  AST: the members a module's own subpackage defines are its own to use). The
  top-level modules (``walrus_mem/memory.py``, ...) form one subpackage of their own.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("walrus_mem", "relayer_mock")
MAX_LINES = 800
MAX_TOP_LEVEL_FILES = 20

# What users are documented to import (README.md, docs/), issue 24 item 2.
PUBLIC_MODULES = {
    "walrus_mem",
    "walrus_mem.__main__",
    "walrus_mem.config",
    "walrus_mem.envelope",
    "walrus_mem.errors",
    "walrus_mem.extract",
    "walrus_mem.hooks",
    "walrus_mem.keys",
    "walrus_mem.mcp_server",
    "walrus_mem.memory",
    "walrus_mem.middleware",
    "walrus_mem.models",
    "walrus_mem.safety",
    "walrus_mem.sessions",
    "walrus_mem.testing",
    "walrus_mem.tools",
    "walrus_mem.walrus",
    "relayer_mock",
    "relayer_mock.__main__",
    "relayer_mock.app",
    "relayer_mock.auth",
    "relayer_mock.cli",
    "relayer_mock.embedded",
    "relayer_mock.faults",
    "relayer_mock.server",
}


def module_table() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is_package) for every module of PACKAGES."""
    table: dict[str, tuple[Path, bool]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            table[".".join(parts)] = (path, is_package)
    return table


def _known_prefix(name: str, table: dict[str, tuple[Path, bool]]) -> str | None:
    while name and name not in table:
        name = name.rpartition(".")[0]
    return name or None


def _from_base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    if not is_package:
        parts.pop()
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    if node.module:
        parts.append(node.module)
    return ".".join(parts)


def imports_of(
    module: str, table: dict[str, tuple[Path, bool]]
) -> Iterator[tuple[int, str, str | None]]:
    """(line, imported module of the table, imported name or None) per import."""
    path, is_package = table[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _known_prefix(alias.name, table)
                if target:
                    yield node.lineno, target, None
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(module, is_package, node)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in table:
                    yield node.lineno, submodule, None
                else:
                    target = _known_prefix(base, table)
                    if target:
                        yield node.lineno, target, alias.name


def import_graph() -> dict[str, set[str]]:
    table = module_table()
    graph: dict[str, set[str]] = {name: set() for name in table}
    for name in table:
        for _, target, _ in imports_of(name, table):
            if target != name:
                graph[name].add(target)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one module (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def shortest_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One shortest circle through the component's first module, for the message."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node] & members):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if child not in previous:
                previous[child] = node
                queue.append(child)
    return component



def test_no_import_cycles():
    graph = import_graph()
    cycles = [
        f"{len(c)} modules: {' -> '.join(shortest_cycle(graph, c))}  (all: {', '.join(c)})"
        for c in strongly_connected(graph)
    ]
    assert cycles == [], "import circles:\n" + "\n".join(cycles)


def test_no_module_over_the_line_limit():
    too_long = {
        str(path.relative_to(ROOT)): n
        for path, _ in module_table().values()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert too_long == {}


def test_public_modules_are_pinned():
    public = {
        name
        for name in module_table()
        if not any(part.startswith("_") and not part.startswith("__") for part in name.split("."))
    }
    assert public == PUBLIC_MODULES


def test_top_level_keeps_only_public_files():
    files = sorted(p.name for p in (ROOT / "walrus_mem").iterdir() if p.is_file())
    assert len(files) <= MAX_TOP_LEVEL_FILES, files
    internal = [f for f in files if f.startswith("_") and f not in {"__init__.py", "__main__.py"}]
    assert internal == []


def test_every_private_subpackage_draws_its_flow():
    bare = []
    for name, (path, is_package) in module_table().items():
        if is_package and name not in PACKAGES:
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
            if len(doc.strip().splitlines()) < 3:
                bare.append(name)
    assert bare == []


def _subpackage(module: str, table: dict[str, tuple[Path, bool]]) -> str:
    """The package a module belongs to (a package belongs to itself)."""
    return module if table[module][1] else module.rpartition(".")[0]


def test_no_private_names_from_another_subpackage():
    table = module_table()
    reached_into = []
    for name in sorted(table):
        home = _subpackage(name, table)
        for line, target, imported in imports_of(name, table):
            if (
                imported
                and imported.startswith("_")
                and not imported.startswith("__")
                and _subpackage(target, table) != home
            ):
                reached_into.append(f"{name}:{line} imports {target}.{imported}")
    assert reached_into == []


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _members_by_package(table: dict[str, tuple[Path, bool]]) -> dict[str, set[str]]:
    """Private methods and attributes that the classes of each subpackage define."""
    members: dict[str, set[str]] = {}
    for name, (path, _) in table.items():
        own = members.setdefault(_subpackage(name, table), set())
        for cls in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(cls, ast.ClassDef):
                continue
            for node in ast.walk(cls):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    own.add(node.name)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    if isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}:
                        own.add(node.attr)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    own.add(node.id)
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    own.add(node.target.id)
    return {pkg: {m for m in names if _private(m)} for pkg, names in members.items()}


def test_no_reaching_into_another_subpackages_private_members():
    table = module_table()
    members = _members_by_package(table)
    reached_into = []
    for name in sorted(table):
        home = _subpackage(name, table)
        path = table[name][0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            receiver = node.value
            if isinstance(receiver, ast.Name) and receiver.id in {"self", "cls"}:
                continue
            if isinstance(receiver, ast.Call) and ast.unparse(receiver.func) == "super":
                continue
            if node.attr in members[home]:
                continue
            owners = sorted(pkg for pkg, names in members.items() if node.attr in names)
            if owners:
                reached_into.append(
                    f"{name}:{node.lineno} {ast.unparse(node)} (defined in {', '.join(owners)})"
                )
    assert reached_into == []
