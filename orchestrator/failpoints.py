"""The points where a test stops a command, to signal it there: GPROF_TEST_PAUSE=POINT:FILE makes
the process create FILE the first time it reaches POINT and wait there a minute. Unset, a point
costs one look at the environment.

- "import": the first import of pandas a command makes (a run's, in its report phase), inside
  pandas' import of its compiled core (IMPORT_POINT_MODULE). An interrupt there leaves pandas broken in sys.modules: the compiled
  modules already loaded stay, tied to a pandas module that is gone, and the next `import pandas`
  raises AttributeError (`partially initialized module 'pandas' has no attribute
  '_pandas_datetime_CAPI'`, as when Ctrl-C lands there). One at the very start of pandas' import
  leaves nothing to break; one once its compiled core is loaded (pandas.core.api) breaks only what
  uses pandas after.
- "build": a folder's report starts being built.
- "write": report.md/.csv/.json written, report.html not yet.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

PAUSE_ENV = "GPROF_TEST_PAUSE"
PAUSE_S = 60

# where "import" waits: a module of pandas' compiled core, imported after pandas._libs.pandas_datetime
# has tied itself to the pandas module being made (pandas 3.1)
IMPORT_POINT_MODULE = "pandas._libs.tslibs.fields"


def _marker(point: str) -> str | None:
    at, _, marker = os.environ.get(PAUSE_ENV, "").partition(":")
    if at != point or not marker:
        return None
    del os.environ[PAUSE_ENV]  # once: what the signal's handling does next is not held
    return marker


def _hold(marker: str) -> None:
    Path(marker).touch()
    time.sleep(PAUSE_S)


def pause(point: str) -> None:
    """Wait at `point` ("build", "write") when GPROF_TEST_PAUSE names it."""
    marker = _marker(point)
    if marker:
        _hold(marker)


class _ImportPause:
    """A finder that finds nothing: asked for its module, it stops there (the first time), so the
    signal lands inside that import as it would in one the user interrupted."""

    def __init__(self, module: str, marker: str) -> None:
        self.module, self.marker = module, marker

    def find_spec(self, name: str, path=None, target=None) -> None:
        if name == self.module:
            sys.meta_path.remove(self)
            _hold(self.marker)
        return None


def pause_in_import() -> None:
    """Arm "import" when GPROF_TEST_PAUSE names it: the process waits as pandas' import reaches
    IMPORT_POINT_MODULE. The CLI calls it as a command starts."""
    marker = _marker("import")
    if marker and IMPORT_POINT_MODULE not in sys.modules:
        sys.meta_path.insert(0, _ImportPause(IMPORT_POINT_MODULE, marker))
