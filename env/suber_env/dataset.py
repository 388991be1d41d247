"""Load a dataset folder (the suber-data artifact contract) into arrays the environment uses.

``load_dataset`` runs three phases: read the manifest, read and validate each file (``_read``), and
assemble the ``Dataset``. Users, descriptions and embeddings are optional; a dataset may lack the
descriptions of some users (see ``Dataset.described_users``)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from . import _read
from ._read import DatasetError
from ._schema import COLUMNS_BY_FAMILY, FAMILY_TERMS
from .scales import Scale, SourceScale, get_scale, source_to_rater

__all__ = ["Dataset", "DatasetError", "load_dataset"]

_FILES = {
    "users": "users.parquet",
    "descriptions": "user_descriptions.parquet",
    "item_embeddings": "item_embeddings.parquet",
}


@dataclass
class Dataset:
    """Arrays and texts of one dataset folder, indexed by the action index (``item_id``) and user row."""

    path: Path
    domain: str
    manifest: dict
    items: pa.Table
    n_items: int
    titles: list[str]
    years: np.ndarray  # int32, 0 where unknown
    overviews: list[str]
    vote: np.ndarray  # float32 on the vote's own range (terms.vote), 0 where unknown: see vote_known
    genre_vocab: list[str]
    genres: np.ndarray  # (n_items, G) uint8 multi-hot
    genre_lists: list[list[str]]
    people: np.ndarray  # (n_items, P) int32 codes of actors (movies) or authors (books), -1 padded
    people_text: list[list[str]]  # "Name (M)" for movies, "Name" for books
    director: np.ndarray  # (n_items,) int32 code, -1 unknown
    users: pa.Table | None = None
    n_users: int = 0
    user_ids: np.ndarray | None = None
    first_names: list[str] = field(default_factory=list)
    sex: np.ndarray | None = None  # uint8: 0 = M, 1 = F, 2 = unknown (a real user whose source records none)
    age: np.ndarray | None = None  # -1: unknown
    real: np.ndarray | None = None  # bool per user: one real user of the release (profile "real")
    liked: np.ndarray | None = None  # (n_users, G) uint8 over genre_vocab
    disliked: np.ndarray | None = None
    behaviour: np.ndarray | None = None  # (n_users, 5) bool over _schema.BEHAVIOURS; None: the table has none
    descriptions: list[str | None] | None = None  # None for a user the descriptions step left out
    described_users: np.ndarray | None = None  # rows of the users that have a description (int64)
    item_embeddings: np.ndarray | None = None  # (n_items, d) float32, unit norm
    missing: dict[str, str] = field(default_factory=dict)  # file -> why it is absent
    source_scale: SourceScale | None = None  # the scale ratings.parquet records
    # Real users' history (user_ratings.parquet, part "history" only), CSR over user rows, oldest first, on the
    # source scale. The held-out part is not loaded: nothing built on a Dataset can see it.
    history_offsets: np.ndarray | None = None
    history_items: np.ndarray | None = None
    history_ratings: np.ndarray | None = None
    # What the domain is called and how it is rated, from the manifest (terms): nouns, prompt family, scale
    terms: dict = field(default_factory=dict)
    vote_known: np.ndarray | None = None  # bool per item: its average vote is known (set by load_dataset)
    _rating_stats: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    @property
    def family(self) -> str:
        """The rater prompt family (templates/<family>.toml): movies, books or items."""
        return self.terms["prompts"]

    @property
    def rater_scale(self) -> str:
        """The scale a rater answers on when none is named (SUBER: 0-9 for movies, 1-5 for books)."""
        return self.terms["rater_scale"]

    @property
    def nouns(self) -> dict:
        return self.terms["nouns"]

    @property
    def vote_scale(self) -> SourceScale:
        """The range the items' average votes are on (terms.vote: TMDB's 0-10, Goodreads' 1-5, a corpus' own
        rating scale), continuous."""
        vote = self.terms["vote"]
        return SourceScale("vote", float(vote["min"]), float(vote["max"]), 0.0)

    @property
    def vote_fill(self) -> float:
        """The vote assumed where an item has none (terms.vote.fill, else the middle of the range)."""
        vote = self.terms["vote"]
        return float(vote.get("fill", (vote["min"] + vote["max"]) / 2))

    def vote_filled(self) -> np.ndarray:
        """Each item's average vote on its own range (float64), ``vote_fill`` where unknown."""
        return np.where(self.vote_known, self.vote.astype(np.float64), self.vote_fill)

    def vote_on(self, scale: Scale) -> np.ndarray:
        """Each item's average vote as the rater's ``scale`` would write it (the one linear map of
        ``scales.source_to_rater``, from the vote's range onto the scale's), ``vote_fill`` where unknown."""
        return source_to_rater(self.vote_filled(), self.vote_scale, scale)

    @property
    def like_threshold(self) -> float | None:
        """The lowest source rating that counts as liking, as the builder recorded it (the ratings step's
        ``like_threshold``, or a real population's); the source scale's own rule (three quarters up) for a
        dataset built before either was recorded. None without a source scale."""
        steps = self.manifest.get("steps") or {}
        recorded = (steps.get("ratings") or {}).get("like_threshold")
        if recorded is None:
            recorded = ((steps.get("users") or {}).get("real") or {}).get("like_threshold")
        if recorded is not None:
            return float(recorded)
        return None if self.source_scale is None else self.source_scale.like_threshold

    def history(self, user: int) -> tuple[np.ndarray, np.ndarray]:
        """User row ``user``'s history (items, ratings on the source scale), oldest first; empty for synthetic users."""
        if self.history_offsets is None:
            return np.zeros(0, np.int64), np.zeros(0)
        a, b = self.history_offsets[user], self.history_offsets[user + 1]
        return self.history_items[a:b], self.history_ratings[a:b]

    def user_name(self, user: int) -> str:
        """How prompts name the user: the first name, or "User <source id>" for a real user."""
        if self.real is not None and self.real[user]:
            return f"{self.first_names[user]} {self.users['last_name'][user].as_py()}"
        return self.first_names[user]

    def __repr__(self) -> str:  # a summary: the arrays and tables would print hundreds of KB
        users = f"{self.n_users} users" if self.users is not None else "no users"
        if self.described_users is not None:
            users += f" ({len(self.described_users)} described)"
        emb = f", item embeddings {self.item_embeddings.shape[1]}-d" if self.item_embeddings is not None else ""
        return (
            f"Dataset({str(self.path)!r}, domain={self.domain!r}, {self.n_items} items, {users}, "
            f"{len(self.genre_vocab)} genres{emb})"
        )

    def sql(self, query: str):
        """Run DuckDB SQL over the folder's Parquet files, each a view named after its file (``items``,
        ``users``, ``user_descriptions``, ``ratings``, ``item_embeddings``...); returns an Arrow table."""
        import duckdb

        con = duckdb.connect()
        try:
            for f in sorted(self.path.glob("*.parquet")):
                con.execute(f'CREATE VIEW "{f.stem}" AS SELECT * FROM {_parquet_sql(f)}')
            rel = con.sql(query)
            fetch = getattr(rel, "to_arrow_table", None) or rel.arrow  # duckdb 2.x / 1.x
            return fetch()
        finally:
            con.close()

    def item_rating_stats(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(count, sum) of the real ratings per item (ratings.parquet), None when the folder has none. In a
        real-user population the population's own ratings count through their history only (ratings.parquet
        holds their held-out ratings too, which nothing built on a Dataset may see)."""
        if self._rating_stats is None and (self.path / "ratings.parquet").exists():
            real = [] if self.real is None else self.users["source_user_id"].filter(pa.array(self.real)).to_pylist()
            import duckdb

            con = duckdb.connect()
            try:
                con.register("population", pa.table({"source_user_id": pa.array(real, pa.string())}))
                ratings = _parquet_sql(self.path / "ratings.parquet")
                t = con.sql(
                    f"SELECT item_id, count(*) AS n, sum(rating) AS s FROM {ratings} r WHERE NOT EXISTS "
                    "(SELECT 1 FROM population p WHERE p.source_user_id = CAST(r.source_user_id AS VARCHAR)) "
                    "GROUP BY item_id"
                ).to_arrow_table()
            finally:
                con.close()
            ids = t.column("item_id").to_numpy().astype(np.int64)
            keep = (ids >= 0) & (ids < self.n_items)
            n, s = np.zeros(self.n_items), np.zeros(self.n_items)
            n[ids[keep]] = t.column("n").to_numpy()[keep]
            s[ids[keep]] = t.column("s").to_numpy()[keep]
            if self.history_items is not None:
                n += np.bincount(self.history_items, minlength=self.n_items)
                s += np.bincount(self.history_items, self.history_ratings, self.n_items)
            self._rating_stats = (n, s)
        return self._rating_stats

    def require(self, what: str, feature: str) -> None:
        """Raise a clear error when ``feature`` needs a part of the dataset that is absent."""
        if getattr(self, what) is None:
            file = _FILES[what]
            raise DatasetError(
                f"{self.path / file}: {feature} needs {file}, which this dataset does not have "
                f"({self.missing.get(file, 'absent')}); build it (suber-data build ...) or choose another option"
            )

    def description(self, user: int, feature: str) -> str:
        """User row ``user``'s description; a clear error when the dataset has none for that user."""
        self.require("descriptions", feature)
        text = self.descriptions[user]
        if text is None:
            raise DatasetError(
                f"{self.path / 'user_descriptions.parquet'}: field 'description' is absent for user_id "
                f"{int(self.user_ids[user])} (the descriptions step left the user out, see manifest.json "
                f"steps.user_descriptions.failures); {feature} can rate only Dataset.described_users"
            )
        return text


def _parquet_sql(path: Path) -> str:
    """``read_parquet('<path>')`` with the path's quotes doubled (a table function takes no bound parameter)."""
    return "read_parquet('" + str(path).replace("'", "''") + "')"


def load_dataset(path: str | Path, domain: str | None = None, verify: bool = True) -> Dataset:
    """Read a dataset folder through its manifest and schema.

    ``domain`` (movies, books, or a described corpus' name) is read from the manifest by default; asking for one
    checks it. What the domain is called and how it is rated (``Dataset.terms``) comes from the manifest's
    ``terms``, never from the name. Users, descriptions and embeddings are optional;
    :meth:`Dataset.require` names what is missing when a feature needs it. Users without a description
    are kept (the oracle rates them); a ``UserWarning`` says how many, and ``Dataset.described_users``
    lists the others, the only users raters that read descriptions are offered.
    """
    root = Path(path)
    if not root.is_dir():
        raise DatasetError(f"{root}: not a folder; pass the dataset folder (for example data/movies/sample)")
    manifest = _read.read_manifest(root, verify)
    built_as = manifest.get("domain") or root.parent.name
    if domain is not None and domain != built_as:
        raise DatasetError(
            f"{root / 'manifest.json'}: field 'domain' is {built_as!r}, but a {domain} dataset was asked for; "
            f"open it as {built_as} ({_env_id(built_as)}) or pass a {domain} folder"
        )
    domain, terms = built_as, _terms(root, manifest, built_as)
    items = _read.read_items(root, COLUMNS_BY_FAMILY[terms["prompts"]])
    vocab, genre_lists, genres = _read.item_genres(items)
    people, people_text, director = _read.item_people(items)
    ds = Dataset(
        path=root,
        domain=domain,
        manifest=manifest,
        items=items,
        n_items=items.num_rows,
        genre_vocab=vocab,
        genres=genres,
        genre_lists=genre_lists,
        people=people,
        people_text=people_text,
        director=director,
        terms=terms,
        **_read.item_scalars(items),
    )
    present = {part: (root / file).exists() for part, file in _FILES.items()}
    ds.missing = {file: f"no {file} in the folder" for part, file in _FILES.items() if not present[part]}
    if present["users"]:
        for name, value in _read.read_users(root, vocab).items():
            setattr(ds, name, value)
        if present["descriptions"]:
            _attach_descriptions(ds, _read.read_descriptions(root, ds.user_ids))
        if (root / "user_ratings.parquet").exists():
            ds.history_offsets, ds.history_items, ds.history_ratings = _read.read_history(root, ds.user_ids)
    else:
        ds.missing.pop(_FILES["descriptions"], None)  # descriptions without users are never read
    if present["item_embeddings"]:
        ds.item_embeddings = _read.read_item_embeddings(root, ds.n_items)
    scale = _read.read_source_scale(root, manifest)
    # a continuous source scale is binned as finely as the dataset's rater answers (SourceScale.bins)
    ds.source_scale = SourceScale.from_record(scale, bins=_rater_labels(terms)) if scale else None
    if ds.history_offsets is not None:
        _votes_from_history(ds, terms.get("vote", {}))
    ds.vote_known = _vote_known(ds.items, ds.vote, ds.vote_scale, _read.item_vote_counts(root))
    return ds


def _votes_from_history(ds: Dataset, vote: dict) -> None:
    """In a real-user population, an item vote or vote count the builder computed from ratings.parquet (books;
    a corpus without such a column: the manifest's terms.vote ``source`` / ``count_source``) is computed again
    without the population's held-out ratings: the prompt, the oracle and the policies read these, and nothing
    held out may reach them."""
    redo = [c for c, key in (("vote_average", "source"), ("vote_count", "count_source")) if vote.get(key) == "ratings"]
    stats = ds.item_rating_stats() if redo else None
    if stats is None:
        return
    n, s = stats
    mean = np.where(n > 0, s / np.maximum(n, 1), 0.0)
    if "vote_average" in redo:
        ds.vote = mean.astype(np.float32)
    values = {"vote_average": pa.array(mean, pa.float32(), mask=n == 0), "vote_count": pa.array(n.astype(np.int32))}
    for name in redo:
        if name in ds.items.column_names:
            ds.items = ds.items.set_column(ds.items.schema.get_field_index(name), name, values[name])


def _vote_known(items: pa.Table, vote: np.ndarray, vote_scale: SourceScale, counts: np.ndarray | None) -> np.ndarray:
    """Items whose average vote is known: not null, inside the vote's range, and not TMDB's 0.0 of an item nobody
    voted on (vote_count 0). A rated item of a signed corpus whose ratings average exactly 0 is known."""
    col = items["vote_average"] if "vote_average" in items.column_names else None
    if col is None:
        return np.zeros(items.num_rows, bool)
    known = ~col.is_null().to_numpy(zero_copy_only=False)
    known &= (vote >= vote_scale.min) & (vote <= vote_scale.max)
    if counts is not None:
        known &= ~((vote == 0) & (counts == 0))
    return known


def _rater_labels(terms: dict) -> int:
    try:
        return get_scale(terms["rater_scale"]).n
    except (KeyError, ValueError):
        return 10


def _env_id(domain: str) -> str:
    """The registered environment of ``domain`` (suber_env/Movies-v0, ...), else the one for any domain."""
    import gymnasium as gym

    own = f"suber_env/{domain.capitalize()}-v0"
    return own if own in gym.registry else "suber_env/Items-v0"


def _terms(root: Path, manifest: dict, domain: str) -> dict:
    """The manifest's terms; the built-in family's for a dataset built before manifests recorded them."""
    terms = manifest.get("terms") or FAMILY_TERMS.get(domain)
    if not terms or terms.get("prompts") not in COLUMNS_BY_FAMILY:
        raise DatasetError(
            f"{root / 'manifest.json'}: field 'terms' (nouns, prompt family, rater scale) is missing or names no "
            f"known prompt family ({', '.join(COLUMNS_BY_FAMILY)}); rebuild the dataset with suber-data"
        )
    return terms


def _attach_descriptions(ds: Dataset, descriptions: list[str | None]) -> None:
    ds.descriptions = descriptions
    ds.described_users = np.array([i for i, d in enumerate(descriptions) if d is not None], np.int64)
    left_out = ds.n_users - len(ds.described_users)
    if left_out:
        warnings.warn(
            f"{ds.path / 'user_descriptions.parquet'}: {left_out} of {ds.n_users} users have no description "
            "(see manifest.json steps.user_descriptions.failures); raters that read descriptions are offered "
            f"only the {len(ds.described_users)} described users (Dataset.described_users)",
            stacklevel=3,
        )
