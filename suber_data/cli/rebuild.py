"""``suber-data rebuild DIR``: build a dataset again from the settings its ``manifest.json`` recorded.

Every step records the settings its output depends on (suber_data/artifacts/steps.py), so the manifest alone
says how to build the folder again: the domain and release, which steps ran, and each step's settings, mapped
back onto the resources the build reads. Where a step ran (``--ray``, devices, embedding batch sizes) is not a
property of the dataset and is not restored.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from suber_data.artifacts import read_manifest, sha256_file
from suber_data.artifacts.manifest import MANIFEST
from suber_data.cli.run import BuildOptions
from suber_data.errors import SuberDataError
from suber_data.pipelines.resources import LLMResource, UsersResource

# --only a build had, from the deepest step the manifest holds (a build that wrote ratings had none).
ONLY_BY_STEP = [("item_embeddings", "embeddings"), ("user_descriptions", "descriptions"), ("users", "users")]


def options_from_manifest(
    folder: str | Path, data_dir: str | None = None, ray: str | None = None
) -> tuple[BuildOptions, dict]:
    """The build that made ``folder``, writing into ``data_dir/<domain>/<release>`` (default: ``folder`` itself),
    and the manifest it was read from."""
    folder = Path(folder)
    where = str(folder / MANIFEST)
    manifest = read_manifest(folder)
    if not manifest:
        raise SuberDataError(f"{folder}: no {MANIFEST} here; pass a dataset folder that `suber-data build` wrote")
    domain, release, steps = manifest.get("domain"), manifest.get("release"), manifest.get("steps") or {}
    if not domain or not release or "items" not in steps:
        raise SuberDataError(
            f"{where}: no domain, release or items step recorded; this folder cannot be rebuilt from its manifest, "
            "build it with `suber-data build movies|books|corpus`"
        )
    if data_dir is None:  # in place: the folder must sit where a build writes it, <data-dir>/<domain>/<release>
        resolved = folder.resolve()
        if resolved.name != release or resolved.parent.name != domain:
            raise SuberDataError(
                f"{folder}: a {domain}/{release} dataset lives in <data-dir>/{domain}/{release} and this folder "
                f"does not; pass --data-dir D to rebuild it into D/{domain}/{release}"
            )
        data_dir = str(resolved.parent.parent)

    def settings(step: str, *needed: str) -> dict:
        found = (steps.get(step) or {}).get("settings") or {}
        for key in needed:
            if key not in found:
                raise SuberDataError(
                    f"{where}: steps.{step}.settings has no '{key}', so the step cannot be built the same way again; "
                    "build the folder with `suber-data build`"
                )
        return found

    recorded: dict[str, dict] = {}
    options = BuildOptions(domain=domain, release=release, data_dir=data_dir, ray=ray)
    items = settings("items")
    # the items step's own settings say which corpus options it had: TMDB (movies), a filter profile (books),
    # or the corpus description it was built from (a described corpus, added to the graph here)
    if "config" in items:
        options.corpus = items["config"]
        use_corpus(items["config"], domain)
    options.tmdb = bool(items.get("tmdb", True))
    if "tmdb_language" in items:
        recorded["tmdb"] = {"language": items["tmdb_language"]}
    if "profile" in items:
        recorded["books"] = {"profile": items["profile"]}
    if "users" in steps:
        users = {k: v for k, v in settings("users", "count").items() if k in UsersResource.model_fields}
        options.users, options.suber_lists = users.pop("count"), users.pop("suber_lists", None)
        recorded["users"] = users
    if "user_descriptions" in steps:
        llm = {k: v for k, v in settings("user_descriptions", "backend").items() if k in LLMResource.model_fields}
        options.llm, model = llm.pop("backend"), llm.pop("model", None)
        options.model = None if model == _default_model(options.llm) else model
        recorded["llm"] = llm
    if "item_embeddings" in steps:
        options.embedding_model = settings("item_embeddings", "model")["model"]
        recorded["embedder"] = {"recipe": settings("item_embeddings").get("recipe", "overview")}
    if "ratings" not in steps:
        options.only = next((only for step, only in ONLY_BY_STEP if step in steps), "items")
    options.recorded = recorded
    # an error in a value read here names the manifest (validate.shown)
    options.origin = {f: where for f in ("release", "users", "suber_lists", "llm", "model", "embedding_model")}
    return options, manifest


def use_corpus(config: str | Path, domain: str | None = None) -> str:
    """Read a corpus description and put its domain in the graph; its name (checked against ``domain``)."""
    from suber_data.corpus.spec import load_spec
    from suber_data.pipelines import corpus, definitions

    spec = load_spec(config)
    if domain is not None and spec.name != domain:
        raise SuberDataError(f"{config}: corpus.name is {spec.name!r}, but the dataset is a {domain!r} dataset")
    definitions.add_domain(corpus.domain(spec))
    return spec.name


def _default_model(backend: str) -> str | None:
    """The model a backend picks when given none (``template``, SmolLM2's id): a recorded model equal to it is
    left unset, as the first build had it."""
    from suber_data.descriptions.backends import describe

    try:
        return describe(backend).model
    except SuberDataError:  # openai has no default; an unknown backend is reported by check_options
        return None


def compare(before: dict, source: str | Path, target: str | Path) -> dict:
    """How the rebuilt ``target`` compares with the manifest ``before`` of ``source``: steps whose fingerprint
    (a hash of every input and setting) is the recorded one; tables whose bytes are (by sha256), or whose rows
    are equal but for a measured time (the descriptions' ``seconds``)."""
    after = read_manifest(target)
    old_steps, new_steps = before.get("steps", {}), after.get("steps", {})
    same_steps = [s for s in old_steps if new_steps.get(s, {}).get("fingerprint") == old_steps[s].get("fingerprint")]
    tables: dict[str, list[str]] = {"tables_identical": [], "tables_equal_but_timings": [], "tables_changed": []}
    for name, entry in before.get("tables", {}).items():
        if after.get("tables", {}).get(name, {}).get("sha256") == entry.get("sha256"):
            tables["tables_identical"].append(name)
        elif _equal_but(MEASURED.get(name), Path(source) / name, Path(target) / name, entry.get("sha256")):
            tables["tables_equal_but_timings"].append(name)
        else:
            tables["tables_changed"].append(name)
    return {"steps_as_recorded": same_steps, "steps_changed": [s for s in old_steps if s not in same_steps], **tables}


# Columns that measure the run (how long a generation took), not the data: they differ between two runs.
MEASURED = {"user_descriptions.parquet": ["seconds"]}


def _equal_but(columns: list[str] | None, old: Path, new: Path, recorded_sha256: str | None) -> bool:
    """The two tables hold the same rows once ``columns`` are left out (``old`` still as recorded)."""
    if not columns or not old.exists() or not new.exists() or sha256_file(old) != recorded_sha256:
        return False
    first, second = (pq.read_table(path) for path in (old, new))
    keep = [c for c in first.column_names if c not in columns]
    return first.schema == second.schema and first.select(keep).equals(second.select(keep))
