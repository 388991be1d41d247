"""The artifact contract: every Parquet file a dataset folder may hold, defined once.

``suber_env`` keeps its own copy of the column names it needs (it never imports this package);
``tests/test_contract.py`` checks that the two agree.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 2  # 2: ratings.user_id renamed source_user_id

ACTOR = pa.struct([("name", pa.string()), ("gender", pa.string())])  # gender: "M", "F" or "unknown"

MOVIE_ITEMS = pa.schema(
    [
        pa.field("item_id", pa.int32(), nullable=False),  # dense 0..n-1, the env's action index
        pa.field("movielens_id", pa.int32(), nullable=False),
        pa.field("tmdb_id", pa.int32()),
        pa.field("imdb_id", pa.string()),  # "tt0114709"
        pa.field("title", pa.string(), nullable=False),
        pa.field("release_date", pa.date32()),
        pa.field("year", pa.int16()),
        pa.field("overview", pa.string()),
        pa.field("genres", pa.list_(pa.string())),  # TMDB names, lower-case (MovieLens' with --no-tmdb)
        pa.field("actors", pa.list_(ACTOR)),  # the two top-billed
        pa.field("director", pa.string()),
        pa.field("vote_average", pa.float32()),
        pa.field("vote_count", pa.int32()),
        pa.field("popularity", pa.float32()),
        pa.field("runtime", pa.int16()),
        pa.field("original_language", pa.string()),
        pa.field("collection_id", pa.int64()),  # TMDB belongs_to_collection: the saga (null when none)
        pa.field("collection_name", pa.string()),
        pa.field("ml_rating_count", pa.int32(), nullable=False),
        pa.field("ml_rating_mean", pa.float32()),
    ]
)

RATINGS = pa.schema(
    [
        pa.field("source_user_id", pa.int32(), nullable=False),  # a real person of the source (MovieLens userId),
        # named apart from users.user_id (synthetic users): a join on user_id would pair unrelated people
        pa.field("item_id", pa.int32(), nullable=False),
        pa.field("rating", pa.float32(), nullable=False),
        pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False),  # DuckDB's native TIMESTAMPTZ
    ]
)

USERS = pa.schema(
    [
        pa.field("user_id", pa.int32(), nullable=False),
        pa.field("first_name", pa.string(), nullable=False),
        pa.field("last_name", pa.string(), nullable=False),
        pa.field("sex", pa.string(), nullable=False),  # "M" or "F"
        pa.field("age", pa.int16(), nullable=False),
        pa.field("birth_year", pa.int16(), nullable=False),
        pa.field("occupation", pa.string(), nullable=False),
        pa.field("hobby", pa.string(), nullable=False),
        pa.field("liked", pa.list_(pa.string()), nullable=False),  # genres (movies) or categories (books)
        pa.field("disliked", pa.list_(pa.string()), nullable=False),
        pa.field("profile", pa.string(), nullable=False),  # "census" or "suber"
        pa.field("seed", pa.int64(), nullable=False),
    ]
)

USER_DESCRIPTIONS = pa.schema(
    [
        pa.field("user_id", pa.int32(), nullable=False),
        pa.field("description", pa.string(), nullable=False),  # the continuation after "NAME is a AGE years old ..."
        pa.field("variant", pa.string(), nullable=False),  # plain, preferences, film_interest, books
        pa.field("backend", pa.string(), nullable=False),  # transformers, openai, smollm2, template
        pa.field("model", pa.string(), nullable=False),
        pa.field("model_revision", pa.string()),
        pa.field("template_hash", pa.string(), nullable=False),
        pa.field("seed", pa.int64(), nullable=False),
        pa.field("temperature", pa.float32(), nullable=False),
        pa.field("max_tokens", pa.int32(), nullable=False),
        pa.field("attempts", pa.int16(), nullable=False),
        pa.field("seconds", pa.float32(), nullable=False),
        pa.field("generation_key", pa.string(), nullable=False),
    ]
)


def embedding_schema(id_column: str, dim: int) -> pa.Schema:
    """``item_embeddings.parquet`` / ``user_embeddings.parquet``: one unit vector per id."""
    return pa.schema(
        [
            pa.field(id_column, pa.int32(), nullable=False),
            pa.field("embedding", pa.list_(pa.float32(), dim), nullable=False),
            pa.field("text_hash", pa.string(), nullable=False),
        ]
    )


# file name -> schema (embeddings are per dimension, checked by embedding_schema)
TABLES: dict[str, pa.Schema] = {
    "items.parquet": MOVIE_ITEMS,
    "ratings.parquet": RATINGS,
    "users.parquet": USERS,
    "user_descriptions.parquet": USER_DESCRIPTIONS,
}

# -- books (Kaggle "Amazon Books Reviews", Amazon Reviews 2023; suber_data/books) ------------------------
BOOK_ITEMS = pa.schema(
    [
        pa.field("item_id", pa.int32(), nullable=False),  # dense 0..n-1, the env's action index
        pa.field("book_id", pa.int32(), nullable=False),  # record index in books_data.csv (SUBER's) / meta_Books.jsonl
        pa.field("title", pa.string(), nullable=False),
        pa.field("overview", pa.string()),  # the Kaggle description (named as the env reads it)
        pa.field("authors", pa.list_(pa.string())),
        pa.field("publisher", pa.string()),
        pa.field("year", pa.int16()),  # SUBER's published_year: publishedDate before the first "-"
        pa.field("genres", pa.list_(pa.string())),  # SUBER's categories, split on "&" and ", "
        pa.field("vote_average", pa.float32()),
        pa.field("vote_count", pa.int32()),
        pa.field("parent_asin", pa.string()),  # Amazon Reviews 2023's item id (the Kaggle files have none)
        pa.field("isbn", pa.string()),  # ISBN-13, else ISBN-10, where Amazon 2023's details list one
    ]
)

# Kaggle user ids are strings ("AVCGYZL8FQQTD"), so book ratings differ from RATINGS in source_user_id's type.
BOOK_RATINGS = pa.schema(
    [
        pa.field("source_user_id", pa.string(), nullable=False),
        pa.field("item_id", pa.int32(), nullable=False),
        pa.field("rating", pa.float32(), nullable=False),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),  # review/time; absent in some rows
    ]
)
