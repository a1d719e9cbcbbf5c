"""The (file, line) pairs a finding explains, kept as one sorted array of numbers.

Every problem line of the input must be explained by a finding or listed as unexplained, so a
finding keeps every line it accounts for, not only the evidence it shows: on a job of 100,000
ranks that is hundreds of thousands of lines, alive from the finding's making to the report.
A ``set`` of ``(file, line)`` tuples cost ~100 bytes a line (the tuple, its line number as an
int object, the table's slot): on 4,096 per-rank files 600 bytes a rank of the rule step's
peak (tracemalloc, 2,048 -> 4,096 files).  An array of line numbers per file still cost an
array a file of every finding (~300 bytes a rank: three findings explain lines of each rank's
file).  Here a line is one 8-byte number, ``file id << LINE_BITS | line``, the ids those of a
:class:`FileIds` the run's sets share (the model's own file index: nothing a file).
"""
from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set

from ..model.job import ORDER_LINE_BITS

#: the array type of the numbers: signed 64-bit (``array``'s ``q``), whatever the platform's ``long``
_CODE = "q"
#: bits of a number that hold the line (a trillion lines a file); the file id above them: as in
#: the model's order of lines, so that a finding's lines in input order are its numbers in order
LINE_BITS = ORDER_LINE_BITS
LINE_MASK = (1 << LINE_BITS) - 1
#: the ids of the names a :class:`FileIds` met besides its base start here (a base holds fewer files)
_MORE = 1 << 22


def holds(keys: array[int], key: int) -> bool:
    """Whether sorted ``keys`` hold ``key``."""
    i = bisect_left(keys, key)
    return i < len(keys) and keys[i] == key


def _line(n: int) -> int:
    if type(n) is not int or not 0 <= n <= LINE_MASK:
        raise ValueError(f"a line number from 0 to 2**{LINE_BITS} - 1, not {n!r}")
    return n


class FileIds:
    """File name <-> a small int, for the :class:`LineSet` s of one run: a base of names given
    (the job model's files, in order: ``JobModel.source_index`` and ``sources``) and those met
    besides, appended."""

    __slots__ = ("_base", "_base_names", "_more", "_more_names")

    def __init__(self, base: Mapping[str, int] | None = None, base_names: Sequence[str] = ()) -> None:
        #: name -> id of the names given (not copied: the model's index, which only grows)
        self._base: Mapping[str, int] = base if base is not None else {}
        self._base_names = base_names
        self._more: dict[str, int] = {}
        self._more_names: list[str] = []

    def get(self, name: str) -> int | None:
        """The id of ``name``, None where it has none."""
        got = self._base.get(name)
        return got if got is not None and got < _MORE else self._more.get(name)

    def id(self, name: str) -> int:
        """The id of ``name``, given one where it has none."""
        got = self.get(name)
        if got is None:
            got = self._more[name] = _MORE + len(self._more_names)
            self._more_names.append(name)
        return got

    def name(self, fid: int) -> str:
        return self._more_names[fid - _MORE] if fid >= _MORE else self._base_names[fid]

    def key(self, source: str, line: int) -> int | None:
        """The number of line ``line`` of ``source`` (None: the file has no id, or the line is out
        of range); asked for every problem line: ``get`` written out."""
        if type(line) is not int or not 0 <= line <= LINE_MASK:
            return None
        fid = self._base.get(source)
        if fid is None or fid >= _MORE:
            fid = self._more.get(source)
            if fid is None:
                return None
        return fid << LINE_BITS | line

    def key_of(self, pair: object) -> int | None:
        """:meth:`key` of a (file, line) pair (None: no such pair)."""
        if type(pair) is not tuple or len(pair) != 2:
            return None
        return self.key(*pair)

    def added(self) -> list[str]:
        """The names given an id besides the base, in the order of their ids."""
        return list(self._more_names)

    def take(self, added: Sequence[str]) -> bool:
        """Whether the names another process's table of the same base added (:meth:`added`) have the
        same ids here, given them where they have none yet and are next in line (the sets that
        process made then mean the same lines here)."""
        for j, name in enumerate(added):
            got = self.get(name)
            if got is None and len(self._more_names) == j:
                got = self.id(name)
            if got != _MORE + j:
                return False
        return True

    def same_as(self, other: FileIds | None) -> bool:
        """Whether a name has the same id in both (one base, no names of their own)."""
        return other is self or (other is not None and other._base is self._base
                                 and other._base_names is self._base_names and not self._more and not other._more)


class LineSet(Set[tuple[str, int]]):
    """A set of (file, line) pairs (a :class:`collections.abc.Set`: ``in``, iteration, ``len``,
    comparisons and set operations with ``set`` both ways), stored as one array of numbers
    (file id, line), sorted and unique once read.  Adding appends; the array is sorted on the
    next read (a run adds a finding's lines in bursts, then asks).  Lines are ints from 0 to
    2**40 - 1."""

    __slots__ = ("_keys", "_ids", "_sorted")

    def __init__(self, pairs: Iterable[tuple[str, int]] = (), ids: FileIds | None = None) -> None:
        self._keys: array[int] = array(_CODE)
        #: the file ids of its numbers (made on the first line of a set given none)
        self._ids = ids
        self._sorted = True
        self.update(pairs)

    @classmethod
    def of_lines(cls, pairs: Iterable[tuple[str, int]], ids: FileIds | None = None) -> LineSet:
        """From (file, line) pairs, sorted at once (pairs in the order of ``ids``' files and lines,
        as a finding's lines in input order are, are kept as they come: no sort)."""
        out = cls(pairs, ids)
        out._tidy()
        return out

    def update(self, pairs: Iterable[tuple[str, int]]) -> None:
        """Add every pair of ``pairs``: another :class:`LineSet`'s numbers as they are where the
        two share their file ids (an empty set takes the other's), else pair by pair, each
        number appended (no table of the pairs: a list a file was ~90 bytes a rank's file)."""
        if isinstance(pairs, LineSet):
            if not self._keys and pairs._ids is not None:
                self._ids = pairs._ids
            if pairs._ids is not None and pairs._ids.same_as(self._ids):
                if pairs._keys:
                    self._keys.extend(pairs._keys)
                    self._sorted = False
                return
        ids = self._ids
        keys = self._keys
        before, last, high = len(keys), None, 0
        for source, line in pairs:
            if source != last:  # a file's lines come together: its id looked up once
                if ids is None:  # made for a first pair: an empty set takes the ids of the next it is given
                    ids = self._ids = FileIds()
                last, high = source, ids.id(source) << LINE_BITS
            keys.append(high | _line(line))
        if len(keys) != before:
            self._sorted = False

    def add(self, pair: tuple[str, int]) -> None:
        self.update((pair,))

    def _tidy(self) -> None:
        """Sort the numbers and drop repeats; numbers in order already are left as they are
        (sorting makes an int object of each: ~50 bytes a line while it runs)."""
        if self._sorted:
            return
        keys = self._keys
        if not all(a < b for a, b in zip(keys, keys[1:])):
            self._keys = array(_CODE, sorted(set(keys)))
        self._sorted = True

    @property
    def ids(self) -> FileIds | None:
        """The file ids of its numbers (None: it holds none)."""
        return self._ids

    def key_of(self, pair: object) -> int | None:
        """The number of (file, line) ``pair`` in this set's file ids (None: it has none there)."""
        return None if self._ids is None else self._ids.key_of(pair)

    def numbers(self) -> array[int]:
        """Its numbers, sorted (:meth:`key_of`); the array itself: not to be changed."""
        self._tidy()
        return self._keys

    def __contains__(self, pair: object) -> bool:
        key = self.key_of(pair)
        return key is not None and holds(self.numbers(), key)

    def _pairs(self) -> Iterator[tuple[int, int]]:
        """(file id, line) of each pair, in order."""
        for key in self.numbers():
            yield key >> LINE_BITS, key & LINE_MASK

    def __iter__(self) -> Iterator[tuple[str, int]]:
        ids = self._ids
        for fid, line in self._pairs():
            yield (ids.name(fid), line)  # type: ignore[union-attr]  # a set with numbers has ids

    def __len__(self) -> int:
        return len(self.numbers())

    def __bool__(self) -> bool:
        return bool(self._keys)

    def per_file(self) -> dict[str, list[int]]:
        """File -> its line numbers in order, the files in name order (what the JSON report says)."""
        out: dict[str, list[int]] = {}
        last, lines = -1, []
        for fid, line in self._pairs():
            if fid != last:
                last, lines = fid, out.setdefault(self._ids.name(fid), [])  # type: ignore[union-attr]
            lines.append(line)
        return {name: out[name] for name in sorted(out)}

    def files(self) -> list[str]:
        """The files it holds lines of."""
        ids = self._ids
        seen = {key >> LINE_BITS for key in self._keys}
        return [ids.name(fid) for fid in sorted(seen)]  # type: ignore[union-attr]

    def renamed(self, name: Callable[[str], str]) -> LineSet:
        """The same lines with each file's name ``name(file)`` (two names made one: their lines merged)."""
        return LineSet.of_lines((name(source), line) for source, line in self)

    def __repr__(self) -> str:
        return f"LineSet({sorted(self)!r})"
