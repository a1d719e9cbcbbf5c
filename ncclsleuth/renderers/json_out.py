"""Stable JSON: ``Report.to_dict()`` with sorted keys, so equal inputs give equal bytes."""
from __future__ import annotations

import json
from typing import Any


def render(report: Any, color: bool = False, **_: Any) -> str:
    return json.dumps(report.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
