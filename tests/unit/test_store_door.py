"""One door: only `postwire.store` knows which store holds a table (the node's spool, or the
table store apart from it on PostgreSQL or LMDB). Outside it, nothing reaches the stores' cores
(`spool.core`, `spool.tables`), opens one (`_core.Spool`, `_core.PgTables`), or imports the
modules that route between them."""

import ast
from pathlib import Path

import postwire

PACKAGE_DIR = Path(postwire.__file__).parent
STORE_DIR = PACKAGE_DIR / "store"
CORES = {"Spool", "PgTables"}
ROUTING_MODULES = {"postwire.store.two_stores", "postwire.store.table_store"}


def _reaches_a_core(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        holder = node.value
        spool_named = (isinstance(holder, ast.Name) and holder.id == "spool") or (
            isinstance(holder, ast.Attribute) and holder.attr == "spool"
        )
        if spool_named and node.attr in ("core", "tables"):
            return True
        if isinstance(holder, ast.Name) and holder.id == "_core" and node.attr in CORES:
            return True
    if isinstance(node, ast.ImportFrom) and node.module == "postwire._core":
        return any(alias.name in CORES for alias in node.names)
    if isinstance(node, ast.ImportFrom) and node.module in ROUTING_MODULES:
        return True
    return isinstance(node, ast.Import) and any(a.name in ROUTING_MODULES for a in node.names)


def test_nothing_outside_the_store_package_reaches_the_stores() -> None:
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if path.is_relative_to(STORE_DIR):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if _reaches_a_core(node):
                line = getattr(node, "lineno", 0)
                found.append(f"{path.relative_to(PACKAGE_DIR.parent)}:{line}")
    assert found == []
