"""The proof on a real-user dataset: does the simulator rank recommenders as the real people do?

The dataset's own split (user_ratings.parquet, written by ``suber-data build ... --profile real``) is the
evaluation's split: each user's history is what the rater's memory and the recommenders see, the held-out
ratings (and, where the release has them, the ratings of items shown at random: random_ratings.parquet) are
read here, for scoring only. A rater becomes a ``Simulator`` that rates (user, item) pairs the way the env does
(the user's persona, their real history in memory, the env's retrieval), with its distribution carried onto the
source's rating bins by the one rule of ``scales.rater_to_source``. ``grounded_proof`` plans every pair the
proof will ask (the panel picks before anything is rated) and rates them in one batch, so an evaluation rates
them through its resumable rating store, in one process or on Ray."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from suber_env import Dataset, Rater, Requests
from suber_env._read import user_rows
from suber_env._schema import HELD_OUT, HISTORY
from suber_env.core import Memory
from suber_env.scales import source_bins, source_to_rater

from .history import concat, memory_requests
from .proof.choice import ChoiceModel, run_choice
from .proof.controls import derangement, with_controls
from .proof.data import GroundedSplit, Simulator, pair_keys
from .proof.leaks import check_item_statistics
from .proof.null_check import false_positive_rates
from .proof.run import ProofContext, jsonable, run_proof

RANDOM_RATINGS = "random_ratings.parquet"


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


def _part(ds: Dataset, part: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One part of user_ratings.parquet as (user row, item, rating, time in microseconds or -1)."""
    path = ds.path / "user_ratings.parquet"
    t = pq.read_table(path, columns=["user_id", "item_id", "rating", "timestamp", "part"])
    t = t.filter(pc.equal(t["part"], part))
    users = user_rows(ds.user_ids, t["user_id"].to_numpy(), path, "rebuild the users step")
    time = t["timestamp"].cast(pa.int64()).fill_null(-1).to_numpy()
    return users, t["item_id"].to_numpy().astype(np.int64), t["rating"].to_numpy().astype(np.float64), time


def held_out(ds: Dataset) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The held-out part of user_ratings.parquet as (user row, item, rating): read for scoring only."""
    return _part(ds, HELD_OUT)[:3]


def random_exposure(ds: Dataset) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The population's ratings of items shown to them at random (random_ratings.parquet: the release's
    random-exposure part, kept apart from ratings.parquet by the builder), as (user row, item, rating); None
    when the release has none. Read for scoring only."""
    path = ds.path / RANDOM_RATINGS
    if not path.exists():
        return None
    t = pq.read_table(path, columns=["source_user_id", "item_id", "rating"])
    sources = ds.users["source_user_id"].to_pylist()
    row_of = {str(s): r for r, s in enumerate(sources) if s is not None and ds.real[r]}
    src = t["source_user_id"].cast(pa.string()).to_pylist()
    rows = np.array([row_of.get(s, -1) for s in src], np.int64)
    keep = rows >= 0  # people of the release outside the sampled population are not scored
    items = t["item_id"].to_numpy().astype(np.int64)
    return rows[keep], items[keep], t["rating"].to_numpy().astype(np.float64)[keep]


def grounded_split(ds: Dataset) -> GroundedSplit:
    """The dataset's split with real times (-1 where the release records none) and the random-exposure part."""
    hu, hi, hr, ht = _part(ds, HISTORY)
    tu, ti, tr = held_out(ds)
    rand = random_exposure(ds)
    return GroundedSplit(
        n_users=ds.n_users,
        n_items=ds.n_items,
        hist_user=hu,
        hist_item=hi,
        hist_rating=hr,
        hist_time=ht.astype(np.int64),
        test_user=tu,
        test_item=ti,
        test_rating=tr,
        scale_values=np.asarray(ds.source_scale.values, np.float64),
        like_threshold=ds.like_threshold,  # as the builder recorded it (manifest), one fact in one place
        item_genres=ds.genres.astype(np.float64) if len(ds.genre_vocab) else None,
        item_embeddings=ds.item_embeddings,
        rand_user=None if rand is None else rand[0],
        rand_item=None if rand is None else rand[1],
        rand_rating=None if rand is None else rand[2],
    )


CHUNK = 256  # requests per rater call: one batch for the rater, one step of the progress bar


class RaterSimulator:
    """A rater as a Simulator: every user's memory starts from their real history (as the env starts it) less
    the calibration cut (``hidden``: history (user, item) pairs no prompt may show), the env's retrieval picks
    what the prompt shows, and the rater's distribution is mapped onto the source's bins. ``prefetch`` rates a
    planned set of pairs in one batch; later calls answer from it (and rate any other pair live)."""

    def __init__(self, ds: Dataset, rater: Rater, retrieval: str = "recent", k: int = 3, hidden=None):
        self.ds, self.rater, self.retrieval, self.k = ds, rater, retrieval, k
        self.mem = Memory(ds.n_users, ds.n_items, history=0, recent=k if retrieval == "recent" else 0)
        hidden_keys = np.zeros(0, np.int64) if hidden is None else pair_keys(*hidden, ds.n_items)
        for u in range(ds.n_users):
            items, ratings = ds.history(u)
            shown = ~np.isin(pair_keys(np.full(len(items), u), items, ds.n_items), hidden_keys)
            self.mem.preload(u, items[shown], source_to_rater(ratings[shown], ds.source_scale, rater.scale))
        self.bins = source_bins(rater.scale, ds.source_scale)
        self.keys = np.zeros(0, np.int64)
        self.dists = np.zeros((0, self.bins.shape[1]))

    def requests(self, users: np.ndarray, items: np.ndarray) -> tuple[Requests, np.ndarray]:
        """The env's requests for the pairs, in rounds that hold each user at most once (one memory slot per
        request), and the order of the pairs they follow."""
        users, items = np.asarray(users, np.int64), np.asarray(items, np.int64)
        order = np.lexsort((items, users))
        first = np.r_[True, users[order][1:] != users[order][:-1]]
        rank = np.arange(len(order)) - np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
        rounds = [order[rank == r] for r in range(int(rank.max()) + 1 if len(rank) else 0)]
        reqs = [memory_requests(self.ds, self.mem, self.k, users[sel], items[sel], self.retrieval) for sel in rounds]
        return concat(reqs), np.concatenate(rounds)

    def prefetch(self, users: np.ndarray, items: np.ndarray) -> None:
        """Rate the distinct pairs in one call of the rater (an evaluation's rating store cuts it in blocks)."""
        keys = np.setdiff1d(pair_keys(users, items, self.ds.n_items), self.keys)
        if len(keys) == 0:
            return
        batch, order = self.requests(keys // self.ds.n_items, keys % self.ds.n_items)
        dists = np.empty((len(keys), self.bins.shape[1]))
        dists[order] = self._rate(batch) @ self.bins
        merged = np.concatenate([self.keys, keys])
        pos = np.argsort(merged, kind="stable")
        self.keys, self.dists = merged[pos], np.concatenate([self.dists, dists])[pos]

    def __call__(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        self.prefetch(users, items)
        q = pair_keys(users, items, self.ds.n_items)
        return self.dists[np.searchsorted(self.keys, q)]

    def _rate(self, batch: Requests) -> np.ndarray:
        """The rater's distributions: one call, or, for a live rater on many pairs, calls of ``CHUNK`` requests
        with a progress bar on stderr (an LLM rater on a CPU takes minutes)."""
        n = len(batch)
        if n <= CHUNK or not getattr(self.rater, "live", True):
            return self.rater.distribution(batch)
        from rich.progress import Progress

        parts = []
        with Progress(transient=True) as bar:
            task = bar.add_task(f"grounded: {self.rater.name} rating {n:,} pairs", total=n)
            for start in range(0, n, CHUNK):
                parts.append(self.rater.distribution(batch.subset(slice(start, start + CHUNK))))
                bar.advance(task, min(CHUNK, n - start))
        return np.concatenate(parts)


def item_statistics(ds: Dataset) -> dict[str, tuple[str, np.ndarray]]:
    """Every item statistic a rater, persona, panel member or policy reads, as (kind, values) for the leak
    check: the vote the prompt and the oracle read, the popularity and the mean rating policies read."""
    from suber_env.training.policies import item_popularity, mean_rating

    vote = np.where(ds.vote > 0, ds.vote, np.nan).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):  # items nobody rated: no mean
        mean = _unshrunk_mean(ds, mean_rating(ds, prior=0.0))
    return {"vote": ("mean", vote), "popularity": ("count", item_popularity(ds)), "mean_rating": ("mean", mean)}


def _unshrunk_mean(ds: Dataset, mean: np.ndarray) -> np.ndarray:
    stats = ds.item_rating_stats()
    return np.where(stats[0] > 0, mean, np.nan) if stats is not None else np.full(ds.n_items, np.nan)


def check_leaks(ds: Dataset, split: GroundedSplit) -> dict:
    """The item statistics the env exposes, checked against the held-out ratings (proof/leaks.py)."""
    stats = ds.item_rating_stats()
    if stats is None:
        return {"skipped": "no ratings.parquet: no item statistic comes from ratings"}
    return check_item_statistics(item_statistics(ds), *stats, split)


_LAST: dict = {}  # an evaluation builds the same context in its plan and score passes: build it once


def _context(ds: Dataset, sizes: tuple, extra_recommenders: dict | None) -> tuple:
    """(split, ProofContext, leak report) for ``ds``, reused while the folder's split files are unchanged."""
    files = [ds.path / n for n in ("user_ratings.parquet", RANDOM_RATINGS, "items.parquet")]
    key = (str(ds.path), tuple(f.stat().st_mtime_ns if f.exists() else 0 for f in files), sizes)
    if _LAST.get("key") != key:
        _LAST.clear()
        split = grounded_split(ds)
        leaks = check_leaks(ds, split)
        panel = None
        if extra_recommenders:
            from .proof.data import History
            from .proof.panel import default_panel

            panel = default_panel(History.from_split(split), sizes[1])
            for label, (scores, trained_on, reads_rater_inputs) in extra_recommenders.items():
                panel.add(label, scores, reads_rater_inputs=reads_rater_inputs, trained_on=trained_on)
        k, seed, boots, perms, max_pos, calib, _ = sizes
        _LAST.update(key=key, value=(split, ProofContext(split, panel, k, seed, boots, perms, max_pos, calib), leaks))
    return _LAST["value"]


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
    perms: int = 1000,
    max_pos: int = 20,
    calib_per_user: int = 5,
    extra_recommenders: dict | None = None,
    null_check: int = 0,
    built_on: dict[str, Rater] | None = None,
) -> dict:
    """``run_proof`` for ``rater`` (named ``name``) and its controls on the dataset's own split. Every pair the
    rater and its shuffled control will be asked is planned and rated in one batch before any measurement.
    ``built_on``: the raters ``rater`` corrects (the hybrid's cf), measured beside it as controls, by name."""
    why = not_grounded(ds)
    if why:
        return {"skipped": why}
    sizes = (k, seed, boots, perms, max_pos, calib_per_user, tuple(sorted(extra_recommenders or ())))
    split, ctx, leaks = _context(ds, sizes, extra_recommenders)
    cut = (ctx.history.user[ctx.cut], ctx.history.item[ctx.cut])
    sim = RaterSimulator(ds, rater, retrieval, memory_k, hidden=cut)
    users, items = ctx.pairs()
    perm = derangement(ds.n_users, seed)  # with_controls' shuffled control asks as user perm[u]
    sim.prefetch(np.concatenate([users, perm[users]]), np.concatenate([items, items]))
    sims: dict[str, Simulator] = with_controls(ctx.fit_history, {name: sim}, seed)
    for base_name, base in (built_on or {}).items():
        sims[base_name] = RaterSimulator(ds, base, retrieval, memory_k, hidden=cut)
    result = run_proof(split, sims, context=ctx)
    if null_check:
        result["null_check"] = jsonable(false_positive_rates(ctx, null_check, seed=seed))
    result["protocol"]["rater_memory"] = {"retrieval": retrieval, "k": memory_k}
    result["protocol"]["source_scale"] = ds.source_scale.name
    result["protocol"]["item_statistics_checked"] = leaks
    return result


def chooser_model(ds: Dataset, chooser) -> ChoiceModel:
    """A page chooser as the choice protocol's model: each page asked as the env asks it outside an episode
    (no earlier views; the person's last history items as recent views)."""
    from suber_env.choosers import page_requests

    return lambda users, pages: chooser.pick_probs(page_requests(ds, users, pages))


def grounded_choice(ds: Dataset, kinds, *, seed: int = 0, boots: int = 1000, max_pos: int = 20) -> dict:
    """The choice protocol (proof/choice.py) for the page choosers ``kinds`` (oracle, exposure; each built on
    the Dataset, which never holds the held-out part) on the dataset's own split, with its controls. The item
    statistics a chooser reads (the oracle's vote, the exposure chooser's counts) pass the proof's leak check."""
    from suber_env.choosers import make_chooser

    why = not_grounded(ds)
    if why:
        return {"skipped": why}
    split = grounded_split(ds)
    leaks = check_leaks(ds, split)
    models, fitted = {}, {}
    for kind in kinds:
        t = time.perf_counter()
        chooser = make_chooser(kind, ds)
        fitted[kind] = {"seconds": time.perf_counter() - t, "fitted_on": getattr(chooser, "fitted_on", None)}
        models[kind] = chooser_model(ds, chooser)
    result = run_choice(split, models, seed=seed, boots=boots, max_pos=max_pos)
    if "protocol" in result:
        result["protocol"]["item_statistics_checked"] = leaks
        result["protocol"]["choosers"] = fitted
    return jsonable(result)


def trained_policies(ds: Dataset, runs: list[str | Path]) -> dict[str, tuple[np.ndarray, tuple, bool]]:
    """Every policy under each of ``runs`` (``suber-env train --out RUNS``: ``<algo>/seed<k>/final.zip``) as a
    recommender of the panel: its scores of every item for each real user, given that user's real history as the
    episode's memory. ``trained_on``: the history pairs, the only ratings of these users a policy trained in the
    simulator can have seen; the proof checks them against the held-out part. A policy trained on the taste
    observation reads the liked / disliked genres the raters rate by: flagged as reading the rater's inputs. A
    policy trained on pages (``pages-<algo>/seed<k>/final.zip``) ranks items by its chance to show each on the
    page (``page_policy_scores``; an RLlib page run's ``final/`` too, in the RLlib overlay); its observation holds
    the same genres, so it is flagged too."""
    from gymnasium import spaces

    from suber_env.training import load_model, policy_scores
    from suber_env.training.pages import load_page_model, page_policy_scores

    found = []
    for folder in runs:
        got = sorted(Path(folder).glob("*/seed*/final.zip"))
        got += sorted(Path(folder).glob("pages-*/seed*/final/rllib_checkpoint.json"))  # needs the RLlib overlay
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
        if path.name == "rllib_checkpoint.json":  # --engine rllib on pages: the run folder is one level up
            from suber_env.training.rllib_trainer import load_page_module

            path = path.parent
            scores, taste = page_policy_scores(load_page_module(path, ds), ds, users, items), True
        elif path.parent.parent.name.startswith("pages-"):
            scores, taste = page_policy_scores(load_page_model(path, ds), ds, users, items), True
        else:
            model, norm = load_model(path)
            taste = not isinstance(model.observation_space, spaces.Dict)  # SUBER's observation is a Dict
            scores = policy_scores(model, ds, users, items, ratings, obs_norm=norm, rating_range=(src.min, src.max))
        name = f"policy {path.parent.parent.parent.name}/{path.parent.parent.name}/{path.parent.name}"
        out[name] = (np.asarray(scores, np.float64), trained_on, taste)
    return out


def _built_on(ds: Dataset, rater: Rater, name: str) -> dict[str, Rater]:
    """The rater that ``name`` corrects (raters.BUILT_ON), with its default settings, on the same scale."""
    from suber_env.raters import BUILT_ON, make_rater

    return {b: make_rater(b, ds, scale=rater.scale.name) for b in [BUILT_ON.get(name)] if b}


def grounded_case(ds: Dataset, rater: Rater, name: str, seed: int, sizes: dict) -> dict:
    """The proof as a case of the suite: its headline (the rater's Kendall tau on the fair panel, protocol R
    where the dataset has random exposure, else A, with its bootstrap interval) as the score."""
    why = not_grounded(ds)
    if why:
        return {"skipped": why}
    policies = trained_policies(ds, sizes["grounded_policies"]) if sizes.get("grounded_policies") else None
    proof = grounded_proof(
        ds, rater, name, seed=seed, k=sizes["grounded_k"], retrieval=sizes["people_retrieval"], memory_k=sizes["k"],
        boots=sizes["grounded_boots"], perms=sizes["grounded_perms"], max_pos=sizes["grounded_max_pos"],
        calib_per_user=sizes["grounded_calibration"], extra_recommenders=policies,
        null_check=sizes.get("grounded_null_check", 0), built_on=_built_on(ds, rater, name),
    )  # fmt: skip
    if "skipped" in proof:
        return proof
    if sizes.get("grounded_choosers"):
        proof["choice"] = grounded_choice(
            ds, sizes["grounded_choosers"], seed=seed, boots=sizes["grounded_boots"], max_pos=sizes["grounded_max_pos"]
        )
    from .proof.markdown import headline_protocol

    protocol = headline_protocol(proof)
    if protocol is None:
        return {"skipped": "not applicable: too few grounded users for either protocol", "detail": proof}
    p = proof["protocol"]
    tau = proof["simulators"][name]["agreement"][protocol]["stats"][p["primary_metric"]][p["headline_subset"]]
    tau = tau["kendall_tau"]
    return {"score": tau["value"], "ci": tau["ci95"], "n": p["users"][protocol], "detail": proof}
