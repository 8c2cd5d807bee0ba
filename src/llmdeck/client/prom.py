"""Reading a server's Prometheus ``/metrics`` page (vLLM, SGLang, llama.cpp names).

Only the few samples we use are kept: lines are filtered by name before the (pure-Python)
``prometheus_client`` parser sees them, so sampling every second stays cheap even on pages with
hundreds of histogram buckets. Values of the same name are summed across label sets (engines).
A name that is absent means "not reported", never zero.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

# logical name -> sample names per engine, in preference order
SAMPLE_NAMES: dict[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs", "llamacpp:requests_processing"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred"),
    "kv_usage": ("vllm:kv_cache_usage_perc", "sglang:token_usage", "llamacpp:kv_cache_usage_ratio"),
    "prefix_queries": ("vllm:prefix_cache_queries_total",),
    # llama.cpp: the prompt tokens its prompt cache served (see _cached_apart)
    "prefix_hits": ("vllm:prefix_cache_hits_total", "llamacpp:prompt_tokens_cached_total"),
    "cache_hit_rate": ("sglang:cache_hit_rate",),
    "preemptions": ("vllm:num_preemptions_total",),
    "prompt_tokens": (
        "vllm:prompt_tokens_total",
        "sglang:prompt_tokens_total",
        "llamacpp:prompt_tokens_total",
    ),
    "generation_tokens": (
        "vllm:generation_tokens_total",
        "sglang:generation_tokens_total",
        "llamacpp:tokens_predicted_total",
    ),
    # the server's own latency histograms (sum and count; their deltas give the mean over a run)
    "ttft_sum": ("vllm:time_to_first_token_seconds_sum",),
    "ttft_count": ("vllm:time_to_first_token_seconds_count",),
    "itl_sum": ("vllm:inter_token_latency_seconds_sum",),
    "itl_count": ("vllm:inter_token_latency_seconds_count",),
}
_WANTED: dict[str, str] = {name: key for key, names in SAMPLE_NAMES.items() for name in names}


@dataclass
class MetricsSnapshot:
    """One scrape: logical name -> value (summed over label sets), plus which engine it came from."""

    t: float
    values: dict[str, float] = field(default_factory=dict)
    engine: str | None = None


# One C-level pass picks the sample lines we use (name, then labels or a space).
_LINE_RE = re.compile(
    r"^(?:"
    + "|".join(re.escape(n) for n in sorted(_WANTED, key=len, reverse=True))
    + r")(?:\{[^\n]*\})? [^\n]*$",
    re.M,
)


def _filter(text: str) -> str:
    return "\n".join(m.group(0) for m in _LINE_RE.finditer(text)) + "\n"


def parse_metrics(text: str, t: float = 0.0) -> MetricsSnapshot:
    """Parse a /metrics page into a snapshot of the values llmdeck reports."""
    from prometheus_client.parser import text_string_to_metric_families

    snap = MetricsSnapshot(t=t)
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(_filter(text)):
        for sample in family.samples:
            if sample.name in _WANTED:
                sums[sample.name] = sums.get(sample.name, 0.0) + float(sample.value)
    for key, names in SAMPLE_NAMES.items():
        for name in names:
            if name in sums and plausible(key, sums[name]):
                snap.values[key] = sums[name]
                if snap.engine is None:
                    snap.engine = name.split(":", 1)[0]
                break
    if _CACHED_APART in sums:
        _cached_apart(snap)
    return snap


_CACHED_APART = "llamacpp:prompt_tokens_cached_total"
MAX_COUNT = 1e15  # no server counts this many tokens or requests
MAX_KV_USAGE = 64.0  # a fraction per engine, summed over the engines (data parallel) of one page


def plausible(key: str, value: float) -> bool:
    """A value a server can report: finite, not negative, and for the KV usage a sum of fractions.
    An impossible one (1e300 %, NaN) counts as not reported rather than being shown as measured."""
    if not math.isfinite(value) or value < 0:
        return False
    return value <= (MAX_KV_USAGE if key == "kv_usage" else MAX_COUNT)


def _cached_apart(snap: MetricsSnapshot) -> None:
    """llama.cpp counts the prompt tokens it computed (``prompt_tokens_total``, "excluding cached
    tokens") apart from those its prompt cache served (``prompt_tokens_cached_total``): as vLLM counts
    them, every prompt token is a query of the prefix cache, and a prompt token is one of either."""
    hits, computed = snap.values.get("prefix_hits"), snap.values.get("prompt_tokens")
    if hits is not None and computed is not None:
        snap.values["prefix_queries"] = snap.values["prompt_tokens"] = computed + hits


_START_RE = re.compile(r"^process_start_time_seconds(?:\{[^\n]*\})? ([0-9.eE+-]+)$", re.M)


def process_start_time(text: str) -> float | None:
    """``process_start_time_seconds`` (Unix time) of the process that served the page: for vLLM the
    API server, i.e. when the server was started. None when the page does not have it."""
    m = _START_RE.search(text)
    if m is None:
        return None
    try:
        t = float(m.group(1))
    except ValueError:
        return None
    # a Unix time a process can have started at (2001..2096): 1e300 had crashed bench
    return t if 1e9 < t < 4e9 else None
