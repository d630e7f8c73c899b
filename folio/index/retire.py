"""A replaced or gone version's outputs leave: its document folder (whole: markdown,
JSON, pages, figures), once no other source uses it.

Why the markers: a folder is named by the file name's stem and the content id
(:func:`folio.io.keys.doc_slug`), so the same bytes under the same name in two folders
(``in/a/report.pdf``, ``in/b/report.pdf``) share one. Each source using a folder leaves
a marker, ``_folder_sources/{folder}/{hash of source}``, before it writes there; a
source moving off it removes its own marker and then the folder if no marker is left.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Container

from folio.io.layout import FOLDER_SOURCES
from folio.io.sinks import Sink

__all__ = ["release_folder", "use_folder"]

log = logging.getLogger(__name__)


def _marker(folder: str, source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{FOLDER_SOURCES}/{folder}/{digest}"


def use_folder(sink: Sink, folder: str, source: str) -> None:
    """Say that ``source`` writes (and keeps) its outputs in ``folder``."""
    sink.write_text(_marker(folder, source), source)


def release_folder(sink: Sink, folder: str, source: str,
                   sources: Container[str] = ()) -> bool:
    """``source`` no longer uses ``folder``: the folder leaves, whole, when no other
    source does; True when it was removed. A folder holding one of ``sources`` (the
    run's present sources, by URI: outputs under the sources' own prefix) stays."""
    if not folder:
        return False
    sink.delete(_marker(folder, source))
    if next(iter(sink.names(f"{FOLDER_SOURCES}/{folder}/")), None) is not None:
        return False  # the same bytes and name under another source: its folder too
    if sources and (sink.uri(folder) in sources
                    or any(sink.uri(name) in sources for name in sink.names(f"{folder}/"))):
        log.warning("%s holds a source document: left in place", sink.uri(folder))
        return False
    sink.delete_prefix(folder)
    return True
