from wordfreq.cli import main, words


def test_words_lower_case():
    assert words("The cat, the HAT.") == ["the", "cat", "the", "hat"]


def test_count(tmp_path, capsys):
    p = tmp_path / "t.txt"
    p.write_text("one two two\nthree")
    assert main([str(p)]) == 0
    assert capsys.readouterr().out.strip() == "4"
