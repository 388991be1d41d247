"""Writers of small corpora in the shapes a user's files come in (CSV, JSON Lines, Parquet, gzip), and of the
TOML file that describes them, for the corpus tests."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ANIME = Path(__file__).resolve().parents[3] / "shared" / "data" / "anime_sources"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "anime.toml"

# A made-up domain: its name, nouns and categories are in no code of the project.
GAMES = [
    ("g1", "Harbor of Lanterns", ["worker placement", "trading"], "Ships and lanterns in a busy port.", 2019),
    ("g2", "Crypt Delvers", ["dungeon crawl", "cooperative"], "Heroes share the loot of a deep crypt.", 2021),
    ("g3", "Orchard Rows", ["tile laying", "family"], "Plant rows of trees for the best harvest.", 2015),
    ("g4", "Starlane Cartel", ["trading", "space"], "Run cargo between stars, bribe the customs.", 2018),
    ("g5", "Mossy Bridges", ["family", "tile laying"], "Build bridges over a mossy swamp.", 2020),
    ("g6", "Ashen Legions", ["wargame", "dungeon crawl"], "Hold the line against the ash legions.", 2017),
    ("g7", "Tea Route", ["trading", "worker placement"], "Carry tea along the old mountain route.", 2016),
    ("g8", "Comet Miners", ["space", "cooperative"], "Mine a comet before it passes the sun.", 2022),
]


def write_games(folder: Path) -> dict[str, Path]:
    """Items as gzip JSON Lines with a list column; ratings as Parquet on a continuous -10..+10 scale with
    epoch-second times and 99 meaning "owned, not played"."""
    folder.mkdir(parents=True, exist_ok=True)
    items = folder / "games.jsonl.gz"
    with gzip.open(items, "wt", encoding="utf-8") as f:
        for gid, title, cats, blurb, year in GAMES:
            f.write(
                json.dumps({"gid": gid, "name": title, "mechanics": cats, "blurb": blurb, "published": year}) + "\n"
            )
    users, games, scores, times = [], [], [], []
    for u in range(12):
        for k, (gid, *_rest) in enumerate(GAMES):
            if (u + k) % 3:
                users.append(f"player{u}")
                games.append(gid)
                scores.append(99.0 if (u * k) % 11 == 5 else round(((u * 7 + k * 5) % 41) / 2 - 10, 1))
                times.append(1_600_000_000 + 3600 * (u * 10 + k))
    ratings = folder / "plays.parquet"
    table = pa.table({"player": users, "game": games, "score": scores, "when": times})
    pq.write_table(table, ratings)
    return {"items": items, "ratings": ratings}


GAMES_TOML = """
[corpus]
name = "boardgames"
release = "shelf-1"
title = "A shelf of board games"
license = "CC0-1.0"

[nouns]
item = "board game"
items = "board games"
category = "mechanic"
categories = "mechanics"
consumed = "played"
person = "player"

[items]
path = "games.jsonl.gz"
id = "gid"
title = "name"
text = ["blurb"]
categories = "mechanics"
categories_format = "list"
year = "published"

[ratings]
path = "plays.parquet"
user = "player"
item = "game"
value = "score"
time = "when"

[scale]
min = -10
max = 10
step = 0
special = { "99" = "owned, not played" }

[tastes]
prior = "items"
min_items = 0

[env]
scale = "1-10"
"""


def write_toml(folder: Path, text: str, name: str = "corpus.toml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path
