"""The dataset card: ``README.md`` in the dataset folder, written from the manifest and the Parquet files.

Its YAML header names one configuration per table (``configs:``), so ``datasets.load_dataset(folder, "users")``
reads exactly ``users.parquet`` and nothing else in the folder (six tables in one split would not load); the
body says what each column means (the files' own field descriptions), shows the steps' plots (PNG files in the
folder, linked by name), how the data was built, with which models, from which sources, under which terms, and
whom to cite. It holds no timestamps, so the same inputs give the same card, byte for byte, from the CLI and from
Dagster. It is a step like the others: rewritten only when what it shows changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import yaml

from suber_data.artifacts.io import atomic_path
from suber_data.artifacts.manifest import fingerprint, read_manifest
from suber_data.artifacts.steps import StepRecord, StepResult, run_step
from suber_data.publish.terms import SUBER_CITATION, terms_for, tool_citation

CARD = "README.md"
STEP = "card"
CARD_VERSION = 1
# Tables in the order a reader meets them; any other table of the manifest follows, by name.
TABLE_ORDER = [
    "items.parquet",
    "ratings.parquet",
    "users.parquet",
    "user_descriptions.parquet",
    "item_embeddings.parquet",
    "user_embeddings.parquet",
]
_SIZES = [(10**3, "n<1K"), (10**4, "1K<n<10K"), (10**5, "10K<n<100K"), (10**6, "100K<n<1M"), (10**7, "1M<n<10M")]
_SIZES += [(10**8, "10M<n<100M"), (10**9, "100M<n<1B"), (10**10, "1B<n<10B")]  # the Hub's size_categories


def card_tables(dataset_dir: Path, manifest: dict[str, Any]) -> list[str]:
    """The manifest's tables present in the folder, in reading order: each becomes a configuration."""
    names = [n for n in manifest.get("tables", {}) if (dataset_dir / n).is_file()]
    return sorted(names, key=lambda n: (TABLE_ORDER.index(n) if n in TABLE_ORDER else len(TABLE_ORDER), n))


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "), default=str)
    return text.replace("|", "\\|").replace("\n", " ")


def _header(manifest: dict[str, Any], tables: list[str], domain: str) -> str:
    rows = max((manifest["tables"][n].get("rows", 0) for n in tables), default=0)
    configs = []
    for i, name in enumerate(tables):
        config = {"config_name": Path(name).stem, "data_files": [{"split": "train", "path": name}]}
        configs.append({**config, "default": True} if i == 0 else config)
    meta = {
        "pretty_name": f"SUBER {domain} dataset ({manifest.get('release', '?')})",
        "language": ["en"],
        "license": "other",
        "license_name": "source-terms",
        "tags": ["recommender-systems", "synthetic-users", "suber", domain],
        "size_categories": [next((label for limit, label in _SIZES if rows < limit), "10B<n<100B")],
        "configs": configs,
    }
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n"


def _tables_section(dataset_dir: Path, manifest: dict[str, Any], tables: list[str]) -> list[str]:
    lines = ["## Tables", ""]
    for name in tables:
        entry = manifest["tables"][name]
        lines += [f"### `{Path(name).stem}`", ""]
        lines += [f"`{name}`: {entry.get('rows', 0):,} rows, sha256 `{entry.get('sha256', '?')}`.", ""]
        lines += ["| column | type | description |", "| --- | --- | --- |"]
        for field in pq.read_schema(dataset_dir / name):
            about = (field.metadata or {}).get(b"description", b"").decode()
            lines.append(f"| `{field.name}` | `{_cell(str(field.type))}` | {_cell(about)} |")
        lines.append("")
    return lines


def random_exposure_text(manifest: dict[str, Any]) -> str:
    """What the random-exposure ratings are and how they are kept apart ("" when the dataset has none)."""
    step = manifest.get("steps", {}).get("random_ratings")
    if not step:
        return ""
    c = step.get("counts", {})
    return (
        f"`random_ratings.parquet` holds {c.get('ratings', 0):,} ratings by {c.get('users', 0):,} people of "
        f"{c.get('items', 0):,} items that were drawn at random and shown to them (mean {c.get('mean_rating')}), "
        "an unbiased sample of how each person rates the catalogue, where `ratings.parquet` holds the items people "
        "chose to rate. It is kept apart for evaluation: never merged into `ratings.parquet`, and read by no user, "
        f"description, taste, embedding or item statistic. {c.get('in_ratings_too', 0):,} (person, item) pairs are "
        "in both files (both kept). `source_user_id` is the same person in both files and, for real users, "
        "`users.source_user_id`."
    )


def _random_section(manifest: dict[str, Any]) -> list[str]:
    text = random_exposure_text(manifest)
    return ["## Ratings of randomly shown items", "", text, ""] if text else []


def _plots_section(dataset_dir: Path, manifest: dict[str, Any]) -> list[str]:
    """The PNG plots the steps recorded (``plots`` in their manifest sections) that are in the folder, shown inline."""
    lines = []
    for step, section in manifest.get("steps", {}).items():
        files = [(n, f) for n, f in (section.get("plots") or {}).items() if (dataset_dir / f).is_file()]
        if files:
            lines += [f"### {step}", ""]
            for name, file in files:  # a paragraph each: images on one line would share it, shrunk
                lines += [f"![{step}: {name}]({file})", ""]
    if not lines:
        return []
    return ["## Plots", "", "Drawn by the build from the tables above; the PNG files are in this folder.", "", *lines]


def _build_section(manifest: dict[str, Any]) -> list[str]:
    # Settings, not counts: counts hold timings and cache hits, which would make two builds' cards differ.
    lines = ["## How it was built", "", "Each step's settings (`manifest.json` has its counts too):", ""]
    lines += ["| step | settings |", "| --- | --- |"]
    for step, section in manifest.get("steps", {}).items():
        if step not in (STEP, "catalog"):
            lines.append(f"| {step} | {_cell(section.get('settings') or {})} |")
    models = {}
    for section in manifest.get("steps", {}).values():
        for role, model in (section.get("models") or {}).items():
            backend = model.get("backend") or model.get("library") or ""
            models[(role, model.get("id"), model.get("revision"))] = backend
    lines += ["", "### Models", ""]
    if models:
        lines += ["| role | model | revision | run with |", "| --- | --- | --- | --- |"]
        lines += [f"| {r} | `{_cell(i)}` | `{_cell(v)}` | {_cell(b)} |" for (r, i, v), b in sorted(models.items())]
        lines += ["", "Each model's own licence applies to it; see its model card."]
    else:
        lines.append("No model was used.")
    return [*lines, ""]


def _sources_section(manifest: dict[str, Any]) -> list[str]:
    lines = ["## Sources", "", "| source | from | size | checksum |", "| --- | --- | --- | --- |"]
    for key, entry in manifest.get("sources", {}).items():
        origin = entry.get("url") or f"package {entry.get('package', '?')} {entry.get('version', '')}".strip()
        checksum = f"sha256 `{entry['sha256']}`" if entry.get("sha256") else ""
        checksum = checksum or (f"md5 `{entry['md5']}`" if entry.get("md5") else "")
        lines.append(f"| {_cell(key)} | {_cell(origin)} | {_cell(entry.get('size') or '')} | {checksum} |")
    lines += ["", "## Licences and attribution", ""]
    lines += [
        "This dataset mixes sources with different terms; each applies to the columns that come from it, and "
        "whoever uses or redistributes the dataset takes on all of them. suber-data (MIT-licensed software) "
        "generated the synthetic users, their descriptions and the embeddings from these sources, so the "
        "sources' terms carry over to them too.",
        "",
    ]
    for terms in terms_for(manifest):
        licence = f"[{terms.licence}]({terms.link})" if terms.link else terms.licence
        lines += [f"### {terms.name}", "", f"Licence: {licence}.", "", terms.obligations, ""]
    about = manifest.get("about") or {}  # a described corpus: the terms its description states
    if about.get("license") or about.get("citation"):
        lines += [f"### {about.get('title') or manifest.get('domain', '?')} (the corpus description's own)", ""]
        lines += [f"Licence: {about.get('license') or 'not stated'}.", ""]
        lines += [f"Cite: {about['citation']}", ""] if about.get("citation") else []
        lines += [f"Homepage: {about['homepage']}", ""] if about.get("homepage") else []
    return lines


def _citation_section(manifest: dict[str, Any]) -> list[str]:
    version = manifest.get("tool", {}).get("version", "?")
    entries = [SUBER_CITATION, tool_citation(version), *(t.cite for t in terms_for(manifest) if t.cite)]
    intro = "SUBER, this tool, and the sources that ask to be cited:"
    return ["## Citation", "", intro, "", "```bibtex", *"\n\n".join(entries).splitlines(), "```", ""]


def render_card(dataset_dir: str | Path) -> str:
    """The card's text for the dataset in ``dataset_dir`` as it is now."""
    dataset_dir = Path(dataset_dir)
    manifest = read_manifest(dataset_dir)
    tables = card_tables(dataset_dir, manifest)
    domain = manifest.get("domain", "?")
    release = manifest.get("release", "?")
    tool = manifest.get("tool", {})
    first = Path(tables[0]).stem if tables else "items"
    lines = [
        _header(manifest, tables, domain),
        f"# SUBER {domain} dataset: {release}",
        "",
        f"Items, real ratings, synthetic users, their LLM-written descriptions and text embeddings for simulating "
        f"recommender-system users with an LLM, after SUBER (Corecco et al., 2024). Built by "
        f"{tool.get('name', 'suber-data')} {tool.get('version', '?')} (artifact schema "
        f"v{manifest.get('schema_version', '?')}) from the `{release}` release; `manifest.json` records every "
        "source, setting, seed, model and checksum.",
        "",
        "## Load it",
        "",
        "Each table is a configuration with one `train` split:",
        "",
        "```python",
        "from datasets import load_dataset",
        f'{first} = load_dataset("<this repository or folder>", "{first}", split="train")',
        "```",
        "",
        "`catalog.duckdb` holds the same tables for DuckDB (embeddings as `FLOAT[d]` arrays); the `suber_env` package "
        "opens the folder as a recommender environment (`suber_env.load_dataset(folder)`).",
        "",
        *_tables_section(dataset_dir, manifest, tables),
        *_random_section(manifest),
        *_plots_section(dataset_dir, manifest),
        *_build_section(manifest),
        *_sources_section(manifest),
        *_citation_section(manifest),
    ]
    return "\n".join(lines)


def build_dataset_card(dataset_dir: str | Path) -> StepResult:
    """Write ``README.md`` when its text would change (or it is missing); record the step in the manifest."""
    dataset_dir = Path(dataset_dir)
    text = render_card(dataset_dir)
    tables = card_tables(dataset_dir, read_manifest(dataset_dir))

    def write() -> StepRecord:
        with atomic_path(dataset_dir / CARD) as tmp:
            tmp.write_text(text, encoding="utf-8")
        return StepRecord(counts={"configs": len(tables)})

    return run_step(dataset_dir, STEP, fingerprint(STEP, CARD_VERSION, text), write, also_needs=[CARD])
