"""Load a file of scripts/ as a module, for the tests of the scripts that draw and
generate docs (scripts/ is no package: its files run as ``python scripts/NAME.py``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def load_script(name: str) -> ModuleType:
    """``scripts/NAME.py`` as the module ``folio_script_NAME``."""
    spec = importlib.util.spec_from_file_location(f"folio_script_{name}",
                                                  SCRIPTS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
