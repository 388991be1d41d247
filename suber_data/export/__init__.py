"""Exporters of a built dataset to the files recommender libraries load: LensKit and RecBole."""

from suber_data.export.formats import FORMATS, export

__all__ = ["FORMATS", "export"]
