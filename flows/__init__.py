"""The Prefect layer's flows and entry points: ``ingest`` (many sources),
``ingest_document`` (one, for UI runs and triggers), the sweep, the GPU flows, and the
``folio`` command (``flows.cli``) that runs them."""

# registers the S3 result-storage block class, which every flow run that reads or writes
# results on S3 must know by its slug (docs/hosts.md)
import deployments.result_storage  # noqa: F401
