"""suber_env's own copy of the artifact contract (the columns it reads).

``suber_env`` never imports ``suber_data``; ``tests/test_contract.py`` at the repository root checks
that every column named here exists in ``suber_data.artifacts.schemas`` with the same Arrow type.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 3  # 2: ratings.user_id renamed source_user_id; 3: real-user populations, rating scale

ACTOR = pa.struct([("name", pa.string()), ("gender", pa.string())])

# items.parquet (movies): column -> (arrow type, required)
MOVIE_ITEM_COLUMNS: dict[str, tuple[pa.DataType, bool]] = {
    "item_id": (pa.int32(), True),
    "title": (pa.string(), True),
    "year": (pa.int16(), False),
    "overview": (pa.string(), False),
    "genres": (pa.list_(pa.string()), False),
    "actors": (pa.list_(ACTOR), False),
    "director": (pa.string(), False),
    "vote_average": (pa.float32(), False),
    "collection_id": (pa.int64(), False),
    "collection_name": (pa.string(), False),
}

# items.parquet (books): the contract has no book table yet; the env reads the same core columns and
# an optional ``authors`` list (used in the prompt in place of actors).
BOOK_ITEM_COLUMNS: dict[str, tuple[pa.DataType, bool]] = {
    "item_id": (pa.int32(), True),
    "title": (pa.string(), True),
    "year": (pa.int16(), False),
    "overview": (pa.string(), False),
    "genres": (pa.list_(pa.string()), False),
    "authors": (pa.list_(pa.string()), False),
    "vote_average": (pa.float32(), False),
}

# items.parquet of a corpus described by a file (suber-data build corpus): the core columns only.
ITEM_COLUMNS: dict[str, tuple[pa.DataType, bool]] = {
    "item_id": (pa.int32(), True),
    "title": (pa.string(), True),
    "year": (pa.int16(), False),
    "overview": (pa.string(), False),
    "genres": (pa.list_(pa.string()), False),
    "vote_average": (pa.float32(), False),
}
# The columns each prompt family reads (a dataset's manifest terms.prompts).
COLUMNS_BY_FAMILY = {"movies": MOVIE_ITEM_COLUMNS, "books": BOOK_ITEM_COLUMNS, "items": ITEM_COLUMNS}

# The terms of the two built-in families, for datasets built before manifests recorded them (suber-data writes
# the same values; suber_data/movies/corpus.py and suber_data/books/corpus.py: TERMS).
FAMILY_TERMS = {
    "movies": {"nouns": {"item": "film", "items": "films", "category": "genre", "categories": "genres"},
               "prompts": "movies", "rater_scale": "0-9",
               "vote": {"min": 0.0, "max": 10.0, "fill": 6.53, "source": "tmdb", "count_source": "tmdb"}},
    "books": {"nouns": {"item": "book", "items": "books", "category": "category", "categories": "categories"},
              "prompts": "books", "rater_scale": "1-5",
              "vote": {"min": 1.0, "max": 5.0, "fill": 4.21, "source": "ratings", "count_source": "ratings"}},
}  # fmt: skip

USER_COLUMNS: dict[str, tuple[pa.DataType, bool]] = {
    "user_id": (pa.int32(), True),
    "first_name": (pa.string(), True),
    "last_name": (pa.string(), True),
    "sex": (pa.string(), True),  # M, F or U (a real user whose source records none)
    "age": (pa.int16(), False),  # null: unknown (real users)
    "occupation": (pa.string(), False),
    "hobby": (pa.string(), False),
    "liked": (pa.list_(pa.string()), False),
    "disliked": (pa.list_(pa.string()), False),
    # real users (profile "real"); null for synthetic ones
    "profile": (pa.string(), False),
    "source_user_id": (pa.string(), False),
    "age_group": (pa.string(), False),
    "state": (pa.string(), False),
    "habit": (pa.string(), False),
    "rating_mean": (pa.float32(), False),
    "n_history": (pa.int32(), False),
    "favourites": (pa.list_(pa.string()), False),
    "facts": (pa.list_(pa.string()), False),  # other facts a corpus' users file records, "field: value"
}

# user_ratings.parquet: a real population's own ratings; the env reads only part == "history"
USER_RATING_COLUMNS: dict[str, tuple[pa.DataType, bool]] = {
    "user_id": (pa.int32(), True),
    "item_id": (pa.int32(), True),
    "rating": (pa.float32(), True),
    "timestamp": (pa.timestamp("us", tz="UTC"), False),
    "part": (pa.string(), True),
}
HISTORY, HELD_OUT = "history", "held_out"

USER_DESCRIPTION_COLUMNS: dict[str, tuple[pa.DataType, bool]] = {
    "user_id": (pa.int32(), True),
    "description": (pa.string(), True),
}

RATING_COLUMNS: dict[str, tuple[pa.DataType, bool]] = {
    "source_user_id": (pa.int32(), True),
    "item_id": (pa.int32(), True),
    "rating": (pa.float32(), True),
}

# random_ratings.parquet (a corpus with [random_ratings]): ratings of items shown to each person at random, the
# evaluation's unbiased truth; source_user_id maps to a real user through users.parquet's source_user_id. Never
# loaded into a Dataset (nothing the simulator, a persona or a policy reads may see it).
RANDOM_RATING_COLUMNS: dict[str, tuple[pa.DataType, bool]] = {
    "source_user_id": (pa.string(), True),
    "item_id": (pa.int32(), True),
    "rating": (pa.float64(), True),
}

EMBEDDING_ID = {"item_embeddings.parquet": "item_id", "user_embeddings.parquet": "user_id"}
EMBEDDING_COLUMN = "embedding"  # fixed_size_list<float32>[d]

FILES = {
    "items.parquet": MOVIE_ITEM_COLUMNS,
    "users.parquet": USER_COLUMNS,
    "user_descriptions.parquet": USER_DESCRIPTION_COLUMNS,
    "ratings.parquet": RATING_COLUMNS,
    "user_ratings.parquet": USER_RATING_COLUMNS,
}

# ratings.parquet (books): Kaggle user ids are strings, so source_user_id differs from the movies' RATING_COLUMNS.
BOOK_RATING_COLUMNS: dict[str, tuple[pa.DataType, bool]] = {
    "source_user_id": (pa.string(), True),
    "item_id": (pa.int32(), True),
    "rating": (pa.float32(), True),
}
