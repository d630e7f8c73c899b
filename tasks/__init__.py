"""Thin Prefect tasks, one module per pipeline stage, each a few lines over ``folio``."""
