"""Files the user owns: --force deletes only what llmdeck made; writes respect read-only files,
follow symlinks, keep modes and are atomic (classes "destroyed user files" and "files the user
protected" of issue 17)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_helpers import run_cli
from llmdeck.errors import AlreadyExistsError
from security_helpers import FakeHostileModelsServer, serve


@pytest.fixture(autouse=True)
def isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMDECK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("LLMDECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LLMDECK_DEBUG", raising=False)
    monkeypatch.delenv("LLMDECK_API_KEY", raising=False)


@pytest.fixture()
def fake_plain_models_server() -> Iterator[str]:
    """The hostile fake with a plain model id: a server to connect to."""
    handler = type("FakePlainModelsServer", (FakeHostileModelsServer,), {"model_id": "tiny"})
    yield from serve(handler)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# ---- make-tiny --force ------------------------------------------------------------------------


def test_make_tiny_force_on_user_documents_deletes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "Documents"
    docs.mkdir()
    (docs / "thesis.docx").write_text("four years of work")
    (docs / "notes.txt").write_text("keep")
    code, _, err = run_cli(["model", "make-tiny", str(docs), "--force"], capsys)
    assert code == 2, err
    assert "did not make" in err and ".llmdeck-made" in err and "Traceback" not in err
    assert sorted(p.name for p in docs.iterdir()) == ["notes.txt", "thesis.docx"]
    assert (docs / "thesis.docx").read_text() == "four years of work"


def test_force_replaces_what_llmdeck_wrote_into_a_folder_it_marked(tmp_path: Path) -> None:
    """--force deletes the files the marker lists (and the folders they leave empty), never a file the
    user added after (a migration's NOTES.md and mine/ had been deleted with it)."""
    from llmdeck.util.owned import MADE_MARKER, clear_made_dir, is_made_by_llmdeck, mark_made, seal_made

    made = tmp_path / "made"
    mark_made(made, "tiny model")
    (made / "old.bin").write_text("x")
    (made / "sub").mkdir()
    (made / "sub" / "spec.json").write_text("{}")
    outside = tmp_path / "outside.txt"
    outside.write_text("not mine to delete")
    (made / "link").symlink_to(outside)
    seal_made(made)
    (made / "NOTES.md").write_text("the user's")
    (made / "mine").mkdir()
    (made / "mine" / "a.txt").write_text("the user's")
    assert is_made_by_llmdeck(made)
    assert clear_made_dir(made, "tiny model") == ["NOTES.md", "mine"]
    assert sorted(p.name for p in made.iterdir()) == [MADE_MARKER, "NOTES.md", "mine"]
    assert outside.read_text() == "not mine to delete"  # the link went, never what it points at
    mark_made(made, "tiny model")  # a run interrupted before it sealed: its marker lists nothing yet
    (made / "half.bin").write_text("x")
    assert clear_made_dir(made, "tiny model") == ["NOTES.md", "half.bin", "mine"]


def test_a_marker_that_lists_paths_outside_its_folder_deletes_nothing_there(tmp_path: Path) -> None:
    import json

    from llmdeck.util.owned import MADE_MARKER, clear_made_dir, mark_made

    made = tmp_path / "made"
    mark_made(made, "x")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    body = json.loads((made / MADE_MARKER).read_text())
    (made / MADE_MARKER).write_text(json.dumps({**body, "files": ["../victim.txt", str(victim)]}))
    clear_made_dir(made, "x")
    assert victim.read_text() == "keep"


def test_a_marker_of_an_older_llmdeck_without_a_list_deletes_nothing(tmp_path: Path) -> None:
    """Nothing tells an older llmdeck's files from the user's added since: the whole folder had been
    cleared (a hostile-input audit's find)."""
    from llmdeck.util.owned import MADE_MARKER, clear_made_dir

    made = tmp_path / "made"
    made.mkdir()
    (made / MADE_MARKER).write_text('{"kind": "llmdeck-made", "what": "x"}')
    (made / "old.bin").write_text("x")
    with pytest.raises(AlreadyExistsError, match="older llmdeck"):
        clear_made_dir(made, "x")
    assert sorted(p.name for p in made.iterdir()) == [MADE_MARKER, "old.bin"]


def test_an_empty_folder_is_made_into(tmp_path: Path) -> None:
    """An empty folder (made by `mkdir`, or by a start cut short before its marker) has nothing to
    delete: it had been refused as an older llmdeck's (a fresh clone's tests failed on .cache/test-tiny)."""
    from llmdeck.util.owned import clear_made_dir

    (tmp_path / "empty").mkdir()
    assert clear_made_dir(tmp_path / "empty", "x") == []


def test_a_legacy_tiny_marker_deletes_only_the_files_it_lists(tmp_path: Path) -> None:
    """`make-tiny --force` in a folder of an older make-tiny (llmdeck-tiny.json, no .llmdeck-made) to
    which the user had added an adapter and notes: both were deleted."""
    from llmdeck.model.tiny import LEGACY_MARKERS
    from llmdeck.util.owned import clear_made_dir

    made = tmp_path / "legacy"
    (made / "sub").mkdir(parents=True)
    (made / "llmdeck-tiny.json").write_text('{"kind": "llmdeck-tiny", "files": ["config.json"]}')
    (made / "config.json").write_text("{}")
    (made / "my-lora.safetensors").write_text("USER DATA")
    (made / "sub" / "notes.md").write_text("USER")
    assert clear_made_dir(made, "tiny model", LEGACY_MARKERS) == ["my-lora.safetensors", "sub"]
    assert (made / "sub" / "notes.md").read_text() == "USER"


def test_a_listed_file_that_is_a_folder_now_is_refused_before_anything_is_deleted(tmp_path: Path) -> None:
    from llmdeck.util.owned import clear_made_dir, mark_made, seal_made

    made = tmp_path / "made"
    mark_made(made, "x")
    (made / "a.json").write_text("{}")
    (made / "b.json").write_text("{}")
    seal_made(made)
    (made / "b.json").unlink()
    (made / "b.json").mkdir()
    (made / "b.json" / "p.txt").write_text("theirs")
    with pytest.raises(AlreadyExistsError, match="is a folder now"):
        clear_made_dir(made, "x")
    assert (made / "a.json").exists() and (made / "b.json" / "p.txt").exists()


def test_a_symlinked_marker_does_not_count(tmp_path: Path) -> None:
    from llmdeck.errors import AlreadyExistsError
    from llmdeck.util.owned import MADE_MARKER, clear_made_dir, mark_made

    real = tmp_path / "real"
    mark_made(real, "x")
    user = tmp_path / "user"
    user.mkdir()
    (user / "doc.txt").write_text("mine")
    (user / MADE_MARKER).symlink_to(real / MADE_MARKER)
    with pytest.raises(AlreadyExistsError):
        clear_made_dir(user, "tiny model")
    assert (user / "doc.txt").read_text() == "mine"


# ---- the one write helper -------------------------------------------------------------------


def test_atomic_write_refuses_read_only_follows_symlinks_keeps_mode(tmp_path: Path) -> None:
    from llmdeck.errors import UsageError
    from llmdeck.util.atomic import atomic_write_text

    ro = tmp_path / "ro.json"
    ro.write_text("protected")
    ro.chmod(0o444)
    with pytest.raises(UsageError) as info:
        atomic_write_text(ro, "new")
    assert info.value.exit_code == 2 and "read-only" in info.value.message
    assert ro.read_text() == "protected" and _mode(ro) == 0o444

    target = tmp_path / "real" / "conf.json"
    target.parent.mkdir()
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    atomic_write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new" and _mode(target) == 0o640
    assert [p.name for p in target.parent.iterdir()] == ["conf.json"]  # no temp file left

    secret = tmp_path / "new-secret.env"
    atomic_write_text(secret, "K=v", secret=True)
    assert _mode(secret) == 0o600


def test_plan_spec_out_refuses_a_read_only_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "spec.json"
    old = '{"schema_version": 1, "engine": "venv", "model": "/m"}'  # a spec llmdeck wrote, then protected
    out.write_text(old)
    out.chmod(0o444)
    code, _, err = run_cli(["plan", "Qwen3-0.6B", "--machine", "dgx-spark", "--spec-out", str(out)], capsys)
    assert code == 2 and "read-only" in err and "Traceback" not in err
    assert out.read_text() == old and _mode(out) == 0o444


# ---- connect --file -------------------------------------------------------------------------


def _connect(url: str, path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    return run_cli(["connect", "opencode", "--server", url, "--file", str(path), *extra], capsys)


def test_connect_refuses_a_read_only_file(
    fake_plain_models_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "opencode.json"
    cfg.write_text('{"theme": "mine"}\n')
    cfg.chmod(0o444)
    code, _, err = _connect(fake_plain_models_server, cfg, capsys)
    assert code == 2, err
    assert "read-only" in err and "Traceback" not in err
    assert cfg.read_text() == '{"theme": "mine"}\n' and _mode(cfg) == 0o444
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("opencode")) == ["opencode.json"]


def test_connect_writes_through_a_symlink_and_keeps_the_mode(
    fake_plain_models_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "opencode.json"
    real.write_text('{"theme": "mine"}\n')
    real.chmod(0o640)
    link = tmp_path / "opencode.json"
    link.symlink_to(real)
    code, _, err = _connect(fake_plain_models_server, link, capsys)
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == str(real)
    data = json.loads(real.read_text())
    assert data["theme"] == "mine" and "vllm" in data["provider"]
    assert _mode(real) == 0o640


def test_connect_new_file_with_a_key_is_0600(
    fake_plain_models_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "opencode.json"
    code, _, err = _connect(fake_plain_models_server, cfg, capsys, "--api-key", "sk-anything")
    assert code == 0, err
    assert _mode(cfg) == 0o600


# ---- output paths never replace the user's own files ---------------------------------------------


def test_bench_out_and_spec_out_never_replace_a_users_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from llmdeck.util.net import free_port

    notes = tmp_path / "notes.txt"
    notes.write_text("my notes, not a result\n")
    url = f"http://127.0.0.1:{free_port()}"  # refused before any connection is tried
    code, _, err = run_cli(["bench", url, "--num-prompts", "1", "--out", str(notes)], capsys)
    assert code == 2 and "not a bench result llmdeck wrote" in err, err
    code, _, err = run_cli(["plan", "Qwen3-0.6B", "--machine", "dgx-spark", "--spec-out", str(notes)], capsys)
    assert code == 2 and "not a launch spec llmdeck wrote" in err, err
    assert notes.read_text() == "my notes, not a result\n"


def test_what_llmdeck_wrote_may_be_replaced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from llmdeck.util.owned import PNG_MAGIC, is_plot, json_kind_is, refuse_foreign_file

    spec = tmp_path / "spec.json"
    assert run_cli(["plan", "Qwen3-0.6B", "--machine", "dgx-spark", "--spec-out", str(spec)], capsys)[0] in (
        0,
        1,
    )
    assert run_cli(["plan", "Qwen3-0.6B", "--machine", "dgx-spark", "--spec-out", str(spec)], capsys)[0] in (
        0,
        1,
    )
    result = tmp_path / "r.json"
    result.write_text(
        '{\n  "schema_version": 1,\n  "kind": "llmdeck.bench.result",\n  "x": "' + "y" * 100000 + '"}'
    )
    refuse_foreign_file(result, "bench result", json_kind_is("llmdeck.bench.result"))  # a big one too
    plot = tmp_path / "p.png"
    plot.write_bytes(PNG_MAGIC + b"...")
    with pytest.raises(AlreadyExistsError):  # a PNG of the user's: any PNG had counted as llmdeck's
        refuse_foreign_file(plot, "plot", is_plot, tail_too=True)
    (tmp_path / "empty.json").write_text("")
    refuse_foreign_file(tmp_path / "empty.json", "bench result", json_kind_is("llmdeck.bench.result"))


@pytest.mark.parametrize("kind", ["png", "pdf", "svg"])
def test_report_plot_replaces_its_own_picture_and_never_the_users(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`report r.json --plot thesis.pdf` had replaced the user's PDF (any PNG, PDF or SVG counted as a
    plot llmdeck wrote): a plot carries its mark now, in the picture's metadata (a PDF's at its end)."""
    from llmdeck.util.owned import PNG_MAGIC
    from repo_paths import ROOT

    result = str(ROOT / "evidence" / "report" / "results" / "cmp-seqs2.json")
    out = tmp_path / f"plot.{kind}"
    for _ in range(2):  # a second run replaces the first's picture
        code, _o, err = run_cli(["report", result, "--plot", str(out)], capsys)
        assert code == 0, err
    theirs = tmp_path / f"thesis.{kind}"
    pictures = {"png": PNG_MAGIC, "pdf": b"%PDF-1.4\n", "svg": b'<?xml version="1.0"?>\n<svg>'}
    theirs.write_bytes(pictures[kind] + b"their own" + b"x" * 200_000)
    code, _o, err = run_cli(["report", result, "--plot", str(theirs)], capsys)
    assert code == 2 and "llmdeck will not replace it" in err
    assert theirs.read_bytes().startswith(pictures[kind] + b"their own")


def test_report_html_never_replaces_an_input_or_a_users_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`report X.json --html X.json` had turned the bench result into a page (exit 0); a tune folder's
    trials.jsonl or the user's notes went the same way. --html replaces only a page llmdeck wrote."""
    import shutil

    from repo_paths import ROOT

    result = tmp_path / "cmp.json"
    shutil.copy(ROOT / "evidence" / "report" / "results" / "cmp-seqs2.json", result)
    tune = tmp_path / "tune"
    shutil.copytree(ROOT / "evidence" / "tune" / "cpu", tune)
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    kept = {p: p.read_bytes() for p in (result, tune / "trials.jsonl", notes)}
    for source, page in ((result, result), (result, notes), (tune, tune / "trials.jsonl"), (tune, notes)):
        code, _, err = run_cli(["report", str(source), "--html", str(page)], capsys)
        assert code == 2 and "not a report page llmdeck wrote" in err, (source, page, err)
    assert {p: p.read_bytes() for p in kept} == kept
    old_page = tmp_path / "old.html"  # a page llmdeck wrote before pages carried a generator tag
    shutil.copy(ROOT / "evidence" / "report" / "compare.html", old_page)
    assert run_cli(["report", str(result), "--html", str(old_page)], capsys)[0] == 0
    assert '<meta name="generator" content="llmdeck">' in old_page.read_text()
    assert run_cli(["report", str(tune), "--html", str(old_page)], capsys)[0] == 0  # a tune page replaces it


def test_a_dangling_symlink_makes_no_folders_where_it_points(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`keys create --keys-file LINK` (LINK -> /nonexistent/zz) had created /nonexistent and written the
    keys there; a link into a folder that exists is still written through (its target file is new)."""
    link = tmp_path / "keys.json"
    link.symlink_to(tmp_path / "gone" / "deeper" / "zz.json")
    code, _, err = run_cli(["keys", "create", "bob", "--keys-file", str(link)], capsys)
    assert code == 2 and "whose folder does not exist" in err and not (tmp_path / "gone").exists(), err
    link.unlink()
    link.symlink_to(tmp_path / "zz.json")
    assert run_cli(["keys", "create", "bob", "--keys-file", str(link)], capsys)[0] == 0
    assert (tmp_path / "zz.json").is_file()


def test_a_dangling_symlink_on_the_way_makes_no_folders_where_it_points(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`report r.json --plot LINK/out.png` (LINK -> a folder that is not there) had made that folder and
    written the plot into it; folders the path itself names are still made."""
    from repo_paths import ROOT

    result = ROOT / "benchmarks" / "results" / "bench_h200-seeds.json"
    link = tmp_path / "plots"
    link.symlink_to(tmp_path / "gone" / "deeper")
    code, _, err = run_cli(["report", str(result), "--plot", str(link / "out.png")], capsys)
    assert code == 2 and "is a symbolic link to" in err and not (tmp_path / "gone").exists(), err
    assert run_cli(["report", str(result), "--plot", str(tmp_path / "new" / "out.png")], capsys)[0] == 0
    assert (tmp_path / "new" / "out.png").is_file()


def test_an_output_path_that_is_a_fifo_or_a_device_is_refused_without_opening_it(tmp_path: Path) -> None:
    """`bench --html FIFO` / `report r.json --html FIFO` had waited for ever in the open that reads the
    file's first bytes."""
    import os

    from llmdeck.errors import AlreadyExistsError
    from llmdeck.util.owned import is_report_page, refuse_foreign_file

    fifo = tmp_path / "page.html"
    os.mkfifo(fifo)
    for path, what in ((fifo, "a named pipe"), (Path("/dev/full"), "a device")):
        with pytest.raises(AlreadyExistsError, match=what):
            refuse_foreign_file(path, "report page", is_report_page)


@pytest.mark.parametrize(("what", "article"), [("eval result", "an"), ("bench result", "a")])
def test_a_foreign_file_is_named_with_its_article(tmp_path: Path, what: str, article: str) -> None:
    """It had said 'is not a eval result llmdeck wrote'."""
    from llmdeck.errors import AlreadyExistsError
    from llmdeck.util.owned import json_kind_is, refuse_foreign_file

    theirs = tmp_path / "o.json"
    theirs.write_text("{}")
    with pytest.raises(AlreadyExistsError, match=f"is not {article} {what} llmdeck wrote"):
        refuse_foreign_file(theirs, what, json_kind_is("llmdeck.x"))
