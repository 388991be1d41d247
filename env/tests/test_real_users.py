"""A real-user dataset (`--profile real`, written by the real builder) in the env: the recorded scale is read,
each episode starts from the user's own history, the held-out part never reaches a Dataset, a memory or a
prompt, and the proof runs on the dataset's own split."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from suber_env import SuberEnv, load_dataset
from suber_env.evaluation.grounded import RaterSimulator, grounded_proof, grounded_split, held_out
from suber_env.raters.oracle import OracleRater
from suber_env.scales import get_scale, rater_to_source, source_bins, source_to_rater


def _parts(folder):
    t = pq.read_table(folder / "user_ratings.parquet")
    pairs = {}
    for part in ("history", "held_out"):
        p = t.filter(pc.equal(t["part"], part))
        pairs[part] = set(zip(p["user_id"].to_pylist(), p["item_id"].to_pylist(), strict=True))
    return pairs


def test_real_dataset_loads_history_but_never_the_held_out_part(real_movies_dir):
    ds = load_dataset(real_movies_dir)
    assert ds.real.all() and (ds.sex == 2).all() and (ds.age == -1).all()  # ml-latest's sample: no demographics
    assert ds.source_scale.name == "half stars 0.5-5"
    parts = _parts(real_movies_dir)
    loaded = {(int(ds.user_ids[u]), int(i)) for u in range(ds.n_users) for i in ds.history(u)[0]}
    assert loaded == parts["history"] and not loaded & parts["held_out"]
    assert not any("held" in name for name in vars(ds))  # nothing on a Dataset holds the held-out part


def test_episode_starts_from_the_users_real_history(real_movies_dir):
    ds = load_dataset(real_movies_dir)
    env = SuberEnv(ds, rater="oracle", p_terminate=0.0)
    held = _parts(real_movies_dir)["held_out"]
    for seed in range(6):
        obs, info = env.reset(seed=seed)
        u = info["user"]
        items, ratings = ds.history(u)
        mem = env.core.mem
        seen = set(mem.seen[0, : mem.n_seen[0]].tolist())
        assert seen == set(items.tolist())
        assert not {(int(ds.user_ids[u]), i) for i in seen} & held
        newest = items[::-1][:10]
        assert obs["history_items"][: len(newest)].tolist() == newest.tolist()
        # half stars onto the 0-9 prompt scale's values 1-10: x 2 (the one rule of scales.rater_to_source)
        np.testing.assert_allclose(obs["history_ratings"][: len(newest)], ratings[::-1][:10] * 2)
        _, _, _, _, out = env.step(int(items[-1]))  # recommending a history item: a second watch
        assert mem.count[0, items[-1]] == 2


def test_the_scale_rule_both_ways():
    from suber_env.scales import SourceScale

    half, whole = SourceScale("half", 0.5, 5, 0.5), SourceScale("whole", 1, 5, 1)
    ten = get_scale("1-10")
    assert rater_to_source(np.arange(1, 11), ten, half).tolist() == [0.5 * i for i in range(1, 11)]
    assert rater_to_source(np.arange(1, 11), ten, whole).tolist() == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert source_bins(ten, whole).sum(0).tolist() == [2, 2, 2, 2, 2]  # no empty source bin
    np.testing.assert_allclose(source_to_rater(np.array([1, 5]), whole, ten), [1, 10])
    assert rater_to_source(np.arange(1, 6), get_scale("1-5"), whole).tolist() == [1, 2, 3, 4, 5]


def test_llm_prompt_shows_the_real_history(real_movies_dir, smollm2_tokenizer):
    from suber_env.raters.transformers_rater import TransformersRater
    from suber_env_testdata import tiny_random_lm

    ds = load_dataset(real_movies_dir)
    tok = smollm2_tokenizer
    rater = TransformersRater(ds, tiny_random_lm("llama", len(tok)), tok, scale="0-9", shots=0)
    env = SuberEnv(ds, rater=rater, p_terminate=0.0)
    _, info = env.reset(seed=1)
    u = info["user"]
    items, ratings = ds.history(u)
    env.step(0 if items[-1] != 0 else 1)
    prompt = env.prompt()
    assert f"User {ds.users['last_name'][u].as_py()} is one of the real people" in prompt
    assert "records no age, sex or occupation" in prompt
    assert f"User {ds.users['last_name'][u].as_py()} is someone who {ds.descriptions[u]}" in prompt
    latest = ds.titles[int(items[-1])]
    assert f'"{latest}" ({int(round(ratings[-1] * 2)) - 1})' in prompt  # the latest real rating, on 0-9
    assert "the rating they gave each one" in prompt and "what they have liked" in prompt  # no invented sex


def test_grounded_proof_on_the_dataset_split(real_movies_dir):
    ds = load_dataset(real_movies_dir)
    tu, ti, tr = held_out(ds)
    assert len(tu) == 3 * ds.n_users
    oracle = OracleRater(ds, scale="0-9")
    sim = RaterSimulator(ds, oracle)
    # the same pair asked twice in one call, among other users' pairs: one distribution per row, identical
    d = sim(np.array([0, 1, 0, 2]), np.array([3, 3, 3, 5]))
    assert d.shape == (4, 10) and np.allclose(d.sum(1), 1) and np.allclose(d[0], d[2])
    res = grounded_proof(ds, oracle, "oracle", k=2, boots=50, perms=20)
    assert set(res["simulators"]) == {"random", "oracle", "oracle_shuffled", "cf_knn"}
    assert res["protocol"]["source_scale"] == "half stars 0.5-5" and res["protocol"]["users"]["A"] == ds.n_users


def test_grounded_case_with_the_openai_rater_over_loopback(real_movies_dir, server, tmp_path):
    """The openai rater through the same path (an OpenAI-compatible server on 127.0.0.1 answering with
    log-probabilities): every pair of a batch in one request, the real persona and history in each prompt."""
    from suber_env.evaluation import evaluate

    url, calls = server
    sizes = dict(grounded_k=2, grounded_boots=20, grounded_perms=10, grounded_max_pos=2, grounded_calibration=3)
    res = evaluate(
        real_movies_dir, "openai", tmp_path / "ev", ("grounded",), model="served-model", base_url=url, **sizes
    )
    got = res["results"]["openai"]["grounded"]
    detail = got["detail"]
    sims = detail["simulators"]
    assert set(sims) == {"random", "openai", "openai_shuffled", "cf_knn"}
    assert got["n"] == detail["protocol"]["users"]["A"] == 12 and "R" not in detail["protocol"]["users"]
    assert got["score"] == sims["openai"]["agreement"]["A"]["stats"]["mean_rating"]["fair"]["kendall_tau"]["value"]
    prompts = [p for c in calls for p in c["body"]["prompt"]]
    # every pair the rater and its shuffled control are asked, planned before rating, each asked once
    assert len(prompts) == len(set(prompts)) >= sims["openai"]["cost"]["pairs_rated"]
    assert max(len(c["body"]["prompt"]) for c in calls) > 1  # batched
    assert all("is one of the real people who rated these films" in p for p in prompts)
    assert "openai_shuffled" in (tmp_path / "ev" / "report.md").read_text()
    n = len(calls)
    again = evaluate(
        real_movies_dir, "openai", tmp_path / "ev", ("grounded",), model="served-model", base_url=url, **sizes
    )
    assert len(calls) == n and again["ratings"]["rated"] == 0  # the store holds every block: nothing rated again
    for name, r in again["results"]["openai"]["grounded"]["detail"]["simulators"].items():
        assert (r["agreement"], r["anchors"]) == (sims[name]["agreement"], sims[name]["anchors"])


class _TruthRater:
    """A test rater that knows the person's real held-out rating (read here from user_ratings.parquet) and
    answers it, mirrored with ``reverse``, on the rater's scale; flat where it does not know."""

    name = "truth"

    def __init__(self, ds, reverse=False):
        from suber_env.scales import get_scale

        self.scale = get_scale("0-9")
        tu, ti, tr = held_out(ds)
        src = ds.source_scale
        r = src.min + src.max - tr if reverse else tr
        self.known = dict(zip(zip(tu.tolist(), ti.tolist(), strict=True), r.tolist(), strict=True))
        self.src = src

    def distribution(self, req):
        out = np.full((len(req), self.scale.n), 1.0 / self.scale.n)
        for j, (u, i) in enumerate(zip(req.users.tolist(), req.items.tolist(), strict=True)):
            if (u, i) in self.known:
                label = source_to_rater(np.array([self.known[(u, i)]]), self.src, self.scale)[0]
                out[j] = 0.0
                out[j, int(np.argmin(np.abs(np.asarray(self.scale.values) - label)))] = 1.0
        return out


def test_known_answers_through_the_datasets_own_split(real_movies_dir):
    """grounded_split and RaterSimulator, the production path: a rater that answers the real held-out ratings
    orders the fair panel exactly as the people do (tau 1, pairwise 1), the mirrored one exactly against them,
    and the random control averages near 0 over 20 seeds."""
    ds = load_dataset(real_movies_dir)
    sizes = dict(k=2, boots=50, perms=200, max_pos=2, calib_per_user=1)
    for reverse, want in ((False, 1.0), (True, -1.0)):
        res = grounded_proof(ds, _TruthRater(ds, reverse), "truth", **sizes)
        st = res["simulators"]["truth"]["agreement"]["A"]["stats"]["mean_rating"]["fair"]
        assert st["kendall_tau"]["value"] == pytest.approx(want)
        assert st["pairwise"]["value"] == pytest.approx(1.0 if want > 0 else 0.0)
    split = grounded_split(ds)
    from suber_env.evaluation.proof import ProofContext, random_simulator, run_proof

    ctx = ProofContext(split, None, 2, 0, 5, 200, 2, 1)
    taus = [run_proof(split, {"r": random_simulator(split, s)}, add_random=False, context=ctx)["simulators"]["r"]
            ["agreement"]["A"]["stats"]["mean_rating"]["fair"]["kendall_tau"] for s in range(20)]  # fmt: skip
    assert abs(np.mean([t["value"] for t in taus])) < 3 * taus[0]["null_sd"] / np.sqrt(20)


def test_the_shuffled_control_rates_through_the_other_persons_prompt(real_movies_dir, smollm2_tokenizer):
    """The persona-shuffled control of a prompt-reading rater: the prompt behind its rating of (u, item) names
    the person u was swapped with and shows that person's history, never u's."""
    from suber_env.evaluation.proof import derangement, with_controls
    from suber_env.evaluation.proof.data import History
    from suber_env.raters.transformers_rater import TransformersRater
    from suber_env_testdata import tiny_random_lm

    ds = load_dataset(real_movies_dir)
    tok = smollm2_tokenizer
    lm = TransformersRater(ds, tiny_random_lm("llama", len(tok)), tok, scale="0-9", shots=0)
    seen_prompts = []

    class Recording:
        name, scale = "recording", lm.scale

        def distribution(self, req):
            seen_prompts.extend(lm.prompt(req.subset(np.array([j]))) for j in range(len(req)))
            return lm.distribution(req)

    sim = RaterSimulator(ds, Recording())
    split = grounded_split(ds)
    sims = with_controls(History.from_split(split), {"lm": sim}, seed=0)
    perm = derangement(ds.n_users, seed=0)
    u, item = 3, int(split.test_item[split.test_user == 3][0])
    sims["lm_shuffled"](np.array([u]), np.array([item]))
    (prompt,) = seen_prompts
    other = ds.users["last_name"][int(perm[u])].as_py()
    assert f"User {other}" in prompt and f"User {ds.users['last_name'][u].as_py()} " not in prompt
    latest = ds.titles[int(ds.history(int(perm[u]))[0][-1])]
    assert latest in prompt  # the other person's memory


def test_a_persona_blind_rater_equals_its_shuffled_control_on_the_real_split(real_movies_dir):
    """The oracle rates by liked / disliked genres and earlier watches; with every user's tastes emptied and no
    re-watch penalty it rates by item alone: its paired difference with its shuffled control is exactly 0 and
    it never 'beats' it."""
    ds = load_dataset(real_movies_dir)
    ds.liked[:], ds.disliked[:] = 0, 0
    res = grounded_proof(ds, OracleRater(ds, scale="0-9", repeat=0.0), "oracle", k=2, boots=50, perms=50, max_pos=2,
                         calib_per_user=1)  # fmt: skip
    rows = [r for r in res["paired"] if r["control"] == "oracle_shuffled"]
    assert rows and all(r["difference"] == 0.0 and not r["beats"] for r in rows)


def test_like_threshold_is_read_from_the_manifest(real_movies_dir, tmp_path):
    """The ratings step's recorded threshold, else a real population's, else 4 of 5 stars of the source scale (a
    dataset built before either was recorded)."""
    import json
    import shutil

    folder = Path(shutil.copytree(real_movies_dir, tmp_path / "real"))
    manifest = json.loads((folder / "manifest.json").read_text())
    assert load_dataset(folder).like_threshold == manifest["steps"]["users"]["real"]["like_threshold"] == 4.0

    def with_steps(change) -> float | None:
        edited = json.loads(json.dumps(manifest))
        change(edited["steps"])
        (folder / "manifest.json").write_text(json.dumps(edited))
        return load_dataset(folder, verify=False).like_threshold

    assert with_steps(lambda s: s["ratings"].update(like_threshold=3.5)) == 3.5  # the ratings step's comes first
    assert (
        with_steps(lambda s: (s["ratings"].pop("like_threshold"), s["users"]["real"].update(like_threshold=4.5))) == 4.5
    )
    # neither recorded: the source scale's rule, three quarters up half stars 0.5-5 rounded up to 4
    assert with_steps(lambda s: (s["ratings"].pop("like_threshold"), s["users"]["real"].pop("like_threshold"))) == 4.0
