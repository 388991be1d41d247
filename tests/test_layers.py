"""The dependency direction of DESIGN.md, checked on the source: library <- pipelines <- cli; env stands alone."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "suber_data"
UPPER_LAYERS = ("suber_data.pipelines", "suber_data.cli")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_library_imports_neither_dagster_nor_the_layers_above_it():
    offenders = []
    for path in LIBRARY.rglob("*.py"):
        rel = path.relative_to(LIBRARY)
        if rel.parts[0] in ("pipelines", "cli"):
            continue
        for name in imported_modules(path):
            if name.split(".")[0] in ("dagster", "typer") or name.startswith(UPPER_LAYERS):
                offenders.append(f"{rel}: {name}")
    assert not offenders, offenders


def test_pipelines_do_not_import_the_cli():
    offenders = [
        f"{path.relative_to(LIBRARY)}: {name}"
        for path in (LIBRARY / "pipelines").rglob("*.py")
        for name in imported_modules(path)
        if name.startswith("suber_data.cli")
    ]
    assert not offenders, offenders


def test_env_never_imports_the_builder():
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in (ROOT / "env" / "suber_env").rglob("*.py")
        for name in imported_modules(path)
        if name.split(".")[0] == "suber_data"
    ]
    assert not offenders, offenders


def _import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, lazy imports inside functions included (they are arrows too)."""
    modules = {}
    for path in (root / package).rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        base = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level:  # relative: from .x import y
                    up = base.split(".")[: len(base.split(".")) - (node.level - 1)]
                    module = ".".join([*up, *([module] if module else [])])
                # `from pkg import sub` imports the module pkg.sub; `from mod import name` the module mod
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in modules else module for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and target.split(".")[0] == package:
                    graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    found = _cycles(_import_graph(ROOT, "suber_data")) | _cycles(_import_graph(ROOT / "env", "suber_env"))
    assert not found, sorted(sorted(c) for c in found)


def test_the_cycle_finder_reads_from_package_import_submodule_as_the_submodule():
    graph = _import_graph(ROOT, "suber_data")
    assert "suber_data.users.checks" in graph["suber_data.users.build"]  # from suber_data.users import checks
    assert "suber_data.users" not in graph["suber_data.users.build"]


def test_the_cycle_finder_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {frozenset({"a", "b", "c"})}
