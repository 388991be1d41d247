"""How often does each p-value of the proof call an uninformative simulator significant? On the run's own
panel picks, simulators that give each item one random value (item effects, as any LLM has, and nothing
else) and ones that add a random value per person and noise per pair are scored many times; the share of
p < alpha is the false-positive rate, which a valid p keeps at or below alpha. The independent-per-pair null
that earlier versions used, and a people-permutation null, are computed beside it, to show why neither is
used."""

from __future__ import annotations

import numpy as np

from .agreement import METRICS, _chunks, p_value, people_permutation_null, pick_means, statistics
from .run import ProofContext

UNINFORMATIVE = ("item_effects", "person_and_item_effects")
PERMUTATION_DRAWS = 200  # the people-permutation null is only shown here, and it is the slow part


def _uninformative(kind: str, ctx: ProofContext, rng: np.random.Generator) -> np.ndarray:
    """(n_users, n_items) expected ratings of an uninformative simulator (only its pick values are read)."""
    sv = ctx.split.scale_values
    item = sv[rng.integers(len(sv), size=ctx.split.n_items)].astype(np.float64)
    if kind == "item_effects":
        return np.broadcast_to(item, (ctx.split.n_users, ctx.split.n_items))
    person = rng.normal(0, 0.5, (ctx.split.n_users, 1))
    return item[None, :] + person + rng.normal(0, 0.5, (ctx.split.n_users, ctx.split.n_items))


def _pair_noise_null(ctx: ProofContext, protocol: str, draws: int, seed: int) -> dict:
    """The old null: an independent uniformly random scale value per (person, item) pair."""
    pk, sv = ctx.picks[protocol], ctx.split.scale_values
    real = pk.real_scores()
    out = {(m, s): {"tau": np.empty(draws), "pairwise": np.empty(draws)} for m in METRICS for s in ctx.subsets}
    for sl, rng in _chunks(draws, seed):
        sim = pick_means(sv[rng.integers(len(sv), size=(sl.stop - sl.start, *pk.items.shape))])  # (B, U, R)
        for m, r in real.items():
            for s, idx in ctx.subsets.items():
                tau, pair = statistics(sim[..., idx], np.broadcast_to(r[..., idx], sim[..., idx].shape))
                out[(m, s)]["tau"][sl], out[(m, s)]["pairwise"][sl] = tau, pair
    return out


def false_positive_rates(
    ctx: ProofContext, seeds: int = 100, alpha: float = 0.05, seed: int = 0, people_permutation: bool = True
) -> dict:
    """{protocol: {kind: {"metric/subset/statistic/null": rate}}} over ``seeds`` uninformative simulators
    of each kind, on every metric and subset; ``seeds`` and ``alpha`` recorded beside. The people-permutation
    null (not used by the proof: this table is why) is the slow part; ``people_permutation=False`` skips it."""
    out: dict = {"seeds": seeds, "alpha": alpha, "perms": ctx.perms, "rates": {}}
    for p, pk in ctx.picks.items():
        old = _pair_noise_null(ctx, p, ctx.perms, seed + 7)
        real = pk.real_scores()
        counts: dict = {}
        for kind in UNINFORMATIVE:
            hits: dict[str, int] = {}
            for j in range(seeds):
                exp = _uninformative(kind, ctx, np.random.default_rng([seed, j, UNINFORMATIVE.index(kind)]))
                sim = pick_means(exp[pk.users[None, :, None], pk.items])
                perm = (
                    people_permutation_null(sim, real, ctx.subsets, min(ctx.perms, PERMUTATION_DRAWS), seed + 11 + j)
                    if people_permutation
                    else {}
                )
                for m in METRICS:
                    for s, idx in ctx.subsets.items():
                        tau, pair = (float(x) for x in statistics(sim[:, idx], real[m][:, idx]))
                        null = ctx.nulls[p][(m, s)]
                        ps = {
                            "tau/item_null": p_value(tau, null["tau"]),
                            "tau/pair_noise_null (old)": p_value(tau, old[(m, s)]["tau"]),
                            "pairwise/item_null": p_value(pair, null["pairwise"]),
                            "pairwise/people_permutation (not used)": p_value(pair, perm[(m, s)]) if perm else None,
                            "pairwise/pair_noise_null (old)": p_value(pair, old[(m, s)]["pairwise"]),
                        }
                        for name, pv in ps.items():
                            key = f"{m}/{s}/{name}"
                            hits[key] = hits.get(key, 0) + int(pv is not None and pv < alpha)
            counts[kind] = {key: n / seeds for key, n in hits.items()}
        out["rates"][p] = counts
    return out
