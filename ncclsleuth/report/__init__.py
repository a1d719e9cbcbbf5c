"""The report: findings (most likely root cause first), unexplained problem lines, summary.

One :class:`Report` object feeds every renderer (terminal, JSON, Markdown, Slack,
HTML); renderers never look at the model or the events.  ``to_dict`` is the stable
JSON schema (``SCHEMA_VERSION``).  :func:`build_report` makes one from a model and the
rules; :mod:`.redact` a copy without site identifiers, :mod:`.diff` the comparison of
two runs.
"""
from __future__ import annotations

from dataclasses import field
from typing import Any

from ..events import Event
from ..model.job import JobModel
from ..model.summary import summarize
from ..rules.findings import Evidence, Finding
from ..rules.ranking import explained_by, run_rules
from ..rules.schema import Rule
from ..util import Spread
from ..util.classes import dataclass
from ..util.gcpause import paused
from ..util.rxstore import rx

SCHEMA_VERSION = "1.0"
#: what a report of something that is not a log says, and how to get one
NOT_A_LOG = "not a log: no line of NCCL, PyTorch distributed or nccl-tests was found"
HOW_TO_GET_A_LOG = (
    "Run the job with NCCL_DEBUG=INFO (NCCL prints its version, interfaces, rings and every WARN) and "
    "TORCH_DISTRIBUTED_DEBUG=DETAIL with TORCH_CPP_LOG_LEVEL=INFO (PyTorch's process-group and watchdog lines), "
    "then give ncclsleuth what every rank printed: torchrun writes it to its console, or one file per rank with "
    "--log-dir DIR --redirects 3 --tee 3; Slurm writes slurm-<jobid>.out (srun --output=%x-%j-%t.out for one "
    "file per task); mpirun writes to its stdout (--output-filename DIR for one file per rank).")
_DIGITS = rx(r"\d+")
MAX_UNEXPLAINED = 200


@dataclass
class Report:
    """What ``analyze`` answers: the findings ranked, the problem lines no finding explains, the
    summary of the job, and the notices about the inputs."""

    findings: list[Finding]
    unexplained: list[Evidence]
    summary: dict[str, Any]
    notices: list[dict[str, str]] = field(default_factory=list)
    unexplained_total: int = 0
    #: inputs read (0: nothing could be read); not part of the JSON
    files_read: int = field(default=0, compare=False)
    #: the post-mortem's pictures (rings, hops, init timeline), when asked for
    #: (:func:`ncclsleuth.model.figures.build_figures`); not part of the JSON
    figures: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def verdict(self) -> Finding | None:
        return self.findings[0] if self.findings else None

    @property
    def is_log(self) -> bool:
        """Whether the inputs hold anything NCCL, PyTorch distributed or nccl-tests wrote
        (or anything a rule diagnosed, or a problem line to list): "hello world" or random
        bytes are not."""
        return bool(self.findings or self.unexplained) or bool(self.summary.get("recognised_lines", 1))

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION,
                "verdict": self.findings[0].title if self.findings else
                ("no problem found" if self.is_log else NOT_A_LOG),
                "findings": [f.to_dict() for f in self.findings],
                "unexplained": [e.to_dict() for e in self.unexplained],
                "unexplained_total": self.unexplained_total,
                "summary": self.summary, "notices": self.notices}


def build_report(model: JobModel, rules: list[Rule], notices: list[dict[str, str]] | None = None,
                 spread: Spread | None = None) -> Report:
    """Run the rules and put findings, unexplained problem lines and the summary together
    (``spread``: as :func:`~ncclsleuth.rules.ranking.run_rules`)."""
    with paused():
        return _build_report(model, rules, notices, spread)


def _build_report(model: JobModel, rules: list[Rule], notices: list[dict[str, str]] | None,
                  spread: Spread | None) -> Report:
    findings = run_rules(model, rules, spread=spread)
    rest = explained_by(findings).unexplained(model.error_events())
    return Report(findings=findings, unexplained=_unexplained(rest, model), summary=summarize(model),
                  notices=list(notices or []), unexplained_total=len(rest))


def _unexplained(rest: list[Any], model: JobModel) -> list[Evidence]:
    """Up to MAX_UNEXPLAINED lines: one per distinct message shape first, so a flood of
    one WARN cannot hide a different error that came later; then the rest in order."""
    seen: set[str] = set()
    first: list[Event] = []
    for ev in rest:
        shape = _DIGITS.sub("#", ev.text.split(" NCCL ", 1)[-1])[:300]
        if shape not in seen:
            seen.add(shape)
            first.append(ev)
    picked = first[:MAX_UNEXPLAINED]
    if len(picked) < MAX_UNEXPLAINED:
        chosen = {id(e) for e in picked}
        picked += [e for e in rest if id(e) not in chosen][: MAX_UNEXPLAINED - len(picked)]
    picked.sort(key=model.order_key)
    return [Evidence(ev.source, ev.line, ev.text, ev.rank) for ev in picked]
