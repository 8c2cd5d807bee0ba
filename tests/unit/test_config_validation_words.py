"""Gateway config errors in the file's terms (formats/validation.py): an unknown key names the keys that
are there, a union's member tags are dropped and its messages joined, a scalar member's complaint is
left out beside the model member's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmdeck.errors import ConfigError
from llmdeck.gateway.config import parse_config
from llmdeck.settings import Settings

HEAD = "routes:\n  - model: a\n    backends: ['http://127.0.0.1:9']\n"


def _message(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(text, source=tmp_path / "gw.yaml", settings=Settings(state_dir=tmp_path / "state"))
    return " ".join(info.value.render().split())


@pytest.mark.parametrize(
    ("text", "words"),
    [
        # it had said "Extra inputs are not permitted", naming no key that is
        (HEAD + "timeouts: {connect: 2}\n", "timeouts.connect: not a key here (the keys here: connect_s, "),
        # pydantic's union tags had leaked: budget.memory_gib.literal['auto'] / .constrained-float
        (HEAD + "budget: {memory_gib: -3}\n", "budget.memory_gib: Input should be 'auto' or Input should be"),
        (
            "routes:\n  - model: a\n    backends: [{url: 'http://h:1', bogus: 1}]\n",
            "routes[0].backends[0].bogus: not a key here (the keys here: url, server, spec,",
        ),
        # an alias with markup and an escape sequence had been served and shown (as red text)
        (
            "routes:\n  - model: \"[red]x[/red]\\x1b]0;t\\x07\"\n    backends: ['http://127.0.0.1:9']\n",
            "routes[0].model: the alias '[red]x[/red]\\x1b]0;t\\x07' is no name: use up to 200 printable",
        ),
        (
            HEAD + "limits: {k: {rpm: 100000000000000000000}}\n",
            "limits.k.rpm: Input should be less than or equal",
        ),
        # YAML's .nan / .inf had gone out in every request as "max_tokens": NaN (no JSON reader takes it)
        (
            HEAD + "    defaults: {max_tokens: .nan}\n",
            "gw.yaml:4: routes[0].defaults: max_tokens is nan, which JSON cannot carry: give a finite number",
        ),
        (
            HEAD + "    responses: {override: {extra: {a: [1, -.inf]}}}\n",
            "routes[0].responses.override: extra.a.1 is -inf, which JSON cannot carry",
        ),
        # a second `routes:` (or `defaults:`) had silently replaced the first
        (HEAD + HEAD.replace("a", "b"), "gw.yaml:4: not valid YAML (the key 'routes' is given twice in one"),
        (
            HEAD + "    defaults: {max_tokens: 9}\n    defaults: {temperature: 0}\n",
            "gw.yaml:5: not valid YAML (the key 'defaults' is given twice in one mapping (lines 4 and 5)",
        ),
    ],
)
def test_config_errors_read_as_the_file(tmp_path: Path, text: str, words: str) -> None:
    message = _message(tmp_path, text)
    assert words in message
    assert "literal[" not in message and "constrained-" not in message and ".str:" not in message


def test_a_key_that_looks_secret_is_named_not_redacted_into_nonsense(tmp_path: Path) -> None:
    """'api_key: Extra inputs ...' had been redacted to 'api_key: <redacted> inputs are not permitted'."""
    message = _message(tmp_path, HEAD.replace("    backends", "    api_key: sk-CONFIGSECRET1\n    backends"))
    assert "routes[0].api_key: not a key here (the keys here: model, backends" in message
    assert "CONFIGSECRET" not in message and "<redacted> inputs" not in message
