"""The evaluation suite's store of rating blocks in one process: a rerun rates nothing, a run stopped by a
failing server resumes with only the missing blocks and ends with the uninterrupted run's numbers, the block
size does not change an exact rater's numbers, and bad input gets a one-line error naming the fix."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from suber_env.evaluation import evaluate

from tests.support.completions_server import CompletionsServer
from tests.support.sample_dataset import shared_sample
from tests.support.shared_build import read_only

OPENAI = dict(suite=("similarity",), pairs=40, block_size=4, controls=(), model="m", max_batch=4, max_attempts=1)


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    yield from read_only(shared_sample(tmp_path_factory))


def metrics(out: Path) -> dict:
    return json.loads((out / "metrics.json").read_text())


def test_rerun_rates_nothing_and_the_block_size_leaves_the_oracle_as_it_is(sample, tmp_path):
    first = evaluate(sample, "oracle", tmp_path / "a", pairs=60, block_size=16)
    assert first["ratings"]["rated"] == first["ratings"]["blocks"] > 10
    written = {p: p.stat().st_mtime_ns for p in (tmp_path / "a" / "ratings" / "oracle").iterdir()}
    again = evaluate(sample, "oracle", tmp_path / "a", pairs=60, block_size=16)
    assert again["ratings"]["rated"] == 0 and again["ratings"]["reused"] == first["ratings"]["blocks"]
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "a" / "ratings" / "oracle").iterdir()} == written
    assert again["results"] == first["results"]
    whole = evaluate(sample, "oracle", tmp_path / "b", pairs=60, block_size=100_000)  # one block per case
    assert whole["ratings"]["blocks"] < first["ratings"]["blocks"]
    assert whole["results"] == first["results"]  # the oracle rates each request on its own


def test_run_stopped_by_a_failing_server_resumes_with_only_the_missing_blocks(sample, tmp_path):
    with CompletionsServer() as server:
        whole = evaluate(sample, "openai", tmp_path / "whole", base_url=server.base_url, **OPENAI)
        assert len(server.prompts) == 40 and whole["ratings"]["blocks"] == 10
    # three blocks of four answered, then HTTP 400
    with CompletionsServer(fail_after=12) as server, pytest.raises(RuntimeError, match="HTTP 400"):
        evaluate(sample, "openai", tmp_path / "rep", base_url=server.base_url, **OPENAI)
    store = tmp_path / "rep" / "ratings" / "openai"
    assert len(list(store.glob("*.parquet"))) == 3 and not list(store.glob("*.tmp"))
    assert not (tmp_path / "rep" / "metrics.json").exists()  # no report from a run that did not finish
    with CompletionsServer() as server:  # another port: the server's address is not part of a block's key
        resumed = evaluate(sample, "openai", tmp_path / "rep", base_url=server.base_url, **OPENAI)
        assert len(server.prompts) == 40 - 12  # only the missing blocks' requests
    assert resumed["ratings"] == {"blocks": 10, "rated": 7, "reused": 3, "store": str(store)}
    assert resumed["results"] == whole["results"]
    assert metrics(tmp_path / "rep")["results"] == metrics(tmp_path / "whole")["results"]


def test_metrics_record_the_openai_model_and_its_server_without_credentials(sample, tmp_path):
    with CompletionsServer() as server:
        secret_url = server.base_url.replace("http://", "http://evaluator:s3cret@")
        result = evaluate(sample, "openai", tmp_path, base_url=secret_url, **OPENAI)
        assert len(server.prompts) == 40  # the server behind that URL did the rating
    settings = metrics(tmp_path)["settings"]
    assert settings["rater"] == "openai" and settings["model"] == "m"
    assert settings["base_url"] == settings["rater_options"]["base_url"] == server.base_url
    assert result["settings"] == settings
    written = (tmp_path / "metrics.json").read_text() + (tmp_path / "report.md").read_text()
    assert "s3cret" not in written and "evaluator@" not in written


def test_a_run_removes_the_half_written_parts_a_killed_run_left(sample, tmp_path):
    first = evaluate(sample, "oracle", tmp_path, suite=("high_low",), block_size=8)
    store = tmp_path / "ratings" / "oracle"
    parts = {p.name: p.read_bytes() for p in store.glob("*.parquet")}
    # what a driver killed between the store's mkstemp and its rename leaves: a part cut short
    fd, left = tempfile.mkstemp(dir=store, prefix="tmp", suffix=".tmp")
    os.write(fd, next(iter(parts.values()))[:100])
    os.close(fd)
    others = [store / "notes.tmp", store / "tmp-notes.txt", tmp_path / "ratings" / "tmpkeep.tmp"]
    for path in others:  # not the store's temporary names, or not in its folder: kept
        path.write_text("keep")
    again = evaluate(sample, "oracle", tmp_path, suite=("high_low",), block_size=8)
    assert not Path(left).exists()
    assert all(path.read_text() == "keep" for path in others)
    assert {p.name: p.read_bytes() for p in store.glob("*.parquet")} == parts
    assert again["ratings"]["rated"] == 0 and again["results"] == first["results"]


def test_damaged_block_names_its_file_and_the_fix(sample, tmp_path):
    evaluate(sample, "oracle", tmp_path, suite=("high_low",), block_size=8)
    part = sorted((tmp_path / "ratings" / "oracle").glob("*.parquet"))[0]
    part.write_bytes(b"not parquet")
    with pytest.raises(ValueError, match=rf"{part}: unreadable rating block .*delete it and run again"):
        evaluate(sample, "oracle", tmp_path, suite=("high_low",), block_size=8)


def test_bad_options_are_one_line_errors(sample, tmp_path):
    with pytest.raises(ValueError, match="block_size .*--block-size.* at least 1"):
        evaluate(sample, "oracle", tmp_path, block_size=0)
    with pytest.raises(ValueError, match="unknown rater 'gpt'; choose from oracle, cf, hybrid, transformers, openai"):
        evaluate(sample, "gpt", tmp_path)
    pytest.importorskip("ray")
    from suber_env.evaluation.ray_rating import RayOptions

    with pytest.raises(ValueError, match="model and tokenizer as objects, which cannot travel .*pass the model's path"):
        evaluate(sample, "transformers", tmp_path, suite=("high_low",), model=object(), tokenizer=object(),
                 ray=RayOptions("127.0.0.1:1"))  # fmt: skip
    with pytest.raises(ValueError, match="Ray workers .*--ray-workers.* at least 1"):
        RayOptions("auto", workers=0)


def test_the_proof_stopped_mid_run_resumes_with_only_the_missing_pairs(tmp_path):
    """The grounded case plans every pair before rating, so its ratings go through the same store: a run stopped
    by a failing server keeps its finished blocks and the rerun asks the server only for the rest."""
    import shutil

    real = Path(shutil.copytree(Path(__file__).parents[1] / "env" / "tests" / "data" / "movies_sample_real",
                                tmp_path / "real"))  # fmt: skip
    opts = dict(suite=("grounded",), controls=(), model="m", max_batch=8, max_attempts=1, block_size=8)
    opts |= dict(grounded_k=2, grounded_boots=20, grounded_perms=20, grounded_max_pos=2, grounded_calibration=1)
    with CompletionsServer() as server:
        whole = evaluate(real, "openai", tmp_path / "whole", base_url=server.base_url, **opts)
        total = len(server.prompts)
    assert whole["ratings"]["blocks"] == -(-total // 8) and total > 100
    with CompletionsServer(fail_after=24) as server, pytest.raises(RuntimeError, match="HTTP 400"):
        evaluate(real, "openai", tmp_path / "rep", base_url=server.base_url, **opts)
    store = tmp_path / "rep" / "ratings" / "openai"
    assert len(list(store.glob("*.parquet"))) == 3
    with CompletionsServer() as server:
        resumed = evaluate(real, "openai", tmp_path / "rep", base_url=server.base_url, **opts)
        assert len(server.prompts) == total - 24
    assert resumed["ratings"]["reused"] == 3
    got = resumed["results"]["openai"]["grounded"]["detail"]["simulators"]
    want = whole["results"]["openai"]["grounded"]["detail"]["simulators"]
    assert {n: r["agreement"] for n, r in got.items()} == {n: r["agreement"] for n, r in want.items()}
