"""`llmdeck migrate ollama` against a FAKE Ollama serving Ollama's documented answers (fake_ollama.py)."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest

from cli_helpers import run_cli
from fake_ollama import FakeOllama, documented_box, fixture, running


def _migrate(url: str, out: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    return run_cli(
        ["migrate", "ollama", "--ollama", url, "--out", str(out), "--machine", "dgx-spark", *extra], capsys
    )


def test_documented_box_specs_gateway_and_unmapped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from llmdeck.engines.spec import read_spec_file
    from llmdeck.gateway.config import load_config
    from llmdeck.plan.planner import PlanRequest, make_plan
    from llmdeck.settings import Settings

    out = tmp_path / "mig"
    with running() as (url, fake):
        code, stdout, stderr = _migrate(url, out, capsys, "--json")
    assert code == 0, stderr
    report = json.loads(stdout)
    assert report == json.loads((out / "migration.json").read_text())
    assert report["kind"] == "llmdeck.migrate.ollama" and report["schema_version"] == 1
    assert report["host"]["python"] and report["machine"] == "dgx-spark"
    (mistral,) = report["migrated"]
    assert mistral["ollama_name"] == "mistral:latest" and mistral["aliases"] == ["mistral", "mistral:latest"]
    assert mistral["repo_id"] == "mistralai/Mistral-7B-Instruct-v0.3"
    assert mistral["kv_cache_tokens"] > 0 and mistral["requested_gib"] > mistral["weights_gib"] > 10
    changes = {c["what"]: c for c in mistral["changes"]}
    assert (
        "Q4_0" in changes["weights"]["ollama"]
        and "--tool-call-parser mistral" in changes["tool calls"]["vllm"]
    )
    assert changes["keep-alive"]["ollama"].endswith("2024-06-04T14:38:31.83753-07:00)")  # docs' ps
    unmapped = {u["ollama_name"]: u for u in report["unmapped"]}
    assert set(unmapped) == {"deepseek-r1:latest", "llama3.2:latest", "gemma4", "llava:latest"}
    assert (
        unmapped["deepseek-r1:latest"]["family"] == "qwen2"
        and "no catalog entry" in unmapped["gemma4"]["why"]
    )
    # Ollama's loaded models: reported with the command, never unloaded without --unload
    assert [m["name"] for m in report["loaded"]] == ["gemma4", "mistral:latest"]
    assert fake.unloaded == [] and report["unloaded"] == []
    assert any('"keep_alive": 0' in c and "/api/generate" in c for c in report["next_commands"])
    assert "POST /api/show" in fake.requests
    # the spec is one `llmdeck up --spec` reads, and plan validates its flags for the machine
    spec = read_spec_file(out / mistral["spec_file"])
    assert spec.port == 8001 and "--enable-prefix-caching" in spec.vllm_args
    plan = make_plan(
        PlanRequest(model=mistral["catalog_name"], machine="dgx-spark", vllm_args=spec.vllm_args)
    )
    assert plan.memory.fits and not plan.errors
    # the gateway config loads as `gateway up` loads it; its aliases are the Ollama names
    loaded = load_config(out / "gateway.yaml", Settings(state_dir=tmp_path / "state"))
    assert [r.alias for r in loaded.routes] == ["mistral", "mistral:latest"]
    assert loaded.routes[0].backends[0].managed is not None


def test_qwen3_alias_thinking_default_off(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A documented tags entry renamed to qwen3:30b-a3b (a derived answer: the docs show no Qwen3)."""
    import yaml

    entry = copy.deepcopy(fixture("api_tags.docs.json")["models"][0])
    entry["name"] = entry["model"] = "qwen3:30b-a3b"
    state = FakeOllama(tags={"models": [entry]}, ps={"models": []}, shows={})
    with running(state) as (url, _):
        code, stdout, stderr = _migrate(url, tmp_path / "m", capsys, "--json")
    assert code == 0, stderr
    (m,) = json.loads(stdout)["migrated"]
    assert m["catalog_name"] == "Qwen3-30B-A3B" and m["aliases"] == ["qwen3:30b-a3b"]
    assert "--reasoning-parser" in m["vllm_args"] and "hermes" in m["vllm_args"]
    doc = yaml.safe_load((tmp_path / "m" / "gateway.yaml").read_text())
    assert doc["routes"] == [
        {
            "model": "qwen3:30b-a3b",
            "backends": [
                {"spec": m["spec_file"], "memory_gib": doc["routes"][0]["backends"][0]["memory_gib"]}
            ],
            "defaults": {"chat_template_kwargs": {"enable_thinking": False}},
        }
    ]
    assert doc["budget"]["allow_unload_ollama"] is False


def test_unload_only_when_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with running() as (url, fake):
        code, stdout, stderr = _migrate(url, tmp_path / "m", capsys, "--unload", "--json")
    assert code == 0, stderr
    assert fake.unloaded == ["gemma4", "mistral:latest"]
    report = json.loads(stdout)
    assert report["unloaded"] == fake.unloaded
    assert not any("keep_alive" in c for c in report["next_commands"])


def test_out_folder_force_and_foreign(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m"
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("mine")
    with running() as (url, _):
        assert _migrate(url, out, capsys)[0] == 0
        code, _, err = _migrate(url, out, capsys)
        assert code == 2 and "--force" in err
        (out / "NOTES.md").write_text("mine")  # added to llmdeck's folder: --force had deleted them
        (out / "extra").mkdir()
        for _ in range(2):  # and again: what it kept is not listed as its own the next time
            assert _migrate(url, out, capsys, "--force")[0] == 0
            assert (out / "NOTES.md").read_text() == "mine" and (out / "extra").is_dir()
        code, _, err = _migrate(url, user, capsys, "--force")
        assert code == 2 and "did not make" in err
    assert (user / "notes.txt").read_text() == "mine" and sorted(p.name for p in user.iterdir()) == [
        "notes.txt"
    ]


@pytest.mark.parametrize(
    ("url", "code", "words"),
    [
        ("ftp://127.0.0.1:11434", 2, "not a usable http(s) URL"),
        ("http://127.0.0.1:99999", 2, "not between 1 and 65535"),
    ],
)
def test_bad_urls_exit_2(
    url: str, code: int, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    got, _, err = _migrate(url, tmp_path / "m", capsys)
    assert got == code and words in err and "Traceback" not in err


def test_unreachable_and_garbled_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from llmdeck.util.net import free_port

    t0 = time.monotonic()
    code, _, err = _migrate(f"http://127.0.0.1:{free_port()}", tmp_path / "a", capsys, "--timeout", "2")
    assert code == 1 and "Cannot reach Ollama" in err and time.monotonic() - t0 < 10
    assert "Connection refused" in err and "ConnectError" not in err  # words, not httpx's class
    assert not (tmp_path / "a").exists()  # nothing written for an Ollama that is not there
    for path, body, words in [
        ("/api/tags", b"<html>not ollama</html>", "not JSON"),
        ("/api/tags", b"[" * 200_000 + b"]" * 200_000, "JSON nested deeper than any reply"),  # "not JSON"
        ("/api/tags", b'{"models": {"a": 1}}', "not a list"),
        ("/api/ps", b"[1, 2]", "not Ollama's list"),
    ]:
        state = FakeOllama(*documented_box(), raw={path: body})
        with running(state) as (url, _):
            code, _, err = _migrate(url, tmp_path / path.strip("/").replace("/", "-"), capsys)
        assert code == 1 and words in err and "Traceback" not in err, (path, err)


@pytest.mark.parametrize("where", ["/api/tags", "/api/show"])
def test_a_field_of_the_wrong_type_is_a_bad_reply_not_a_validation_dump(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``details.family: 5`` in /api/tags was an internal error with pydantic's error list; in /api/show
    (for a model whose tags give no family) it reached the mapping as a number."""
    tags, ps, shows = documented_box()
    for m in tags["models"]:
        if where == "/api/show":
            m["details"].pop("family", None)
        elif m["name"] == "mistral:latest":
            m["details"]["family"] = 5
    shows["mistral:latest"] = {"details": {"family": 5}, "model_info": {}}
    with running(FakeOllama(tags, ps, shows)) as (url, _):
        code, _, err = _migrate(url, tmp_path / "m", capsys)
    assert code == 1 and "Traceback" not in err and "validation error" not in err, err
    assert f"reply at {url}{where} is not what llmdeck expects" in err
    assert "'mistral:latest', details.family is 5, not a string" in err and "--ollama" in err
    assert not (tmp_path / "m").exists()


def test_a_password_in_the_ollama_url_is_shown_and_stored_redacted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The progress line, the report's title, the unload commands and migration.json showed it."""
    with running() as (url, fake):
        secret_url = url.replace("http://", "http://bob:pw-9876@")
        code, out, err = _migrate(secret_url, tmp_path / "m", capsys)
        assert code == 0, err
        json_code, json_out, _ = _migrate(secret_url, tmp_path / "m", capsys, "--force", "--json", "--unload")
    assert json_code == 0 and fake.unloaded  # the run itself still used the password
    stored = (tmp_path / "m" / "migration.json").read_text()
    for shown in (out, err, json_out, stored):
        assert "pw-9876" not in shown and "bob:<redacted>@127.0.0.1" in shown


def test_mapping_prefers_the_gguf_precision() -> None:
    from llmdeck.catalog.entries import load_catalog
    from llmdeck.migrate.mapping import map_model
    from llmdeck.migrate.ollama_api import OllamaModelInfo, canonical, parse_parameters

    cat = load_catalog()

    def pick(name: str, q: str, cc: int | None = 9, **kw: Any) -> str | None:
        m = map_model(OllamaModelInfo(name=name, quantization_level=q, **kw), cat, cc)
        return m.entry.name if m.entry else None

    assert pick("qwen3:30b-a3b", "Q4_K_M") == "Qwen3-30B-A3B"  # the only build: bf16
    assert pick("qwen3.6:27b", "Q4_K_M") == "Qwen3.6-27B-FP8"
    assert pick("gpt-oss:20b", "MXFP4") == "gpt-oss-20b" and pick("gpt-oss", "MXFP4") == "gpt-oss-20b"
    assert pick("qwen3-coder-next", "Q8_0") == "Qwen3-Coder-Next-FP8"
    assert pick("qwen3-coder-next", "F16") == "Qwen3-Coder-Next"
    assert pick("llama3.2:latest", "Q4_K_M") is None
    assert pick("llama3.1:8b", "Q4_K_M", capabilities=["completion", "vision"]) is None
    assert canonical("Mistral") == "mistral:latest" and canonical("a/b:c") == "a/b:c"
    assert parse_parameters('num_ctx 2048\nstop "<|eot|>"\nPARAMETER num_ctx 8192') == {
        "num_ctx": "8192",
        "stop": "<|eot|>",
    }


def test_show_facts_from_documented_answers() -> None:
    from llmdeck.migrate.ollama_api import OllamaModelInfo, apply_show

    gemma = OllamaModelInfo(name="gemma4")
    apply_show(gemma, fixture("api_show.gemma4.openapi.json"))
    assert (gemma.architecture, gemma.native_context, gemma.num_ctx) == ("gemma4", 131072, 2048)
    assert gemma.capabilities == ["completion", "vision"] and gemma.quantization_level == "Q4_K_M"
    llava = OllamaModelInfo(name="llava")
    apply_show(llava, fixture("api_show.llava.docs.json"))
    assert (llava.architecture, llava.native_context, llava.num_ctx) == ("llama", 8192, 4096)  # Modelfile
    assert llava.has_template and llava.parameters["num_keep"] == "24"


def test_a_file_the_user_put_in_the_migration_folder_is_not_replaced_by_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A first migration with no model wrote no gateway.yaml; the user wrote one there; --force had
    replaced it (and cleared llmdeck's migration.json before refusing a spec name the user had taken)."""
    from fake_ollama import FakeOllama, documented_box

    tags, ps, shows = documented_box()
    state = FakeOllama({"models": []}, {"models": []}, {})
    out = tmp_path / "m"
    with running(state) as (url, fake):
        assert _migrate(url, out, capsys)[0] == 0
        mine = "# MY OWN hand-written gateway config\n"
        (out / "gateway.yaml").write_text(mine)
        fake.tags, fake.ps, fake.shows = tags, ps, shows
        code, _, err = _migrate(url, out, capsys, "--force", "--unload")
    assert code == 2 and "gateway.yaml" in err and "did not write" in err
    assert (out / "gateway.yaml").read_text() == mine and (out / "migration.json").is_file()
    assert fake.unloaded == []  # refused before anything was unloaded


def test_an_ollama_that_never_answers_show_is_asked_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each model's /api/show had waited --timeout in turn (100 models: 17 minutes at the default), and
    the models it could not map named no cause."""
    from fake_ollama import FakeOllama, documented_box

    state = FakeOllama(*documented_box(), show_delay_s=5)
    with running(state) as (url, fake):
        code, stdout, err = _migrate(url, tmp_path / "m", capsys, "--timeout", "1", "--json")
    shows = [r for r in fake.requests if r == "POST /api/show"]
    assert code == 0, err
    assert len(shows) == 1
    unmapped = json.loads(stdout)["unmapped"]
    assert unmapped and all("/api/show" in u["why"] for u in unmapped if "catalog" in u["why"])


def test_a_compressed_reply_is_refused_not_inflated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gzip inside gzip (tests/fake_servers.py): httpx had inflated it whole before the cap counted."""
    import fake_servers

    with fake_servers.running("fake_gzip_bomb_server") as url:
        code, _, err = _migrate(url, tmp_path / "m", capsys, "--timeout", "5")
    assert code == 1 and "compressed" in err and "Traceback" not in err


def test_names_that_differ_in_case_are_one_model_and_negative_sizes_are_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ollama's names are case-insensitive (types/model/name.go: EqualFold): `qwen3:30b-a3b` and
    `QWEN3:30B-A3B` (documented tags entries renamed; an older Ollama kept both) had become two specs,
    two servers of the same weights; a ps entry of -1 bytes and -1 tokens had been shown as
    "-0.0 GiB while loaded" and "context: -1". Now: one spec whose routes answer both spellings, and
    the loaded model matched whatever case ps spells it in, its size and context unknown."""
    import yaml

    entry = fixture("api_tags.docs.json")["models"][0]
    lower, upper = copy.deepcopy(entry), copy.deepcopy(entry)
    lower["name"] = lower["model"] = "qwen3:30b-a3b"
    upper["name"] = upper["model"] = "QWEN3:30B-A3B"
    ps = copy.deepcopy(fixture("api_ps.docs.json")["models"][0])
    ps.update(name="QWEN3:30B-A3B", model="QWEN3:30B-A3B", size=-1, size_vram=-1, context_length=-1)
    state = FakeOllama(tags={"models": [lower, upper]}, ps={"models": [ps]}, shows={})
    with running(state) as (url, _):
        code, stdout, stderr = _migrate(url, tmp_path / "m", capsys, "--json")
    assert code == 0, stderr
    (m,) = json.loads(stdout)["migrated"]
    assert m["aliases"] == ["qwen3:30b-a3b", "QWEN3:30B-A3B"]
    doc = yaml.safe_load((tmp_path / "m" / "gateway.yaml").read_text())
    assert [(r["model"], r["backends"][0]["spec"]) for r in doc["routes"]] == [
        ("qwen3:30b-a3b", m["spec_file"]),
        ("QWEN3:30B-A3B", m["spec_file"]),
    ]
    assert sorted(p.name for p in (tmp_path / "m").glob("ollama-*.json")) == [m["spec_file"]]
    changes = {c["what"]: c["ollama"] for c in m["changes"]}
    assert changes["memory"] == "loaded (Ollama gave no size)"
    assert changes["context"].startswith("Ollama's default")
    (loaded,) = json.loads(stdout)["loaded"]
    assert loaded["bytes"] is None and loaded["vram_bytes"] is None
