"""The content-addressed store (cmx/cache/store.py) and the `cmx cache` verbs, on real runs."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from cmx import api
from cmx.cache.store import META, Entry, EntryMeta, Store
from tests.conftest import Home

TOKEN = "s3cr3t-cache-token-5b1e"


def _file_recipe(home: Home, name: str, counter: Path, tags: str | None = None) -> None:
    """A cacheable recipe that writes data/out.txt (content from input `text`) and counts its runs."""
    home.recipe(name, f"""
        name: {name}
        summary: writes a file
        tags: [{tags or name}]
        inputs:
          text: {{type: str, default: hello}}
        cache: true
        outputs:
          file: {{type: path}}
          folder: {{type: path}}
          text: {{type: str}}
        """, f"""
        def run(ctx):
            with open({str(counter)!r}, "a") as f:
                f.write("ran\\n")
            data = ctx.workdir / "data"
            data.mkdir()
            (data / "out.txt").write_text(ctx.inputs["text"])
            return {{"file": str(data / "out.txt"), "folder": str(ctx.workdir), "text": ctx.inputs["text"]}}
        """)


def _only_entry(store: Store) -> Entry:
    entries = list(store.entries())
    assert len(entries) == 1, entries
    return entries[0]


# --- the store -------------------------------------------------------------------------------

def test_entry_is_invisible_until_published(tmp_path: Path) -> None:
    store = Store(tmp_path / "cache")
    key = "ab" * 32
    with store.lock("some-recipe", key):
        build = store.new_build_dir("some-recipe", key)
        assert build.parent == store.root / "some-recipe" and build.name.startswith(".tmp-")
        (build / "weights.bin").write_bytes(b"\0" * 100)
        (build / META).write_text("{}")  # even a meta.json inside the build folder does not publish it
        assert store.lookup("some-recipe", key) is None
        assert list(store.entries()) == []
        entry = store.publish(build, EntryMeta("some-recipe", key, outputs={"path": str(build / "weights.bin")}))
    assert not build.exists()
    found = store.lookup("some-recipe", key)
    assert found is not None and found.path == store.root / "some-recipe" / key
    assert found.outputs == {"path": str(found.path / "weights.bin")} == entry.outputs
    assert [e.key for e in store.entries()] == [key]


def test_a_running_build_lives_in_a_tmp_folder_beside_its_entry(home: Home) -> None:
    home.recipe("peek", """
        name: peek
        summary: looks at its own build folder
        tags: [peek]
        cache: true
        outputs:
          build_name: {type: str}
          siblings: {type: list}
        """, """
        import os
        def run(ctx):
            return {"build_name": ctx.workdir.name, "siblings": sorted(os.listdir(ctx.workdir.parent))}
        """)
    result = api.run("peek", settings=home.settings)
    out = result.outputs
    assert out["build_name"].startswith(".tmp-")
    # no entry yet
    siblings = [s for s in out["siblings"] if not s.endswith(".lock") and not s.startswith(".scratch-")]
    assert siblings == [out["build_name"]]
    entry = _only_entry(Store(home.settings.cache))
    assert entry.path.name == result.steps["peek"].key
    assert not (entry.path.parent / out["build_name"]).exists()


def test_meta_json_records_recipe_inputs_outputs_deps_times_and_file_checksums(home: Home) -> None:
    home.recipe("base", """
        name: base
        summary: a dep
        tags: [base]
        cache: true
        outputs:
          n: {type: int}
        """, "def run(ctx):\n    return {'n': 7}\n")
    home.recipe("top", """
        name: top
        summary: has a secret input and a dep
        tags: [top]
        inputs:
          samples: {type: int, default: 3}
          token: {type: secret, env: CMX_TEST_TOKEN}
        variations:
          size:
            full: {default: true}
            tiny: {inputs: {samples: 1}}
        deps:
          - tags: base
            as: base
        cache: true
        outputs:
          file: {type: path}
          n: {type: int}
        """, """
        def run(ctx):
            assert ctx.inputs["token"].reveal()
            (ctx.workdir / "sub").mkdir()
            (ctx.workdir / "sub" / "a.txt").write_text("a" * ctx.inputs["samples"])
            (ctx.workdir / "b.bin").write_bytes(bytes(range(256)))
            return {"file": str(ctx.workdir / "sub" / "a.txt"), "n": ctx.deps.base.outputs["n"]}
        """)
    result = api.run("top _tiny", settings=home.settings,
                     environ={"CMX_TEST_TOKEN": TOKEN})
    store = Store(home.settings.cache)
    entry = store.lookup("top", result.steps["top"].key)
    assert entry is not None
    raw = (entry.path / META).read_text()
    assert TOKEN not in raw
    meta = json.loads(raw)
    assert meta["recipe"] == "top" and meta["key"] == entry.key
    assert meta["variations"] == ["tiny"]
    assert meta["inputs"] == {"samples": 1}  # as variation _tiny sets it; the secret is left out
    assert meta["outputs"] == {"file": {"entry_path": "sub/a.txt"}, "n": 7}
    assert meta["deps"] == {"base": result.steps["base"].key}
    created = datetime.fromisoformat(meta["created"])
    assert abs((datetime.now(timezone.utc) - created).total_seconds()) < 120
    assert isinstance(meta["duration"], (int, float)) and meta["duration"] >= 0
    assert meta["size"] == 1 + 256
    assert meta["files"] == {
        "sub/a.txt": hashlib.sha256(b"a").hexdigest(),
        "b.bin": hashlib.sha256(bytes(range(256))).hexdigest(),
    }


def test_path_outputs_inside_the_entry_survive_the_rename(home: Home, tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    _file_recipe(home, "make-file", counter)
    first = home.cmx_json("run", "make-file")
    entry_dir = Path(first["steps"]["make-file"]["entry"])
    assert first["outputs"]["file"] == str(entry_dir / "data" / "out.txt")
    assert first["outputs"]["folder"] == str(entry_dir)
    assert Path(first["outputs"]["file"]).read_text() == "hello"
    meta = json.loads((entry_dir / META).read_text())
    assert meta["outputs"]["file"] == {"entry_path": "data/out.txt"}  # stored relative
    assert meta["outputs"]["folder"] == {"entry_path": "."}
    again = home.cmx_json("run", "make-file")
    assert again["steps"]["make-file"]["status"] == "cached"
    assert again["outputs"] == first["outputs"]  # returned absolute again from the cache
    assert counter.read_text().count("ran") == 1


def test_paths_inside_list_and_dict_outputs_survive_the_rename_too(home: Home) -> None:
    home.recipe("many-files", """
        name: many-files
        summary: returns paths inside list and dict outputs
        tags: [many-files]
        cache: true
        outputs:
          files: {type: list}
          by_name: {type: dict}
        """, """
        def run(ctx):
            paths = {}
            for name in ("a", "b"):
                (ctx.workdir / name).write_text(name)
                paths[name] = str(ctx.workdir / name)
            return {"files": list(paths.values()), "by_name": {"nested": paths, "other": "/elsewhere"}}
        """)
    for status in ("built", "cached"):
        result = home.cmx_json("run", "many-files")
        assert result["steps"]["many-files"]["status"] == status
        entry = Path(result["steps"]["many-files"]["entry"])
        out = result["outputs"]
        assert out["files"] == [str(entry / "a"), str(entry / "b")]
        assert out["by_name"] == {"nested": {"a": str(entry / "a"), "b": str(entry / "b")}, "other": "/elsewhere"}
        assert all(Path(p).read_text() in "ab" for p in out["files"])


# --- cmx cache ls / show / rm ----------------------------------------------------------------

def test_cache_ls_lists_entries_and_filters_by_query(home: Home, tmp_path: Path) -> None:
    assert home.cmx_json("cache", "ls") == []
    _file_recipe(home, "get-alpha", tmp_path / "c1", tags="get, alpha")
    _file_recipe(home, "get-beta", tmp_path / "c2", tags="get, beta")
    home.cmx("run", "alpha", check=True)
    home.cmx("run", "alpha", "--input", "text=other", check=True)
    home.cmx("run", "beta", check=True)
    everything = home.cmx_json("cache", "ls")
    assert sorted(e["recipe"] for e in everything) == ["get-alpha", "get-alpha", "get-beta"]
    alpha = home.cmx_json("cache", "ls", "alpha")
    assert {e["recipe"] for e in alpha} == {"get-alpha"} and len(alpha) == 2
    assert sorted(e["inputs"]["text"] for e in alpha) == ["hello", "other"]
    for e in everything:
        assert Path(e["path"]).is_dir() and len(e["key"]) == 64 and e["size"] > 0
        assert e["outputs"]["file"].startswith(e["path"])
    text = home.cmx("cache", "ls", check=True).stdout
    assert "3 entries" in text and "get-beta" in text


def test_cache_show_prints_meta_of_a_key_prefix(home: Home, tmp_path: Path) -> None:
    _file_recipe(home, "make-file", tmp_path / "c")
    key = home.cmx_json("run", "make-file")["steps"]["make-file"]["key"]
    shown = json.loads(home.cmx("cache", "show", key[:8], check=True).stdout)
    assert shown["key"] == key and shown["recipe"] == "make-file"
    assert shown["outputs"]["file"] == str(Path(shown["path"]) / "data" / "out.txt")
    assert "data/out.txt" in shown["files"]
    missing = home.cmx("cache", "show", "ffffffff")
    assert missing.returncode == 1 and "no cache entry" in missing.stderr


def test_cache_rm_by_key_removes_only_that_entry(home: Home, tmp_path: Path) -> None:
    _file_recipe(home, "make-file", tmp_path / "c")
    k1 = home.cmx_json("run", "make-file")["steps"]["make-file"]["key"]
    k2 = home.cmx_json("run", "make-file", "--input", "text=two")["steps"]["make-file"]["key"]
    assert k1 != k2
    removed = home.cmx_json("cache", "rm", k1[:10])
    assert [e["key"] for e in removed] == [k1]
    assert [e["key"] for e in home.cmx_json("cache", "ls")] == [k2]
    assert not (home.settings.cache / "make-file" / k1).exists()


def test_cache_rm_by_query_removes_every_entry_of_matching_recipes(home: Home, tmp_path: Path) -> None:
    _file_recipe(home, "get-alpha", tmp_path / "c1", tags="get, alpha")
    _file_recipe(home, "get-beta", tmp_path / "c2", tags="get, beta")
    home.cmx("run", "alpha", check=True)
    home.cmx("run", "alpha", "--input", "text=x", check=True)
    home.cmx("run", "beta", check=True)
    removed = home.cmx_json("cache", "rm", "alpha")
    assert sorted(e["recipe"] for e in removed) == ["get-alpha", "get-alpha"]
    assert [e["recipe"] for e in home.cmx_json("cache", "ls")] == ["get-beta"]
    assert not list((home.settings.cache / "get-alpha").glob("*/meta.json"))


# --- cmx cache gc ----------------------------------------------------------------------------

_HOLD_LOCK = """
import sys, time
from filelock import FileLock
with FileLock(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(60)
"""


def test_gc_removes_leftover_build_folders_but_not_one_being_built(home: Home) -> None:
    store = Store(home.settings.cache)
    dead_key, live_key = "1" * 64, "2" * 64
    dead = store.new_build_dir("some-recipe", dead_key)
    (dead / "half.bin").write_bytes(b"x")
    live = store.new_build_dir("some-recipe", live_key)
    lock_path = store.root / "some-recipe" / f".{live_key}.lock"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, str(lock_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        removed = home.cmx_json("cache", "gc")
        assert str(dead) in removed and str(live) not in removed
        assert not dead.exists()
        assert live.is_dir()  # another process holds its lock: it is being built
    finally:
        holder.kill()
        holder.wait()
    removed = home.cmx_json("cache", "gc")
    assert str(live) in removed and not live.exists()


def test_gc_dry_run_removes_nothing(home: Home) -> None:
    leftover = Store(home.settings.cache).new_build_dir("some-recipe", "3" * 64)
    out = home.cmx("cache", "gc", "--dry-run", check=True).stdout
    assert f"would remove {leftover}" in out
    assert leftover.is_dir()


def test_gc_older_than_removes_old_entries_and_keeps_recent_ones(home: Home, tmp_path: Path) -> None:
    _file_recipe(home, "make-file", tmp_path / "c")
    old_key = home.cmx_json("run", "make-file", "--input", "text=old")["steps"]["make-file"]["key"]
    new_key = home.cmx_json("run", "make-file", "--input", "text=new")["steps"]["make-file"]["key"]
    meta_path = home.settings.cache / "make-file" / old_key / META
    meta = json.loads(meta_path.read_text())
    meta["created"] = "2020-01-01T00:00:00+00:00"
    meta_path.write_text(json.dumps(meta))
    assert home.cmx_json("cache", "gc") == []  # without --older-than, entries are kept
    removed = home.cmx_json("cache", "gc", "--older-than", "30")
    old_dir = home.settings.cache / "make-file" / old_key
    assert str(old_dir) in removed
    assert set(removed) <= {str(old_dir), str(old_dir.with_name(f".{old_key}.lock"))}  # and its unused lock
    assert [e["key"] for e in home.cmx_json("cache", "ls")] == [new_key]


# --- cmx cache verify ------------------------------------------------------------------------

def test_verify_reports_a_corrupted_file_and_exits_1(home: Home, tmp_path: Path) -> None:
    _file_recipe(home, "make-file", tmp_path / "c")
    home.cmx("run", "make-file", "--input", "text=fine", check=True)
    out = home.cmx_json("run", "make-file")["outputs"]
    clean = home.cmx("cache", "verify")
    assert clean.returncode == 0 and "2 entries checked, 0 corrupted" in clean.stdout
    Path(out["file"]).write_text("tampered")
    bad = home.cmx("cache", "verify")
    assert bad.returncode == 1
    assert "make-file/" in bad.stdout and "data/out.txt: changed" in bad.stdout
    report = json.loads(home.cmx("cache", "verify", "--json").stdout)
    assert report["checked"] == 2
    assert [(p["file"], p["problem"]) for p in report["problems"]] == [("data/out.txt", "changed")]
    (Path(out["folder"]) / "extra.txt").write_text("dropped in")
    Path(out["file"]).unlink()
    problems = {(p["file"], p["problem"]) for p in json.loads(home.cmx("cache", "verify", "--json").stdout)["problems"]}
    assert problems == {("data/out.txt", "missing"), ("extra.txt", "unexpected")}


def test_verify_remove_deletes_the_corrupted_entry_and_the_next_run_rebuilds_it(home: Home, tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    _file_recipe(home, "make-file", counter)
    first = home.cmx_json("run", "make-file")
    Path(first["outputs"]["file"]).write_text("tampered")
    removed = home.cmx("cache", "verify", "--remove")
    assert removed.returncode == 1 and "removed" in removed.stdout
    assert home.cmx_json("cache", "ls") == []
    again = home.cmx_json("run", "make-file")
    assert again["steps"]["make-file"]["status"] == "built"
    assert Path(again["outputs"]["file"]).read_text() == "hello"
    assert counter.read_text().count("ran") == 2
    assert home.cmx("cache", "verify").returncode == 0


def test_no_cache_verb_lists_builds_in_progress_or_the_index(home: Home, tmp_path: Path) -> None:
    _file_recipe(home, "make-file", tmp_path / "c")
    home.cmx("run", "make-file", check=True)
    Store(home.settings.cache).new_build_dir("make-file", "4" * 64)
    assert (home.settings.cache / ".index").is_dir()
    entries = home.cmx_json("cache", "ls")
    assert [e["recipe"] for e in entries] == ["make-file"]
    assert home.cmx("cache", "verify").returncode == 0
    assert os.path.isfile(home.settings.cache / "README.md")


def test_a_scratch_folder_outlives_a_failed_build_and_goes_on_publish_or_gc(tmp_path: Path) -> None:
    from cmx.cache.store import Store

    store = Store(tmp_path / "cache")
    scratch = store.scratch_dir("fetch", "k" * 64)
    assert not scratch.exists(), "created only by a step that uses it"
    scratch.mkdir(parents=True)
    (scratch / "model.bin.part").write_bytes(b"half")
    assert store.scratch_dir("fetch", "k" * 64) == scratch and (scratch / "model.bin.part").exists()
    build = store.new_build_dir("fetch", "k" * 64)
    store.publish(build, EntryMeta("fetch", "k" * 64))
    assert not scratch.exists()
    left = store.scratch_dir("fetch", "j" * 64)
    left.mkdir()
    assert left in store.gc(dry_run=True) and left.exists()
    store.gc()
    assert not left.exists()
