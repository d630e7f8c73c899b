"""What the warm server imports once (:mod:`folio_prefect.deployments.warm_start`): the
modules every flow run and ``folio`` command would import, in the order a run needs them.

It includes what those modules import only on first use, found by running a one-page
ingest in a process that had imported this module and listing what it imported then
(tests/test_warm_imports.py keeps that list empty but for the model runtimes): Prefect's
parameter serialiser imports FastAPI's encoder and its task engine and concurrency
modules on a run's first call, anyio its asyncio backend, folio the page, embedding and
output modules inside the functions that use them; each child paid that again
(0.3-0.5 s of a one-page ``folio ingest``).

Not imported here: onnxruntime (it starts a thread on import, and the server must stay
single-threaded to fork safely; the embedding model and the layout model import it in the
child) and anything that opens a connection or a file.
"""

from __future__ import annotations

import multiprocessing.synchronize  # noqa: F401
import os

import anyio._backends._asyncio  # noqa: F401  # anyio's backend, on its first event loop
import fastapi.encoders  # noqa: F401  # Prefect's Flow.serialize_parameters, every run
import great_expectations  # noqa: F401  # the validation child's 3-4 s
import lancedb  # noqa: F401
import prefect._internal.states
import prefect.concurrency.sync
import prefect.engine
import prefect.flow_engine
import prefect.task_engine
import prefect.utilities.visualization  # noqa: F401  # Flow.__call__ asks whether to draw
import pydantic.color  # noqa: F401
import rich._emoji_codes  # noqa: F401  # the progress bar's markup

import folio.checks.validation_child
import folio.checks.validation_gx
import folio.engines.registry
import folio.engines.tesseract
import folio.figures.store
import folio.index.publish
import folio.onnx_session  # onnxruntime itself only inside cpu_session, in the child
import folio.output.embeddings
import folio.output.outputs
import folio.page.layout
import folio.pdf.ghostscript
import folio.pdf.page_worker
import folio.pdf.worker_child  # the page-worker zygote's
import folio.pipeline.early_embed
import folio.security.command_line
import folio.stores.lance_s3
import folio.stores.lancedb_store  # noqa: F401
import folio_prefect.deployments.local_server
import folio_prefect.deployments.trigger
import folio_prefect.flows.cli
import folio_prefect.flows.ingest  # noqa: F401
from folio.warm import client
from folio_prefect.deployments.warm_start import SETTINGS_LATER_ENV, reread_prefect_settings


def after_fork() -> None:
    """In each forked child, once its caller's environment and folder are in place:
    Prefect's settings read from them (the server read its own at its start: a run's API
    key, its folder's prefect.toml), and the child marked, so that its ``folio`` command
    does not ask the server again. A ``folio`` command's child reads the settings later,
    itself (:data:`SETTINGS_LATER_ENV`); the mark is removed here, so that the child's own
    children (a flow run's helpers) read theirs. The caller's parent
    (:func:`folio.warm.client.parent_pid`) is taken out of the environment likewise."""
    if os.environ.pop(SETTINGS_LATER_ENV, None) is None:
        reread_prefect_settings()
    client.enter_child()
