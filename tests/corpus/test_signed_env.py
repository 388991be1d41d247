"""A corpus rated on a signed continuous scale (-10.000 to +10.000, three decimals, about a third negative, some
exactly 0), with no title, no categories column and no timestamps, its raters built as real people (a random
split) by the real `suber-data build corpus`, then run
through the env's own commands: `suber-env episode`, `suber-env evaluate` (every case of the default suite) and
`suber-env train`. The oracle ranks its items as their real ratings do (issue 36, points 1 and 2), and the rater
prompt tells an item's average on the corpus' own scale (point 3)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from suber_env.cli import app as env_app
from typer.testing import CliRunner

from suber_data.cli.main import app as data_app
from tests.corpus.helpers import write_toml

N_ITEMS, N_USERS, PER_USER = 40, 36, 32
WORDS = ("lantern", "harbour", "mossy", "comet", "orchard", "cartel", "bridge", "crypt", "route", "ash")
# Four themes whose words always come together: the topics the corpus step derives (no categories column) are
# these, whatever the arithmetic's order; the genre case needs three of them.
THEMES = (
    ("tide", "gull", "anchor"),
    ("apple", "blossom", "beehive"),
    ("candle", "bones", "altar"),
    ("orbit", "stars", "rocket"),
)

TOML = """
[corpus]
name = "signed"
release = "s1"

[nouns]
item = "sketch"
items = "sketches"

[items]
path = "items.csv"
id = "id"
text = "body"

[ratings]
path = "ratings.csv"
user = "who"
item = "what"
value = "score"

[scale]
min = -10
max = 10
step = 0

[tastes]
min_items = 0
"""


def write_corpus(folder) -> np.ndarray:
    """items.csv (an id, a title, one multi-line text column) and ratings.csv (no time column); returns each
    item's own mean, which the ratings scatter around."""
    rng = np.random.default_rng(36)
    means = rng.uniform(-4.0, 8.0, N_ITEMS)
    with open(folder / "items.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "name", "body"])
        for i in range(N_ITEMS):
            theme = THEMES[i % 4]
            body = f"A {WORDS[i % 10]} at dusk.\nThen {theme[0]}, {theme[1]} and {theme[2]} by the sea."
            w.writerow([f"s{i}", f"Sketch of the {WORDS[i % 10]}, Part {i // 10 + 1}", body])  # ten series of four
    with open(folder / "ratings.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["who", "what", "score"])
        for u in range(N_USERS):
            for i in rng.choice(N_ITEMS, PER_USER, replace=False):
                score = np.clip(means[i] + rng.normal(0, 3.0), -10, 10)
                score = 0.0 if rng.random() < 0.03 else score  # some exactly 0
                w.writerow([f"u{u}", f"s{i}", f"{score:.3f}"])
    return means


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("signed")
    write_corpus(root)
    config = write_toml(root, TOML)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SUBER_DATA_OFFLINE", "1")
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("SUBER_DATA_CACHE", str(root / "cache"))
        mp.delenv("SUBER_DATA_MIRROR", raising=False)
        args = ["build", "corpus", "--config", str(config), "--profile", "real", "--split", "random", "--users", "12"]
        args += ["--held-out", "6", "--min-history", "20", "--llm", "template"]
        result = CliRunner().invoke(data_app, [*args, "--data-dir", str(root / "data")])
    assert result.exit_code == 0, result.output
    return root, root / "data" / "signed" / "s1"


def test_the_ratings_are_signed_continuous_and_untimed(built):
    _, folder = built
    r = pq.read_table(folder / "ratings.parquet")
    ratings = r["rating"].to_numpy()
    assert 0.25 < (ratings < 0).mean() < 0.45 and (ratings == 0).sum() > 10 and r["timestamp"].null_count == r.num_rows
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["steps"]["ratings"]["rating_scale"]["step"] == 0
    vote = manifest["terms"]["vote"]
    assert (vote["min"], vote["max"], vote["fill"]) == (-10.0, 10.0, 0.0)


def test_the_oracle_ranks_items_as_their_ratings_do(built):
    """Before: base = vote if vote > 0 else 6.0: every item with a negative mean was put above the best one."""
    import suber_env
    from suber_env.raters import OracleRater

    _, folder = built
    ds = suber_env.load_dataset(folder)
    n, total = ds.item_rating_stats()  # real people: their held-out ratings never reach an item's vote
    means = total / n
    base = OracleRater(ds).base
    assert (means < 0).sum() >= 10
    assert np.corrcoef(means, base)[0, 1] > 0.99  # one linear map: the order and the spacing are kept
    assert base[means.argmax()] == base.max() and base[means.argmin()] == base.min()


def test_the_prompt_tells_the_average_on_the_corpus_scale(built):
    """Before: "+4.03 on -10..10" was told as "4 on a scale of 1 to 10", and a negative average got no line."""
    import suber_env
    from suber_env.prompts import PromptBuilder, dataset_query

    _, folder = built
    ds = suber_env.load_dataset(folder)
    pb = PromptBuilder.for_dataset(ds, suber_env.SCALES[ds.rater_scale], shots=0)
    low = int(np.argmin(ds.vote))
    query, _ = dataset_query(pb, ds, 0, low, [], [], 0)
    assert ds.vote[low] < 0
    assert f"{round(float(ds.vote[low]), 2):g} on a scale of -10 to 10." in query


def test_episode_evaluate_and_train_run_on_it(built):
    root, folder = built
    runner = CliRunner()
    episode = runner.invoke(env_app, ["episode", str(folder), "--steps", "5"])
    assert episode.exit_code == 0, episode.output
    assert "at dusk" in episode.output  # no title column: titles are the text's first words
    out = root / "evaluation"
    evaluated = runner.invoke(
        env_app,
        ["evaluate", str(folder), "--out", str(out), "--pairs", "200", "--people-users", "10"],
    )
    assert evaluated.exit_code == 0, evaluated.output
    results = json.loads((out / "metrics.json").read_text())["results"]["oracle"]
    skipped = {case: r["skipped"] for case, r in results.items() if "skipped" in r}
    # titles made of the text's first words name no series, so the collections case has none to test (said so);
    # every other case runs, the proof on the real people included
    assert {c for c in skipped if not c.startswith("collections")} == set(), skipped
    assert all(s.startswith("not applicable") and "no series" in s or "embedding" in s for s in skipped.values())
    assert "score" in results["grounded"]
    similarity = results["similarity"]
    assert similarity["detail"]["bins"] == pytest.approx(np.linspace(-10, 10, 10).tolist(), abs=1e-6)
    assert 0 < similarity["score"] <= 1
    people = results["people"]["detail"]
    assert people["source_scale"] == "-10 to 10" and people["like_threshold"] == 5.0
    rmse = people["predictors"]["rater (expected)"]["rmse"]["value"]
    assert 0 < rmse < 20
    assert "high_low" in results and "score" in results["high_low"]
    trained = runner.invoke(
        env_app,
        ["train", str(folder), "--algo", "a2c", "--steps", "320", "--num-envs", "8", "--out", str(root / "runs")],
    )
    assert trained.exit_code == 0, trained.output
    assert (root / "runs" / "a2c" / "seed0" / "final.zip").exists()


def test_titles_are_derived_and_the_proof_runs_on_the_signed_scale(built):
    """No title column: titles are the text's first words. The proof runs on the -10..10 scale with the like
    threshold three quarters up (5), every item statistic checked against the held-out ratings."""
    root, folder = built
    titles = pq.read_table(folder / "items.parquet")["title"].to_pylist()
    assert all(t.startswith("A ") and "dusk" in t for t in titles)
    out = root / "ev"
    sizes = ["--grounded-boots", "50", "--grounded-perms", "50", "--grounded-max-pos", "3"]
    evaluated = CliRunner().invoke(env_app, ["evaluate", str(folder), "--suite", "grounded", "--out", str(out), *sizes])
    assert evaluated.exit_code == 0, evaluated.output
    proof = json.loads((out / "metrics.json").read_text())["results"]["oracle"]["grounded"]
    p = proof["detail"]["protocol"]
    assert p["users"] == {"A": 12} and p["like_threshold"] == 5.0 and p["scale_values"][0] == -10.0
    assert p["item_statistics_checked"]["vote"]["items_that_tell"] > 0
    assert all(c["follow_held_out"] == 0 for c in p["item_statistics_checked"].values())
    fair = proof["detail"]["simulators"]["oracle"]["agreement"]["A"]["stats"]["mean_rating"]["fair"]
    assert proof["score"] == fair["kendall_tau"]["value"] is not None  # the headline: protocol A, the fair panel
