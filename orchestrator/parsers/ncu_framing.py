"""The framing of a `.ncu-rep`, checked before ncu_report reads it: seen with ncu-report 2026.3.1
on reports of ncu 2025.3.1, an empty, truncated or non-ncu file does not raise, `load_report`
returns a report with no (or, cut near the end, fewer) kernels, silently. The same walk reads
the session records (the ncu version, ncu's command line), which ncu_report does not expose."""

from __future__ import annotations

import struct
from pathlib import Path

from orchestrator.errors import ParseError

# .ncu-rep framing, as seen in reports of ncu 2025.3.1 (not a documented format): b"NVR\0", a
# little-endian uint32 header length, a header (protobuf, field 1 = format version, 7 here),
# then records [uint32 length][protobuf message] up to the end of the file. A few small records
# carry the session: key/value pairs ("Nsight Compute Target" = the ncu version, "CUDA Version")
# and ncu's command line, which ncu_report does not expose. The record walk that detects a
# truncated file runs only for the format versions it was checked on.

MAGIC = b"NVR\x00"
KNOWN_FORMAT_VERSIONS = {7}
_SESSION_RECORD_MAX = 64 * 1024


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise ValueError("bad varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, i


def _pb_fields(buf: bytes):
    """(field number, wire type, value) of one protobuf message; ValueError if malformed."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, i = _varint(buf, i)
        elif wire == 2:
            n, i = _varint(buf, i)
            if i + n > len(buf):
                raise ValueError("field runs past its message")
            val, i = buf[i : i + n], i + n
        elif wire == 1:
            val, i = buf[i : i + 8], i + 8
        elif wire == 5:
            val, i = buf[i : i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield num, wire, val


def _session_from_record(rec: bytes, session: dict[str, str]) -> None:
    try:
        for num, wire, val in _pb_fields(rec):
            if num != 3 or wire != 2:
                continue
            for num2, wire2, val2 in _pb_fields(val):
                if num2 == 8 and wire2 == 2:
                    kv = {n: v for n, w, v in _pb_fields(val2) if w == 2}
                    if 1 in kv and 2 in kv:
                        session[kv[1].decode("utf-8")] = kv[2].decode("utf-8")
                elif num2 == 11 and wire2 == 2:
                    session["command_line"] = val2.decode("utf-8").strip()
    except (ValueError, UnicodeDecodeError):
        pass  # not a session record


def inspect_container(path: Path) -> dict[str, str]:
    """Check that `path` is a whole .ncu-rep; return the session key/values it carries.

    Example:
        >>> inspect_container(Path("run/report.ncu-rep"))["Nsight Compute Target"]
    """
    if not path.exists():
        raise ParseError(path, "no such file")
    if not path.is_file():
        raise ParseError(path, "not a regular file")
    size = path.stat().st_size
    if size == 0:
        raise ParseError(path, "empty file", hint="ncu may have been stopped before it wrote the report")
    session: dict[str, str] = {}
    with open(path, "rb") as fh:
        head = fh.read(8)
        if not head.startswith(MAGIC):
            if path.suffix == ".ncu-repz":
                return session  # compressed form: ncu_report checks it
            looks_text = all(32 <= b < 127 or b in (9, 10, 13) for b in head)
            raise ParseError(
                path,
                "not an Nsight Compute report (no NVR header)",
                hint="for the CSV that ncu --csv prints use read_csv_raw" if looks_text else None,
            )
        if len(head) < 8:
            raise ParseError(path, f"truncated: {size} bytes, shorter than the report header")
        header_len = struct.unpack_from("<I", head, 4)[0]
        header = fh.read(header_len)
        if len(header) < header_len:
            raise ParseError(path, "truncated inside the report header")
        try:
            fields = {n: v for n, w, v in _pb_fields(header) if w == 0}
        except ValueError:
            fields = {}
        if fields.get(1) not in KNOWN_FORMAT_VERSIONS:
            return session
        off = 8 + header_len
        while off < size:
            if off + 4 > size:
                raise ParseError(
                    path,
                    f"truncated: the file ends inside a record header at byte {off}",
                    hint="the report was cut short (disk full, copy interrupted, ncu killed)",
                )
            fh.seek(off)
            n = struct.unpack("<I", fh.read(4))[0]
            if off + 4 + n > size:
                raise ParseError(
                    path,
                    f"truncated: the record at byte {off} needs {n} bytes, {size - off - 4} are left",
                    hint="the report was cut short (disk full, copy interrupted, ncu killed)",
                )
            if n <= _SESSION_RECORD_MAX:
                _session_from_record(fh.read(n), session)
            off += 4 + n
    return session
