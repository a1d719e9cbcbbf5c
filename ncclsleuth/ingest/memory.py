"""Inputs held in memory (an HTTP request body, a rule test's snippet): imported only by
what reads them, not by every ``analyze``."""
from __future__ import annotations

import io
from dataclasses import field
from typing import BinaryIO

from ..util.classes import dataclass
from .sources import InputFile


@dataclass(frozen=True)
class MemoryInput(InputFile):
    """Bytes held in memory (an HTTP request body, a rule test's snippet), read as a file of
    that name would be: the block reader, the same repairs, the same notices."""

    data: bytes = field(default=b"", repr=False, compare=False)

    def open(self) -> BinaryIO:
        return io.BytesIO(self.data)
