"""``croissant.json``: Croissant 1.1 metadata of a built dataset (https://mlcommons.org/croissant/).

One ``FileObject`` per table (with its sha256), one ``RecordSet`` per table with a ``Field`` per column (type,
description from the Parquet field metadata), the sources' licences and citations, and the responsible-AI
fields (``rai:``) that say how the synthetic users were made, which models wrote what, and the known biases and
limits. Written from the manifest and the files only, without timestamps, so the same folder gives the same
bytes; mlcroissant validates and loads it in the tests (it is not needed to write it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from suber_data import __version__
from suber_data.artifacts.io import atomic_path
from suber_data.artifacts.manifest import read_manifest
from suber_data.publish.card import card_tables, random_exposure_text
from suber_data.publish.terms import SUBER_CITATION, terms_for

CROISSANT = "croissant.json"
CONFORMS_TO = "http://mlcommons.org/croissant/1.1"
CONTEXT = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "arrayShape": "cr:arrayShape",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "containedIn": "cr:containedIn",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "equivalentProperty": "cr:equivalentProperty",
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isArray": "cr:isArray",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}


def _data_type(t: pa.DataType) -> tuple[str, str | None] | None:
    """(Croissant data type, array shape or None) of an Arrow type; None for a type left out (structs)."""
    if pa.types.is_fixed_size_list(t):
        inner = _data_type(t.value_type)
        return (inner[0], str(t.list_size)) if inner and inner[1] is None else None
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = _data_type(t.value_type)
        return (inner[0], "-1") if inner and inner[1] is None else None
    if pa.types.is_boolean(t):
        return "sc:Boolean", None
    if pa.types.is_integer(t):
        return "sc:Integer", None
    if pa.types.is_floating(t):
        return "sc:Float", None
    if pa.types.is_timestamp(t):
        return "sc:DateTime", None
    if pa.types.is_date(t):
        return "sc:Date", None
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "sc:Text", None
    return None


def record_set(dataset_dir: Path, table: str) -> tuple[dict, dict, list[str]]:
    """The FileObject and RecordSet of one table, and the columns left out (types Croissant cannot extract)."""
    name = table.removesuffix(".parquet")
    file = {"@type": "cr:FileObject", "@id": table, "name": table, "contentUrl": table,
            "encodingFormat": "application/x-parquet"}  # fmt: skip
    fields, skipped = [], []
    for f in pq.read_schema(dataset_dir / table):
        kind = _data_type(f.type)
        if kind is None:
            skipped.append(f.name)
            continue
        field: dict[str, Any] = {"@type": "cr:Field", "@id": f"{name}/{f.name}", "name": f.name, "dataType": kind[0]}
        about = (f.metadata or {}).get(b"description", b"").decode()
        if about:
            field["description"] = about
        if kind[1] is not None:
            field |= {"isArray": True, "arrayShape": kind[1]}
        field["source"] = {"fileObject": {"@id": table}, "extract": {"column": f.name}}
        fields.append(field)
    about = f"{table}: one row per {name.replace('_', ' ')} entry"
    if skipped:
        about += f"; nested columns not described here: {', '.join(skipped)}"
    return file, {"@type": "cr:RecordSet", "@id": name, "name": name, "description": about, "field": fields}, skipped


def _models(manifest: dict) -> list[str]:
    """Which model wrote or embedded what, as the steps recorded them."""
    out = []
    for step, section in manifest.get("steps", {}).items():
        for role, model in (section.get("models") or {}).items():
            if isinstance(model, dict):
                named = ", ".join(f"{k} {v}" for k, v in model.items() if v is not None)
                out.append(f"{step} ({role}): {named}")
        settings = section.get("settings") or {}
        if step.endswith("_embeddings") and "model" in settings and not section.get("models"):
            out.append(f"{step}: {settings['model']}")
    return out


def _population(manifest: dict) -> str:
    users = manifest.get("steps", {}).get("users")
    if not users:
        return "No user population is part of this dataset (only the real ratings the source publishes)."
    settings, tastes = users.get("settings") or {}, users.get("tastes") or {}
    if settings.get("profile") == "real":
        return (
            f"{users['counts'].get('users')} real people of the source's ratings, each described from their own "
            "rating history only; a held-out part of each history (user_ratings.parquet, part held_out) is never "
            "shown to a persona, description, memory or policy."
        )
    census = users.get("census") or {}
    return (
        f"{users['counts'].get('users')} synthetic users (profile {settings.get('profile')}, seed "
        f"{settings.get('seed')}): ages and sexes drawn from the US census table {census.get('year', '')} "
        "by systematic sampling, first names from US Social Security data by birth year and sex, last names from "
        "the 1990 US Census, occupations and hobbies from fixed lists by age rules, liked and disliked "
        f"{tastes.get('names', '')} tastes from {tastes.get('source', 'the prior')}. They are not real people."
    )


def _rai(manifest: dict) -> dict[str, Any]:
    models = _models(manifest)
    special = manifest.get("steps", {}).get("ratings", {}).get("special_values") or {}
    limits = [
        "Synthetic users follow US census and name statistics only; their tastes follow a survey or the corpus' own "
        "category counts, not any real person.",
        "Descriptions written by a small LLM can repeat stereotypes of age, sex and occupation; rows written by "
        "the 'template' backend say so in their text and in user_descriptions.backend.",
    ]
    if random_exposure_text(manifest):
        limits.append(random_exposure_text(manifest))
    if special:
        limits.append("Ratings with a special meaning were dropped from ratings.parquet: " + ", ".join(
            f"{value} ({entry.get('meaning')})" for value, entry in special.items()))  # fmt: skip
    return {
        "rai:dataCollection": "Items and ratings from the sources listed under prov: and in manifest.json "
        "(downloaded, checksum-verified, parsed with DuckDB); users: " + _population(manifest),
        "rai:dataCollectionType": ["Secondary data (public item catalogues and ratings)", "Synthetic data"],
        "rai:dataPreprocessingProtocol": "Steps, in order, each recorded with its settings and fingerprint in "
        f"manifest.json: {', '.join(manifest.get('steps', {}))}.",
        "rai:machineAnnotationTools": models or ["none: no model wrote or embedded anything in this dataset"],
        "rai:dataBiases": "The sources' raters are self-selected users of one website each (their tastes, ages and "
        "countries are not a population's). Synthetic users are drawn from US statistics only. LLM-written "
        "descriptions inherit the model's biases.",
        "rai:dataLimitations": " ".join(limits),
        "rai:dataUseCases": "Training and evaluating recommender systems against LLM-simulated users (SUBER, "
        "arXiv:2406.01631); not for inferring anything about real individuals.",
        "rai:dataSocialImpact": "Simulated users stand in for people; conclusions drawn from them need checking "
        "against real held-out ratings (the evaluation suite of suber-env reports that agreement).",
        "rai:personalSensitiveInformation": "Synthetic users' names, ages and sexes are drawn from public "
        "statistics and belong to no one. Real users appear only under the source's pseudonymous ids.",
    }


def croissant(dataset_dir: str | Path) -> dict[str, Any]:
    """The Croissant 1.1 document of ``dataset_dir`` (from its manifest and Parquet files)."""
    dataset_dir = Path(dataset_dir)
    manifest = read_manifest(dataset_dir)
    about = manifest.get("about") or {}
    domain, release = manifest.get("domain", "?"), manifest.get("release", "?")
    files, sets = [], []
    for table in card_tables(dataset_dir, manifest):
        file, rs, _ = record_set(dataset_dir, table)
        file["sha256"] = manifest["tables"][table].get("sha256")
        files.append(file)
        sets.append(rs)
    sources = terms_for(manifest)
    licences = [t.link or t.licence for t in sources] + ([about["license"]] if about.get("license") else [])
    cites = [t.cite for t in sources if t.cite] + ([about["citation"]] if about.get("citation") else [])
    derived = [{"@type": "sc:CreativeWork", "name": t.name, "url": t.link, "license": t.licence} for t in sources]
    web = {key: str(e.get("url", "")) for key, e in manifest.get("sources", {}).items()}
    derived += [{"@type": "sc:CreativeWork", "name": k, "url": u} for k, u in web.items() if u.startswith("http")]
    return {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": CONFORMS_TO,
        "name": f"suber-{domain}-{release}",
        "description": about.get("description")
        or f"SUBER {domain} dataset ({release}), built by suber-data: "
        "items, real ratings, users, descriptions and embeddings for LLM-based recommender simulation.",
        "license": licences or ["see README.md"],
        "url": about.get("homepage") or "https://arxiv.org/abs/2406.01631",
        "citeAs": "\n\n".join([SUBER_CITATION, *cites]),
        "version": f"{manifest.get('schema_version', 0)}.0.0",
        "creator": {"@type": "sc:Organization", "name": f"suber-data {__version__}"},
        "isBasedOn": derived,
        "keywords": ["recommender systems", "synthetic users", "LLM simulation", domain],
        **_rai(manifest),
        "distribution": files,
        "recordSet": sets,
    }


def build_croissant(dataset_dir: str | Path) -> Path:
    """Write ``croissant.json`` into the folder (atomically); returns its path."""
    target = Path(dataset_dir) / CROISSANT
    text = json.dumps(croissant(dataset_dir), indent=2, ensure_ascii=False) + "\n"
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        with atomic_path(target) as tmp:
            tmp.write_text(text, encoding="utf-8")
    return target
