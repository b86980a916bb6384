"""Raw files kept compressed: `report.sqlite.xz`, `report.ncu-rep.xz`, `trace.json.gz`, ...

Archived run folders (and the committed fixtures) hold their raw profiler output as `.xz` or
`.gz`. Every reader takes them as they are: `locate` finds the file a run folder holds under a
raw name, `read_bytes` gives its content, and `plain_file` gives a real, uncompressed file for
the readers that need one (SQLite, ncu_report), decompressed into a temporary directory outside
the run folder and removed afterwards, so reading a folder never writes into it.

Example:
    >>> with plain_file(locate(Path("run/report.sqlite"))) as db:   # report.sqlite or .xz or .gz
    ...     export = nsys.read_export(db)
"""

from __future__ import annotations

import gzip
import lzma
import shutil
import tempfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from orchestrator.errors import ParseError

OPENERS: dict[str, Callable[[Path], IO[bytes]]] = {
    ".xz": lambda p: lzma.open(p, "rb"),
    ".gz": lambda p: gzip.open(p, "rb"),
}
# what a damaged or cut-short stream raises while it is read
_STREAM_ERRORS = (lzma.LZMAError, EOFError, gzip.BadGzipFile, zlib.error)


def is_compressed(path: Path | str) -> bool:
    """Whether `path` names a compressed file this module opens (.xz or .gz), by its suffix."""
    return Path(path).suffix in OPENERS


def suffix_of(path: Path | str) -> str:
    """The compression suffix `path`'s name ends with (".xz", ".gz"), else "": what a copy of it
    keeps, so it is read the same way."""
    name = Path(path).name
    return next((s for s in OPENERS if name.endswith(s)), "")


def locate(path: Path | str) -> Path:
    """`path` where it exists, else the first of `path.xz`, `path.gz` that does; else `path`
    itself (so the reader's "no such file" names the file it looked for)."""
    path = Path(path)
    if path.exists():
        return path
    for suffix in OPENERS:
        candidate = path.with_name(path.name + suffix)
        if candidate.is_file():
            return candidate
    return path


def _stream_error(path: Path, exc: BaseException) -> ParseError:
    what = "cut short" if isinstance(exc, EOFError) else "corrupt"
    return ParseError(
        path,
        f"the {path.suffix.lstrip('.')} stream is {what} ({exc or type(exc).__name__})",
        hint="the archive was damaged or its copy did not finish; take the file again",
    )


def read_bytes(path: Path | str) -> bytes:
    """The content of `path`, decompressed when it ends in .xz or .gz."""
    path = Path(path)
    try:
        if is_compressed(path):
            with OPENERS[path.suffix](path) as fh:
                return fh.read()
        return path.read_bytes()
    except FileNotFoundError:
        raise ParseError(path, "no such file") from None
    except _STREAM_ERRORS as exc:
        raise _stream_error(path, exc) from exc
    except OSError as exc:
        raise ParseError(path, f"cannot read it ({exc.strerror or exc})") from exc


@contextmanager
def plain_file(path: Path | str) -> Iterator[Path]:
    """A real file holding `path`'s content: `path` itself when it is not compressed; otherwise
    its content decompressed into a temporary directory (outside the run folder), removed when
    the block ends. A ParseError the block raises about the temporary copy names `path`."""
    path = Path(path)
    if not is_compressed(path):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="gprof-orch-raw-") as tmp:
        plain = Path(tmp) / path.stem  # report.sqlite.xz -> report.sqlite: readers go by suffix
        try:
            with OPENERS[path.suffix](path) as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except FileNotFoundError:
            raise ParseError(path, "no such file") from None
        except _STREAM_ERRORS as exc:
            raise _stream_error(path, exc) from exc
        except OSError as exc:
            raise ParseError(
                path,
                f"cannot decompress it ({exc.strerror or exc})",
                hint=f"decompressing needs room in {tempfile.gettempdir()} (set TMPDIR)",
            ) from exc
        try:
            yield plain
        except ParseError as exc:
            if exc.path != plain:
                raise
            raise ParseError(path, exc.reason, hint=exc.hint) from exc
