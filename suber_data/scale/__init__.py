"""Scale-out: the description and embedding steps on a Ray cluster (``ray_runner``), the ``openai`` backend over
several OpenAI-compatible servers (``endpoints``). See docs/scale-out.md."""

from suber_data.scale.ray_runner import RayOptions, RayRunner

__all__ = ["RayOptions", "RayRunner"]
