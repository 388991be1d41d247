"""Options that do what they say (issue 25, item 7): 0 users means none, and --only keeps the real ratings."""

from pathlib import Path

import pytest

from suber_data.cli.run import BuildOptions, resources_for, wanted_assets
from suber_data.cli.validate import check_options
from suber_data.errors import SuberDataError
from suber_data.pipelines import definitions


@pytest.fixture(scope="module")
def graph():
    return definitions.defs.resolve_asset_graph()


@pytest.mark.parametrize("only", ["users", "descriptions"])
def test_zero_users_with_only_users_is_refused_not_600(tmp_path, only):
    options = BuildOptions("movies", "sample", str(tmp_path), users=0, only=only)
    with pytest.raises(SuberDataError, match="--users 0: 0 means no users"):
        check_options(options)


def test_users_left_out_take_the_step_default_and_a_count_is_kept(tmp_path, graph):
    assert resources_for(BuildOptions("movies", "sample", str(tmp_path), only="users"))["users"].count == 600
    assert resources_for(BuildOptions("movies", "sample", str(tmp_path), users=7))["users"].count == 7
    assert "users" not in wanted_assets(BuildOptions("movies", "sample", str(tmp_path), users=0), graph)
    assert "users" not in wanted_assets(BuildOptions("movies", "sample", str(tmp_path)), graph)


@pytest.mark.parametrize("only", ["items", "users", "descriptions"])
@pytest.mark.parametrize("domain", ["movies", "books"])
def test_every_only_keeps_the_real_ratings(tmp_path, graph, domain, only):
    release = "sample" if domain == "movies" else "books-sample"
    keys = wanted_assets(BuildOptions(domain, release, str(tmp_path), users=4, llm="template", only=only), graph)
    prefix = "" if domain == "movies" else "books/"
    assert f"{prefix}ratings" in keys and keys[-1] == f"{prefix}catalog"


def test_help_and_readme_say_what_a_build_without_options_does(tmp_path, graph):
    from suber_data.cli.main import app
    from suber_data.pipelines.resources import EmbedderResource, LLMResource, UsersResource

    # what the code does: no option, no step after the corpus; --only a step: the resource's default
    bare = wanted_assets(BuildOptions("movies", "sample", str(tmp_path)), graph)
    assert bare == ["movielens_release", "tmdb_details", "items", "ratings", "catalog"]
    defaults = (UsersResource().count, LLMResource().backend, EmbedderResource().model)
    assert defaults == (600, "smollm2", "sentence-transformers/sentence-t5-base")

    # what the help says: each of the three options tells what leaving it out does, and no default is claimed bare
    import typer

    movies = typer.main.get_command(app).commands["build"].commands["movies"]
    helps = {p.name: " ".join(p.help.split()) for p in movies.params if getattr(p, "help", None)}
    assert "(the default)" not in helps["llm"]
    assert "which sample the users step's default, 600" in helps["users"]
    assert "--only descriptions, which uses smollm2" in helps["llm"]
    assert "--only embeddings, which uses sentence-transformers/sentence-t5-base" in helps["embedding_model"]
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    assert "without them it builds the items, the real ratings and the catalog" in readme
