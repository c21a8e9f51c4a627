"""The product's import graph, read from the source (ast), for the architecture tests.

Every `import` and `from … import` of a product package is an edge from the importing module
to the imported module (a name imported from a package is the submodule when one exists, else
the package itself). Imports inside functions are edges too, marked `local`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
PRODUCT_PACKAGES = ("config", "mitl", "annotation", "pipeline", "api", "frontend")


@dataclass(frozen=True)
class ImportEdge:
    source: str
    target: str
    line: int
    local: bool  # inside a function: not run when the module loads


def module_files() -> dict[str, Path]:
    """Map every product module's dotted name to its file (migrations left out)."""
    modules: dict[str, Path] = {}
    for package in PRODUCT_PACKAGES:
        for path in sorted((REPOSITORY / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(REPOSITORY).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    """Resolve a relative `from` import against the importing module."""
    if level == 0:
        return name or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _function_lines(tree: ast.AST) -> set[int]:
    """Line numbers of the import statements that sit inside a function."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    lines.add(inner.lineno)
    return lines


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = _absolute(module, is_package, node.level, node.module)
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def import_edges() -> list[ImportEdge]:
    """Every import of one product module by another."""
    files = module_files()
    edges: list[ImportEdge] = []
    for module, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        local_lines = _function_lines(tree)
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            names = _targets(node, module, is_package)
            # `from pkg import name`: the submodule when it exists, else the package.
            found = [name for name in names[1:] if name in files] if len(names) > 1 else []
            for target in found or [name for name in names[:1] if name in files]:
                if target != module:
                    edges.append(
                        ImportEdge(module, target, node.lineno, node.lineno in local_lines)
                    )
    return edges


def third_party_imports(module: str) -> set[str]:
    """Top-level names of the libraries a module imports when it loads."""
    tree = ast.parse(module_files()[module].read_text())
    local_lines = _function_lines(tree)
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom) or node.lineno in local_lines:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names - set(PRODUCT_PACKAGES)


def cycles(edges: list[ImportEdge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found
