"""The ingestion flows for GPU work pools: the same flows, on :class:`VLLMTaskRunner`.

A deployment on a GPU pool (``folio-h200``, ``folio-h100-80gb``, ...) points at these
entrypoints. Each flow run resolves its settings from the pool's environment exactly as
``folio ingest --engine vllm`` does (``FOLIO_OCR__PROFILE``, ``FOLIO_OCR__MODEL``,
``FOLIO_OCR__PRESET``, ``FOLIO_SERVER__*``), and its task runner attaches to the worker
host's shared vLLM server, starting it when none runs: a one-page UI run or a trigger
pays vLLM's start-up only when the server has been idle past ``server.idle_timeout_s``.
The runner is built when this module is imported, in the flow-run process, so it sees
that process's environment.
"""

from __future__ import annotations

from typing import Any, cast

from folio_prefect.flows.ingest import ingest as _ingest
from folio_prefect.flows.ingest import ingest_document as _ingest_document
from folio_prefect.flows.vllm_runner import VLLMTaskRunner

#: shared by both flows: duplicated per run by Prefect, configuration only until entered
RUNNER = cast(Any, VLLMTaskRunner.from_environment())

ingest = _ingest.with_options(task_runner=RUNNER)
ingest_document = _ingest_document.with_options(task_runner=RUNNER)
