"""The on-disk caches (parsed rule YAML, message templates) never change a result."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import ncclsleuth.parse.grammar as G
from ncclsleuth.parse.grammar import ShapeCache, TemplateStore, disk_key
from ncclsleuth.rules import loader as engine
from ncclsleuth.rules.loader import default_rule_dir, load_rules
from ncclsleuth.util import yaml_files, yamldocs
from ncclsleuth.util.cache import cache_dir, unmarshal


def _copy_pack(tmp_path: Path) -> Path:
    dst = tmp_path / "rules"
    shutil.copytree(default_rule_dir(), dst)
    return dst


@pytest.mark.parametrize("spelled", ["{}", "{}/", "{}//", "./{}"])
def test_yaml_files_lists_what_rglob_lists(tmp_path, monkeypatch, spelled):
    # a tree where sorting strings and sorting Paths disagree ("a-b/" before "a/" as text,
    # after it as parts), a symlinked folder rglob does not enter, a folder named *.yaml
    # (rglob lists it), a hidden file, names that only end in yaml
    root = tmp_path / "pack"
    for rel in ("a/z.yaml", "a-b/y.yaml", "a/b/x.yaml", "top.yaml", ".hidden.yaml", "a/notyaml", "a/x.yml",
                "odd.yaml/inner.yaml", "a0/w.yaml"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x: 1\n")
    (root / "linked").symlink_to(root / "a", target_is_directory=True)
    (root / "link.yaml").symlink_to(root / "top.yaml")
    monkeypatch.chdir(tmp_path)
    folder = spelled.format("pack")
    assert yaml_files(folder) == [str(p) for p in sorted(Path(folder).rglob("*.yaml"))]
    assert yaml_files(Path(folder)) == yaml_files(folder)
    assert yaml_files(tmp_path / "absent") == []


def test_rule_docs_cache_used_and_identical(tmp_path, monkeypatch):
    pack = _copy_pack(tmp_path)
    first, _ = load_rules([pack])
    where = yamldocs._docs_path("rules", pack)
    assert where is not None and os.path.exists(where)
    calls = []
    monkeypatch.setattr(yamldocs, "read_yaml", lambda p: calls.append(p))
    monkeypatch.setattr(engine, "_validated", lambda folder, paths: None)  # past the validated pack
    second, _ = load_rules([pack])
    assert calls == []  # nothing parsed: every doc came from the cache
    assert second == first


def test_rule_docs_cache_invalidated_by_an_edit(tmp_path):
    pack = _copy_pack(tmp_path)
    rules, _ = load_rules([pack])
    victim = pack / "net" / "NET001.yaml"
    text = victim.read_text(encoding="utf-8")
    old_title = next(r.title for r in rules if r.id == "NET001")
    victim.write_text(text.replace(f'title: "{old_title}"', 'title: "edited title"', 1), encoding="utf-8")
    assert "edited title" in victim.read_text(encoding="utf-8")
    rules, _ = load_rules([pack])
    assert next(r.title for r in rules if r.id == "NET001") == "edited title"
    # a broken edit is reported exactly as without a cache
    victim.write_text("id: [unclosed\n", encoding="utf-8")
    _, errors = load_rules([pack], keep_going=True)
    assert [e.path for e in errors] == [str(victim)]
    assert "not valid YAML" in str(errors[0])


def test_rule_docs_not_cached_when_json_would_change_them(tmp_path):
    assert yamldocs.save_docs("rules", tmp_path, [], {}) is None  # no manifest: nothing written
    pack = _copy_pack(tmp_path)
    paths = sorted(pack.rglob("*.yaml"))
    yamldocs.save_docs("rules", pack, paths, {str(paths[0]): {1: "int key"}})
    assert yamldocs.cached_docs("rules", pack, paths) is None


def test_template_store_round_trip(tmp_path):
    lines = ["node1:10:11 [0] NCCL INFO Channel 00/02 : 0[0] -> 1[1] via P2P/IPC/read",
             "node1:10:11 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>",
             "unrelated text the grammar rejects 123"]
    learn = ShapeCache()
    before = [learn.parse(t.split(" NCCL INFO ")[-1]) for t in lines]
    learn.save()
    fresh = ShapeCache()
    after = [fresh.parse(t.split(" NCCL INFO ")[-1]) for t in lines]
    assert after == before
    assert fresh.parses == 0  # every shape (the rejected one too) came from disk
    assert ShapeCache(enabled=False).parse(lines[0].split(" NCCL INFO ")[-1]) == before[0]


def test_template_store_keys_shapes_by_their_digest():
    """The file names each shape by its BLAKE2b digest, not by its text (a long line's shape,
    masked values written as 6-byte escapes, made the file ~15x the size and every start parse
    it): a 2,000-character shape costs 32 characters, and is found again from another store."""
    shape = "Trees " + "\x00/\x00/-\x00->\x00->\x00 " * 100
    store = TemplateStore()
    store.learn("shapes", shape, None)
    store.save()
    data = G._read_store()
    assert disk_key(shape) in data["shapes"] and shape not in data["shapes"]
    assert shape.encode() not in next(Path(cache_dir()).glob("templates-*.bin")).read_bytes()
    assert len(disk_key(shape)) == 32 and disk_key(shape) != disk_key(shape + " ")
    assert TemplateStore().get("shapes", shape) is None  # found: a shape the grammar rejected


def test_template_store_ignores_bad_entries():
    folder = cache_dir()
    assert folder is not None
    ShapeCache().parse("Using network IB")  # make sure the file exists
    store = TemplateStore()
    store.learn("shapes", "evil", None)
    store.save()
    path = next(Path(folder).glob("templates-*.bin"))
    data = G._read_store()
    data["shapes"][disk_key("Using network IB")] = ["net_selected", {"network": ["__import__('os')", 0, 0, None]}]
    path.write_bytes(G._pack(data))
    cache = ShapeCache()
    res = cache.parse("Using network IB")
    assert res is not None and res[0] == "net_selected" and cache.parses == 1  # parsed again, not filled


def test_template_store_concurrent_saves_keep_every_entry():
    """Processes saving at the same time (workers at the end of a run) lose nothing."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_learn_and_save, args=(i,)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert all(p.exitcode == 0 for p in procs)
    folder = cache_dir()
    assert folder is not None
    data = G._read_store()
    for i in range(4):
        for j in range(50):
            assert disk_key(f"worker {i} key {j}") in data["shapes"]


def _learn_and_save(i: int) -> None:
    store = TemplateStore()
    for j in range(50):
        store.learn("shapes", f"worker {i} key {j}", None)
        store.save()


def test_unusable_cache_folder_is_skipped(tmp_path, monkeypatch):
    """A cache folder that cannot be created, or that others can write to, is not used."""
    from ncclsleuth.util import cache

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert cache.cache_dir() is None
    shared = tmp_path / "shared"
    (shared / "ncclsleuth").mkdir(parents=True)
    os.chmod(shared / "ncclsleuth", 0o777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    assert cache.cache_dir() is None
    os.chmod(shared / "ncclsleuth", 0o700)
    assert cache.cache_dir() == str(shared / "ncclsleuth")


def test_analysis_works_without_a_cache_folder(tmp_path):
    """A fresh process whose cache folder cannot exist: Lark compiles in memory, nothing is stored."""
    import subprocess
    import sys

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    log = tmp_path / "a.log"
    log.write_text("h:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\nh:1:1 [0] NCCL INFO Using network Socket\n")
    res = subprocess.run([sys.executable, "-m", "ncclsleuth", "analyze", str(log), "--format", "json"],
                         capture_output=True, text=True, env={**os.environ, "XDG_CACHE_HOME": str(blocker)})
    assert res.returncode == 1, res.stderr
    assert json.loads(res.stdout)["findings"][0]["rule_id"] == "NET003"
    assert res.stderr == ""


def test_code_store_round_trip_compiles_each_source_once(monkeypatch):
    from ncclsleuth.util import cache

    compiled = []
    real = compile

    def counting(src, *a):  # type: ignore[no-untyped-def]
        compiled.append(src)
        return real(src, *a)

    monkeypatch.setattr(cache, "compile", counting, raising=False)
    src = "def fill(t):\n    return {'x': t[1:3]}\n"
    first = cache.CodeStore()
    ns: dict = {}
    exec(first.compile(src, "<t>"), ns)  # noqa: S102
    first.save()
    again = cache.CodeStore()
    ns2: dict = {}
    exec(again.compile(src, "<t>"), ns2)  # noqa: S102
    assert ns["fill"]("abcd") == ns2["fill"]("abcd") == {"x": "bc"}
    assert compiled == [src]  # the second store read it from disk


def test_code_store_ignores_a_damaged_or_foreign_file():
    import marshal

    from ncclsleuth.util import cache

    path = cache._code_path()
    assert path is not None
    src = "def f():\n    return 7\n"
    key = cache.code_key(src)
    good = marshal.dumps((src, compile(src, "<t>", "exec")))
    other = "def f():\n    return 8\n"
    huge = cache._MAGIC + (cache._MAX_INDEX + 1).to_bytes(4, "little")

    def indexed(at: object) -> bytes:  # a store whose index says ``at`` for the source's key
        index = marshal.dumps({key: at})
        return cache._MAGIC + len(index).to_bytes(4, "little") + index + good

    base = cache._HEAD + len(marshal.dumps({key: (0, len(good))}))  # where the entry would be
    wrong = [indexed(at) for at in ((base, -1), (-1, len(good)), (base,), [base, len(good)],
                                    (base, len(good), 0), (str(base), len(good)), (base, float(len(good))), None)]
    for bad in (b"not marshal data", marshal.dumps({src: good}),  # the whole-marshal format of before
                huge, cache._MAGIC + b"\x05\x00",  # an index too big; a head cut short
                *wrong,  # an index entry that is not an (offset, size) pair of integers >= 0
                cache.pack_code({key: b"not marshal data"}), cache.pack_code({key: marshal.dumps("not code")}),
                cache.pack_code({key: marshal.dumps((other, compile(other, "<t>", "exec")))}),  # another source
                cache.pack_code({key: good})[:-10],  # the entry cut short
                cache.pack_code({key: good}).replace(cache._MAGIC, b"x" * len(cache._MAGIC))):
        Path(path).write_bytes(bad)
        store = cache.CodeStore()
        ns: dict = {}
        exec(store.compile(src, "<t>"), ns)  # noqa: S102
        assert ns["f"]() == 7
        assert store._used == set() and list(store._new) == [key]  # compiled here, not taken from the file
    for sound in (cache.pack_code({key: good}), indexed((base, len(good)))):
        Path(path).write_bytes(sound)
        store = cache.CodeStore()
        exec(store.compile(src, "<t>"), ns)  # noqa: S102
        assert ns["f"]() == 7 and store._used == {key} and not store._new  # the sound file is used
    Path(path).unlink()


def test_same_report_with_an_empty_and_a_warm_code_store(tmp_path, monkeypatch):
    """Generated code read back from disk parses exactly as freshly compiled code."""
    import subprocess
    import sys

    job = Path(__file__).resolve().parent.parent / "fixtures" / "examples" / "desync-16"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cmd = [sys.executable, "-m", "ncclsleuth", "analyze", str(job), "--format", "json", "--fail-on", "never"]
    cold = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert list(tmp_path.glob("ncclsleuth/code-*.bin"))
    warm = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert warm == cold and json.loads(warm)["findings"]


def _count_reads(monkeypatch) -> list[int]:  # type: ignore[no-untyped-def]
    """The sizes of the reads by offset the caches make from now on (``util.cache.pread``)."""
    from ncclsleuth.util import cache

    reads: list[int] = []
    real = cache._PREAD

    def counting(fd: int, n: int, at: int) -> bytes:
        reads.append(n)
        return real(fd, n, at)

    monkeypatch.setattr(cache, "_PREAD", counting)
    return reads


def test_code_store_reads_only_the_index_and_the_entries_a_process_asks_for(monkeypatch):
    """A start reads the file's index and then, by offset, the entries it uses: not the whole file."""
    from ncclsleuth.util import cache

    path = cache._code_path()
    assert path is not None
    if os.path.exists(path):
        os.unlink(path)
    first = cache.CodeStore()
    sources = [f"def f():\n    return {i}\n" for i in range(300)]
    for src in sources:
        first.compile(src, "<t>")
    first.save()
    size = os.path.getsize(path)
    reads = _count_reads(monkeypatch)
    monkeypatch.setattr(cache, "WHOLE", size - 1)  # a big store: read an entry at a time
    again = cache.CodeStore()
    ns: dict = {}
    exec(again.compile(sources[7], "<t>"), ns)  # noqa: S102
    exec(again.compile(sources[299], "<t>"), ns)  # noqa: S102
    assert ns["f"]() == 299
    assert again._index is not None and len(again._index) == 300  # every entry indexed ...
    assert list(again._code) == [sources[7], sources[299]]  # ... only the two asked for built
    assert len(reads) == 4 and sum(reads) < size // 5  # head, index, two entries
    monkeypatch.setattr(cache, "WHOLE", size)  # a small one: one read, the entries sliced from it
    reads.clear()
    small = cache.CodeStore()
    for src in sources[:10]:
        small.compile(src, "<t>")
    assert reads == [size] and len(small._used) == 10 and not small._new
    kept = cache._read_code()
    assert len(kept) == 300 and all(type(v) is bytes for v in kept.values())


@pytest.mark.parametrize("whole", [True, False])
def test_code_store_entries_stay_readable_when_another_process_replaces_the_file(monkeypatch, whole):
    """A save writes a new file and renames it over the old; a store that opened the old one
    reads its entries at the old offsets from the file it opened (or from the copy it read whole)."""
    from ncclsleuth.util import cache

    monkeypatch.setattr(cache, "WHOLE", 1 << 30 if whole else 0)

    path = cache._code_path()
    assert path is not None
    if os.path.exists(path):
        os.unlink(path)
    sources = [f"def f():\n    return {i}\n" for i in range(50)]
    first = cache.CodeStore()
    for src in sources:
        first.compile(src, "<t>")
    first.save()
    reader = cache.CodeStore()
    reader.compile(sources[0], "<t>")  # the index read, the file open
    writer = cache.CodeStore()
    for i in range(200):  # new entries in the new file: every offset moves
        writer.compile(f"def g():\n    return {i}\n", "<t>")
    writer.save()
    for i, src in enumerate(sources[1:], 1):
        ns: dict = {}
        exec(reader.compile(src, "<t>"), ns)  # noqa: S102
        assert ns["f"]() == i
    assert len(reader._used) == 50 and not reader._new  # all from the old file, none compiled


def test_code_store_save_removes_the_whole_marshal_file_of_earlier_versions():
    from ncclsleuth.util import cache

    path = cache._code_path()
    assert path is not None
    legacy = Path(path[:-len(".bin")] + ".marshal")
    legacy.write_bytes(b"old")
    store = cache.CodeStore()
    store.compile("def f():\n    return 'legacy'\n", "<t>")
    store.save()
    assert not legacy.exists() and os.path.exists(path)


def test_code_store_file_packs_offsets_past_its_index():
    """Each entry is where the index says, for a store of any size (offsets after the index)."""
    import marshal

    from ncclsleuth.util import cache

    for n in (0, 1, 7, 2_000):
        entries = {cache.code_key(str(i)): marshal.dumps((str(i), i)) for i in range(n)}
        data = cache.pack_code(entries)
        index = cache._index_of(data)
        assert index is not None and list(index) == list(entries)
        assert all(data[at:at + size] == entries[k] for k, (at, size) in index.items())


def test_code_store_concurrent_saves_keep_every_entry():
    from ncclsleuth.util import cache

    path = cache._code_path()
    assert path is not None
    if os.path.exists(path):
        os.unlink(path)
    pids = []
    for i in range(4):
        pid = os.fork()
        if pid == 0:
            try:
                store = cache.CodeStore()
                for j in range(20):
                    store.compile(f"def f():\n    return {i * 100 + j}\n", "<t>")
                    store.save()
            finally:
                os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)
    import marshal

    kept = {marshal.loads(v)[0] for v in cache._read_code().values()}
    assert {f"def f():\n    return {i * 100 + j}\n" for i in range(4) for j in range(20)} <= kept


def test_old_template_stores_are_pruned_with_their_lock_files(tmp_path, monkeypatch):
    import time

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = Path(cache_dir())
    for i in range(G.KEEP_STORES + 2):
        (folder / f"templates-old{i}.json").write_text("{}")
        (folder / f"templates-old{i}.json.lock").write_text("")
        os.utime(folder / f"templates-old{i}.json", (time.time() - 100 + i, time.time() - 100 + i))
    G._prune(str(folder / "templates-old0.json"))
    left = sorted(p.name for p in folder.iterdir())
    assert left == sorted(f"templates-old{i}.json{ext}" for i in range(2, G.KEEP_STORES + 2) for ext in ("", ".lock"))


def test_bounded_stores_keep_what_was_used_and_drop_the_oldest():
    from ncclsleuth.util.cache import merge_recent

    stored = {f"k{i}": i for i in range(6)}  # k0 oldest
    kept = merge_recent(stored, used={"k1"}, new={"n1": 10, "k3": 33}, limit=5)
    assert list(kept) == ["k4", "k5", "k1", "n1", "k3"] and kept["k3"] == 33
    assert merge_recent(stored, set(), {}, 10) == stored


def test_template_store_stays_bounded_and_keeps_a_used_entry(monkeypatch):
    monkeypatch.setattr(TemplateStore, "MAX_ENTRIES", 5)
    first = TemplateStore()
    for i in range(5):
        first.learn("shapes", f"old {i}", None)
    first.save()
    again = TemplateStore()
    assert again.get("shapes", "old 0") is None  # found (a rejected shape), and now recently used
    for i in range(3):
        again.learn("shapes", f"new {i}", None)
    again.save()
    data = G._read_store()
    assert list(data["shapes"]) == [disk_key(k) for k in ("old 4", "old 0", "new 0", "new 1", "new 2")]


def test_template_store_reads_the_key_table_and_only_the_entries_looked_up(monkeypatch):
    """A lookup reads the file's key table once and then the one entry it finds, by offset:
    a full store (8,000 shapes) is not parsed by a start that looks up ten."""

    first = TemplateStore()
    for i in range(2_000):
        first.learn("shapes", f"shape {i}", None)
        first.learn("lines", f"line {i}", False)
    first.save()
    path = next(Path(cache_dir()).glob("templates-*.bin"))
    reads = _count_reads(monkeypatch)
    again = TemplateStore()
    assert again.get("shapes", "shape 7") is None and again.get("lines", "line 1999") is False
    assert again.get("shapes", "line 7") is G._MISS and again.get("lines", "shape 7") is G._MISS  # per table
    assert again.get("shapes", "never seen") is G._MISS
    assert len(reads) == 4 and sum(reads) < path.stat().st_size  # head, key table, the two entries found
    assert again._used == {"shapes": {disk_key("shape 7")}, "lines": {disk_key("line 1999")}}


def test_template_store_finds_every_entry_of_either_table():
    rng = __import__("random").Random(5)
    data = {"shapes": {}, "lines": {}}
    for i in range(300):
        data[rng.choice(["shapes", "lines"])][disk_key(f"k{i}")] = rng.choice([None, False, ["k", {"f": (i, 0, 1, None)}]])
    blob = G._pack(data)
    keys = blob[G._HEAD:G._HEAD + G._count(blob) * G._RECORD]
    for table, entries in data.items():
        for key, value in entries.items():
            at = G._find(keys, G._TABLES[table] + bytes.fromhex(key))
            assert at is not None and unmarshal(blob[at[0]:at[0] + at[1]], G._MISS) == value
        other = "lines" if table == "shapes" else "shapes"
        assert all(G._find(keys, G._TABLES[other] + bytes.fromhex(k)) is None for k in entries)
    assert G._find(keys, b"\x00" + bytes(16)) is None and G._find(b"", b"\x00" + bytes(16)) is None


def test_template_store_keeps_reading_the_file_it_opened_while_another_process_saves():
    first = TemplateStore()
    for i in range(50):
        first.learn("shapes", f"old {i}", None)
    first.save()
    reader = TemplateStore()
    assert reader.get("shapes", "old 0") is None  # the key table read, the file open
    writer = TemplateStore()
    for i in range(500):
        writer.learn("shapes", f"new {i}", False)
    writer.save()  # a new file renamed over the one the reader has open: every offset moved
    assert all(reader.get("shapes", f"old {i}") is None for i in range(50))
    assert TemplateStore().get("shapes", "new 499") is False


def test_template_store_ignores_a_damaged_or_foreign_file():
    path = Path(G._store_path() or "")
    good = G._pack({"shapes": {disk_key("s"): ["k", {"f": (1, 2, 3, None)}]}, "lines": {}})
    deep: list = [(1, 2, 3, None)]
    for _ in range(1_500):
        deep = [deep]
    kept = path.read_bytes() if path.exists() else None
    try:
        for bad in (b"", b"{}", G._MAGIC, G._MAGIC + (G._MAX_COUNT + 1).to_bytes(4, "little"),
                    good[:G._HEAD + 10], good[:-3], good.replace(G._MAGIC, b"x" * len(G._MAGIC)),
                    good[:-2] + b"\xff\xff",  # an entry that is not marshal data
                    G._pack({"shapes": {disk_key("s"): ["k", {"f": deep}]}, "lines": {}})):  # spans nested 1,500 deep
            path.write_bytes(bad)
            assert TemplateStore().get("shapes", "s") is G._MISS, bad[:20]
        path.write_bytes(good)
        tpl = TemplateStore().get("shapes", "s")
        assert isinstance(tpl, G.Template) and tpl.kind == "k" and tpl.spans == {"f": (1, 2, 3, None)}
    finally:
        if kept is not None:
            path.write_bytes(kept)


def test_template_store_save_removes_the_json_file_of_earlier_versions():
    store = TemplateStore()
    store.learn("shapes", "s", None)
    store.save()
    path = next(Path(cache_dir()).glob("templates-*.bin"))
    legacy = path.with_suffix(".json")
    legacy.write_text("{}")
    store.learn("shapes", "t", None)
    store.save()
    assert not legacy.exists() and path.exists()


def test_derived_tables_of_two_checkouts_coexist_and_an_edit_replaces_its_own(tmp_path, monkeypatch):
    """Two installs (a benchmark alternating two builds) keep a table each; an edited source
    replaces its own table only."""
    from ncclsleuth.util.cache import derived

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("a")
    b.write_text("b")
    builds: list[str] = []

    def table(src: Path) -> dict[str, str]:
        builds.append(src.name)
        return {"text": src.read_text()}

    for _ in range(2):  # alternating: each built once
        assert derived("kb", [str(a)], lambda: table(a)) == {"text": "a"}
        assert derived("kb", [str(b)], lambda: table(b)) == {"text": "b"}
    assert builds == ["a.yaml", "b.yaml"]
    a.write_text("a2")
    assert derived("kb", [str(a)], lambda: table(a)) == {"text": "a2"}
    assert derived("kb", [str(b)], lambda: table(b)) == {"text": "b"}
    assert builds == ["a.yaml", "b.yaml", "a.yaml"]
    assert len(list((tmp_path / "cache" / "ncclsleuth").glob("kb-*.marshal"))) == 2


# --------------------------------------------------------------------------- the validated rule pack


def _counting_validate(monkeypatch) -> list[str]:
    """Record the path of every rule document the schema validates."""
    seen: list[str] = []
    real = engine.validate

    def counting(doc, path):  # type: ignore[no-untyped-def]
        seen.append(path)
        return real(doc, path)

    monkeypatch.setattr(engine, "validate", counting)
    return seen


def test_validated_pack_is_not_validated_again(tmp_path, monkeypatch):
    pack = _copy_pack(tmp_path)
    first, _ = load_rules([pack])
    checked = _counting_validate(monkeypatch)
    second, _ = load_rules([pack])
    assert checked == []  # kept from the first load: no schema check
    assert second == first


def test_edited_rule_file_is_validated_again(tmp_path, monkeypatch):
    pack = _copy_pack(tmp_path)
    load_rules([pack])
    victim = pack / "net" / "NET001.yaml"
    victim.write_text(victim.read_text(encoding="utf-8").replace("title:", "title: edited -", 1) + "\n",
                      encoding="utf-8")
    checked = _counting_validate(monkeypatch)
    rules, _ = load_rules([pack])
    assert str(victim) in checked
    assert next(r.title for r in rules if r.id == "NET001").startswith("edited -")


def test_invalid_rule_is_refused_on_every_load(tmp_path):
    import pytest

    from ncclsleuth.rules.schema import RuleError

    pack = _copy_pack(tmp_path)
    load_rules([pack])  # a valid pack kept
    victim = pack / "net" / "NET001.yaml"
    victim.write_text(victim.read_text(encoding="utf-8") + "\nunknown_key: 1\n", encoding="utf-8")
    for _ in range(2):  # the error is not kept as valid by the first refusal
        with pytest.raises(RuleError, match="unknown_key"):
            load_rules([pack])
        _, errors = load_rules([pack], keep_going=True)
        assert [(e.path, e.key) for e in errors] == [(str(victim), "unknown_key")]


def test_schema_code_change_validates_the_pack_again(tmp_path, monkeypatch):
    """The pack is kept per version of the schema's code: any of those files edited, every rule is checked."""
    pack = _copy_pack(tmp_path)
    code = tmp_path / "schema.py"
    code.write_text("# v1\n")
    real = engine._schema_sources
    monkeypatch.setattr(engine, "_schema_sources", lambda: [*real(), str(code)])
    load_rules([pack])
    code.write_text("# version 2\n")
    checked = _counting_validate(monkeypatch)
    load_rules([pack])
    assert len(checked) == len(list(pack.rglob("*.yaml")))


def test_no_cache_validates_every_rule_and_keeps_nothing(tmp_path, monkeypatch):
    from ncclsleuth import api

    pack = _copy_pack(tmp_path)
    checked = _counting_validate(monkeypatch)
    rules = api.load_rules(api.Options(cache=False, default_rules=False, rule_dirs=(str(pack),)))
    assert len(checked) == len(rules) == len(list(pack.rglob("*.yaml")))
    folder = cache_dir()
    assert folder is not None
    key = engine._pack_key(sorted(pack.rglob("*.yaml")))
    assert engine.kept(*key, engine._SCHEMA_VERSION) == (False, None)
    assert yamldocs.cached_docs("rules", pack, sorted(pack.rglob("*.yaml"))) is None
    checked.clear()
    api.load_rules(api.Options(cache=False, default_rules=False, rule_dirs=(str(pack),)))
    assert len(checked) == len(rules)  # again: nothing was kept


def test_no_cache_option_reaches_the_rule_loader(tmp_path, monkeypatch):
    """``analyze --no-cache`` validates the pack afresh (the CLI passes the option through)."""
    from click.testing import CliRunner

    from ncclsleuth.cli import main

    log = tmp_path / "a.log"
    log.write_text("h:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n")
    runner = CliRunner()
    runner.invoke(main, ["analyze", str(log), "--format", "json"])  # the pack kept
    checked = _counting_validate(monkeypatch)
    runner.invoke(main, ["analyze", str(log), "--format", "json"])
    assert checked == []
    res = runner.invoke(main, ["analyze", str(log), "--format", "json", "--no-cache"])
    assert res.exit_code in (0, 1), res.output
    assert len(checked) == len(list(default_rule_dir().rglob("*.yaml")))


_COUNT_COMPILES = """
import sys, io, contextlib
from ncclsleuth.util import cache
compiled = []
def counting(source, *args):
    compiled.append(source)
    return compile(source, *args)
cache.compile = counting  # what CodeStore calls where it has no code for a source
from ncclsleuth.cli import main
sys.argv = ["ncclsleuth", "analyze", "--format", "json", sys.argv[1]]
try:
    with contextlib.redirect_stdout(io.StringIO()):
        main()
except SystemExit:
    pass
print(len(compiled))
"""


def test_a_second_analyze_compiles_nothing(tmp_path, monkeypatch):
    """The classes made after the parse (findings, renderers) are kept too (keep_compiled)."""
    import subprocess
    import sys

    job = Path(__file__).resolve().parent.parent / "fixtures" / "examples" / "desync-16"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", _COUNT_COMPILES, str(job)], capture_output=True, text=True,
                           check=True).stdout.split()[-1] for _ in range(2)]
    assert int(runs[0]) > 20 and runs[1] == "0"


def test_stores_read_whole_by_load_all_look_up_without_reading_a_file(monkeypatch):
    """``serve`` reads both stores whole before it forks its workers: a request reads no cache file."""
    from ncclsleuth.util import cache

    store = TemplateStore()
    store.learn("shapes", "a shape", None)
    store.save()
    code = cache.CodeStore()
    src = "def f():\n    return 'whole'\n"
    code.compile(src, "<t>")
    code.save()
    templates, compiled = TemplateStore(), cache.CodeStore()
    templates.load_all()
    compiled.load_all()

    def no_read(*args: object) -> bytes:
        raise AssertionError("a file read after load_all")

    monkeypatch.setattr(cache, "_PREAD", no_read)
    assert templates.get("shapes", "a shape") is None and templates.get("shapes", "other") is G._MISS
    ns: dict = {}
    exec(compiled.compile(src, "<t>"), ns)  # noqa: S102
    assert ns["f"]() == "whole" and compiled._used == {cache.code_key(src)}


def test_a_proc_files_field_is_read_by_its_key(tmp_path):
    """``util.proc_field``: the value after a key in a /proc-style file (the rule step's helper reads
    VmRSS and MemAvailable with it, the atomic writer the umask); None for a missing key or file."""
    from ncclsleuth.util import proc_field

    status = tmp_path / "status"
    status.write_text("Name:\tpython\nUmask:\t0022\nVmRSS:\t  104212 kB\nEmpty:\n", encoding="ascii")
    assert proc_field(str(status), "VmRSS:") == "104212"
    assert proc_field(str(status), "Umask:") == "0022"
    assert proc_field(str(status), "Empty:") is None and proc_field(str(status), "VmHWM:") is None
    assert proc_field(str(tmp_path / "none"), "VmRSS:") is None
