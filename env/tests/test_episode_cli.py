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
    for _step, user, item, title, rating, expected, top, _reward in rows:
        assert title.strip() == movies.titles[int(item)]
        assert int(user) in movies.user_ids.tolist() and 1 <= float(rating) <= 10
        assert 1 <= float(expected) <= 10 and float(top) in range(1, 11)  # the readouts beside the sampled one
    again = runner.invoke(app, ["episode", str(movies_dir), "--steps", "4", "--seed", "2"], env={"COLUMNS": "200"})
    assert again.output == result.output  # the seed fixes the episode


def test_episode_names_a_bad_folder(tmp_path):
    result = runner.invoke(app, ["episode", str(tmp_path)])
    assert result.exit_code != 0 and "manifest.json is missing" in result.output


def test_train_and_eval_policy_refuse_a_bad_folder_in_one_line(tmp_path):
    """Issue 25, item 8: not a 40-line traceback but one line with the fix, exit status 1."""
    for command in (["train"], ["eval-policy"]):
        result = runner.invoke(app, [*command, str(tmp_path)])
        assert result.exit_code == 1, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.output
        assert "manifest.json is missing" in lines[0] and "suber-data build" in lines[0], lines[0]
        assert result.exception is None or isinstance(result.exception, SystemExit)


def test_eval_policy_refuses_a_mistyped_runs_folder(movies_dir, tmp_path):
    """A --runs folder that is missing, or holds no trained model, is refused before any baseline is evaluated."""
    (tmp_path / "empty").mkdir()
    for runs, says in ((tmp_path / "ruins", "no such folder"), (tmp_path / "empty", "no trained model")):
        result = runner.invoke(app, ["eval-policy", str(movies_dir), "--runs", str(runs), "--out", str(tmp_path / "r")])
        assert result.exit_code == 1, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and says in lines[0] and f"--runs {runs}" in lines[0], result.output
        assert not (tmp_path / "r").exists()
