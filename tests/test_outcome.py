"""Retryability is a typed field decided where an error is known, not read back from
the text of a reason (which once missed "storage")."""

from __future__ import annotations

import os

from folio.errors import is_transient_code
from folio.models import DocumentOutcome, DocumentResult, PageOutcome, PagePrep, PageResult
from folio.pipeline import Services, process_page
from folio.pipeline.validate import decide_outcome
from folio.settings.config import PipelineConfig


def test_every_transient_error_class_is_retryable_and_input_errors_are_not() -> None:
    for reason in ("storage: put s3://b/k", "timeout: 120 s", "worker-crashed: page 3",
                   "engine-unavailable: gone", "transient: x", "internal: page never reported"):
        assert is_transient_code(reason), reason
    for reason in ("malformed: bad xref", "encrypted: password", "bad-output: empty",
                   "page-too-large: 2e9 px", "validation: text-nonempty"):
        assert not is_transient_code(reason), reason


def test_a_page_worker_storage_error_makes_the_document_retryable(tmp_path: object) -> None:
    services = Services(PipelineConfig(), str(tmp_path))
    page = process_page(PagePrep(index=0, error="storage: write /x: No space left"), services)
    assert page.outcome is PageOutcome.QUARANTINED and page.retryable
    ok = PageResult(index=1, width_pt=1, height_pt=1, outcome=PageOutcome.OK)
    doc = DocumentResult(source="s", page_count=2, pages=[page, ok])
    decide_outcome(doc)
    assert doc.outcome is DocumentOutcome.PARTIAL and doc.retryable
    bad = process_page(PagePrep(index=0, error="malformed: no page 0"), services)
    doc = DocumentResult(source="s", page_count=2, pages=[bad, ok])
    decide_outcome(doc)
    assert not bad.retryable and not doc.retryable


def test_a_full_disk_is_the_machines_fault_and_other_os_errors_are_not() -> None:
    import errno

    from folio.errors import StorageError, storage_error_from_os

    for code in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO):
        err = storage_error_from_os(OSError(code, os.strerror(code)), "page 3 in /w")
        assert isinstance(err, StorageError) and is_transient_code(err.reason), code
        assert err.reason.startswith("storage: page 3 in /w: ")
    assert storage_error_from_os(OSError(errno.ENOENT, "gone"), "x") is None
    assert storage_error_from_os(PermissionError(errno.EACCES, "no"), "x") is None
