"""The (file, line) pairs a finding explains, kept as sorted line numbers per file.

Every problem line of the input must be explained by a finding or listed as unexplained, so a
finding keeps every line it accounts for, not only the evidence it shows: on a job of 100,000
ranks that is hundreds of thousands of lines, alive from the finding's making to the report.
A ``set`` of ``(file, line)`` tuples cost ~100 bytes a line (the tuple, its line number as an
int object, the table's slot): on 4,096 per-rank files 600 bytes a rank of the rule step's
peak (tracemalloc, 2,048 -> 4,096 files).  Here a line is 8 bytes of an array, a file an array
and a table slot.
"""
from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Set

#: the array type of the line numbers: signed 64-bit (``array``'s ``q``), whatever the platform's ``long``
_CODE = "q"


class LineSet(Set[tuple[str, int]]):
    """A set of (file, line) pairs (a :class:`collections.abc.Set`: ``in``, iteration, ``len``,
    comparisons and set operations with ``set`` both ways), stored as one array of line numbers
    per file, sorted and unique once read.  Adding appends; the files added to are sorted on the
    next read (a run adds a finding's lines in bursts, then asks)."""

    __slots__ = ("_files", "_dirty")

    def __init__(self, pairs: Iterable[tuple[str, int]] = ()) -> None:
        self._files: dict[str, array[int]] = {}
        #: files appended to since they were last sorted (None: none)
        self._dirty: set[str] | None = None
        self.update(pairs)

    @classmethod
    def of_files(cls, lines: Mapping[str, Iterable[int]]) -> LineSet:
        """From file -> its line numbers (in any order, repeats allowed)."""
        out = cls()
        for source, nums in lines.items():
            out._extend(source, nums)
        out._tidy()
        return out

    def update(self, pairs: Iterable[tuple[str, int]]) -> None:
        """Add every pair of ``pairs`` (another :class:`LineSet` file by file)."""
        if isinstance(pairs, LineSet):
            for source, nums in pairs._files.items():
                self._extend(source, nums)
            return
        by_file: dict[str, list[int]] = {}
        for source, line in pairs:
            bucket = by_file.get(source)
            if bucket is None:
                bucket = by_file[source] = []
            bucket.append(line)
        for source, lines in by_file.items():
            self._extend(source, lines)

    def add(self, pair: tuple[str, int]) -> None:
        self._extend(pair[0], (pair[1],))

    def _extend(self, source: str, nums: Iterable[int]) -> None:
        got = self._files.get(source)
        if got is None:
            got = self._files[source] = array(_CODE)
        before = len(got)
        got.extend(nums)
        if len(got) == before:
            if not before:
                del self._files[source]
            return
        if self._dirty is None:
            self._dirty = set()
        self._dirty.add(source)

    def _tidy(self) -> None:
        """Sort the files appended to and drop their repeats (an exact-size array each)."""
        dirty = self._dirty
        if dirty is None:
            return
        for source in dirty:
            self._files[source] = array(_CODE, sorted(set(self._files[source])))
        self._dirty = None

    def __contains__(self, pair: object) -> bool:
        if type(pair) is not tuple or len(pair) != 2 or type(line := pair[1]) is not int:
            return False
        if self._dirty is not None:
            self._tidy()
        nums = self._files.get(pair[0])
        if nums is None:
            return False
        i = bisect_left(nums, line)
        return i < len(nums) and nums[i] == line

    def __iter__(self) -> Iterator[tuple[str, int]]:
        if self._dirty is not None:
            self._tidy()
        for source, nums in list(self._files.items()):
            for line in nums:
                yield (source, line)

    def __len__(self) -> int:
        if self._dirty is not None:
            self._tidy()
        return sum(map(len, self._files.values()))

    def __bool__(self) -> bool:
        return bool(self._files)  # no file is kept without a line

    def per_file(self) -> dict[str, list[int]]:
        """File -> its line numbers in order, the files in name order (what the JSON report says)."""
        if self._dirty is not None:
            self._tidy()
        return {source: nums.tolist() for source, nums in sorted(self._files.items())}

    def files(self) -> list[str]:
        """The files it holds lines of."""
        return list(self._files)

    def renamed(self, name: Callable[[str], str]) -> LineSet:
        """The same lines with each file's name ``name(file)`` (two names made one: their lines merged)."""
        out = LineSet()
        for source, nums in self._files.items():
            out._extend(name(source), nums)
        out._tidy()
        return out

    def __repr__(self) -> str:
        return f"LineSet({sorted(self)!r})"
