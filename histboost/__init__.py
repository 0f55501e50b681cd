"""histboost: histogram gradient-boosted trees, collectives and hash embeddings."""

__version__ = "0.1.0"
