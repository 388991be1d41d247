"""The proof on a real-user dataset: does the simulator rank recommenders as the real people do?

The dataset's own split (user_ratings.parquet, written by ``suber-data build ... --profile real``) is the
evaluation's split: each user's history is what the rater's memory and the recommenders see, the held-out
ratings are read here, for scoring only. A rater becomes a ``Simulator`` that rates (user, item) pairs the way
the env does (the user's persona, their real history in memory, the env's retrieval), with its distribution
carried onto the source's rating bins by the one rule of ``scales.rater_to_source``; ``proof.run_proof`` then
scores it against the controls (random, the same rater with every user's persona and memory shuffled, and a
collaborative-filtering simulator)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from suber_env import Dataset, Rater, Requests
from suber_env._read import user_rows
from suber_env._schema import HELD_OUT
from suber_env.core import Memory
from suber_env.scales import source_bins, source_to_rater

from .history import concat, memory_requests
from .proof.controls import with_controls
from .proof.data import GroundedSplit, Simulator
from .proof.run import run_proof


def not_grounded(ds: Dataset) -> str | None:
    """Why ``ds`` cannot run the proof (None when it can)."""
    if ds.history_offsets is None or ds.real is None or not ds.real.any():
        return (
            f"not applicable: {ds.path} has no real-user population (user_ratings.parquet); build one with "
            "suber-data build ... --profile real"
        )
    if ds.source_scale is None:
        return f"not applicable: {ds.path / 'ratings.parquet'} records no rating scale; rebuild the ratings step"
    return None


def held_out(ds: Dataset) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The held-out part of user_ratings.parquet as (user row, item, rating): read for scoring only."""
    t = pq.read_table(ds.path / "user_ratings.parquet", columns=["user_id", "item_id", "rating", "part"])
    t = t.filter(pc.equal(t["part"], HELD_OUT))
    users = user_rows(ds.user_ids, t["user_id"].to_numpy(), ds.path / "user_ratings.parquet", "rebuild the users step")
    return users, t["item_id"].to_numpy().astype(np.int64), t["rating"].to_numpy().astype(np.float64)


def grounded_split(ds: Dataset) -> GroundedSplit:
    off = ds.history_offsets
    hist_user = np.repeat(np.arange(ds.n_users), np.diff(off))
    order_in_user = np.arange(len(hist_user)) - off[hist_user]  # oldest first: the position is the time
    tu, ti, tr = held_out(ds)
    return GroundedSplit(
        n_users=ds.n_users,
        n_items=ds.n_items,
        hist_user=hist_user,
        hist_item=ds.history_items.astype(np.int64),
        hist_rating=ds.history_ratings.astype(np.float64),
        hist_time=order_in_user.astype(np.int64),
        test_user=tu,
        test_item=ti,
        test_rating=tr,
        scale_values=np.asarray(ds.source_scale.values, np.float64),
        like_threshold=0.8 * ds.source_scale.max,  # 4 of 5 stars, SUBER's 8 of 10
        item_genres=ds.genres.astype(np.float64) if len(ds.genre_vocab) else None,
        item_embeddings=ds.item_embeddings,
    )


CHUNK = 256  # requests per rater call: one batch for the rater, one step of the progress bar


class RaterSimulator:
    """A rater as a Simulator: every user's memory starts from their real history (as the env starts it), the
    env's retrieval picks what the prompt shows, and the rater's distribution is mapped onto the source's bins."""

    def __init__(self, ds: Dataset, rater: Rater, retrieval: str = "recent", k: int = 3):
        self.ds, self.rater, self.retrieval, self.k = ds, rater, retrieval, k
        self.mem = Memory(ds.n_users, ds.n_items, history=0, recent=k if retrieval == "recent" else 0)
        for u in range(ds.n_users):
            items, ratings = ds.history(u)
            self.mem.preload(u, items, source_to_rater(ratings, ds.source_scale, rater.scale))
        self.bins = source_bins(rater.scale, ds.source_scale)

    def __call__(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        users, items = np.asarray(users, np.int64), np.asarray(items, np.int64)
        order = np.lexsort((items, users))
        first = np.r_[True, users[order][1:] != users[order][:-1]]
        rank = np.arange(len(order)) - np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
        out = np.empty((len(users), self.bins.shape[1]))
        rounds = [order[rank == r] for r in range(int(rank.max()) + 1 if len(rank) else 0)]
        # each round holds a user at most once: one memory slot per request, as memory_requests needs
        reqs = [memory_requests(self.ds, self.mem, self.k, users[sel], items[sel], self.retrieval) for sel in rounds]
        if reqs:
            out[np.concatenate(rounds)] = self._rate(concat(reqs)) @ self.bins
        return out

    def _rate(self, batch: Requests) -> np.ndarray:
        """The rater's distributions, in batched calls of ``CHUNK`` requests, with a progress bar on stderr when
        there is more than one call (an LLM rater on a CPU takes minutes)."""
        n = len(batch)
        if n <= CHUNK:
            return self.rater.distribution(batch)
        from rich.progress import Progress

        parts = []
        with Progress(transient=True) as bar:
            task = bar.add_task(f"grounded: {self.rater.name} rating {n:,} pairs", total=n)
            for start in range(0, n, CHUNK):
                parts.append(self.rater.distribution(batch.subset(slice(start, start + CHUNK))))
                bar.advance(task, min(CHUNK, n - start))
        return np.concatenate(parts)


def grounded_proof(
    ds: Dataset,
    rater: Rater,
    name: str,
    *,
    seed: int = 0,
    k: int = 5,
    retrieval: str = "recent",
    memory_k: int = 3,
    boots: int = 1000,
    perms: int = 200,
    max_pos: int = 20,
    calib_per_user: int = 50,
    extra_recommenders: dict | None = None,
) -> dict:
    """``run_proof`` for ``rater`` (named ``name``) and its controls on the dataset's own split."""
    why = not_grounded(ds)
    if why:
        return {"skipped": why}
    split = grounded_split(ds)
    sims: dict[str, Simulator] = {name: RaterSimulator(ds, rater, retrieval, memory_k)}
    from .proof.data import History

    sims = with_controls(History.from_split(split), sims, seed)
    panel = None
    if extra_recommenders:
        from .proof.panel import default_panel

        panel = default_panel(History.from_split(split), seed)
        for label, (scores, trained_on, reads_rater_inputs) in extra_recommenders.items():
            panel.add(label, scores, reads_rater_inputs=reads_rater_inputs, trained_on=trained_on)
    result = run_proof(
        split, sims, k=k, seed=seed, boots=boots, perms=perms, panel=panel, max_pos=max_pos,
        calib_per_user=calib_per_user,
    )  # fmt: skip
    result["protocol"]["rater_memory"] = {"retrieval": retrieval, "k": memory_k}
    result["protocol"]["source_scale"] = ds.source_scale.name
    return result


def trained_policies(ds: Dataset, runs: list[str | Path]) -> dict[str, tuple[np.ndarray, tuple, bool]]:
    """Every policy under each of ``runs`` (``suber-env train --out RUNS``: ``<algo>/seed<k>/final.zip``) as a
    recommender
    of the panel: its scores of every item for each real user, given that user's real history as the episode's
    memory. ``trained_on``: the history pairs, the only ratings of these users a policy trained in the simulator
    can have seen; the proof checks them against the held-out part. A policy trained on the taste observation
    reads the liked / disliked genres the raters rate by: flagged as reading the rater's inputs."""
    from gymnasium import spaces

    from suber_env.training import load_model, policy_scores

    found = []
    for folder in runs:
        got = sorted(Path(folder).glob("*/seed*/final.zip"))
        if not got:
            raise ValueError(f"{folder}: no trained policy (<algo>/seed<k>/final.zip); train one with --out")
        found += got
    users = np.arange(ds.n_users)
    items = [ds.history(u)[0] for u in users]
    ratings = [ds.history(u)[1] for u in users]
    src = ds.source_scale
    trained_on = (np.repeat(users, [len(i) for i in items]), np.concatenate(items))
    out = {}
    for path in found:
        model, norm = load_model(path)
        taste = not isinstance(model.observation_space, spaces.Dict)  # SUBER's observation is a Dict
        scores = policy_scores(model, ds, users, items, ratings, obs_norm=norm, rating_range=(src.min, src.max))
        name = f"policy {path.parent.parent.parent.name}/{path.parent.parent.name}/{path.parent.name}"
        out[name] = (np.asarray(scores, np.float64), trained_on, taste)
    return out


def grounded_case(ds: Dataset, rater: Rater, name: str, seed: int, sizes: dict) -> dict:
    """The proof as a case of the suite: its headline (the rater's Kendall tau, protocol A, with its bootstrap
    interval) as the score, everything in the detail."""
    why = not_grounded(ds)
    if why:
        return {"skipped": why}
    policies = trained_policies(ds, sizes["grounded_policies"]) if sizes.get("grounded_policies") else None
    proof = grounded_proof(
        ds, rater, name, seed=seed, k=sizes["grounded_k"], retrieval=sizes["people_retrieval"], memory_k=sizes["k"],
        boots=sizes["grounded_boots"], perms=sizes["grounded_perms"], max_pos=sizes["grounded_max_pos"],
        calib_per_user=sizes["grounded_calibration"], extra_recommenders=policies,
    )  # fmt: skip
    if "skipped" in proof:
        return proof
    sims = proof["simulators"][name]["agreement"]
    protocol = "A" if "A" in sims else next(iter(sims), None)
    if protocol is None:
        return {"skipped": "not applicable: too few grounded users for either protocol", "detail": proof}
    metric = proof["protocol"]["primary_metric"][protocol]
    tau = sims[protocol]["stats"][metric]["all"]["kendall_tau"]
    return {"score": tau["value"], "ci": tau["ci95"], "n": proof["protocol"]["users"][protocol], "detail": proof}
