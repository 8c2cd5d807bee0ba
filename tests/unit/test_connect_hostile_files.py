"""`connect` against a user's own files that could lose or leak something: a key written into a file
others can read, an earlier server's key left for the next server, a URL's password, files the merge
could read but not write back (a YAML key given twice, a lone surrogate, NaN)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from llmdeck.connect import ServeInfo, connect_client
from llmdeck.errors import ConfigError


def info(**kw: object) -> ServeInfo:
    base = {"base_url": "http://127.0.0.1:8101", "model": "tiny-qwen3", "max_model_len": 40960}
    base.update(kw)
    return ServeInfo.model_validate(base)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(
    ("client", "name", "text"),
    [
        ("claude-code", "settings.json", '{"theme": "dark"}'),
        ("codex", "config.toml", 'theme = "dark"\n'),
        ("opencode", "opencode.json", "{}"),
        ("continue", "config.yaml", "name: mine\n"),
    ],
)
def test_a_key_written_into_a_file_others_read_makes_it_owner_only(
    tmp_path: Path, client: str, name: str, text: str
) -> None:
    """The file had stayed 0644 with the key in it, and nothing said so."""
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o644)
    result = connect_client(client, info(api_key="sk-secretkey-123456"), file=path)
    assert "sk-secretkey-123456" in path.read_text() and _mode(path) == 0o600
    assert any("readable by other users" in n for n in result.notes)


def test_a_file_without_a_secret_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "opencode.json"
    path.write_text("{}")
    path.chmod(0o644)
    connect_client("opencode", info(), file=path)
    assert _mode(path) == 0o644


def test_a_urls_password_counts_as_a_secret(tmp_path: Path) -> None:
    path = tmp_path / "opencode.json"
    connect_client("opencode", info(base_url="http://u:secretpw@127.0.0.1:8101"), file=path)
    assert _mode(path) == 0o600


@pytest.mark.parametrize(
    ("client", "name", "field"),
    [("codex", "config.toml", "experimental_bearer_token"), ("opencode", "opencode.json", "apiKey")],
)
def test_an_earlier_servers_key_is_not_left_for_the_next(
    tmp_path: Path, client: str, name: str, field: str
) -> None:
    """Connected first with a key, then to a server that needs none: the old key had stayed beside the
    new URL and gone to the new server."""
    path = tmp_path / name
    connect_client(client, info(api_key="sk-OLDKEY-12345678"), file=path)
    assert "sk-OLDKEY-12345678" in path.read_text()
    connect_client(client, info(base_url="http://localhost:8102"), file=path)
    text = path.read_text()
    assert "localhost:8102" in text and "sk-OLDKEY" not in text and field not in text


@pytest.mark.parametrize(
    ("client", "name", "text", "says"),
    [
        ("continue", "config.yaml", "name: a\nname: b\nmodels: []\n", "given twice"),
        ("aider", ".aider.conf.yml", "a: 1\na: 2\n", "given twice"),
        ("opencode", "opencode.json", '{"name": "\\ud800", "x": 1}', "lone UTF-16 surrogate"),
        ("opencode", "opencode.json", '{"x": NaN}', "NaN, which is no JSON number"),
    ],
)
def test_a_file_the_merge_could_not_write_back_is_refused_untouched(
    tmp_path: Path, client: str, name: str, text: str, says: str
) -> None:
    """These had been internal errors (ruamel's DuplicateKeyError; UnicodeEncodeError after a backup was
    made) or NaN written back as no JSON."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=says) as exc:
        connect_client(client, info(), file=path)
    assert exc.value.exit_code == 2 and path.read_text() == text
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no backup left behind


def test_yaml_merge_keys_may_still_override(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("base: &b {name: x, v: 1}\nother:\n  <<: *b\n  name: y\n")
    connect_client("continue", info(), file=path)
    assert "name: y" in path.read_text()


def test_a_full_disk_during_the_backup_leaves_no_empty_backup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backup's copy ran out of space: an "internal error" (exit 1 as a bug), and an empty
    ``.bak-`` file stayed beside the user's file. Now: no space is an OperationError, the user's file
    as it was, no backup left."""
    import errno
    import shutil

    from llmdeck.errors import OperationError

    path = tmp_path / "opencode.json"
    path.write_text('{"theme": "dark"}')

    def full_disk(src: Path, dst: Path) -> None:
        Path(dst).write_bytes(b"")  # the copy was made, its data did not fit
        raise OSError(errno.ENOSPC, "No space left on device", str(dst))

    monkeypatch.setattr(shutil, "copy2", full_disk)
    with pytest.raises(OperationError, match="No space left"):
        connect_client("opencode", info(), file=path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["opencode.json"]
    assert path.read_text() == '{"theme": "dark"}'


@pytest.mark.parametrize(
    ("client", "name", "text"),
    [("opencode", "opencode.json", "[1, 2]"), ("continue", "config.yaml", "- a list\n")],
)
def test_a_file_of_the_wrong_shape_given_with_file_is_not_told_to_use_file(
    tmp_path: Path, client: str, name: str, text: str
) -> None:
    """A JSON array or a YAML list given with --file had been answered "Fix the file or use --file."."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as info_:
        connect_client(client, info(), file=path)
    assert str(path) in info_.value.message and "--file" not in info_.value.render()
    assert info_.value.hint == "Fix the file, or use --print and paste the block yourself."
    assert path.read_text() == text
