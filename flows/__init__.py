"""The Prefect layer's flows and entry points: ``ingest`` (many sources),
``ingest_document`` (one, for UI runs and triggers), the sweep, the GPU flows, and the
``folio`` command (``folio_prefect.flows.cli``) that runs them."""
