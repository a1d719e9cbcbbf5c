"""The one way through: sources in, a :class:`~ncclsleuth.report.Report` out.

::

    from ncclsleuth import api
    report = api.analyze(["logs/"], api.Options(jobs=4))

Every command goes through here (``analyze``, ``report``, ``diff``, ``topology``,
``serve``, ``watch``'s rule step, the rule-test runner), so they all read inputs with
the same fast path: the block reader, the prefilter and per-file models merged in input
order (:func:`ncclsleuth.model.build.parse_one`), in this process, in forked workers
(``jobs``), in a process pool (URL inputs) or on a Dask cluster (``scheduler``).

The stages, bottom up: ``ingest`` (sources -> lines) and ``events`` (what a line
means), ``parse`` (lines -> events), ``model`` (events -> the job), ``parallel`` and
``rules`` (engines; the diagnosis), ``report`` and ``renderers``, this module, and on
top the front ends (``live``, ``serve``, ``ruletests``, ``cli``).
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .ingest.sources import Discovery, EngineError, InputFile, Notice, discover
from .model.build import parse_one, worker_cache
from .model.job import UNREAD_KINDS, JobModel
from .model.merge import fits, merge
from .parse.grammar import ShapeCache
from .util import reread
from .util.classes import dataclass
from .util.gcpause import paused

if TYPE_CHECKING:
    from .parallel.forked import Beside
    from .parse.stream import EventRun
    from .report import Report
    from .report.diff import DiffResult, Run
    from .rules.findings import Finding
    from .rules.schema import Rule, RuleError

#: an input: a path (file, folder, ``-``, URL) or an input object (bytes in memory, ...)
Source = str | InputFile
#: one per-file (or per-run) result of an engine: (model, notices, files read: a count or a bool)
Result = tuple[JobModel, list[Notice], int | bool]


@dataclass
class Options:
    """How to analyse: the engine, the caches, the rules, what to keep."""

    #: processes parsing files: this one and ``jobs - 1`` forked workers (None: the machine's cores);
    #: with 2 or more, a big model's rule step is shared with one forked helper (``parallel.rulestep``)
    jobs: int | None = 1
    #: parse on a Dask cluster: ``tcp://host:8786`` or ``local:N``
    scheduler: str | None = None
    #: the shape cache, the templates and the validated rule pack on disk (results are identical without)
    cache: bool = True
    #: use (and save) the process's shape cache; False: a fresh one for this call, not saved
    #: (analyses running in threads at once)
    shared_cache: bool = True
    #: with ``shared_cache=False``: this shape cache instead of a fresh one, not saved either
    #: (``serve``: loaded once at start, inherited by its worker processes)
    shapes: ShapeCache | None = field(default=None, repr=False)
    #: rules already loaded; None: load the shipped pack (``default_rules``) and ``rule_dirs``
    rules: Sequence[Rule] | None = None
    #: extra rule folders
    rule_dirs: Sequence[str | Path] = ()
    #: whether the shipped pack is loaded besides ``rule_dirs``
    default_rules: bool = True
    #: skip broken rule files (each goes to ``on_rule_error``) instead of stopping
    keep_going: bool = False
    on_rule_error: Callable[[RuleError], None] | None = None
    #: told once per load, in words, that a user rule replaces the shipped rule of its id
    on_rule_notice: Callable[[str], None] | None = None
    #: the project's rule configuration (``Settings.rule_config()`` of
    #: :mod:`ncclsleuth.util.config`): ``rules`` (extra folders), ``disable``/``enable``
    #: (ids, names, globs), ``severity`` (pattern -> severity)
    config: Mapping[str, Any] | None = None
    #: compute the post-mortem's figures (``Report.figures``): rings, hops, init timeline
    with_figures: bool = False
    #: called with each per-file (or per-run) model as it is merged
    progress: Callable[[JobModel], None] | None = None
    #: called once with the input files found (local inputs), before any is read: a
    #: progress bar's total
    on_inputs: Callable[[Sequence[InputFile]], None] | None = None
    #: fsspec options for URL inputs (endpoint, anonymous access, ...)
    storage_options: dict[str, Any] | None = field(default=None, repr=False)
    #: with ``jobs`` > 1, a plain file of at least twice this many bytes is parsed in pieces
    #: of about this size by the processes (None: ``ncclsleuth.parallel.split.PIECE_BYTES``;
    #: tests set it small, so that boundaries land inside multi-line records)
    piece_bytes: int | None = None


@dataclass
class Built:
    """The job model of some sources, the notices of reading them, how many files were read."""

    model: JobModel
    notices: list[Notice]
    files_read: int


# --------------------------------------------------------------------------- rules


def load_rules(options: Options) -> list[Rule]:
    """The rules ``options`` ask for (``options.rules`` as given, else loaded from the
    folders), as the configuration selects them (``options.config``: extra folders,
    disabled rules, severities).  A user rule with the id of a shipped one replaces it;
    ``on_rule_notice`` is told so, once per call."""
    from .rules.select import select

    config = options.config or {}
    if options.rules is not None:
        return select(list(options.rules), config)
    from .rules.loader import default_rule_dir
    from .rules.loader import load_rules as load
    from .rules.select import override

    errors: list[RuleError] = []
    shipped: list[Rule] = []
    if options.default_rules:
        shipped, errors = load([default_rule_dir()], keep_going=options.keep_going, cache=options.cache)
    user_dirs = [Path(d) for d in (*options.rule_dirs, *config.get("rules", ()))]
    own: list[Rule] = []
    if user_dirs:
        own, more = load(user_dirs, keep_going=options.keep_going, cache=options.cache)
        errors += more
    rules, said = override(shipped, own)
    if options.on_rule_error is not None:
        for e in errors:
            options.on_rule_error(e)
    if options.on_rule_notice is not None:
        for line in said:
            options.on_rule_notice(line)
    return select(rules, config)


# --------------------------------------------------------------------------- building the model


def _engine(sources: Sequence[Source], options: Options) -> Any:
    """None (local inputs, this machine) unless URLs or a scheduler ask for fsspec / Dask."""
    paths = [s for s in sources if isinstance(s, str)]
    if options.scheduler is None and not any("://" in p for p in paths):
        return None
    if len(paths) < len(sources):
        raise EngineError("inputs held in memory cannot go to a cluster or a remote store")
    from .ingest import remote

    try:
        if any(remote.is_url(p) for p in paths):
            remote.require_fsspec()  # one line saying how to install it, before any work
        if options.scheduler is not None:
            from .parallel.cluster import dask_engine

            return dask_engine(options.scheduler, options.storage_options)
        if not remote.needs_remote(paths):
            return None
        from .parallel.pool import remote_engine

        return remote_engine(default_jobs() if options.jobs is None else options.jobs, options.storage_options)
    except ValueError as exc:  # a malformed --scheduler
        raise EngineError(str(exc)) from None


def default_jobs() -> int:
    """``--jobs`` by default: the machine's cores."""
    return max(1, os.cpu_count() or 1)


def _worth_parallel(files: list[InputFile], jobs: int) -> bool:
    """Workers for several files (imported only then: a paste or one log never loads them)."""
    from .parallel.local import worth_parallel

    return worth_parallel(files, jobs)


def _pieces(files: list[InputFile], jobs: int, piece_bytes: int | None) -> list[Any] | None:
    """The work items when a file is big enough to be parsed in pieces (else None); the
    modules are imported only then (a paste or a few small logs never load them)."""
    least = 2 * (piece_bytes or _PIECE_BYTES)
    for f in files:
        try:
            if os.path.getsize(f.path) >= least:
                break
        except (OSError, ValueError):
            pass
    else:
        return None
    from .parallel.split import PIECE_BYTES, plan

    return plan(files, jobs, piece_bytes or PIECE_BYTES)


#: as ncclsleuth.parallel.split.PIECE_BYTES (tests/test_split.py checks), not imported for small inputs
_PIECE_BYTES = 8 << 20


def _unread(options: Options) -> frozenset[str]:
    """Event kinds the model need not keep one by one: those no shipped rule or fact reads,
    when only the shipped rules run (a rule of the user's may read any kind)."""
    return UNREAD_KINDS if options.rules is None and not options.rule_dirs and options.default_rules else frozenset()


def _register_for_reading_again(files: Sequence[InputFile]) -> None:
    """The plain local files among the inputs: the model keeps their lines by reference
    (:mod:`.util.reread`), in this process and the forked workers (Dask's keep their text)."""
    for f in files:
        if type(f) is InputFile and f.path != "-" and "://" not in f.path and os.path.isfile(f.path):
            reread.register(f.display, os.path.abspath(f.path))


def _discover(sources: Sequence[Source]) -> Discovery:
    """Paths expanded by :func:`discover` (consecutive paths together), input objects as given."""
    found = Discovery()
    run: list[str] = []
    for s in [*sources, None]:
        if isinstance(s, str):
            run.append(s)
            continue
        if run:
            part = discover(run)
            found.files.extend(part.files)
            found.notices.extend(part.notices)
            run = []
        if s is not None:
            found.files.append(s)
    return found


def build(sources: Sequence[Source], options: Options | None = None,
          meanwhile: Callable[[], None] | None = None) -> Built:
    """Parse every input into one job model.

    Each file is parsed into its own model and merged in input order, whether in this
    process or elsewhere, so results do not depend on ``jobs`` or the engine.
    ``meanwhile()`` is called once before the first result: right after worker
    processes start, so that work done there (loading the rule pack) overlaps their
    parsing, or before any parsing when there are no workers (a broken rule file is
    reported at once, not after a 2 GB log was read).
    """
    options = options or Options()
    with paused():  # no cycles among millions of events: collection passes are pure overhead
        return _build(list(sources), options, _engine(sources, options), meanwhile)


def _build(sources: list[Source], options: Options, engine: Any, meanwhile: Callable[[], None] | None) -> Built:
    model = JobModel()
    files_read = 0
    jobs = default_jobs() if options.jobs is None else options.jobs
    cache = options.cache
    results: Iterable[Result]
    source: Any = None
    notices: list[Notice] = []
    if engine is not None:
        source = results = engine([str(s) for s in sources], cache)
    else:
        found = _discover(sources)
        notices = list(found.notices)
        drop = _unread(options)
        _register_for_reading_again(found.files)
        if options.on_inputs is not None:
            options.on_inputs(found.files)
        items = _pieces(found.files, jobs, options.piece_bytes) if jobs > 1 else None
        if items is not None:
            from .parallel.split import split_results

            # closed below: stops the pool
            results = source = split_results(items, jobs, cache, meanwhile, drop, partial(fits, model))
            meanwhile = None
        elif jobs > 1 and len(found.files) > 1 and _worth_parallel(found.files, jobs):
            from .parallel.local import parallel_results

            # closed below: stops the pool
            results = source = parallel_results(found.files, jobs, cache, meanwhile, drop, partial(fits, model))
            meanwhile = None
        else:
            shapes = None if options.shared_cache else options.shapes or ShapeCache(enabled=cache)
            results = (parse_one(f, cache, shapes, drop) for f in found.files)
    if meanwhile is not None:
        meanwhile()
    try:
        for part, file_notices, read in results:
            merge(model, part)
            notices.extend(file_notices)
            files_read += int(read)  # a count: one file serially, a run of files from a worker
            if options.progress is not None:
                options.progress(part)
            del part  # merged: not held through the next file's parse (its unkept events)
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()
    notices.extend(Notice("job", why) for why in model.bounds_met())
    if engine is not None:
        notices[:0] = getattr(source, "notices", [])  # discovery notices first, as discover()'s are
    elif options.shared_cache:
        worker_cache(cache).save()
    return Built(model, notices, files_read)


# --------------------------------------------------------------------------- diagnosis


def diagnose(model: JobModel, rules: Sequence[Rule], notices: Sequence[Mapping[str, str]] = (),
             with_figures: bool = False, jobs: int | None = 1) -> Report:
    """The rule step: the rules on a model, findings ranked, unexplained lines, summary
    (and the post-mortem's figures, from the model, when asked); ``jobs`` as ``Options.jobs``:
    a big model's rules are shared with a forked helper (:mod:`ncclsleuth.parallel.rulestep`)."""
    from .report import build_report

    spread = None
    if jobs is None or jobs > 1:  # the module only then (a paste never loads it)
        from .parallel.rulestep import spread_for

        spread = spread_for(model, default_jobs() if jobs is None else jobs)
    report = build_report(model, list(rules), [dict(n) for n in notices], spread)
    if with_figures:
        from .model.figures import build_figures

        report.figures = build_figures(model)
    return report


def evaluate(model: JobModel, rules: Sequence[Rule]) -> list[Finding]:
    """Only the findings of ``rules`` on ``model``, ranked (no report around them)."""
    from .rules.ranking import run_rules

    return run_rules(model, list(rules))


def analyze(sources: Sequence[Source], options: Options | None = None) -> Report:
    """The main job: sources -> :class:`~ncclsleuth.report.Report` (``files_read`` set on it).

    The rule pack loads while worker processes parse (see ``meanwhile`` in :func:`build`); on a
    first run the knowledge table is made beside the parse (:func:`_rules_and_knowledge`).
    """
    options = options or Options()
    loaded: list[tuple[list[Rule], Beside | None]] = []
    with paused():  # one pause: re-enabled in between, gc would first walk the whole model (~1 s at 16k ranks)
        try:
            built = build(sources, options, meanwhile=lambda: loaded.append(_rules_and_knowledge(options)))
        except BaseException:
            if loaded and loaded[0][1] is not None:  # a first run's child: not left behind
                loaded[0][1].join()
            raise
        rules, child = loaded[0]
        _knowledge_ready(child)
        report = diagnose(built.model, rules, [n.to_dict() for n in built.notices], options.with_figures,
                          options.jobs if options.scheduler is None else 1)
    report.files_read = built.files_read
    return report


def _rules_and_knowledge(options: Options) -> tuple[list[Rule], Beside | None]:
    """The rule pack, and the knowledge table made where it is not kept yet, or the child making
    it (:func:`_knowledge_ready` after the parse).  Where the table is kept, both
    are read now.  On a first run (no table kept) a forked child makes and keeps the rule pack,
    then the knowledge table, and this process reads the pack kept as a warm run does, then parses
    while the child makes the table: its 4.5 MB of YAML took ~0.5 s of a first paste's 1.3 s
    before the parse, as long as Lark's LALR tables take in it (:func:`_first_run_beside`).  Where
    no child can, both are made here before the parse (the table read after it would take ~11 MB
    more at the peak of the 8k file's first run)."""
    from . import knowledge

    if options.cache and not knowledge.table_kept():
        child = _first_run_beside(options)
        if child is not None:
            return load_rules(options), child
    return _made_and_kept(options), None


def _made_and_kept(options: Options) -> list[Rule]:
    from . import knowledge

    rules = load_rules(options)
    knowledge.prepare()
    return rules


def _knowledge_ready(child: Beside | None) -> None:
    """The knowledge table ready for the rule step: a first run's child (``child``) waited for, and
    its table read, or made here where it failed or took past its deadline; nothing more where
    :func:`_rules_and_knowledge` had it ready before the parse."""
    if child is None:
        return
    from . import knowledge

    child.join()
    knowledge.prepare()  # nothing where the child kept it


def _first_run_beside(options: Options) -> Beside | None:
    """A forked child that makes and keeps a first run's rule pack (waited for) and then its
    knowledge table (while this process parses): the same files as made here, but the memory that
    reading their YAML takes and frees is not this process's to keep (made here, the resident
    memory after them went 19 -> 44 MiB, and the 8k file's first run peaked ~11 MiB higher).
    None where no child made the rule pack (no cache folder, no fork, other threads running, or
    it failed: this process makes both, and says what failed, as before); a child whose second
    step fails leaves the table to be made here after the parse."""
    from . import knowledge
    from .parallel.forked import run_beside
    from .util.cache import cache_dir

    if cache_dir() is None:  # nothing would be kept
        return None
    return run_beside(partial(load_rules, options), knowledge.prepare)


def warm(options: Options | None = None, samples: Sequence[Source] = ()) -> list[tuple[str, float]]:
    """Make now what a first run makes and keeps in the cache folder (the rule pack parsed, the
    knowledge table, Lark's compiled grammar, the NCCL catalog's index), and the templates of the
    line shapes of ``samples`` (logs of the jobs to come: analysed, the report dropped), and say
    what each took: (what, seconds).  A first run made them on top of its analysis: a 200-line
    paste took ~0.6 s and ~51 MB on a fresh cache folder against ~0.07 s and ~24 MB once they were
    kept, and a container whose cache folder does not outlive it paid that on every run.  Done
    while its image is built, as the user that runs ncclsleuth, every run starts warm.  Raises
    :class:`OSError` where there is no cache folder this user may use (nothing could be kept)."""
    import time

    from . import knowledge
    from .parse import catalog, grammar
    from .util.cache import cache_dir
    from .util.rxstore import keep_compiled

    if cache_dir() is None:
        raise OSError("no cache folder to keep them in ($XDG_CACHE_HOME/ncclsleuth or ~/.cache/ncclsleuth, "
                      "owned by this user and not writable by others)")
    options = options or Options()
    steps: list[tuple[str, Callable[[], object]]] = [
        ("rule pack", partial(load_rules, options)),
        ("knowledge table", knowledge.identifier),  # made and kept where it is not, then read
        ("grammar", grammar.parser),
        ("NCCL catalog", catalog.prepare),
        ("compiled code", keep_compiled),
    ]
    if samples:
        steps.append(("line shapes", partial(analyze, samples, options)))
    done: list[tuple[str, float]] = []
    for what, step in steps:
        t0 = time.perf_counter()
        step()
        done.append((what, time.perf_counter() - t0))
    return done


# --------------------------------------------------------------------------- other views


def diff(good: Sequence[Source], bad: Sequence[Source], options: Options | None = None) -> DiffResult:
    """Analyse a GOOD and a BAD run and say what changed, most suspicious first."""
    from .report.diff import DiffResult, compare

    options = options or Options()
    rules = load_rules(options)
    with paused():  # one pause: re-enabled between a build and its rule step, gc walked the whole model
        g, b = _run(good, options, rules), _run(bad, options, rules)
        return DiffResult(g, b, compare(g, b))


def _run(sources: Sequence[Source], options: Options, rules: list[Rule]) -> Run:
    from .report.diff import Run, run_facts

    built = build(sources, options)
    report = diagnose(built.model, rules, [n.to_dict() for n in built.notices])
    report.files_read = built.files_read
    facts, numbers = run_facts(built.model)
    return Run(", ".join(map(str, sources)), report, facts, numbers, built.files_read)


def events(sources: Sequence[str], options: Options | None = None) -> EventRun:
    """Every event of every line (``text`` ones too), streaming, in file order (``ncclsleuth parse``).

    The line-at-a-time path, with catalog ids: what a line means, not what the rules need."""
    from .parse.stream import iter_events

    return iter_events(list(sources), cache=(options or Options()).cache)


def memory_sources(files: Mapping[str, str | bytes] | str | bytes, dedent: bool = False) -> list[InputFile]:
    """In-memory inputs (a request body, a rule test's snippets): name -> text, or one text."""
    import textwrap

    from .ingest.memory import MemoryInput

    named = files if isinstance(files, Mapping) else {"snippet.log": files}
    out: list[InputFile] = []
    for name, text in named.items():
        if isinstance(text, str):
            text = (textwrap.dedent(text) if dedent else text).encode("utf-8")
        out.append(MemoryInput(name, data=text))
    return out
