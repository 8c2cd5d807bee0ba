import pytest

from wordfreq.cli import main


def run(tmp_path, capsys, text, *args):
    p = tmp_path / "t.txt"
    p.write_text(text)
    code = main([str(p), *args])
    return code, capsys.readouterr().out.splitlines()


def test_top(tmp_path, capsys):
    assert run(tmp_path, capsys, "b a b c a b", "--top", "2") == (0, ["b 3", "a 2"])


def test_top_ties(tmp_path, capsys):
    assert run(tmp_path, capsys, "z y x", "--top", "2") == (0, ["x 1", "y 1"])


@pytest.mark.parametrize("bad", ["0", "-3", "two"])
def test_top_bad(tmp_path, capsys, bad):
    with pytest.raises(SystemExit) as exc:
        run(tmp_path, capsys, "a", "--top", bad)
    assert exc.value.code == 2
