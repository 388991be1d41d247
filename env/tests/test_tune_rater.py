"""`suber-env tune-rater`: LoRA on the dataset's history through the real tune, save, load and rate path, with a
tiny random-weight Llama and SmolLM2's real tokenizer; a planted rule is learnt; held-out pairs are refused."""

from __future__ import annotations

import dataclasses
import shutil

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from suber_env import load_dataset, make_rater
from suber_env.cli import app
from suber_env.evaluation.grounded import held_out
from suber_env.evaluation.proof.data import LeakError
from suber_env.tuning import TuneConfig, Tuner, history_examples
from suber_env.tuning.lora import BEST, CHECKPOINT
from suber_env_testdata import tiny_random_lm
from typer.testing import CliRunner

pytest.importorskip("peft")
runner = CliRunner()


@pytest.fixture(scope="module")
def tiny_base(smollm2_tokenizer, tmp_path_factory):
    """A 2-layer random Llama with SmolLM2's tokenizer, saved as a transformers folder (what --base takes)."""
    folder = tmp_path_factory.mktemp("tiny_base")
    tiny_random_lm("llama", len(smollm2_tokenizer)).save_pretrained(folder)
    smollm2_tokenizer.save_pretrained(folder)
    return folder


def _load_tiny(folder):
    from suber_env.raters.transformers_rater import load_model

    return load_model(str(folder))


def test_tune_save_load_and_rate_through_the_command(real_movies_dir, tiny_base, tmp_path):
    out = tmp_path / "tuned"
    args = ["tune-rater", str(real_movies_dir), "--base", str(tiny_base), "--out", str(out), "--epochs", "1",
            "--max-examples", "12", "--batch", "4", "--eval-every", "2"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "examples/s" in result.output
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tuning.json"):
        assert (out / name).exists(), name
    assert (out / CHECKPOINT / "state.json").exists() and (out / BEST / "adapter_model.safetensors").exists()
    again = runner.invoke(app, args)  # a second run into the same folder is refused in one line
    assert again.exit_code == 1 and again.output.strip().startswith("error: ") and "--resume" in again.output

    ds = load_dataset(real_movies_dir)
    base_model, tok = _load_tiny(tiny_base)
    base = make_rater("transformers", ds, model=base_model, tokenizer=tok)
    tuned = make_rater("transformers", ds, model=str(out))  # a folder: loaded from disk
    train, val = history_examples(ds, tuned.scale)
    req = val.requests
    assert tuned.prompt(req, 0) == base.prompt(req, 0)  # tuned in the very prompt it rates with
    p_tuned, p_base = tuned.distribution(req), base.distribution(req)
    assert np.allclose(p_tuned.sum(1), 1) and not np.allclose(p_tuned, p_base)

    env = gym.make("suber_env/Movies-v0", dataset=str(real_movies_dir), rater="transformers",
                   rater_kwargs={"model": str(out)})  # fmt: skip
    env.reset(seed=0)
    _, _, _, _, info = env.step(0)
    assert info["rating"] in tuned.scale.values
    shown = runner.invoke(app, ["episode", str(real_movies_dir), "--rater", "transformers", "--model", str(out),
                                "--steps", "2"], env={"COLUMNS": "200"})  # fmt: skip
    assert shown.exit_code == 0, shown.output


def test_resume_continues_to_the_same_adapter(real_movies_dir, tiny_base, tmp_path):
    ds = load_dataset(real_movies_dir)
    cfg = TuneConfig(max_examples=8, batch=2, epochs=1, eval_every=2, lr=1e-3, patience=10, max_validation=4)

    def adapter(tuner):
        return {k: v.detach().clone() for k, v in tuner.model.named_parameters() if "lora_" in k}

    whole = Tuner(ds, *_load_tiny(tiny_base), tmp_path / "a", cfg, "cpu")
    whole.run()
    stopped = Tuner(ds, *_load_tiny(tiny_base), tmp_path / "b", cfg, "cpu")

    def stop_after_three(n, loss):
        if stopped.state["step"] == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        stopped.run(stop_after_three)
    resumed = Tuner(ds, *_load_tiny(tiny_base), tmp_path / "b", cfg, "cpu")
    resumed.resume()
    assert resumed.state["step"] == 2  # the last checkpoint (every 2 steps)
    resumed.run()
    assert resumed.state["step"] == whole.state["step"] == 4
    a, b = adapter(whole), adapter(resumed)
    assert a.keys() == b.keys() and all(np.allclose(a[k].numpy(), b[k].numpy(), atol=1e-6) for k in a)


def test_a_held_out_pair_planted_in_history_is_refused(real_movies_dir):
    ds = load_dataset(real_movies_dir)
    tu, ti, tr = held_out(ds)
    u = int(tu[0])
    at = int(ds.history_offsets[u + 1])
    leaky = dataclasses.replace(
        ds,
        history_offsets=ds.history_offsets + (np.arange(ds.n_users + 1) > u),
        history_items=np.insert(ds.history_items, at, ti[0]),
        history_ratings=np.insert(ds.history_ratings, at, tr[0]),
    )
    with pytest.raises(LeakError, match="tune-rater's training pairs: 1 of"):
        history_examples(leaky, make_scale(leaky))
    train, val = history_examples(ds, make_scale(ds))
    pairs = set(zip(np.r_[train.requests.users, val.requests.users].tolist(),
                    np.r_[train.requests.items, val.requests.items].tolist(), strict=True))  # fmt: skip
    assert not pairs & set(zip(tu.tolist(), ti.tolist(), strict=True))
    assert len(train) + len(val) == len(ds.history_items)


def make_scale(ds):
    from suber_env.scales import get_scale

    return get_scale(ds.rater_scale)


def test_a_dataset_without_history_is_refused_in_one_line(movies_dir, tiny_base, tmp_path):
    result = runner.invoke(app, ["tune-rater", str(movies_dir), "--base", str(tiny_base), "--out", str(tmp_path / "o")])
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "user_ratings.parquet" in lines[0] and "--profile real" in lines[0], result.output


def _planted(real_movies_dir, tmp_path):
    """The real-user sample with every history rating replaced by a rule: 5 stars for items of the genre that
    splits the rated items most evenly, half a star for the others."""
    folder = shutil.copytree(real_movies_dir, tmp_path / "planted")
    ds = load_dataset(folder)
    share = ds.genres[ds.history_items].mean(0)
    genre = int(np.abs(share - 0.5).argmin())
    t = pq.read_table(folder / "user_ratings.parquet")
    liked = ds.genres[t["item_id"].to_numpy(), genre].astype(bool)
    rating = np.where(liked, 5.0, 0.5).astype(t.schema.field("rating").type.to_pandas_dtype())
    history = pc.equal(t["part"], "history").to_numpy(zero_copy_only=False)
    new = np.where(history, rating, t["rating"].to_numpy())
    t = t.set_column(t.schema.get_field_index("rating"), "rating", pa.array(new, t.schema.field("rating").type))
    pq.write_table(t, folder / "user_ratings.parquet")
    return load_dataset(folder, verify=False), genre  # changed on purpose: its checksum no longer matches


def _separation(rater, examples, ds, genre) -> float:
    """AUC of the rater's expected rating between the rule's liked and disliked items."""
    from scipy.stats import mannwhitneyu

    e = rater.distribution(examples.requests) @ np.asarray(rater.scale.values)
    liked = ds.genres[examples.requests.items, genre].astype(bool)
    return float(mannwhitneyu(e[liked], e[~liked]).statistic / (liked.sum() * (~liked).sum()))


@pytest.mark.slow
def test_a_tuned_rater_learns_a_planted_rule(real_movies_dir, tiny_base, tmp_path):
    """Tuned on the training cut of a population rating by a planted rule, the rater's expected ratings on the
    validation cut (never trained on) separate the rule's liked and disliked items far better than untuned."""
    ds, genre = _planted(real_movies_dir, tmp_path)
    train, val = history_examples(ds, make_scale(ds), validation=0.3)
    liked = ds.genres[val.requests.items, genre].astype(bool)
    assert 0 < liked.sum() < len(liked)
    model, tok = _load_tiny(tiny_base)
    untuned = _separation(make_rater("transformers", ds, model=model, tokenizer=tok, shots=0), val, ds, genre)
    cfg = TuneConfig(batch=8, epochs=4, eval_every=12, lr=3e-3, validation=0.3, patience=4, shots=0)
    tuner = Tuner(ds, _load_tiny(tiny_base)[0], tok, tmp_path / "tuned", cfg, "cpu")
    tuner.write_config({})
    tuner.run()
    tuner.finish()
    rater = make_rater("transformers", ds, model=str(tmp_path / "tuned"))
    assert rater.pb.shots == 0  # the folder's tuning.json: rated in the prompt it was tuned in
    tuned = _separation(rater, val, ds, genre)
    assert tuned >= 0.85 and tuned > untuned + 0.25, (untuned, tuned)
