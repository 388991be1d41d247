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
