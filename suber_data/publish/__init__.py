"""The dataset card (card.py; the sources' licences and citations: licences.py) and `suber-data publish` to the
Hugging Face Hub (hub.py)."""
