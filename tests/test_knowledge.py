"""The knowledge base (knowledge/): valid against its schema, consistent with the shipped
catalogs, complete over NCCL's core WARN call sites, and looked up as documented."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from ncclsleuth import knowledge
from ncclsleuth.knowledge.identify import literal_parts, torch_formats
from ncclsleuth.knowledge.schema import check_file
from ncclsleuth.parse import catalog
from ncclsleuth.util.yamldocs import yaml_docs

DOCS = yaml_docs(knowledge.default_dir(), "knowledge-test")
ENTRIES = [(Path(path).name, doc.get("source"), e) for path, doc in sorted(DOCS.items())
           for e in doc.get("entries") or ()]
NCCL = [(f, e) for f, s, e in ENTRIES if s == "nccl"]
TORCH = [(f, e) for f, s, e in ENTRIES if s == "torch"]


@pytest.mark.parametrize("path", sorted(DOCS), ids=lambda p: Path(p).name)
def test_every_file_follows_the_schema(path):
    assert check_file(DOCS[path]) == []


def test_nccl_entries_name_catalog_formats_and_files():
    formats = catalog.by_id()
    problems = []
    for fname, e in NCCL:
        fmt = formats.get(e["id"])
        if fmt is None:
            problems.append(f"{fname} {e['id']}: not in the catalog")
        elif fmt.format != e["format"]:
            problems.append(f"{fname} {e['id']}: format differs from the catalog's {fmt.format!r}")
        elif not set(e.get("files") or ()) <= set(fmt.files):
            problems.append(f"{fname} {e['id']}: files {e['files']} not all in {fmt.files}")
    assert problems == []


def test_every_core_warn_call_site_has_exactly_one_entry():
    """Coverage: each (file, format) of an NCCL core WARN (src/, all releases) is explained once."""
    owner: dict[tuple[str, str], list[str]] = defaultdict(list)
    formats = catalog.by_id()
    for fname, e in NCCL:
        for f in e.get("files") or formats[e["id"]].files:
            owner[(f, e["id"])].append(fname)
    sites = {(f, fmt.id) for fmt in formats.values() if fmt.level == "WARN" for f in fmt.files if f.startswith("src/")}
    assert len(sites) > 1400
    assert sorted(s for s in sites if s not in owner) == []
    assert {s: o for s, o in owner.items() if len(o) > 1} == {}


def test_torch_entries_name_catalog_messages_and_cover_them():
    cat = dict(torch_formats())
    assert [e["id"] for _, e in TORCH if cat.get(e["id"]) != e["format"] and not e["id"].startswith("TORCH-")] == []
    assert sorted(set(cat) - {e["id"] for _, e in TORCH}) == []


def test_torch_messages_the_catalog_lacks_identify_as_themselves():
    """A PyTorch message missing from the reference catalog (TORCH-<slug>, read from a real log
    or a wheel's strings) carries the real line it was read from, and that line is found as it."""
    extra = [e for _, e in TORCH if e["id"].startswith("TORCH-")]
    assert extra, "no TORCH-<slug> entry: the test checks nothing"
    wrong = []
    for e in extra:
        line = " ".join(str(e["example"]).splitlines())
        known = knowledge.identifier().identify(line)
        if known is None or known.id != e["id"]:
            wrong.append((e["id"], known and known.id))
    assert wrong == []


def test_other_sources_have_examples_that_identify():
    """A neighbour's entry with an example line: the line is identified (as that entry, or as
    another source's message of the same text), so the formats match what the programs print.
    Entries for values inside a block (a ``nvidia-smi topo -m`` cell, an ``ibstat`` field)
    hold too little literal text to find a line by and are read by block parsers instead."""
    wrong = []
    for fname, source, e in ENTRIES:
        if source in ("nccl", "torch") or not e.get("example") or not literal_parts(e["format"]):
            continue
        line = " ".join(str(e["example"]).splitlines())  # a message printed over lines, as one
        if knowledge.identifier().identify(line) is None:
            wrong.append(f"{fname} {e['id']}: {line[:100]!r}")
    assert wrong == []


def _kb(entries: list[dict]) -> knowledge.KnowledgeBase:
    base = {"function": "f", "subsystem": "socket", "severity": "error", "meaning": "m", "why": "w", "fix": "",
            "ref": "r", "format": "x"}
    return knowledge.KnowledgeBase([{"source": "nccl", "entries": [{**base, **e} for e in entries]}])


def test_lookup_picks_the_entry_of_the_printing_file():
    kb = _kb([{"id": "A", "files": ["src/bootstrap.cc"], "role": "cause", "category": "rendezvous_misconfig"},
              {"id": "A", "files": ["src/transport/net_socket.cc"], "role": "cause", "category": "collective_desync"}])
    assert kb.lookup("A", file="bootstrap.cc").category == "rendezvous_misconfig"  # type: ignore[union-attr]
    assert kb.lookup("A", file="transport/net_socket.cc").category == "collective_desync"  # type: ignore[union-attr]
    # an RCCL build path names the same file
    assert kb.lookup("A", file="/build/rccl/hipify/src/bootstrap.cc").category == "rendezvous_misconfig"  # type: ignore[union-attr]
    assert kb.lookup("B") is None


def test_the_first_context_variant_that_holds_wins():
    kb = _kb([{"id": "C", "role": "cause", "category": "network_blocked", "context": [
        {"when": {"message": "refused", "phase": "runtime"}, "role": "symptom", "category": "peer_failure"},
        {"when": {"message": "refused"}, "meaning": "port closed"},
        {"when": {"phase": "runtime"}, "role": "symptom", "category": "peer_failure", "meaning": "peer died"}]}])
    m = kb.lookup("C", message="Connection refused", phase="runtime")
    assert (m.role, m.category, m.meaning) == ("symptom", "peer_failure", "m")  # type: ignore[union-attr]
    m = kb.lookup("C", message="Connection refused", phase="init")
    assert (m.role, m.category, m.meaning) == ("cause", "network_blocked", "port closed")  # type: ignore[union-attr]
    m = kb.lookup("C", message="timed out", phase="runtime")
    assert (m.role, m.meaning) == ("symptom", "peer died")  # type: ignore[union-attr]
    assert kb.lookup("C", message="timed out").role == "cause"  # type: ignore[union-attr]


@pytest.mark.parametrize("line, source, key", [
    ("node5:240:240 [6] misc/ibvwrap.cc:212 NCCL WARN Call to ibv_open_device failed", "nccl", "NCCL-W-ca11100b"),
    ("2019-06-02T16:13:44.884Z: [1,12]<stdout>:c-57:815:864 [0] misc/ibvwrap.cu:220 NCCL WARN Call to "
     "ibv_get_async_event failed", "nccl", "NCCL-W-81fa9200"),
    ("[rank3]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [PG ID 0 PG GUID 0(default_pg) Rank 3] Watchdog "
     "caught collective operation timeout: WorkNCCL(SeqNum=1245, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
     "Timeout(ms)=600000) ran for 600012 milliseconds before timing out.", "torch", "PGN-WD-TIMEOUT"),
    ("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/4 clients joined.",
     "torch", "TCP-WAIT-WORKERS"),
])
def test_lines_are_identified(line, source, key):
    hit = knowledge.identifier().identify(line)
    assert hit is not None and (hit.source, hit.id) == (source, key)


def test_identification_keeps_numbers_that_name_the_message():
    """Xid 43 and Xid 79 are different messages: the cache must not fold them."""
    idf = knowledge.identifier()
    a = idf.identify("[ 1234.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.")
    b = idf.identify("[ 1234.5] NVRM: Xid (PCI:0000:3b:00): 43, pid=1234, Ch 00000008")
    assert a is not None and b is not None and a.id != b.id


def test_a_line_nobody_knows_is_not_identified():
    assert knowledge.identifier().identify("step 12 loss 0.53 time 41.2ms") is None


def _scan(index, text):
    """Every format of ``index`` on ``text`` itself: what ``FormatIndex.find`` answered
    before it remembered the formats without digits per line shape."""
    flat = " ".join(text.split())
    best = None
    for source, key, lits, total, word in index._entries:
        if word in flat:
            found = index._found(flat, lits)
            if found >= index.SHARE * total and (best is None or found > best[0]):
                best = (found, source, key)
    return (best[1], best[2]) if best else None


def test_format_index_remembers_shapes_without_losing_digits():
    """Lines made of each format's literal text with numbers around it (the same shape with
    other numbers hits the memo), digits inside the text changed too: the memo answers what
    scanning every format answers, and Xid 43 stays apart from Xid 79."""
    index = knowledge.identifier()._others
    entries = index._entries[::7] + [e for e in index._entries if any(c.isdigit() for lit in e[2] for c in lit)]
    lines = []
    for _, _, lits, _, _ in entries:
        text = " 17 ".join(lits)
        lines += [f"[rank3] {text} 5", f"[rank12] {text} 40", f"[rank3] {text.replace('4', '7')} 5"]
    lines += ["[ 1234.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
              "[ 1234.5] NVRM: Xid (PCI:0000:3b:00): 43, pid=1234, Ch 00000008"]
    for line in lines:
        assert index.find(line) == _scan(index, line), line
    assert index._memo  # the memo was used


def _fresh_table(monkeypatch, tmp_path):
    """The knowledge table built in an empty cache folder (``_table``'s memo cleared)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    knowledge._table.cache_clear()
    knowledge._load.cache_clear()
    return knowledge._table(str(knowledge.default_dir()))


def test_the_table_keeps_the_entries_in_a_blob_read_by_offset(monkeypatch, tmp_path):
    """The cached table holds offsets, not the 2,800 entries; each id reads back as the files say."""
    try:
        table = _fresh_table(monkeypatch, tmp_path)
        assert "by_id" not in table and Path(table["blob"]).parent == tmp_path / "ncclsleuth"
        assert Path(table["blob"]).stat().st_size == table["blob_size"] == sum(n for _, n in table["index"].values())
        from_files = knowledge.load(check=True)
        from_blob = knowledge._load(str(knowledge.default_dir()), False)
        assert from_blob._by_id == {}  # nothing decoded before a lookup
        for key in from_files.ids()[::97]:
            assert from_blob._entries(key) == from_files._entries(key)
        assert len(from_blob._by_id) == len(from_files.ids()[::97])
    finally:
        knowledge._table.cache_clear()
        knowledge._load.cache_clear()


def test_a_removed_blob_is_built_again_and_a_vanished_one_read_from_the_files(monkeypatch, tmp_path):
    try:
        table = _fresh_table(monkeypatch, tmp_path)
        key = next(iter(table["index"]))
        expected = knowledge.load(check=True)._entries(key)
        kb = knowledge._load(str(knowledge.default_dir()), False)
        Path(table["blob"]).unlink()
        assert kb._entries(key) == expected  # under a running process: the files are read
        knowledge._table.cache_clear()
        again = knowledge._table(str(knowledge.default_dir()))  # the next run: the blob is made again
        assert Path(again["blob"]).stat().st_size == again["blob_size"]
    finally:
        knowledge._table.cache_clear()
        knowledge._load.cache_clear()


def test_a_damaged_blob_is_read_from_the_files(monkeypatch, tmp_path):
    """Bytes in the blob that are not marshal data (the file overwritten in place) do not stop the
    run: the entries are read from the knowledge files, as for a blob that went away."""
    try:
        table = _fresh_table(monkeypatch, tmp_path)
        key = next(iter(table["index"]))
        expected = knowledge.load(check=True)._entries(key)
        kb = knowledge._load(str(knowledge.default_dir()), False)
        blob = Path(table["blob"])
        blob.write_bytes(b"\xff" * blob.stat().st_size)  # same size, no marshal data
        assert kb._entries(key) == expected and kb._packed == {}
    finally:
        knowledge._table.cache_clear()
        knowledge._load.cache_clear()


def test_without_a_cache_folder_the_entries_stay_in_the_table(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    try:
        table = _fresh_table(monkeypatch, blocker)  # XDG_CACHE_HOME is a file: no cache folder
        assert "by_id" in table and "blob" not in table
        kb = knowledge._load(str(knowledge.default_dir()), False)
        key = next(iter(table["by_id"]))
        assert kb._entries(key) == knowledge.load(check=True)._entries(key)
    finally:
        knowledge._table.cache_clear()
        knowledge._load.cache_clear()


#: what ncclGetErrorString returns (NVIDIA/nccl src/init.cc), as a wrapper quotes it
#: ('NCCL error: <string>': vLLM's pynccl, CuPy, Ray), by release
NCCL_ERROR_STRINGS = {
    "unhandled system error (run with NCCL_DEBUG=INFO for details)": "NCCL-LIB-SYS",  # 2.18.1+
    "unhandled cuda error (run with NCCL_DEBUG=INFO for details)": "NCCL-LIB-CUDA",  # 2.18.1+
    "remote process exited or there was a network error": "NCCL-LIB-REMOTE",  # 2.13+
    "unhandled system error": "TORCH-nccl-string-system-pre218",  # 2.3.5-2.17.1
    "unhandled cuda error": "TORCH-nccl-string-cuda-pre218",  # 2.3.5-2.17.1
}


def test_nccl_error_strings_of_every_release_are_known():
    """A bare 'NCCL error: unhandled system error' (NCCL before 2.18) was listed as unexplained
    under a 'No problem found' verdict (corpus miaai-glm-26)."""
    got = {}
    for text in NCCL_ERROR_STRINGS:
        hit = knowledge.explain(f"RuntimeError: NCCL error: {text}", None)
        got[text] = hit[1].id if hit else None
    assert got == NCCL_ERROR_STRINGS


def test_a_run_makes_the_knowledge_table_before_its_parse_where_none_is_kept(monkeypatch, tmp_path):
    """A first run made the table (4.5 MB of YAML) when its first problem line was explained, after
    the parse: ~11 MB more at the peak of the 8,000-rank file's first run.  ``analyze`` now makes it
    before the parse where none is kept; where one is, it reads nothing (once a process).  Here
    without fork, so in this process (with it, a child makes it: tests/test_first_run.py)."""
    from ncclsleuth import api
    from ncclsleuth.model import build
    from ncclsleuth.parallel import forked
    from ncclsleuth.util import cache

    folder = str(knowledge.default_dir())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(forked, "available", lambda: False)
    order: list[str] = []
    real_table, real_parse = knowledge._table, build.parse_one

    def table(where: str):  # type: ignore[no-untyped-def]
        order.append("table")
        return real_table(where)

    def parse_one(*a, **k):  # type: ignore[no-untyped-def]
        order.append("parse")
        return real_parse(*a, **k)

    monkeypatch.setattr(knowledge, "_table", table)
    monkeypatch.setattr(api, "parse_one", parse_one)
    log = Path(__file__).resolve().parent.parent / "fixtures" / "examples" / "desync-16" / "nccl.node000.29094.log"
    try:
        for c in (real_table, knowledge._load, knowledge._prepare):
            c.cache_clear()
        assert not cache.is_kept("knowledge", knowledge._sources(folder), knowledge.TABLE_VERSION)
        api.analyze([str(log)], api.Options(jobs=1))
        assert order[:2] == ["table", "parse"]
        assert cache.is_kept("knowledge", knowledge._sources(folder), knowledge.TABLE_VERSION)
        order.clear()
        for c in (real_table, knowledge._prepare):
            c.cache_clear()
        knowledge.prepare()  # kept: nothing made, nothing read
        assert order == []
    finally:
        for c in (real_table, knowledge._load, knowledge._prepare):
            c.cache_clear()
