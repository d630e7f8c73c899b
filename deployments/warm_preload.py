"""What the warm server imports once (:mod:`folio_prefect.deployments.warm_start`): the
modules every flow run and ``folio`` command would import, in the order a run needs them.

Not imported here: onnxruntime (it starts a thread on import, and the server must stay
single-threaded to fork safely; the embedding model and the layout model import it in the
child) and anything that opens a connection or a file.
"""

from __future__ import annotations

import great_expectations  # noqa: F401  # the validation child's 3-4 s
import lancedb  # noqa: F401
import prefect.engine
import prefect.flow_engine  # noqa: F401

import folio.checks.validation_child
import folio.checks.validation_gx
import folio.pdf.worker_child  # the page-worker zygote's
import folio.stores.lancedb_store  # noqa: F401
import folio_prefect.deployments.trigger
import folio_prefect.flows.cli
import folio_prefect.flows.ingest  # noqa: F401
from folio.warm import client
from folio_prefect.deployments.warm_start import reread_prefect_settings


def after_fork() -> None:
    """In each forked child, once its caller's environment and folder are in place:
    Prefect's settings read from them (the server read its own at its start: a run's API
    key, its folder's prefect.toml), and the child marked, so that its ``folio`` command
    does not ask the server again."""
    reread_prefect_settings()
    client.IN_CHILD = True
