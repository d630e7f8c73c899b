"""Prefect flows: ``ingest`` (many sources), ``ingest_document`` (one, for UI runs and
triggers)."""
