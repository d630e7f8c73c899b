"""``import lancedb`` without the REST client it never uses here.

Why: ``import lancedb`` took 1.3 s of a 2-core machine's time with bytecode cached (2.7 s
without), most of ``folio search``'s. Over half of it is
``lance_namespace_urllib3_client``'s package ``__init__``, an OpenAPI-generated client
for a Lance REST namespace server, which imports its nine API classes, whose 366 methods
each build a pydantic validator when the class is defined. lancedb imports only the
package's ``models`` (through ``lance_namespace``), and folio connects to folders and S3
prefixes, never to a REST namespace.

So before lancedb is imported, that package is put in ``sys.modules`` *unexecuted*: its
submodules (``models``) import as usual, and the first use of a name of the package
itself (``ApiClient``, ``TableApi``: a REST connection) runs its real ``__init__`` then,
in the same module object, so nothing is lost, only deferred. A lancedb that needs the
package's names at import simply pays for them then.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any

__all__ = ["import_lancedb"]

#: the package whose ``__init__`` is deferred
DEFERRED = "lance_namespace_urllib3_client"

_lock = threading.Lock()


def import_lancedb() -> ModuleType:
    """The ``lancedb`` module, imported with :data:`DEFERRED`'s ``__init__`` deferred."""
    with _lock:
        if "lancedb" not in sys.modules and DEFERRED not in sys.modules:
            _defer_package_init(DEFERRED)
    import lancedb

    return lancedb


def _defer_package_init(name: str) -> None:
    spec = importlib.util.find_spec(name)  # a top-level package: found, not executed
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not installed, or not a package: the normal import decides
    module = importlib.util.module_from_spec(spec)  # __path__, __spec__, __file__ set
    loader = spec.loader
    ran = threading.Lock()

    def __getattr__(attr: str) -> Any:  # a name the package's __init__ defines
        if attr.startswith("__"):
            raise AttributeError(attr)
        with ran:
            if module.__dict__.get("__getattr__") is __getattr__:
                del module.__dict__["__getattr__"]
                loader.exec_module(module)
        return getattr(module, attr)

    module.__dict__["__getattr__"] = __getattr__
    sys.modules[name] = module
