"""The ``suber-data`` command: builds selections of the same Dagster asset graph that ``dagster dev`` shows."""

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table

from suber_data import __version__, settings
from suber_data.cli import console as ui
from suber_data.cli.build import AsJson, Verbose, build_app, rebuild
from suber_data.errors import SuberDataError

app = typer.Typer(
    name="suber-data",
    help="Build datasets for LLM-based recommender-system simulation (items, users, descriptions, embeddings).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(build_app, name="build")
app.command("rebuild")(rebuild)


@app.callback(invoke_without_command=True)
def _root(version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False) -> None:
    if version:
        ui.out.print(__version__)
        raise typer.Exit()


@app.command("sources")
def sources(as_json: AsJson = False) -> None:
    """Known releases: size, checksum and whether they are in the cache."""
    from suber_data.sources import COMPOSITES, REGISTRY, cached_path

    _load_all_sources()
    rows = []
    for name, release in sorted(REGISTRY.items()):
        checksum = "sha256" if release.sha256 else ("md5" if release.md5 else "unpinned")
        rows.append(
            {
                "name": name,
                "family": release.family,
                "size": release.size,
                "checksum": checksum,
                "sha256": release.sha256,
                "md5": release.md5,
                "url": release.url,
                "cached": cached_path(release) is not None,
                "description": release.description,
            }
        )
    for name, composite in COMPOSITES.items():  # built from several files: listed with the files it needs
        parts = [REGISTRY[p] for p in composite.parts]
        sizes = [r.size for r in parts]
        rows.append(
            {
                "name": name,
                "family": "composite",
                "size": sum(sizes) if all(sizes) else None,
                "checksum": "sha256" if all(r.sha256 for r in parts) else "unpinned",
                "sha256": None,
                "md5": None,
                "url": None,
                "parts": list(composite.parts),
                "cached": all(cached_path(r) is not None for r in parts),
                "description": f"{composite.description} (needs {' + '.join(composite.parts)})",
            }
        )
    rows.sort(key=lambda row: row["name"])
    if as_json:
        ui.print_json(rows)
        return
    title = f"Known releases (cache: {escape(str(settings.cache_dir()))})"
    longest = max((len(row["name"]) for row in rows), default=4)
    if ui.out.width < longest + 90:  # too narrow for a table: one block per release, the name whole on its own line
        ui.out.print(f"[bold]{title}[/]")
        for row in rows:
            size = f"{row['size']:,} bytes" if row["size"] else "size ?"
            cached = "cached" if row["cached"] else "not cached"
            ui.out.print(f"[bold]{row['name']}[/]  {row['family']}, {size}, {row['checksum']}, {cached}")
            ui.out.print(Padding(escape(row["description"]), (0, 0, 0, 4)))
        return
    table = Table(title=title)
    table.add_column("name", no_wrap=True, min_width=longest)  # what users type: never cut
    for column in ("family", "size", "checksum", "cached"):
        table.add_column(column, no_wrap=True)
    table.add_column("description", ratio=1)
    for row in rows:
        size = f"{row['size']:,}" if row["size"] else "?"
        cached = "yes" if row["cached"] else "no"
        table.add_row(row["name"], row["family"], size, row["checksum"], cached, escape(row["description"]))
    ui.out.print(table)


@app.command("info")
def info(
    path: Annotated[Path, typer.Argument(help="A dataset folder, e.g. data/movies/ml-latest-small.")],
    verify: Annotated[
        bool, typer.Option("--verify", help="Hash every table and compare with the recorded sha256 (slower).")
    ] = False,
    as_json: AsJson = False,
) -> None:
    """What a dataset holds, from its manifest, after checking that every recorded file is there with its recorded
    size (``--verify``: and sha256). A file that is not as recorded is named and the command exits 1."""
    from suber_data.artifacts import read_manifest
    from suber_data.artifacts.manifest import table_problems

    try:
        manifest = read_manifest(path)
    except SuberDataError as exc:
        ui.fail(str(exc))
    if not manifest:
        ui.fail(f"{path}: no manifest.json here; build a dataset with `suber-data build movies` or `build books`")
    # without --verify the cache of checksums still catches a file rewritten since it was hashed
    problems = table_problems(path, verify=verify)
    if as_json:
        ui.print_json({"path": str(path), "ok": not problems, "problems": problems, **manifest})
        if problems:
            raise typer.Exit(1)
        return
    ui.out.print(
        f"[bold]{path}[/]  {manifest.get('domain', '?')}/{manifest.get('release', '?')}  "
        f"schema v{manifest.get('schema_version')}  tool {manifest.get('tool', {}).get('version')}  "
        f"updated {manifest.get('updated_at')}"
    )
    tables = Table(title="tables")
    for column in ("file", "rows", "bytes", "step"):
        tables.add_column(column)
    for name, entry in manifest.get("tables", {}).items():
        tables.add_row(name, f"{entry['rows']:,}", f"{entry['bytes']:,}", entry.get("step", ""))
    ui.out.print(tables)
    steps = Table(title="steps")
    steps.add_column("step", no_wrap=True)
    steps.add_column("built at", no_wrap=True)
    steps.add_column("counts and settings", ratio=1)
    for name, section in manifest.get("steps", {}).items():
        details = {**(section.get("counts") or {}), **(section.get("settings") or {})}
        steps.add_row(name, section.get("built_at", ""), escape(_pairs(details)))
    ui.out.print(steps)
    if manifest.get("sources"):
        src = Table(title="sources")
        for column in ("file", "url", "size", "sha256"):
            src.add_column(column, overflow="fold")  # a URL is copied: folded whole, never cut
        for name, entry in manifest["sources"].items():
            src.add_row(name, entry.get("url", ""), f"{entry.get('size') or '?'}", (entry.get("sha256") or "")[:16])
        ui.out.print(src)
    if problems:
        _info_problems(path, problems)


def _info_problems(path: Path, problems: list[str]) -> None:
    for problem in problems:
        ui.console.print(f"[bold red]error:[/] {escape(problem)}", soft_wrap=True)
    ui.fail(
        f"{path}: {len(problems)} file(s) not as manifest.json recorded them; run the same `suber-data build` again "
        f"(or `suber-data rebuild {path}`): it rebuilds them"
    )


@app.command("publish")
def publish(
    path: Annotated[Path, typer.Argument(help="A dataset folder, e.g. data/movies/ml-latest-small.")],
    repo_id: Annotated[str | None, typer.Option(help="Hub dataset repository, e.g. your-name/suber-movies.")] = None,
    private: Annotated[bool, typer.Option("--private", help="Create the repository private.")] = False,
    revision: Annotated[str | None, typer.Option(help="Branch to commit to (default: main).")] = None,
    create_pr: Annotated[bool, typer.Option("--create-pr", help="Open a pull request instead of committing.")] = False,
    message: Annotated[str | None, typer.Option(help="Commit message.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would go up; contact nothing.")] = False,
    verbose: Verbose = False,
    as_json: AsJson = False,
) -> None:
    """Upload a dataset folder (card, tables, manifest, catalog; never .work/ or locks) to the Hugging Face Hub.

    The token comes from HF_TOKEN or `hf auth login`; HF_ENDPOINT selects another Hub."""
    from suber_data.publish.hub import publish as publish_folder

    try:
        report = publish_folder(
            path, repo_id, private=private, revision=revision, create_pr=create_pr, message=message, dry_run=dry_run
        )
    except SuberDataError as exc:
        ui.command_failed(exc, verbose, as_json)
    if as_json:
        ui.print_json(report)
        return
    size = f"{len(report['files'])} files, {report['bytes']:,} bytes"
    if dry_run:
        ui.out.print(f"would publish {escape(str(path))} ({size}; card {report['card']}):", soft_wrap=True)
        for name in report["files"]:
            ui.out.print(f"  {escape(name)}")
    else:
        # soft_wrap: URLs stay whole, to be copied
        ui.out.print(
            f"published {escape(str(path))} to {escape(report['url'])} ({size}; card {report['card']})", soft_wrap=True
        )
        ui.out.print(f"commit: {escape(report['pr_url'] or report['commit_url'])}", soft_wrap=True)


def _pairs(values: dict) -> str:
    """One ``key: value`` per line, values as JSON with spaces: a narrow terminal wraps between words, never
    inside a key or a number."""
    return "\n".join(f"{k}: {json.dumps(v, separators=(', ', ': '), default=str)}" for k, v in values.items())


def _load_all_sources() -> None:
    """Import the modules that register releases, so `sources` lists them all."""
    import importlib

    for module in (
        "suber_data.movies.corpus",
        "suber_data.books.corpus",
        "suber_data.books.amazon2023",
        "suber_data.users.sources",
    ):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise


class ExportFormat(StrEnum):
    lenskit = "lenskit"
    recbole = "recbole"


@app.command("export")
def export_cmd(
    fmt: Annotated[ExportFormat, typer.Argument(metavar="FORMAT", help="lenskit (Parquet) or recbole (atomic files).")],
    path: Annotated[Path, typer.Argument(help="A dataset folder, e.g. data/movies/ml-latest-small.")],
    out_dir: Annotated[Path, typer.Option("--out", help="Folder to write the export into.")],
    as_json: AsJson = False,
) -> None:
    """Write a dataset's real ratings and its items in the files LensKit or RecBole load (see the README)."""
    from suber_data.export import export

    try:
        written = export(fmt.value, path, out_dir)
    except SuberDataError as exc:
        ui.fail(str(exc))
    if as_json:
        ui.print_json({"ok": True, "format": fmt.value, "out": str(out_dir), "files": written})
        return
    for name, rows in written.items():
        ui.out.print(f"{escape(str(out_dir / name))}: {rows:,} rows", soft_wrap=True)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where it lands so that ``finally`` blocks run as they do for Ctrl-C."""


def _terminate(signum, frame) -> None:
    raise _Terminated()


def main() -> None:
    import signal

    signal.signal(signal.SIGTERM, _terminate)  # Dagster swaps it while a build runs; cli.run reports that case
    try:
        app()
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, _Terminated)
        ui.console.print(f"interrupted ({'SIGTERM' if terminated else 'SIGINT'}); run the same command again to resume")
        sys.exit(143 if terminated else 130)


if __name__ == "__main__":
    main()
