"""``suber-data build movies|books|corpus`` (options, a TOML file with ``--config``, or both) and ``rebuild``."""

from __future__ import annotations

import functools
import inspect
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from suber_data import settings
from suber_data.errors import SuberDataError

build_app = typer.Typer(help="Build a dataset.", no_args_is_help=True)


class Only(StrEnum):
    items = "items"
    users = "users"
    descriptions = "descriptions"
    embeddings = "embeddings"


class Profile(StrEnum):
    census = "census"
    suber = "suber"
    real = "real"


class Split(StrEnum):
    time = "time"
    random = "random"


# The options of the `build` commands, declared once.
Config = Annotated[
    Path | None,
    typer.Option(help="A TOML file of these settings (see examples/build.toml); options typed here win over it."),
]
DataDir = Annotated[Path | None, typer.Option(help="Root of built datasets (env SUBER_DATA_DIR, default ./data).")]
OnlyStep = Annotated[Only | None, typer.Option(help="Stop after this step (and the catalog).")]
Users = Annotated[
    int | None,
    typer.Option(
        help="Sample this many users (0: none): synthetic, or real with --profile real. Left out: none, except with "
        "--only users or descriptions, which sample the users step's default, 600."
    ),
]
HeldOut = Annotated[
    int | None, typer.Option(help="--profile real: ratings held out per user for evaluation (default 10).")
]
MinHistory = Annotated[
    int | None, typer.Option(help="--profile real: fewest history ratings a sampled user has (default 20).")
]
SplitBy = Annotated[
    Split | None,
    typer.Option(help="--profile real: hold out each user's latest ratings (time, the default) or random ones."),
]
Seed = Annotated[int | None, typer.Option(help="Seed of every sampled and generated artifact (resource defaults).")]
SuberLists = Annotated[Path | None, typer.Option(help="Folder with SUBER's list CSVs, instead of fetching them.")]
Llm = Annotated[
    str | None,
    typer.Option(
        help="Write user descriptions with: transformers, openai, smollm2, template. Left out: no descriptions, "
        "except with --only descriptions, which uses smollm2."
    ),
]
Model = Annotated[str | None, typer.Option(help="LLM model id or local path for --llm.")]
LlmBaseUrl = Annotated[str | None, typer.Option(help="Base URL of an OpenAI-compatible server.")]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="On an error, print its whole traceback too.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout (tables and progress: none).")]
RayAddress = Annotated[
    str | None,
    typer.Option("--ray", help="Run descriptions and embeddings on this Ray cluster: auto, HOST:PORT or local."),
]
EmbeddingModel = Annotated[
    str | None,
    typer.Option(
        help="Embed items (and described users) with this sentence-transformers model ('minilm': offline). Left out: "
        "no embeddings, except with --only embeddings, which uses sentence-transformers/sentence-t5-base."
    ),
]


# The options every `build` command takes after its own (movies, books, a described corpus): one list, added to
# each command's signature by `_shared_options`, which hands them to the command in **shared.
SHARED_OPTIONS: dict[str, tuple[object, object]] = {
    "data_dir": (DataDir, None),
    "only": (OnlyStep, None),
    "users": (Users, None),
    "seed": (Seed, None),
    "held_out": (HeldOut, None),
    "min_history": (MinHistory, None),
    "split": (SplitBy, None),
    "llm": (Llm, None),
    "model": (Model, None),
    "llm_base_url": (LlmBaseUrl, None),
    "embedding_model": (EmbeddingModel, None),
    "ray": (RayAddress, None),
    "verbose": (Verbose, False),
    "as_json": (AsJson, False),
}


def _shared_options(command):
    """``command`` with SHARED_OPTIONS after its own parameters, as typer reads a signature; the command takes
    them in ``**shared``."""
    own = inspect.signature(command, eval_str=True)
    kept = [p for p in own.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    extra = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        for name, (annotation, default) in SHARED_OPTIONS.items()
    ]

    @functools.wraps(command)
    def run(**values):
        return command(**values)

    run.__signature__ = own.replace(parameters=[*kept, *extra])
    run.__annotations__ = {p.name: p.annotation for p in [*kept, *extra]}
    return run


def _cli():
    """The command's consoles and error helpers (suber_data/cli/console.py), looked up when used."""
    from suber_data.cli import console

    return console


@build_app.command("movies")
@_shared_options
def build_movies(
    ctx: typer.Context,
    config: Config = None,
    release: Annotated[str, typer.Option(help="MovieLens release (see `suber-data sources`); 'sample' is offline.")] = (
        "ml-latest-small"
    ),
    no_tmdb: Annotated[bool, typer.Option("--no-tmdb", help="Skip TMDB: a MovieLens-only item table.")] = False,
    tmdb_rate: Annotated[float | None, typer.Option(help="TMDB requests per second (resource default: 40).")] = None,
    profile: Annotated[
        Profile | None,
        typer.Option(
            help="census (the resource default), suber (SUBER-exact sampling) or real (real users of the release, "
            "each with a history and held-out ratings)."
        ),
    ] = None,
    suber_lists: SuberLists = None,
    **shared,
) -> None:
    """Build a movie dataset: MovieLens (+ TMDB) items and ratings, optional users, descriptions, embeddings."""
    values, verbose, as_json = _values(locals())
    _build(ctx, "movies", config, values, verbose=verbose, as_json=as_json)


@build_app.command("books")
@_shared_options
def build_books(
    ctx: typer.Context,
    config: Config = None,
    release: Annotated[
        str,
        typer.Option(
            help="Books release (see `suber-data sources`): kaggle-amazon-books (Kaggle credentials or a mirror), "
            "amazon2023-books (Amazon Reviews 2023 meta_Books + Books); 'books-sample' is offline."
        ),
    ] = "kaggle-amazon-books",
    profile: Annotated[
        Profile | None,
        typer.Option(
            help="census (the default: the project's book filter, census users), suber (SUBER's book filter "
            "and sampler exactly) or real (the project's filter, real reviewers as users)."
        ),
    ] = None,
    suber_lists: SuberLists = None,
    **shared,
) -> None:
    """Build a book dataset: Amazon Books (Kaggle) items and ratings, optional users, descriptions, embeddings."""
    values, verbose, as_json = _values(locals())
    _build(ctx, "books", config, {**values, "no_tmdb": True}, verbose=verbose, as_json=as_json)


@build_app.command("corpus")
@_shared_options
def build_corpus(
    ctx: typer.Context,
    config: Annotated[
        Path,
        typer.Option(
            help="The corpus description (TOML; see examples/anime.toml and docs/corpus.md): its files, columns, "
            # \\[: Rich markup would take a bare [build] for a style and drop it
            "scale, nouns, tastes, and an optional \\[build] table of the settings below."
        ),
    ],
    profile: Annotated[
        Profile | None, typer.Option(help="census (the default) or real (real people of the ratings as users).")
    ] = None,
    **shared,
) -> None:
    """Build a dataset of any corpus a TOML file describes: its items and ratings, optional users, descriptions,
    embeddings; the same steps and checks as movies and books. The file is checked (keys, types, files, columns,
    scale) before any step runs."""
    values, verbose, as_json = _values(locals())
    from suber_data.cli.rebuild import use_corpus
    from suber_data.corpus import fetch_sources, load_spec

    try:
        if profile == Profile.suber:
            raise SuberDataError("--profile suber: SUBER's sampler is defined on movies and books; use census or real")
        spec = load_spec(config)
        fetch_sources(spec)  # files, columns and the scale checked before any step (downloads land in the cache)
        name = use_corpus(config)
    except SuberDataError as exc:
        _cli().command_failed(exc, verbose, as_json)
    values.update(release=spec.release, no_tmdb=True, suber_lists=None)
    _build(ctx, name, config, values, verbose=verbose, as_json=as_json, table="build", corpus=str(spec.path))


def _values(scope: dict) -> tuple[dict, bool, bool]:
    """A build command's settings (its own options and the shared ones), and its --verbose and --json."""
    values = {k: v for k, v in scope.items() if k not in ("ctx", "config", "shared")} | scope["shared"]
    return values, values.pop("verbose"), values.pop("as_json")


def _typed(ctx: typer.Context, name: str) -> bool:
    """Whether the user typed this option. By the source's name: typer 0.2x carries its own copy of click,
    whose ParameterSource is not click's."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def _build(
    ctx: typer.Context,
    domain: str,
    config: Path | None,
    values: dict,
    *,
    verbose: bool,
    as_json: bool,
    table: str | None = None,
    corpus: str | None = None,
):
    from suber_data.cli.config import load_build_file
    from suber_data.cli.run import BuildOptions

    origin: dict[str, str] = {}
    if config is not None:
        try:
            found = load_build_file(config, tmdb_step="tmdb_rate" in values, table=table)
        except SuberDataError as exc:
            _cli().command_failed(exc, verbose, as_json)
        for key, value in found.items():  # the file fills what the command line left at its default
            param = "no_tmdb" if key == "tmdb" else key
            if not _typed(ctx, param):
                values[param] = (not value) if key == "tmdb" else value
                origin[key] = str(config)
    data_dir, only, profile, suber_lists, split = (
        values.pop(k) for k in ("data_dir", "only", "profile", "suber_lists", "split")
    )
    options = BuildOptions(
        domain=domain,
        data_dir=str(settings.data_dir(data_dir)),
        tmdb=not values.pop("no_tmdb"),
        only=str(only) if only else None,  # an Only member or the file's string
        profile=str(profile) if profile else None,
        suber_lists=str(suber_lists) if suber_lists else None,
        split=str(split) if split else None,
        origin=origin,
        corpus=corpus,
        **values,
    )
    run_checked(options, verbose, as_json)


def run_checked(options, verbose: bool, as_json: bool, after=None) -> dict:
    """Check every setting, then build; an error is one line (``--verbose``: with its traceback)."""
    from suber_data.cli.run import BuildInterrupted, StepFailed, run_build
    from suber_data.cli.validate import check_options

    cli = _cli()
    try:
        check_options(options)  # before any step runs: nothing is downloaded or written on a bad value
        report = run_build(options, console=cli.console, out=cli.out, as_json=as_json)
    except BuildInterrupted as exc:
        cli.console.print(str(exc), markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(exc.exit_code) from None
    except SuberDataError as exc:
        cli.command_failed(exc, verbose, as_json, exc.details if isinstance(exc, StepFailed) else None)
    if after is not None:
        report = after(report)
    if as_json:
        cli.print_json(report)
    return report


def rebuild(
    path: Annotated[Path, typer.Argument(help="A dataset folder with its manifest.json, e.g. data/movies/sample.")],
    data_dir: Annotated[
        Path | None,
        typer.Option(
            help="Build into D/<domain>/<release>. Without it, in place: DIR must be <data-dir>/<domain>/<release>."
        ),
    ] = None,
    ray: RayAddress = None,
    verbose: Verbose = False,
    as_json: AsJson = False,
) -> None:
    """Build a dataset again from the settings its manifest.json recorded, in place or under another --data-dir.

    In place, with nothing changed, every step is "up to date".

    It ends saying which steps had the recorded inputs and which tables came out byte-identical."""
    from suber_data.cli.rebuild import compare, options_from_manifest

    cli = _cli()
    try:
        options, before = options_from_manifest(path, str(data_dir) if data_dir else None, ray)
    except SuberDataError as exc:
        cli.command_failed(exc, verbose, as_json)

    def compared(report: dict) -> dict:
        report["rebuilt_from"] = str(path)
        report["compared"] = compare(before, path, report["dataset_dir"])
        return report

    report = run_checked(options, verbose, as_json, after=compared)
    if not as_json:
        seen = report["compared"]
        for label, names in (
            ("steps with the recorded inputs (same fingerprint)", seen["steps_as_recorded"]),
            ("steps with other inputs", seen["steps_changed"]),
            ("tables byte-identical to the recorded ones", seen["tables_identical"]),
            ("tables equal to the recorded ones but for measured times (seconds)", seen["tables_equal_but_timings"]),
            ("tables that differ", seen["tables_changed"]),
        ):
            if names:
                cli.out.print(f"{label}: {escape(', '.join(names))}", soft_wrap=True)
