"""`suber-env episode` on the built sample: one episode printed as a table, bad folders named."""

from __future__ import annotations

import re

from suber_env.cli import app
from typer.testing import CliRunner

runner = CliRunner()


def test_episode_prints_a_table_of_steps(movies, movies_dir):
    result = runner.invoke(app, ["episode", str(movies_dir), "--steps", "4", "--seed", "2"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f"{movies.n_items} items, {movies.n_users} users (8 described); rater oracle" in result.output
    rows = [r.split("│")[1:-1] for r in result.output.splitlines() if re.match(r"│ \d", r)]
    assert [int(r[0]) for r in rows] == [1, 2, 3, 4]
    for _step, user, item, title, rating, _reward in rows:
        assert title.strip() == movies.titles[int(item)]
        assert int(user) in movies.user_ids.tolist() and 1 <= float(rating) <= 10
    again = runner.invoke(app, ["episode", str(movies_dir), "--steps", "4", "--seed", "2"], env={"COLUMNS": "200"})
    assert again.output == result.output  # the seed fixes the episode


def test_episode_names_a_bad_folder(tmp_path):
    result = runner.invoke(app, ["episode", str(tmp_path)])
    assert result.exit_code != 0 and "manifest.json is missing" in result.output
