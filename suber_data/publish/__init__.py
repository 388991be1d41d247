"""The dataset card (card.py, terms.py) and `suber-data publish` to the Hugging Face Hub (hub.py)."""
