"""connect writers: published formats, merging into existing user files, backups."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from llmdeck.connect import ServeInfo, connect_client
from llmdeck.errors import ConfigError, UsageError
from repo_paths import ROOT

SCHEMA = ROOT / "src/llmdeck/connect/schemas/opencode-provider.schema.json"


def info(**kw: object) -> ServeInfo:
    base = {
        "base_url": "http://127.0.0.1:8101",
        "model": "tiny-qwen3",
        "max_model_len": 40960,
        "tool_calls": True,
        "reasoning": True,
        "thinking_template": True,
        "thinking_default": True,
    }
    base.update(kw)
    return ServeInfo.model_validate(base)


def validate_opencode(doc: dict[str, object]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)


def test_opencode_block_matches_published_schema_and_server_facts(tmp_path: Path) -> None:
    result = connect_client("opencode", info(), file=tmp_path / "opencode.json")
    doc = json.loads((tmp_path / "opencode.json").read_text())
    validate_opencode(doc)
    provider = doc["provider"]["vllm"]
    assert provider["npm"] == "@ai-sdk/openai-compatible"
    assert provider["options"]["baseURL"] == "http://127.0.0.1:8101/v1"
    model = provider["models"]["tiny-qwen3"]
    assert model["limit"] == {"context": 40960, "output": 10240}
    assert model["tool_call"] is True and model["reasoning"] is True
    assert doc["model"] == "vllm/tiny-qwen3"
    assert result.action == "created" and result.backup is None


def test_schema_rejects_a_wrong_opencode_block() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    bad = {"provider": {"vllm": {"options": {"baseURL": "x"}, "models": {"m": {"limit": {"context": 1}}}}}}
    with pytest.raises(jsonschema.ValidationError):
        validate_opencode(bad)
    with pytest.raises(jsonschema.ValidationError):
        validate_opencode({"provider": {"vllm": {"baseURL": "typo at the wrong level"}}})


def test_opencode_merge_keeps_unrelated_keys_and_backs_up(tmp_path: Path) -> None:
    path = tmp_path / "opencode.json"
    user = {
        "$schema": "https://opencode.ai/config.json",
        "model": "anthropic/claude-sonnet-4-5",
        "theme": "tokyonight",
        "mcp": {"fs": {"type": "local", "command": ["mcp-fs"]}},
        "provider": {
            "anthropic": {"options": {"apiKey": "{env:ANTHROPIC_API_KEY}"}},
            "vllm": {
                "options": {"baseURL": "http://old:8000/v1", "headers": {"X-Team": "a"}},
                "models": {"older-model": {"name": "older-model"}},
            },
        },
    }
    original = json.dumps(user, indent=2)
    path.write_text(original)
    result = connect_client("opencode", info(api_key="sk-local"), file=path)
    doc = json.loads(path.read_text())
    validate_opencode(doc)
    assert result.action == "updated"
    assert result.backup is not None and Path(result.backup).read_text() == original
    assert Path(result.backup).name.startswith("opencode.json.bak-")
    # unrelated keys survive, the user's default model is not changed
    assert doc["theme"] == "tokyonight" and doc["mcp"] == user["mcp"]
    assert doc["model"] == "anthropic/claude-sonnet-4-5"
    assert doc["provider"]["anthropic"] == user["provider"]["anthropic"]
    vllm = doc["provider"]["vllm"]
    assert vllm["options"] == {
        "baseURL": "http://127.0.0.1:8101/v1",
        "headers": {"X-Team": "a"},
        "apiKey": "sk-local",
    }
    assert set(vllm["models"]) == {"older-model", "tiny-qwen3"}
    # a second run changes nothing and makes no second backup
    again = connect_client("opencode", info(api_key="sk-local"), file=path)
    assert again.action == "unchanged" and again.backup is None
    assert len(list(tmp_path.glob("opencode.json.bak-*"))) == 1


def test_opencode_jsonc_file_is_refused_not_clobbered(tmp_path: Path) -> None:
    path = tmp_path / "opencode.json"
    text = '{\n  // my comment\n  "theme": "x"\n}\n'
    path.write_text(text)
    with pytest.raises(ConfigError) as exc:
        connect_client("opencode", info(), file=path)
    assert exc.value.exit_code == 2
    assert path.read_text() == text


def test_thinking_off_is_sent_per_request_where_the_client_allows(tmp_path: Path) -> None:
    oc = connect_client("opencode", info(), print_only=True, thinking="off")
    model = oc.config["provider"]["vllm"]["models"]["tiny-qwen3"]
    assert model["options"] == {"chat_template_kwargs": {"enable_thinking": False}}
    validate_opencode(oc.config)
    cont = connect_client("continue", info(), print_only=True, thinking="off")
    extra = cont.config["models"][0]["requestOptions"]["extraBodyProperties"]
    assert extra == {"chat_template_kwargs": {"enable_thinking": False}}
    # the default leaves thinking to the server and says so
    plain = connect_client("opencode", info(), print_only=True)
    assert "options" not in plain.config["provider"]["vllm"]["models"]["tiny-qwen3"]
    assert any("Thinking is on by default" in n for n in plain.notes)
    # a model without a thinking switch gets no kwargs even when asked
    none = connect_client("opencode", info(thinking_template=False), print_only=True, thinking="off")
    assert "options" not in none.config["provider"]["vllm"]["models"]["tiny-qwen3"]


def test_openclaw_merge_keeps_other_providers_and_models(tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json"
    user = {
        "agents": {"defaults": {"model": {"primary": "vllm/tiny-qwen3"}}},
        "models": {
            "providers": {
                "ollama": {"baseUrl": "http://127.0.0.1:11434/v1", "api": "openai-completions", "models": []},
                "vllm": {"baseUrl": "http://old/v1", "models": [{"id": "other", "name": "other"}]},
            }
        },
    }
    path.write_text(json.dumps(user))
    result = connect_client("openclaw", info(max_model_len=131072), file=path)
    doc = json.loads(path.read_text())
    assert doc["agents"] == user["agents"]
    assert doc["models"]["providers"]["ollama"] == user["models"]["providers"]["ollama"]
    vllm = doc["models"]["providers"]["vllm"]
    assert vllm["baseUrl"] == "http://127.0.0.1:8101/v1" and vllm["api"] == "openai-completions"
    assert vllm["apiKey"] == "none"
    ids = [m["id"] for m in vllm["models"]]
    assert ids == ["other", "tiny-qwen3"]
    mine = vllm["models"][1]
    assert mine["contextWindow"] == 131072 and mine["maxTokens"] == 32768 and mine["reasoning"] is True
    assert result.backup is not None
    connect_client("openclaw", info(max_model_len=131072), file=path)
    assert [m["id"] for m in json.loads(path.read_text())["models"]["providers"]["vllm"]["models"]] == ids


@pytest.mark.parametrize("models", ["x", {"providers": []}, {"providers": {"vllm": "old"}}])
def test_openclaw_file_with_a_non_object_on_our_path_is_merged_after_a_backup(
    tmp_path: Path, models: object
) -> None:
    """models / models.providers / the provider of another shape: was an AttributeError (internal error)."""
    path = tmp_path / "openclaw.json"
    path.write_text(json.dumps({"models": models, "theme": "dark"}))
    result = connect_client("openclaw", info(), file=path)
    doc = json.loads(path.read_text())
    assert doc["theme"] == "dark" and doc["models"]["providers"]["vllm"]["models"][0]["id"] == "tiny-qwen3"
    assert result.backup is not None and json.loads(Path(result.backup).read_text())["models"] == models


@pytest.mark.parametrize("client", ["continue", "aider"])
@pytest.mark.parametrize(
    ("text", "says"), [("[" * 100_000 + "]" * 100_000, "nests too deeply"), ("a: " + "9" * 5000, "number")]
)
def test_yaml_file_past_the_parsers_limits_is_refused_not_a_crash(
    tmp_path: Path, client: str, text: str, says: str
) -> None:
    """Was a RecursionError or ValueError (internal error, exit 1); the file is left as it was."""
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=says) as exc:
        connect_client(client, info(), file=path)
    assert exc.value.exit_code == 2 and "Python" not in exc.value.render()
    assert path.read_text() == text and [p.name for p in tmp_path.iterdir()] == ["config.yaml"]


def test_continue_yaml_merge_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    user = {
        "name": "My Config",
        "version": "1.0.0",
        "schema": "v1",
        "models": [{"name": "gpt", "provider": "openai", "model": "gpt-4o", "apiKey": "sk-x"}],
        "rules": ["Be terse."],
    }
    path.write_text(yaml.safe_dump(user, sort_keys=False))
    connect_client("continue", info(), file=path)
    connect_client("continue", info(max_model_len=8192), file=path)  # again: replaces, no duplicate
    doc = yaml.safe_load(path.read_text())
    assert doc["name"] == "My Config" and doc["rules"] == ["Be terse."]
    assert doc["models"][0] == user["models"][0]
    assert len(doc["models"]) == 2
    mine = doc["models"][1]
    assert mine["provider"] == "openai" and mine["apiBase"] == "http://127.0.0.1:8101/v1"
    assert mine["model"] == "tiny-qwen3" and mine["capabilities"] == ["tool_use"]
    assert mine["defaultCompletionOptions"]["contextLength"] == 8192
    assert len(list(tmp_path.glob("config.yaml.bak-*"))) == 2


def test_continue_keeps_the_users_comments_anchors_and_merge_keys(tmp_path: Path) -> None:
    """PyYAML's load-and-dump had dropped every comment and expanded every anchor of config.yaml."""
    path = tmp_path / "config.yaml"
    path.write_text(
        "# my continue config\n"
        "name: mine  # inline\n"
        "version: 1.0.0\n"
        "schema: v1\n"
        "defaults: &d\n"
        "  provider: openai\n"
        "models:\n"
        "  - <<: *d\n"
        "    name: gpt  # the cloud one\n"
        "    model: gpt-4o\n"
    )
    connect_client("continue", info(), file=path)
    text = path.read_text()
    assert "# my continue config" in text and "# inline" in text and "# the cloud one" in text
    assert "&d" in text and "<<: *d" in text
    doc = yaml.safe_load(text)
    assert [m["name"] for m in doc["models"]] == ["gpt", "tiny-qwen3 (vllm)"]
    assert doc["models"][0]["provider"] == "openai"


@pytest.mark.parametrize(
    ("client", "name", "text", "says"),
    [
        # `models: notalist` had become a list of its characters (`- n`, `- o`, ...) plus the model
        ("continue", "config.yaml", "name: mine\nmodels: notalist\n", "not a list of models"),
        ("continue", "config.yaml", "name: mine\nmodels: {a: 1}\n", "not a list of models"),
        # JSON readers keep the last of two equal keys: the merge had dropped the first without a word
        (
            "opencode",
            "opencode.json",
            '{"provider": {"a": {"x": 1}}, "provider": {"b": {}}}',
            "the key 'provider' is given twice in one object",
        ),
    ],
)
def test_a_config_llmdeck_cannot_merge_is_refused_and_left_as_it_was(
    tmp_path: Path, client: str, name: str, text: str, says: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=says) as exc:
        connect_client(client, info(), file=path)
    assert exc.value.exit_code == 2 and path.read_text() == text


def test_aider_keeps_the_users_comments(tmp_path: Path) -> None:
    path = tmp_path / ".aider.conf.yml"
    path.write_text("# aider conf\nauto-commits: false  # keep\n")
    connect_client("aider", info(), file=path)
    text = path.read_text()
    assert "# aider conf" in text and "auto-commits: false  # keep" in text and "openai-api-base" in text


def test_continue_new_file_has_required_top_level_keys(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "config.yaml"
    connect_client("continue", info(tool_calls=False), file=path)
    doc = yaml.safe_load(path.read_text())
    assert {"name", "version", "schema"} <= set(doc) and doc["schema"] == "v1"
    assert "capabilities" not in doc["models"][0]


def test_a_crlf_dotenv_keeps_its_line_endings(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_bytes(b"# mine\r\nFOO=bar\r\n")
    connect_client("openai", info(), file=env)
    raw = env.read_bytes()
    assert raw.startswith(b"# mine\r\nFOO=bar\r\n") and b"OPENAI_BASE_URL=" in raw
    assert raw.count(b"\n") == raw.count(b"\r\n")


def test_openai_env_print_and_dotenv_merge(tmp_path: Path) -> None:
    printed = connect_client("openai", info(api_key="k1"))
    assert printed.action == "printed" and printed.path is None
    assert "export OPENAI_BASE_URL=http://127.0.0.1:8101/v1\n" in printed.text
    assert "export OPENAI_API_KEY=k1\n" in printed.text
    env = tmp_path / ".env"
    env.write_text("# mine\nFOO=bar\nexport OPENAI_API_KEY=old\n")
    connect_client("openai", info(), file=env)
    lines = env.read_text().splitlines()
    assert lines[:2] == ["# mine", "FOO=bar"]
    assert "OPENAI_API_KEY=EMPTY" in lines and "export OPENAI_API_KEY=old" not in lines
    assert "OPENAI_BASE_URL=http://127.0.0.1:8101/v1" in lines


def test_cline_is_printed_with_context_window() -> None:
    result = connect_client("cline", info(max_model_len=65536))
    assert result.action == "printed"
    assert result.config["apiProvider"] == "openai"
    assert result.config["openAiBaseUrl"] == "http://127.0.0.1:8101/v1"
    assert result.config["openAiModelInfo"]["contextWindow"] == 65536
    assert json.loads(result.text) == result.config


def test_tool_less_server_gets_a_warning_for_agents() -> None:
    result = connect_client("opencode", info(tool_calls=False), print_only=True)
    assert result.config["provider"]["vllm"]["models"]["tiny-qwen3"]["tool_call"] is False
    assert any("--enable-auto-tool-choice" in n for n in result.notes)


def test_unknown_client_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        connect_client("vim", info())


def test_print_with_a_file_is_refused_before_the_server_is_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`connect openai --print --file F` printed the block and ignored F without a word (the user, who
    named a file, believed it written or read)."""
    from cli_helpers import run_cli

    target = tmp_path / "my.env"
    args = ["connect", "openai", "--server", "http://127.0.0.1:9", "--print", "--file", str(target)]
    code, out, err = run_cli(args, capsys)
    flat = " ".join(err.split())
    assert code == 2 and "--print writes nothing" in flat and "Drop --file" in flat and not out
    assert not target.exists()
