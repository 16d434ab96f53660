"""The package's import graph: no module imports itself back through others (TYPE_CHECKING
imports included: they tie the layers together as surely for a reader and for mypy), and no
module below the front doors imports one: only those that assemble the service do."""

import ast
from collections.abc import Iterator
from pathlib import Path

import postwire

PACKAGE_DIR = Path(postwire.__file__).parent
FRONT_DOORS = ("postwire.api", "postwire.smtp.submission", "postwire.dashboard")
# The modules that build the processes out of the front doors.
ASSEMBLERS = ("postwire.app", "postwire.worker_process", "postwire.workers")


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE_DIR.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imported_names(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports, with the packages whose `__init__` each
    import runs (but not the importer's own enclosing packages)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        imported: set[str] = set()
        for name in _imported_names(path):
            while name.startswith("postwire"):
                if name in modules and name != module and not module.startswith(name + "."):
                    imported.add(name)
                name = name.rpartition(".")[0]
        graph[module] = imported
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
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
                        cycles.append(sorted(component))
    return cycles


def test_the_package_has_no_import_cycle() -> None:
    assert import_cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]


def test_layers_below_the_front_doors_never_import_one() -> None:
    graph = import_graph()
    upward = {
        (module, imported)
        for module, imports in graph.items()
        if not module.startswith(FRONT_DOORS) and module not in ASSEMBLERS
        for imported in imports
        if imported.startswith(FRONT_DOORS)
    }
    assert upward == set()
