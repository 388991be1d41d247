"""Dagster: the asset graph materialized in-process, and `dg dev` driven through its GraphQL API."""

import dagster as dg
import pytest
from typer.testing import CliRunner

from suber_data.artifacts import sha256_file
from suber_data.cli.main import app
from suber_data.pipelines.definitions import ASSETS, BOOK_ASSETS, BOOK_CHECKS, CHECKS, default_resources, defs
from suber_data.pipelines.resources import StorageResource, TMDBResource, UsersResource
from tests.support.dagster_server import dagster_server, graphql, launch_job, wait_for_run

EMBEDDINGS = ("item_embeddings", "user_embeddings")


@pytest.fixture
def offline(tmp_path, monkeypatch):
    for name in ("SUBER_DATA_MIRROR", "TMDB_API_KEY", "TMDB_READ_ACCESS_TOKEN", "TMDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SUBER_DATA_OFFLINE", "1")
    monkeypatch.setenv("SUBER_DATA_CACHE", str(tmp_path / "cache"))
    return tmp_path


def test_definitions_load_with_jobs_and_checks():
    for job in ("movies_corpus", "movies_build_all", "movies_description_shards"):
        assert defs.resolve_job_def(job) is not None
    assert defs.resolve_job_def("movies_description_shards").partitions_def is not None
    assert "sample" in defs.resolve_job_def("movies_build_all").partitions_def.get_partition_keys()
    keys = {k.to_user_string() for a in ASSETS for k in a.keys}
    assert {"movielens_release", "tmdb_details", "items", "ratings", "catalog"} <= keys
    # every check of the movie graph, by asset and name: one dropped or renamed fails here
    checks = {k.to_user_string() for c in CHECKS for k in c.check_keys}
    assert checks == {
        *(f"items:items_{n}" for n in ("ids_unique", "schema", "titles_present", "tmdb_coverage")),
        "ratings:ratings_valid",
        *(f"users:users_{n}" for n in ("age_sex", "like_rates", "occupation_rules", "name_duplicates")),
        *(f"users:users_{n}" for n in ("real_split", "real_no_leak", "tastes_in_items")),
        *(f"users:users_{n}" for n in ("profile_fields", "friendship_graph")),
        "user_descriptions:user_descriptions_quality",
        *(f"{a}:{n}" for a in EMBEDDINGS for n in ("dimension", "no_nan", "one_vector_per_row", "unit_norm")),
    }


def test_cli_selection_comes_from_the_asset_graph_and_defaults_from_the_resources():
    from suber_data.cli.run import BuildOptions, resources_for, wanted_assets

    graph = defs.resolve_asset_graph()
    only_items = wanted_assets(BuildOptions("movies", "sample", "d", only="items"), graph)
    assert only_items == ["movielens_release", "tmdb_details", "items", "ratings", "catalog"]  # the real ratings too
    described = wanted_assets(BuildOptions("movies", "sample", "d", only="descriptions"), graph)
    assert described[-1] == "catalog" and described.index("users") < described.index("user_descriptions")
    # unset CLI options leave the UI's defaults in place: one default per setting
    cli, ui = resources_for(BuildOptions("movies", "sample", "d")), default_resources()
    for name in ("users", "llm", "embedder"):
        assert cli[name].model_dump() == ui[name].model_dump(), name
    assert resources_for(BuildOptions("movies", "sample", "d", llm="template", seed=7))["llm"].seed == 7


def test_materialize_writes_the_same_dataset_as_the_library_and_the_cli(offline):
    """The Dagster assets add nothing to the library's steps: items and ratings materialized are the bytes of the
    library's functions called directly, with no Dagster; the CLI (which runs the same graph in-process) checks
    that its options become the same resources as the UI's defaults."""
    from suber_data.movies import corpus
    from suber_data.movies.tmdb import TMDBClient

    direct = offline / "library" / "movies" / "sample"
    tmdb = TMDBResource()
    ml = corpus.build_movielens("sample")
    client = TMDBClient(tmdb.base_url, rate_limit=tmdb.rate_limit, concurrency=tmdb.concurrency, language=tmdb.language)
    details = corpus.build_tmdb(ml, "sample", client)
    corpus.build_items(direct, "sample", ml, details, tmdb_settings={"tmdb_language": tmdb.language})
    corpus.build_ratings(direct, ml, corpus.rating_scale("sample"))
    storage = StorageResource(data_dir=str(offline / "dagster"))
    result = dg.materialize(
        [*ASSETS, *CHECKS],
        selection=dg.AssetSelection.groups("movies_corpus", "movies_catalog"),
        resources={**default_resources(), "storage": storage, "tmdb": TMDBResource()},
        partition_key="sample",
    )
    assert result.success
    evaluations = result.get_asset_check_evaluations()
    assert evaluations and all(e.passed for e in evaluations)
    cli = CliRunner().invoke(app, ["build", "movies", "--release", "sample", "--data-dir", str(offline / "cli")])
    assert cli.exit_code == 0, cli.output
    for name in ("items.parquet", "ratings.parquet", "README.md"):  # the card too: no timestamps in it
        assert sha256_file(offline / "dagster" / "movies" / "sample" / name) == sha256_file(
            offline / "cli" / "movies" / "sample" / name
        )
    for name in ("items.parquet", "ratings.parquet"):
        assert sha256_file(offline / "dagster" / "movies" / "sample" / name) == sha256_file(direct / name), name


@pytest.mark.slow
def test_dg_dev_lists_assets_and_runs_the_movie_job(offline):
    # `dg dev` (the dg project layout, pyproject [tool.dg]) serves the same definitions as `dagster dev`
    env = {"SUBER_DATA_DIR": str(offline / "data")}
    with dagster_server("dg", offline / "dagster_home", env) as url:
        nodes = graphql(url, "{ assetNodes { assetKey { path } } }")["assetNodes"]
        keys = {"/".join(n["assetKey"]["path"]) for n in nodes}
        assert {"movielens_release", "tmdb_details", "items", "ratings", "catalog"} <= keys
        assert {"books/release", "books/items", "books/users", "books/catalog"} <= keys  # side by side
        # the storage's settings come from the environment as EnvVars (the UI names the variable), read at run start
        details = graphql(
            url,
            """{ topLevelResourceDetailsOrError(resourceSelector: {repositoryLocationName: "suber-data",
                 repositoryName: "__repository__", resourceName: "storage"}) {
                 ... on ResourceDetails { configuredValues { key value type } } } }""",
        )["topLevelResourceDetailsOrError"]["configuredValues"]
        shown = {v["key"]: (v["type"], v["value"]) for v in details}
        assert shown["data_dir"] == ("ENV_VAR", "SUBER_DATA_DIR")
        assert "release" not in shown  # the release is the run's partition
        # its steps in the run worker's process: a process per step (the default, which the UI test's clicked run
        # keeps) imports the whole code location again for each of the job's seven steps
        in_process = {"execution": {"config": {"in_process": {}}}}
        run = launch_job(url, "movies_corpus", run_config=in_process, partition="sample")
        assert wait_for_run(url, run) == "SUCCESS"
        assert (offline / "data" / "movies" / "sample" / "catalog.duckdb").exists()
        # the run's materializations and check results belong to its release only
        node = graphql(
            url,
            """{ assetNodeOrError(assetKey: {path: ["items"]}) { ... on AssetNode {
                 partitionKeys assetPartitionStatuses { ... on DefaultPartitionStatuses { materializedPartitions } }
               } } }""",
        )["assetNodeOrError"]
        assert "ml-1m" in node["partitionKeys"]
        assert node["assetPartitionStatuses"]["materializedPartitions"] == ["sample"]


def test_a_domain_plugs_in_by_its_corpus_step():
    from suber_data.pipelines.domains import DomainSpec, domain_assets, domain_definitions

    @dg.asset(name="items", group_name="books_corpus")
    def book_items() -> None: ...

    graph = domain_definitions(DomainSpec("books", [book_items])).resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert {"items", "users", "catalog"} <= keys and "movielens_release" not in keys
    assert dg.AssetKey("items") in graph.get(dg.AssetKey("users")).parent_keys
    with pytest.raises(ValueError, match="keyed 'items'"):
        domain_assets(DomainSpec("books", []))


def test_both_domains_load_side_by_side_in_one_definitions():
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    shared = ["users", "user_descriptions", "item_embeddings", "user_embeddings", "catalog"]
    assert {*shared, "items", "ratings"} <= keys and {f"books/{k}" for k in [*shared, "items", "ratings"]} <= keys
    # the same step definitions, keyed per domain: books' users read books' items and ratings (real users are
    # drawn from the ratings), never the movies'
    parents = {dg.AssetKey(["books", "items"]), dg.AssetKey(["books", "ratings"])}
    assert graph.get(dg.AssetKey(["books", "users"])).parent_keys == parents
    assert graph.get(dg.AssetKey("users")).parent_keys == {dg.AssetKey("items"), dg.AssetKey("ratings")}
    # every domain's groups are named alike: <domain>_corpus, <domain>_users, <domain>_embeddings, <domain>_catalog
    groups = {graph.get(k).group_name for k in graph.get_all_asset_keys()}
    assert groups == {f"{d}_{g}" for d in ("movies", "books") for g in ("corpus", "users", "embeddings", "catalog")}
    assert graph.get(dg.AssetKey(["books", "users"])).group_name == "books_users"
    assert graph.get(dg.AssetKey("users")).group_name == "movies_users"
    books_job = {k.to_user_string() for k in defs.resolve_job_def("books_build_all").asset_layer.executable_asset_keys}
    assert "books/users" in books_job and not any(not k.startswith("books/") for k in books_job)
    assert defs.resolve_job_def("books_description_shards").partitions_def is not None
    checks = {(k.asset_key.to_user_string(), k.name) for k in graph.asset_check_keys}
    assert ("books/users", "users_tastes_in_items") in checks and ("users", "users_tastes_in_items") in checks
    assert ("books/items", "items_complete") in checks

    from suber_data.cli.run import BuildOptions, wanted_assets

    only_items = wanted_assets(BuildOptions("books", "books-sample", "d", only="items"), graph)
    assert only_items == ["books/release", "books/items", "books/ratings", "books/catalog"]


def test_materialize_books_writes_the_same_dataset_as_the_cli(offline):
    storage = StorageResource(data_dir=str(offline / "dagster"), domain="books")
    users = dg.AssetSelection.assets(dg.AssetKey(["books", "users"]))
    result = dg.materialize(
        [*BOOK_ASSETS, *BOOK_CHECKS],
        selection=dg.AssetSelection.groups("books_corpus", "books_catalog") | users,
        resources={**default_resources(), "books_storage": storage, "users": UsersResource(count=8)},
        partition_key="books-sample",
    )
    assert result.success
    evaluations = result.get_asset_check_evaluations()
    assert {e.asset_key.to_user_string() for e in evaluations} == {"books/items", "books/ratings", "books/users"}
    (release,) = [e for e in result.get_asset_materialization_events() if e.asset_key.path == ["books", "release"]]
    sizes = release.materialization.metadata  # the release's files are sized, not counted (that needs a scan)
    assert sizes["Books_rating.csv_bytes"].value > 0 and "Books_rating.csv" not in sizes
    assert all(e.passed for e in evaluations), [(e.check_name, e.metadata) for e in evaluations if not e.passed]
    args = ["build", "books", "--release", "books-sample", "--users", "8", "--data-dir", str(offline / "cli")]
    cli = CliRunner().invoke(app, args)
    assert cli.exit_code == 0, cli.output
    assert "books/items" in cli.output and "items_vote_count" in cli.output
    for name in ("items.parquet", "ratings.parquet", "users.parquet", "README.md"):
        assert sha256_file(offline / "dagster" / "books" / "books-sample" / name) == sha256_file(
            offline / "cli" / "books" / "books-sample" / name
        ), name


# -- what the UI shows beside the runs: kinds, schemas, row counts, code versions, blocking checks --------------
def test_assets_declare_kinds_schemas_and_code_versions(monkeypatch):
    from suber_data.artifacts.schemas import BOOK_ITEMS, MOVIE_ITEMS, USERS
    from suber_data.pipelines import users
    from suber_data.pipelines.keys import ROOT
    from suber_data.pipelines.metadata import code_version
    from suber_data.users import build

    graph = defs.resolve_asset_graph()
    nodes = {k.to_user_string(): graph.get(k) for k in graph.get_all_asset_keys()}
    assert all(n.kinds and n.code_version for n in nodes.values()), [k for k, n in nodes.items() if not n.kinds]
    assert {"duckdb", "parquet"} <= nodes["items"].kinds and "duckdb" in nodes["books/catalog"].kinds
    for key, schema in {"items": MOVIE_ITEMS, "books/items": BOOK_ITEMS, "users": USERS}.items():
        columns = nodes[key].metadata["dagster/column_schema"].columns
        assert [c.name for c in columns] == schema.names, key
        assert all(c.description for c in columns), key  # the contract's one-line descriptions
    # the code version follows the step's version constant: bumping it shows the asset as changed
    assert nodes["users"].code_version == code_version(build.SAMPLER_VERSION, USERS)
    monkeypatch.setattr(build, "SAMPLER_VERSION", build.SAMPLER_VERSION + 1)
    (bumped,), _ = users.make(ROOT)
    assert bumped.code_versions_by_key[dg.AssetKey("users")] != nodes["users"].code_version


def test_every_asset_is_partitioned_by_its_domains_releases():
    from suber_data.releases import releases

    graph = defs.resolve_asset_graph()
    for job, domain in {"movies_corpus": "movies", "movies_build_all": "movies", "books_build_all": "books"}.items():
        keys = set(defs.resolve_job_def(job).asset_layer.executable_asset_keys)
        parents = {p for k in keys for p in graph.get(k).parent_keys}
        # one release per run: no job asks for the description shards' release x shard partitions
        for key in keys | parents:
            assert graph.get(key).partitions_def.get_partition_keys() == releases(domain), (job, key)
    # the catalog comes after every step of its domain but the shards (user_descriptions assembles those)
    movies = {k for a in ASSETS for k in a.keys} - {dg.AssetKey("catalog"), dg.AssetKey("user_description_shards")}
    assert graph.get(dg.AssetKey("catalog")).parent_keys == movies
    # a check's result belongs to one release too
    assert all(graph.get_check_spec(key).partitions_def is not None for key in graph.asset_check_keys)
    shards = defs.resolve_job_def("movies_description_shards").partitions_def
    assert len(shards.get_partition_keys()) == 100 * len(releases("movies"))
    assert "ml-1m|7" in {str(key) for key in shards.get_partition_keys()}


def test_settings_from_the_environment_are_env_vars(monkeypatch):
    from suber_data.pipelines.definitions import BOOKS, MOVIES
    from suber_data.pipelines.domains import domain_resources

    for name in ("SUBER_DATA_DIR", "TMDB_BASE_URL", "SUBER_DATA_RAY"):
        monkeypatch.delenv(name, raising=False)
    plain = domain_resources(MOVIES)
    assert plain["storage"].data_dir == "data" and plain["storage"].domain == "movies"
    monkeypatch.setenv("SUBER_DATA_DIR", "/tmp/x")
    storage = domain_resources(BOOKS)["books_storage"]
    assert isinstance(storage.data_dir, dg.EnvVar) and storage.data_dir.env_var_name == "SUBER_DATA_DIR"
    assert storage.domain == "books"


def test_materialization_metadata_carries_row_count_and_schema(offline):
    import pyarrow.parquet as pq

    storage = StorageResource(data_dir=str(offline))
    result = dg.materialize(
        [*ASSETS, *CHECKS],
        selection=dg.AssetSelection.assets("items", "ratings"),
        resources={**default_resources(), "storage": storage, "tmdb": TMDBResource(enabled=False)},
        partition_key="sample",
    )
    assert result.success
    folder = offline / "movies" / "sample"
    for name in ("items", "ratings"):
        (event,) = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey(name)]
        meta = event.materialization.metadata
        assert meta["dagster/row_count"].value == pq.read_metadata(folder / f"{name}.parquet").num_rows > 0
        columns = [c.name for c in meta["dagster/column_schema"].value.columns]
        assert columns == pq.read_schema(folder / f"{name}.parquet").names
        assert (
            event.materialization.tags["dagster/code_version"]
            == defs.resolve_asset_graph().get(dg.AssetKey(name)).code_version
        )


def test_a_failing_blocking_check_stops_the_steps_downstream(offline):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from suber_data.artifacts.schemas import MOVIE_ITEMS
    from suber_data.cli.run import _first_failure
    from suber_data.pipelines import movies
    from suber_data.pipelines.domains import DomainSpec, domain_assets, domain_resources
    from suber_data.pipelines.keys import ROOT

    @dg.asset(name="items", group_name="movies", required_resource_keys={"storage"}, partitions_def=ROOT.releases)
    def bad_items(context) -> None:
        folder = ROOT.dataset_dir(context)
        folder.mkdir(parents=True)
        rows = [
            {"item_id": 0, "movielens_id": m, "title": "A", "source_title": "A", "ml_rating_count": 1} for m in (1, 2)
        ]  # id 0 twice
        pq.write_table(pa.Table.from_pylist(rows, schema=MOVIE_ITEMS), folder / "items.parquet")

    spec = DomainSpec("movies", [bad_items], movies.checks[:1])
    assets, checks = domain_assets(spec)
    storage = StorageResource(data_dir=str(offline))
    result = dg.materialize(
        [*assets, *checks],
        selection=dg.AssetSelection.assets("items", "users"),
        resources={**domain_resources(spec), "storage": storage, "tmdb": TMDBResource(enabled=False)},
        raise_on_error=False,
        partition_key="sample",
    )
    assert not result.success
    outcome = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert not outcome["items_ids_unique"].passed and outcome["items_ids_unique"].blocking
    assert outcome["items_tmdb_coverage"].passed and not outcome["items_tmdb_coverage"].blocking
    assert [e.asset_key for e in result.get_asset_materialization_events()] == [dg.AssetKey("items")]
    assert not (offline / "movies" / "sample" / "users.parquet").exists()  # users never ran
    assert "users" not in {e.step_key for e in result.all_events if e.is_step_start}
    # the CLI turns the same run into its one-line error: the check that failed, and why
    message = str(_first_failure(result))
    assert "items_ids_unique" in message and "item_id is dense" in message, message


def test_cli_builds_land_in_dagster_home_per_release(offline, monkeypatch):
    """With DAGSTER_HOME set, a CLI build is a run of that instance (the UI on it lists it): its
    materializations and check results belong to the release built."""
    home = offline / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    args = ["build", "movies", "--release", "sample", "--only", "items", "--no-tmdb", "--data-dir", str(offline / "d")]
    built = CliRunner().invoke(app, args)
    assert built.exit_code == 0, built.output
    with dg.DagsterInstance.get() as instance:
        (run,) = instance.get_run_records()
        assert run.dagster_run.tags["dagster/partition"] == "sample" and run.dagster_run.is_success
        for key in ("movielens_release", "items", "catalog"):
            assert instance.get_materialized_partitions(dg.AssetKey(key)) == {"sample"}, key
        records = instance.get_records_for_run(
            run.dagster_run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
        )
        evaluations = [r.event_log_entry.dagster_event.event_specific_data for r in records.records]
        assert {e.check_name for e in evaluations} >= {"items_ids_unique", "items_schema"}
        assert {e.partition for e in evaluations} == {"sample"}
