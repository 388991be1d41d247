"""A planted split for tests and smoke runs: ratings from a known low-rank model, so every answer of the
proof is known in advance (the truth simulator, MF against random, ...)."""

from __future__ import annotations

import numpy as np

from .data import GroundedSplit


def planted_ratings(n_users: int, n_items: int, rank: int, noise: float, rng: np.random.Generator):
    """(truth (n_users, n_items) on 1..5, item factors): a biased low-rank model with noise, rounded."""
    U = rng.normal(0, 1, (n_users, rank))
    V = rng.normal(0, 1, (n_items, rank))
    bu, bi = rng.normal(0, 0.3, n_users), rng.normal(0, 0.5, n_items)
    truth = 3.0 + bu[:, None] + bi[None, :] + (U @ V.T) / np.sqrt(rank) + rng.normal(0, noise, (n_users, n_items))
    return np.clip(np.rint(truth), 1, 5), V


def planted_split(
    n_users: int = 60,
    n_items: int = 80,
    rank: int = 3,
    density: float = 0.5,
    n_test: int = 15,
    noise: float = 0.3,
    seed: int = 0,
    n_random: int = 0,
    selection: float = 0.0,
) -> GroundedSplit:
    """Users and items with ``rank`` latent factors; each user rates a ``density`` share of the items
    (popular items more often, and with ``selection`` > 0 the items they like more often: self-selection),
    on 1..5; the ``n_test`` most recent ratings of each user are held out. With ``n_random``, each user also
    rates that many items drawn at random from the whole catalogue (random exposure, protocol R's truth).
    Items carry genres (the sign pattern of their factors) and embeddings (their factors, noised)."""
    rng = np.random.default_rng(seed)
    ratings, V = planted_ratings(n_users, n_items, rank, noise, rng)
    pop = rng.normal(0, 1, n_items)
    taste = selection * (ratings - 3.0)
    propensity = 1 / (1 + np.exp(-(pop[None, :] + taste + rng.normal(0, 1, (n_users, n_items)))))
    n_rated = int(round(density * n_items))
    rated = np.argsort(-propensity, axis=1)[:, :n_rated]  # (n_users, n_rated) items
    users = np.repeat(np.arange(n_users), n_rated)
    items = rated.ravel()
    times = rng.permutation(len(users)).astype(np.int64)
    order = np.lexsort((-times, users))  # per user, most recent first
    rank_in_user = np.arange(len(users)) - np.searchsorted(users[order], users[order], side="left")
    test = np.zeros(len(users), bool)
    test[order[rank_in_user < n_test]] = True
    genres = (V > 0).astype(np.float64)
    emb = V + rng.normal(0, 0.3, V.shape)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    r = ratings[users, items]
    rand = None
    if n_random:
        shown = np.argsort(rng.random((n_users, n_items)), axis=1)[:, :n_random]
        ru = np.repeat(np.arange(n_users), n_random)
        rand = (ru, shown.ravel(), ratings[ru, shown.ravel()])
    return GroundedSplit(
        n_users=n_users,
        n_items=n_items,
        hist_user=users[~test],
        hist_item=items[~test],
        hist_rating=r[~test],
        hist_time=times[~test],
        test_user=users[test],
        test_item=items[test],
        test_rating=r[test],
        scale_values=np.arange(1.0, 6.0),
        like_threshold=4.0,
        item_genres=genres,
        item_embeddings=emb,
        rand_user=None if rand is None else rand[0],
        rand_item=None if rand is None else rand[1],
        rand_rating=None if rand is None else rand[2],
    )


# A constructed super-population for the proof's intervals: people and items drawn from a known model, so the
# population's pairwise agreement and tau of a simulator are known (to sampling error) from one very large sample,
# and how often an interval method covers them can be counted over many drawn datasets.
N_RECOMMENDERS = 10
SIMULATORS = {"sim": 0.3, "sharp": 1.0}  # simulator name -> the sd of its item quirk (sharper item effects)
_DIM = 4


def _population_parameters() -> dict:
    """The fixed model: each recommender mixes the item effect, the person's taste and its own item noise."""
    rng = np.random.default_rng(20261127)
    return {
        "effect": np.linspace(0.0, 1.2, N_RECOMMENDERS),
        "taste": np.linspace(1.0, 0.0, N_RECOMMENDERS) + rng.uniform(0, 0.3, N_RECOMMENDERS),
        "noise": rng.uniform(0.2, 1.0, N_RECOMMENDERS),
    }


def constructed_panel(n_people: int, n_items: int | None, seed: int, exposed: int = 15, k: int = 5):
    """(Picks of protocol R, {simulator: (R, U, k) expected ratings of the picks}) for ``n_people`` people, each
    shown ``exposed`` distinct items at random from a catalogue of ``n_items`` (``None``: fresh items for every
    person, the super-population) and rating them on 1..5; each of ``N_RECOMMENDERS`` recommenders picks its top
    ``k`` of them. Real rating: 3 + 0.8 item effect + taste . features + noise, rounded. Simulator: the same
    item effect, 0.7 of the taste, plus its own item quirk (``SIMULATORS``) and a per-pair error."""
    from .agreement import Picks

    par, rng = _population_parameters(), np.random.default_rng(seed)
    n_cat = n_people * exposed if n_items is None else n_items
    effect, feat = rng.normal(0, 1, n_cat), rng.normal(0, 1, (n_cat, _DIM)) / np.sqrt(_DIM)
    rec_noise = rng.normal(0, 1, (N_RECOMMENDERS, n_cat))
    quirk = rng.normal(0, 1, n_cat)
    taste = rng.normal(0, 1, (n_people, _DIM))
    if n_items is None:
        cand = np.arange(n_cat).reshape(n_people, exposed)
    else:
        cand = np.argsort(rng.random((n_people, n_cat)), axis=1)[:, :exposed]
    fit = np.einsum("ud,ujd->uj", taste, feat[cand])  # (U, exposed)
    mean = 0.8 * effect[cand] + fit
    real = np.clip(np.rint(3.0 + mean + rng.normal(0, 0.7, mean.shape)), 1, 5)
    score = (par["effect"][:, None, None] * effect[cand] + par["taste"][:, None, None] * fit
             + par["noise"][:, None, None] * rec_noise[:, cand])  # fmt: skip
    pos = np.argsort(-score, axis=2)[..., :k]  # (R, U, k) positions among the person's shown items
    rows = np.arange(n_people)[None, :, None]
    err = rng.normal(0, 0.5, mean.shape)
    sim_mean = 3.0 + 0.9 * effect[cand] + 0.7 * fit + err
    sims = {n: (sim_mean + sd * quirk[cand])[rows, pos] for n, sd in SIMULATORS.items()}
    names = [f"rec{r}" for r in range(N_RECOMMENDERS)]
    picks = Picks("R", np.arange(n_people), cand[rows, pos], real[rows, pos], names, 4.0)
    return picks, sims


def population_agreement(n_people: int = 200_000, seed: int = 1, chunk: int = 20_000, exposed: int = 15) -> dict:
    """{simulator: {"tau", "pairwise"}} of the super-population (mean_rating, the whole panel): pooled pairwise
    agreement and the tau of the recommenders' mean scores over ``n_people`` people with fresh items each."""
    from .agreement import kendall_tau, pairwise_counts, pick_means

    agree = {n: 0.0 for n in SIMULATORS}
    pairs = 0.0
    sums = {n: np.zeros(N_RECOMMENDERS) for n in [*SIMULATORS, "real"]}
    for c in range(0, n_people, chunk):
        picks, sims = constructed_panel(min(chunk, n_people - c), None, seed=[seed, c], exposed=exposed)
        real = pick_means(picks.real)
        sums["real"] += real.sum(axis=0)
        for n, v in sims.items():
            sim = pick_means(v)
            a, e = pairwise_counts(sim, real)
            agree[n] += a.sum()
            sums[n] += sim.sum(axis=0)
        pairs += e.sum()
    return {n: {"tau": float(kendall_tau(sums[n], sums["real"])), "pairwise": agree[n] / pairs} for n in SIMULATORS}


def interval_coverage(
    datasets: int,
    n_people: int,
    n_items: int,
    boots: int,
    truth: dict,
    seed: int = 0,
    exposed: int = 15,
    people_only: bool = True,
) -> dict:
    """How often each interval method covers the super-population's figure (``truth``: population_agreement's
    answer) over ``datasets`` drawn datasets, for each simulator, tau and pairwise (mean_rating, whole panel), and
    the paired difference ``sim - sharp``; with each method's share of intervals holding their own point figure,
    mean width and the mean of (draws' mean - point). Methods, on the proof's two-way draws (``Resampler``) and on
    its people draws alone (item weights 1): ``percentile`` (the former interval), ``recentred`` (the percentile
    interval moved by point - mean of the draws: ``agreement.interval``) and ``basic`` (2 point - quantiles).
    ``people_only=False`` skips the people draws (faster)."""
    from .agreement import BOUNDS, Resampler, interval, people_draws, pick_means, statistics

    sub = {"all": np.arange(N_RECOMMENDERS)}
    names = list(SIMULATORS)
    targets = [(n, st) for n in names for st in ("tau", "pairwise")] + [("sim-sharp", st) for st in ("tau", "pairwise")]
    truth_of = {(n, st): truth[n][st] for n in names for st in ("tau", "pairwise")}
    truth_of.update({("sim-sharp", st): truth["sim"][st] - truth["sharp"][st] for st in ("tau", "pairwise")})
    tally: dict = {}
    for d in range(datasets):
        picks, sims = constructed_panel(n_people, n_items, seed=[seed, d], exposed=exposed)
        real = picks.real_scores()["mean_rating"]
        point, draws = {}, {}
        rs = Resampler(picks, n_items, boots, seed=[seed, d, 1])
        for n, v in sims.items():
            tau, pair = statistics(pick_means(v), real)
            point[(n, "tau")], point[(n, "pairwise")] = float(tau), float(pair)
            two = rs.distribution(v, sub)[("mean_rating", "all")]
            one = {"tau": np.full(boots, np.nan), "pairwise": np.full(boots, np.nan)}
            for sl, w, _ in people_draws(n_people, boots, [seed, d, 1]) if people_only else ():
                one["tau"][sl], one["pairwise"][sl] = statistics(pick_means(v), real, w)
            for st in ("tau", "pairwise"):
                draws[("two-way", n, st)], draws[("people", n, st)] = two[st], one[st]
        for st in ("tau", "pairwise"):
            point[("sim-sharp", st)] = point[("sim", st)] - point[("sharp", st)]
            for way in ("two-way", "people"):
                draws[(way, "sim-sharp", st)] = draws[(way, "sim", st)] - draws[(way, "sharp", st)]
        for way in ("two-way", "people") if people_only else ("two-way",):
            for t in targets:
                b = draws[(way, *t)]
                b = b[~np.isnan(b)]
                lo, hi, mean, p = np.quantile(b, 0.025), np.quantile(b, 0.975), b.mean(), point[t]
                for method, (a, z) in {
                    "percentile": (lo, hi),
                    "recentred": interval(b, p, None if t[0] == "sim-sharp" else BOUNDS[t[1]]),
                    "basic": (2 * p - hi, 2 * p - lo),
                }.items():
                    row = tally.setdefault((way, method, *t), np.zeros(4))
                    row += (a <= truth_of[t] <= z, a <= p <= z, z - a, mean - p)
    return {key: dict(zip(("coverage", "holds_point", "width", "shift"), v / datasets, strict=True))
            for key, v in tally.items()}  # fmt: skip
