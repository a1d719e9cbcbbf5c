"""Flight Recorder dumps: found by their first bytes, read as untrusted data.

A PyTorch Flight Recorder dump (``_dump_fr_trace``, ``TORCH_NCCL_DUMP_ON_TIMEOUT``, the
``_json`` variants) is one file per rank: a pickle (protocol 2, written by libtorch's
pickler) or a JSON object, whose top level is a dict with ``version``, ``entries``,
``pg_config`` (see ``shared/reference/torch/FLIGHT_RECORDER.md``).  Dumps are found by
content, never by name: a pickle starts with the protocol opcode ``\\x80`` and a version
byte, a JSON dump with ``{`` and one of the dump's top-level keys.  Gzip/bzip2/xz copies
are read through the same decompression as logs.

A dump is untrusted input: ``pickle.load`` on a crafted file runs any code it names
(``os.system`` via ``__reduce__``).  :func:`_unpickler` refuses every global
(``find_class``) and every persistent id, which leaves only the opcodes that build plain
containers and scalars (dict, list, tuple, set, str, bytes, int, float, bool, None): no
callable can reach the stack, so ``REDUCE``/``BUILD``/``NEWOBJ`` have nothing to call.
The file is read whole but bounded (:data:`MAX_DUMP_BYTES`), and a refused or broken
file becomes one notice naming it, never an exception.
"""
from __future__ import annotations

import io
import re
import sys
from dataclasses import field
from typing import Any, BinaryIO

from ..util.classes import dataclass
from ..util.rxstore import rx
from .decode import _RawAdapter, decompress, open_binary
from .sources import InputFile, Notice

#: Biggest dump read (after decompression).  A 2,000-entry ring with Python frames is
#: about 0.5 MB as pickle, 1 MB as JSON; C++ stacks (TORCH_FR_CPP_STACK) make it a few
#: MB.  Bigger files are refused with a notice instead of being loaded into memory.
MAX_DUMP_BYTES = 256 << 20
#: the top-level keys of a dump in any release (version, entries, pg_config, pg_status,
#: nccl_comm_state, comm_lib_version / nccl_version)
DUMP_KEYS = frozenset({"version", "entries", "pg_config", "pg_status", "nccl_comm_state", "comm_lib_version",
                       "nccl_version"})
#: how an ``ncclras`` report starts (NCCL 2.24+, src/ras/client_support.cc), after paste decoration
_RAS_HEAD = rx(rb"(?m)^[>`\s]*(?:NCCL version \S+ compiled with CUDA|NCCL RAS client version|Job summary\s*$|"
                       rb"Communicators\.\.\.|Errors\r?\n======|Warnings\r?\n========|"
                       rb"#\d+-\d+ \([0-9a-f]{16}\) (?:INCOMPLETE|ERROR|MISMATCH)\r?$)")
_JSON_HEAD = rx(rb'\A\s*\{\s*"(%s)"' % b"|".join(re.escape(k.encode()) for k in sorted(DUMP_KEYS)))
_SNIFF = 512


class Refused(Exception):
    """A pickle asked for something a dump never holds (a global, a persistent id)."""


def _unpickler(data: bytes) -> Any:
    """The C unpickler with every way to reach code closed: ``find_class`` (globals:
    ``GLOBAL``, ``STACK_GLOBAL``, ``INST``, ``OBJ``, the extension registry) and
    ``persistent_load`` refuse, so only plain containers and scalars can be built.  pickle
    is imported here: most runs read no pickle."""
    cls = _CLASS.get("unpickler")
    if cls is None:
        import pickle

        class PlainUnpickler(pickle.Unpickler):
            def find_class(self, module: str, name: str) -> Any:
                raise Refused(f"{module}.{name}")

            def persistent_load(self, pid: Any) -> Any:
                raise Refused("a persistent id")

        cls = _CLASS["unpickler"] = PlainUnpickler
    return cls(io.BytesIO(data))


_CLASS: dict[str, Any] = {}


def sniff_bytes(head: bytes) -> str | None:
    """What these first bytes start: ``"pickle"`` or ``"json"`` (a dump), ``"ras"`` (an
    ``ncclras`` report, read as text by the log reader and the report parser), else None."""
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return "pickle"
    if head[:1] in (b"{", b" ", b"\n", b"\t", b"\r") and _JSON_HEAD.match(head):
        return "json"
    if _RAS_HEAD.search(head):
        return "ras"
    return None


def _head(buf: BinaryIO) -> bytes:
    """The first bytes of a stream that can peek, decompressed when it is gzip/bzip2/xz,
    without consuming anything (the compressed head is decompressed from a copy)."""
    head = buf.peek(_SNIFF)[:_SNIFF] if hasattr(buf, "peek") else b""
    try:
        if head[:2] == b"\x1f\x8b":
            import zlib

            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(buf.peek(1 << 16), _SNIFF)  # type: ignore[attr-defined]
        if head[:3] == b"BZh":
            import bz2

            return bz2.BZ2Decompressor().decompress(buf.peek(1 << 16), _SNIFF)  # type: ignore[attr-defined]
        if head[:6] == b"\xfd7zXZ\x00":
            import lzma

            return lzma.LZMADecompressor().decompress(buf.peek(1 << 16), _SNIFF)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - a damaged archive: the log reader says so
        return b""
    return head


@dataclass(frozen=True)
class Opened(InputFile):
    """An input already opened (to look at its first bytes): the first ``open()`` hands
    over that stream, so each input is opened and read once (object stores count reads);
    a reader that opens it again (odd encodings) gets a fresh stream of the original."""

    inner: InputFile | None = field(default=None, compare=False)
    held: list[BinaryIO] = field(default_factory=list, compare=False, repr=False)

    def open(self) -> BinaryIO:
        if self.held:
            return self.held.pop()
        assert self.inner is not None
        return open_binary(self.inner)


def sniff(inp: InputFile) -> tuple[str | None, InputFile]:
    """(``"pickle"``/``"json"`` for a dump, ``"ras"`` for an ``ncclras`` report, else None;
    the input to read).

    The input is opened once here and the same stream is read afterwards, by the dump
    reader or the log reader; standard input is peeked, not consumed."""
    if inp.path == "-":
        buf = sys.stdin.buffer
        return sniff_bytes(_head(buf)), inp
    try:
        raw = open_binary(inp)
    except OSError:
        return None, inp  # the log reader reports it
    buf = raw if hasattr(raw, "peek") else io.BufferedReader(_RawAdapter(raw), 1 << 16)
    try:
        form = sniff_bytes(_head(buf))
    except (OSError, ValueError):
        form = None
    return form, Opened(inp.path, inner=inp, held=[buf])


@dataclass
class Loaded:
    """A dump read from one input: its plain data (None when refused) and the notices."""

    data: dict[str, Any] | None
    form: str  # pickle | json | ras_json
    notices: list[Notice]
    #: a JSON file that turned out not to be a dump: read it as a text log instead
    as_text: bool = False
    #: its bytes when they were read whole (handed to the log reader: no second read)
    text: bytes | None = None


def load(inp: InputFile, form: str, limit: int = MAX_DUMP_BYTES) -> Loaded:
    """Read one dump (``form`` from :func:`sniff`): bounded, restricted, never raising."""
    name = inp.display
    out = Loaded(None, form, [])

    def note(msg: str, severity: str = "warning") -> Loaded:
        out.notices.append(Notice(name, msg, severity))
        return out

    try:
        raw: BinaryIO = sys.stdin.buffer if inp.path == "-" else open_binary(inp)
        try:
            head = raw.peek(_SNIFF)[:_SNIFF] if hasattr(raw, "peek") else b""
            stream = decompress(raw, head)[0] if head else raw
            data = stream.read(limit + 1)
        finally:
            if inp.path != "-":
                raw.close()
    except (OSError, EOFError, ValueError) as exc:
        return note(f"cannot read this Flight Recorder dump: {exc}, skipped")
    if len(data) > limit:
        if form == "json":  # a big JSON-lines log, most likely: the log reader's
            out.as_text = True
            return out
        return note(f"Flight Recorder dump larger than {limit >> 20} MB, not read")
    if form == "pickle":
        import pickle

        try:
            obj = _unpickler(data).load()
        except Refused as exc:
            return note(f"pickle refused: it asks for {exc} (code, not data); a Flight Recorder dump holds only "
                        "plain containers and scalars, so this file was not loaded and nothing in it was run")
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError,
                MemoryError, RecursionError, OverflowError) as exc:
            return note(f"broken pickle ({type(exc).__name__}: {str(exc)[:120]}), not a readable Flight Recorder "
                        "dump, skipped")
    else:
        import json

        try:
            obj = json.loads(data.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            obj = None
        if _is_ras_json(obj):  # ncclras -f json (NCCL 2.28.7+): read by the report parser
            out.data, out.form, out.text = obj, "ras_json", data
            return out
        if not is_dump(obj):  # JSON-lines logs and other JSON documents: the log reader's
            out.as_text, out.text = True, data
            return out
    if not is_dump(obj):
        return note("a Python pickle that is not a Flight Recorder dump (no entries/version/pg_config), skipped",
                    "info")
    out.data = obj
    return out


def as_log(inp: InputFile, loaded: Loaded) -> InputFile:
    """The input to give the log reader after :func:`load` found no dump in it: its bytes
    as read (standard input cannot be read twice), else the original input again."""
    if loaded.text is not None:
        from .memory import MemoryInput

        return MemoryInput("<stdin>" if inp.path == "-" else inp.path, data=loaded.text)
    inner = inp.inner if isinstance(inp, Opened) else inp
    return inner if inner is not None else inp


def _is_ras_json(obj: Any) -> bool:
    """``ncclras -f json``'s top level (nccl_version, communicators): a report, not a dump."""
    return isinstance(obj, dict) and "nccl_version" in obj and isinstance(obj.get("communicators"), list)


def is_dump(obj: Any) -> bool:
    """The top level of a dump: a dict with ``entries`` (a list) and ``version`` or ``pg_config``."""
    return (isinstance(obj, dict) and isinstance(obj.get("entries"), list)
            and ("version" in obj or "pg_config" in obj))
