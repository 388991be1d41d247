"""Text recipes: which text of an item or user gets embedded, built column-wise with Arrow compute.

Movies (SUBER): the TMDB overview, the title when the overview is empty. Books (SUBER): the
description, the title when it is empty. Optional ``title_genres_overview``: "Title. Genres: a, b.
Overview" so that genre words weigh in. Users: the generated description; ``named_description``
prepends "NAME is a AGE years old" from ``users.parquet`` as SUBER's prompts read.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from suber_data.errors import InputError

ITEM_RECIPES = ("overview", "title_genres_overview")
USER_RECIPES = ("description", "named_description")


def _blank(column: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.fill_null(pc.equal(pc.utf8_trim_whitespace(column), ""), True)


def _need(table: pa.Table, columns: list[str], where: str, fix: str) -> None:
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise InputError(f"{where}: missing column(s) {missing} needed by the embedding text recipe; {fix}")


def _body_column(table: pa.Table, where: str) -> str:
    for name in ("overview", "description"):
        if name in table.column_names:
            return name
    raise InputError(
        f"{where}: no 'overview' (movies) or 'description' (books) column to embed; "
        "rebuild the items table with the current schema"
    )


def item_texts(table: pa.Table, recipe: str = "overview", where: str = "items.parquet") -> pa.ChunkedArray:
    """One text per row of an items table, following ``recipe``."""
    if recipe not in ITEM_RECIPES:
        raise InputError(f"unknown item text recipe '{recipe}'; choose one of {list(ITEM_RECIPES)}")
    body_name = _body_column(table, where)
    _need(table, ["title"], where, "the items table needs a title")
    title = pc.fill_null(table.column("title").cast(pa.string()), "")
    body = table.column(body_name).cast(pa.string())
    if recipe == "overview":
        return pc.if_else(_blank(body), title, body)
    body = pc.fill_null(body, "")
    parts = [pc.binary_join_element_wise(title, pa.scalar("."), "")]  # "Title."
    if "genres" in table.column_names:
        genres = pc.fill_null(pc.binary_join(table.column("genres"), ", "), "")
        labelled = pc.binary_join_element_wise(pa.scalar("Genres:"), genres, " ")
        parts.append(pc.if_else(pc.equal(genres, ""), "", pc.binary_join_element_wise(labelled, ".", "")))
    parts.append(body)
    joined = pc.binary_join_element_wise(*parts, " ")
    return pc.utf8_trim_whitespace(pc.replace_substring(joined, "  ", " "))


def user_texts(
    descriptions: pa.Table,
    recipe: str = "description",
    users: pa.Table | None = None,
    where: str = "user_descriptions.parquet",
) -> pa.ChunkedArray:
    """One text per row of a user-descriptions table, following ``recipe``."""
    if recipe not in USER_RECIPES:
        raise InputError(f"unknown user text recipe '{recipe}'; choose one of {list(USER_RECIPES)}")
    _need(descriptions, ["user_id", "description"], where, "rebuild the user descriptions")
    text = pc.fill_null(descriptions.column("description").cast(pa.string()), "")
    if recipe == "description":
        return text
    if users is None:
        raise InputError(f"recipe 'named_description' needs users.parquet beside {where}; build the users first")
    _need(users, ["user_id", "first_name", "age"], "users.parquet", "rebuild the users")
    positions = pc.index_in(descriptions.column("user_id"), value_set=users.column("user_id").combine_chunks())
    if positions.null_count:
        raise InputError(
            f"{where}: {positions.null_count} user_id(s) have no row in users.parquet; "
            "rebuild the users and the descriptions"
        )
    names = pc.take(users.column("first_name"), positions)
    ages = pc.take(users.column("age"), positions).cast(pa.string())
    return pc.binary_join_element_wise(names, "is a", ages, "years old", text, " ")
