"""The artifact contract: every Parquet file a dataset folder may hold, defined once.

``suber_env`` keeps its own copy of the column names it needs (it never imports this package);
``tests/test_contract.py`` checks that the two agree. Every column carries a one-line description as
Parquet field metadata (``description``), which the dataset card and other readers show.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 3  # 2: ratings.user_id renamed source_user_id; 3: real-user populations, rating scale

# What each column means, by name: a column means the same in every table that has it, unless a schema overrides it.
COLUMN_DOCS = {
    "item_id": "Dense item index 0..n-1: the environment's action; joins every table that has it",
    "user_id": "Synthetic user id (users.parquet); unrelated to ratings.source_user_id",
    "source_user_id": "A real person of the source data (never a users.user_id)",
    "title": "Title",
    "year": "Year of release or publication",
    "overview": "Plot summary or description, as the source wrote it",
    "genres": "Genres, lower-case",
    "vote_average": "Mean rating at the source",
    "vote_count": "Number of ratings at the source",
    "rating": "The source's rating",
    "timestamp": "When the rating was given (UTC)",
    "embedding": "Unit-norm text embedding (float32)",
    "text_hash": "sha256 of the text that was embedded",
    "seed": "The seed this row was generated with",
}


def described(schema: pa.Schema, **docs: str) -> pa.Schema:
    """``schema`` with a ``description`` on every field it can describe: ``docs`` first, then COLUMN_DOCS
    (tests/test_publish.py checks that every column of a built dataset has one)."""
    fields = []
    for f in schema:
        text = docs.get(f.name) or COLUMN_DOCS.get(f.name)
        fields.append(f.with_metadata({"description": text}) if text else f)
    return pa.schema(fields, metadata=schema.metadata)


ACTOR = pa.struct([("name", pa.string()), ("gender", pa.string())])  # gender: "M", "F" or "unknown"

MOVIE_ITEMS = pa.schema(
    [
        pa.field("item_id", pa.int32(), nullable=False),  # dense 0..n-1, the env's action index
        pa.field("movielens_id", pa.int32(), nullable=False),
        pa.field("tmdb_id", pa.int32()),
        pa.field("imdb_id", pa.string()),  # "tt0114709"
        pa.field("title", pa.string(), nullable=False),
        pa.field("source_title", pa.string(), nullable=False),  # MovieLens' own, verbatim: "Misérables, Les (1995)"
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
MOVIE_ITEMS = described(
    MOVIE_ITEMS,
    movielens_id="MovieLens movieId",
    tmdb_id="TMDB movie id (null when MovieLens links none)",
    imdb_id="IMDb id, e.g. tt0114709",
    title="Title: TMDB's, else MovieLens' with its year dropped and every moved article back in front",
    source_title="The title exactly as the MovieLens release writes it, year and trailing articles included",
    release_date="Release date (TMDB)",
    year="Release year (TMDB's date, else the year in the MovieLens title)",
    overview="Plot overview (TMDB)",
    genres="Genres, lower-case: TMDB's names (MovieLens' when built without TMDB)",
    actors="The two top-billed actors: name and gender (M, F or unknown)",
    director="Director (TMDB credits)",
    vote_average="TMDB vote average (0-10)",
    vote_count="TMDB vote count",
    popularity="TMDB popularity score",
    runtime="Runtime in minutes",
    original_language="Original language (ISO 639-1)",
    collection_id="TMDB collection (film series) id; null when none",
    collection_name="TMDB collection (film series) name",
    ml_rating_count="Number of MovieLens ratings in this release",
    ml_rating_mean="Mean MovieLens rating in this release (0.5-5)",
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
RATINGS = described(
    RATINGS,
    source_user_id="MovieLens userId: a real person, not a users.user_id",
    rating="MovieLens rating, 0.5-5 in steps of 0.5 (1-5 in older releases)",
)

USERS = pa.schema(
    [
        pa.field("user_id", pa.int32(), nullable=False),
        pa.field("first_name", pa.string(), nullable=False),  # real users: "User"
        pa.field("last_name", pa.string(), nullable=False),  # real users: the source's user id
        pa.field("sex", pa.string(), nullable=False),  # "M", "F", or "U" (a real user whose source records none)
        pa.field("age", pa.int16()),  # null: a real user whose source records no exact age
        pa.field("birth_year", pa.int16()),
        pa.field("occupation", pa.string()),
        pa.field("hobby", pa.string()),  # null for real users: no source records one
        pa.field("liked", pa.list_(pa.string()), nullable=False),  # genres (movies) or categories (books)
        pa.field("disliked", pa.list_(pa.string()), nullable=False),
        pa.field("profile", pa.string(), nullable=False),  # "census", "suber" or "real"
        pa.field("seed", pa.int64(), nullable=False),
        # real users only (null for synthetic ones): who they are and how they rate, from their history alone
        pa.field("source_user_id", pa.string()),
        pa.field("age_group", pa.string()),
        pa.field("state", pa.string()),
        pa.field("activity", pa.float32()),
        pa.field("n_history", pa.int32()),
        pa.field("n_held_out", pa.int32()),
        pa.field("rating_mean", pa.float32()),
        pa.field("rating_std", pa.float32()),
        pa.field("high_share", pa.float32()),
        pa.field("habit", pa.string()),
        pa.field("favourites", pa.list_(pa.string())),
        pa.field("facts", pa.list_(pa.string())),  # other facts a corpus' users file records, "field: value"
    ]
)
USERS = described(
    USERS,
    first_name="First name, drawn by birth year and sex (US Social Security data); 'User' for a real user",
    last_name="Last name, drawn by frequency (1990 US Census); the source's user id for a real user",
    sex="M, F, or U (unknown: a real user whose source records none)",
    age="Age in years (null where a real user's source records none, or only a group)",
    birth_year="Year of birth (null where the age is unknown)",
    occupation="Occupation (null where a real user's source records none)",
    hobby="Hobby (null for real users)",
    liked="Genres (movies) or categories (books) the user likes",
    disliked="Genres (movies) or categories (books) the user dislikes",
    profile="Population: census or suber (synthetic), real (one real user of the release each)",
    source_user_id="Real users: the person's id in ratings.parquet (source_user_id); null for synthetic users",
    age_group="Real users: the age group the source records (ml-1m), else null",
    state="Real users: US state from the zip code the source records (ml-100k, ml-1m), else null",
    activity="Activity level: the user's rating count as a quantile of the release's Pareto fit (0-1)",
    n_history="Real users: ratings in their history (user_ratings.parquet part 'history')",
    n_held_out="Real users: ratings held out for evaluation (part 'held_out'), never shown to a persona",
    rating_mean="Real users: mean of their history ratings, on the source's scale",
    rating_std="Real users: standard deviation of their history ratings",
    high_share="Real users: share of their history ratings at the release's like threshold or above",
    habit="Real users: rating habit from the history: harsh critic, balanced or generous rater",
    favourites="Real users: titles of their best-rated history items (at most 5)",
    facts="Real users: other facts the source's users file records, each 'field: value' (e.g. 'location: urban'); "
    "null where it records none",
)

# Real-user populations: each user's own ratings, split into the history the simulator may show and the
# held-out part only an evaluation reads.
USER_RATINGS = pa.schema(
    [
        pa.field("user_id", pa.int32(), nullable=False),
        pa.field("item_id", pa.int32(), nullable=False),
        pa.field("rating", pa.float32(), nullable=False),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("part", pa.string(), nullable=False),  # "history" or "held_out"
    ]
)
USER_RATINGS = described(
    USER_RATINGS,
    user_id="users.user_id of a real user (profile 'real')",
    rating="The person's own rating, on the scale ratings.parquet records",
    timestamp="When the rating was given (UTC); null where the source has no time",
    part="history (may be shown to personas, memories, policies) or held_out (evaluation only)",
)

# Demographics of a release's real users where it publishes them (ml-100k, ml-1m).
SOURCE_USERS = described(
    pa.schema(
        [
            pa.field("source_user_id", pa.int32(), nullable=False),
            pa.field("sex", pa.string()),
            pa.field("age", pa.int16()),
            pa.field("age_group", pa.string()),
            pa.field("occupation", pa.string()),
            pa.field("zip_code", pa.string()),
        ]
    ),
    source_user_id="MovieLens userId: a real person",
    sex="M or F, as the release records it",
    age="Age in years (ml-100k); null where the release gives a group",
    age_group="Age group (ml-1m's codes, decoded)",
    occupation="Occupation as the release names it (ml-1m's codes decoded)",
    zip_code="Zip code as the release records it",
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
USER_DESCRIPTIONS = described(
    USER_DESCRIPTIONS,
    description="The LLM-written description, continuing 'NAME is a AGE years old ...'",
    variant="Prompt variant: plain, preferences, film_interest or books",
    backend="Generation backend: transformers, openai, smollm2 or template",
    model="Model id",
    model_revision="Model revision or file hash",
    template_hash="sha256 of the prompt template",
    temperature="Sampling temperature",
    max_tokens="Token limit of the generation",
    attempts="Attempts until the description passed the checks",
    seconds="Generation time in seconds, as the backend recorded it",
    generation_key="Hash of everything that determines this row (resume key)",
)


def embedding_schema(id_column: str, dim: int) -> pa.Schema:
    """``item_embeddings.parquet`` / ``user_embeddings.parquet``: one unit vector per id."""
    schema = pa.schema(
        [
            pa.field(id_column, pa.int32(), nullable=False),
            pa.field("embedding", pa.list_(pa.float32(), dim), nullable=False),
            pa.field("text_hash", pa.string(), nullable=False),
        ]
    )
    return described(schema)


# file name -> schema (embeddings are per dimension, checked by embedding_schema)
TABLES: dict[str, pa.Schema] = {
    "items.parquet": MOVIE_ITEMS,
    "ratings.parquet": RATINGS,
    "users.parquet": USERS,
    "user_descriptions.parquet": USER_DESCRIPTIONS,
    "user_ratings.parquet": USER_RATINGS,
    "source_users.parquet": SOURCE_USERS,
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
BOOK_ITEMS = described(
    BOOK_ITEMS,
    book_id="Record index in the source's item file (books_data.csv or meta_Books.jsonl)",
    overview="Book description (the source's)",
    authors="Authors",
    publisher="Publisher",
    year="Publication year",
    genres="Categories, split as SUBER splits them",
    vote_average="Mean review score (1-5)",
    vote_count="Number of reviews",
    parent_asin="Amazon Reviews 2023 item id (null for the Kaggle files)",
    isbn="ISBN-13, else ISBN-10, where Amazon 2023 lists one",
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
BOOK_RATINGS = described(
    BOOK_RATINGS,
    source_user_id="Amazon reviewer id: a real person, not a users.user_id",
    rating="Review score, 1-5",
    timestamp="When the review was written (UTC); null where the source has none",
)

# -- a described corpus (suber_data/corpus: any domain a TOML file describes) ------------------------------
CORPUS_ITEMS = described(
    pa.schema(
        [
            pa.field("item_id", pa.int32(), nullable=False),
            pa.field("source_id", pa.string(), nullable=False),  # the source's own item id, verbatim
            pa.field("title", pa.string(), nullable=False),
            pa.field("overview", pa.string()),  # the described text columns, joined
            pa.field("genres", pa.list_(pa.string())),  # the categories, lower-case
            pa.field("year", pa.int16()),
            pa.field("vote_average", pa.float32()),
            pa.field("vote_count", pa.int32()),
            pa.field("popularity", pa.float32()),
        ]
    ),
    source_id="The item's id in the source file, as text",
    overview="The text columns the corpus description names, joined ('Column: value.'); null when none",
    genres="Categories, lower-case (the corpus description says which column and how they are written)",
    year="Year (null where the corpus has none)",
    vote_average="Mean rating at the source (its column, else the mean of ratings.parquet), on the ratings' scale",
    vote_count="Number of ratings (the source's column, else counted in ratings.parquet)",
    popularity="The source's popularity figure (null where it has none)",
)

CORPUS_RATINGS = described(
    pa.schema(
        [
            pa.field("source_user_id", pa.string(), nullable=False),
            pa.field("item_id", pa.int32(), nullable=False),
            pa.field("rating", pa.float32(), nullable=False),
            pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        ]
    ),
    source_user_id="The source's user id, as text: a real person, not a users.user_id",
    rating="The source's rating, on the scale recorded in the file's metadata (special values dropped)",
    timestamp="When the rating was given (UTC); null where the source has no time",
)

# Demographics of a described corpus' real people where it declares a users file ([users] in its TOML).
CORPUS_SOURCE_USERS = described(
    pa.schema(
        [
            pa.field("source_user_id", pa.string(), nullable=False),
            pa.field("sex", pa.string()),
            pa.field("age", pa.int16()),
            pa.field("age_group", pa.string()),
            pa.field("occupation", pa.string()),
            pa.field("facts", pa.list_(pa.string())),
        ]
    ),
    source_user_id="The source's user id, as text (as in ratings.parquet): a real person",
    sex="M or F where the users file records it (the corpus description maps its values), else null",
    age="Age in years where the users file records it, else null",
    age_group="Age group as the users file records it (e.g. '20-30'), else null",
    occupation="Occupation as the users file records it, else null",
    facts="Other facts the users file records, each 'field: value' (e.g. 'location: urban')",
)

# Ratings of items shown to each person at random ([random_ratings] in a corpus TOML): the unbiased truth an
# evaluation may score against. Kept apart: never in ratings.parquet, never read by users, descriptions,
# tastes, embeddings or any item statistic.
RANDOM_RATINGS = described(
    pa.schema(
        [
            pa.field("source_user_id", pa.string(), nullable=False),
            pa.field("item_id", pa.int32(), nullable=False),
            pa.field("rating", pa.float64(), nullable=False),
        ]
    ),
    source_user_id="The source's user id, as text (as in ratings.parquet; users.source_user_id for real users)",
    rating="The person's rating of an item drawn at random and shown to them, on the scale in the file's metadata "
    "(evaluation only: never shown to a persona, description, memory, policy or item statistic)",
)
TABLES["random_ratings.parquet"] = RANDOM_RATINGS  # one schema whatever the domain
