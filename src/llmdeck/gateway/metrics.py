"""The gateway's own Prometheus metrics (prometheus_client, a registry per app).

Labels are the route (alias), the key's name ("-" when the gateway is open) and the outcome; never a
prompt or a key. Tokens come from the backend's ``usage`` (non-streamed replies, and streams that asked
for ``stream_options.include_usage``; Anthropic Messages streams carry it in ``message_start`` and
``message_delta``, Responses streams in ``response.completed``'s ``response``), counted as ``prompt`` and
``completion`` whichever API named them (``input_tokens``/``output_tokens``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from llmdeck.util.jsonsafe import loads as json_loads

REQUESTS, TOKENS, TTFT = ("route", "key", "status"), ("route", "key", "kind"), ("route", "key")  # per key
MAX_TOKENS = 1 << 53  # the largest count a float (a Prometheus counter) holds exactly
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class GatewayMetrics:
    def __init__(self, live_key: Callable[[str], bool] | None = None) -> None:
        """``live_key``: whether a key's series may be labelled still (the app's: it is in the keys
        file as last read); None: every key."""
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "llmdeck_gateway_requests",
            "Requests by route, key and HTTP status.",
            list(REQUESTS),
            registry=r,
        )
        self.errors = Counter(
            "llmdeck_gateway_upstream_errors",
            "Upstream failures by route, backend and reason.",
            ["route", "backend", "reason"],
            registry=r,
        )
        self.tokens = Counter(
            "llmdeck_gateway_tokens",
            "Tokens from the backends' usage, by route, key and kind.",
            list(TOKENS),
            registry=r,
        )
        self.latency = Histogram(
            "llmdeck_gateway_request_duration_seconds",
            "Whole request, as the client saw it.",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.ttft = Histogram(
            "llmdeck_gateway_upstream_ttft_seconds",
            "Request received to the backend's first body byte.",
            list(TTFT),
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge(
            "llmdeck_gateway_in_flight", "Requests being served, by route.", ["route"], registry=r
        )
        self.backend_up = Gauge(
            "llmdeck_gateway_backend_up",
            "1 when the backend's last probe or request succeeded.",
            ["backend"],
            registry=r,
        )

        # what the series of forgotten keys had counted, per route: the totals over keys (the
        # dashboard's rates) never go down when a key's series leave /metrics
        self.retired: dict[str, dict[str, float]] = {}  # route -> requests / prompt / completion
        self.retired_ttft: dict[str, dict[float, float]] = {}  # route -> bucket bound -> count
        self.live_key: Callable[[str], bool] = live_key or (lambda name: True)
        self.lowered, self.counts = _cap_counters(r)

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))

    def count_request(self, route: str, key: str, status: int, usage: dict[str, Any]) -> None:
        """One finished request's counts. A request let in before its key was revoked that ends after
        the re-read had re-created the revoked key's series; it is counted in the totals only."""
        if not self.live_key(key):
            kept = self.retired.setdefault(route, {})
            kept["requests"] = kept.get("requests", 0.0) + 1
            for kind, value in token_counts(usage).items():
                kept[kind] = kept.get(kind, 0.0) + value
            return
        self.requests.labels(route, key, str(status)).inc()
        for kind, value in token_counts(usage).items():
            self.tokens.labels(route, key, kind).inc(value)

    def observe_ttft(self, route: str, key: str, seconds: float) -> None:
        if self.live_key(key):
            self.ttft.labels(route, key).observe(seconds)
            return
        buckets = self.retired_ttft.setdefault(route, {})  # cumulative, as the histogram's buckets
        for le in (*LATENCY_BUCKETS, float("inf")):
            if seconds <= le:
                buckets[float(le)] = buckets.get(float(le), 0.0) + 1

    def forget_keys(self, names: Collection[str]) -> None:
        """The series labelled with these keys (revoked: gone from the keys file) leave /metrics; the
        route-level series (latency, in flight, upstream errors) were never per key and keep counting."""
        for metric, labels in ((self.requests, REQUESTS), (self.tokens, TOKENS), (self.ttft, TTFT)):
            gone: set[tuple[str, ...]] = set()
            for family in metric.collect():
                for sample in family.samples:
                    if sample.labels.get("key") in names:
                        self._retire(sample.name, sample.labels, sample.value)
                        gone.add(tuple(sample.labels[n] for n in labels))
            for values in gone:
                metric.remove(*values)

    def _retire(self, name: str, labels: dict[str, str], value: float) -> None:
        route = labels["route"]
        if name == "llmdeck_gateway_requests_total":
            kept = self.retired.setdefault(route, {})
            kept["requests"] = kept.get("requests", 0.0) + value
        elif name == "llmdeck_gateway_tokens_total":
            kept = self.retired.setdefault(route, {})
            kept[labels["kind"]] = kept.get(labels["kind"], 0.0) + value
        elif name == "llmdeck_gateway_upstream_ttft_seconds_bucket":
            buckets = self.retired_ttft.setdefault(route, {})
            le = float(labels["le"])
            buckets[le] = buckets.get(le, 0.0) + value


def _cap_counters(r: CollectorRegistry) -> tuple[Counter, Counter]:
    """Output caps lowered (outcap, roomcap) and prompts counted for it, per route: bounded labels."""
    lowered = Counter(
        "llmdeck_gateway_max_tokens_lowered",
        "Requests whose output cap was lowered, by route and how: context (to the backend's "
        "max_model_len), room (to the room the prompt leaves, counted on a vLLM < 0.32).",
        ["route", "how"],
        registry=r,
    )
    counts = Counter(
        "llmdeck_gateway_prompt_counts",
        "Prompts counted on a backend to fit an output cap, by route and outcome: fits, over (the "
        "prompt itself is over the context), failed.",
        ["route", "outcome"],
        registry=r,
    )
    return lowered, counts


# The events after which a client has its whole reply (OpenAI chat/completions, Responses, Anthropic
# Messages). Codex closes its connection at `response.completed`, before the backend ends the stream.
# Line starts only (a `data: [DONE]` inside a JSON string is text, not the end); JSON's `"type"` key
# cannot occur unescaped inside a string.
END_MARKERS = (
    b"\ndata: [DONE]",
    b'"type":"response.completed"',
    b'"type": "response.completed"',
    b"\nevent: message_stop",
    b"\nevent: response.completed",
)


class UsageSniffer:
    """Finds ``usage`` in a reply as it passes (SSE events or one JSON body), without holding the stream."""

    MAX_BODY = 4 << 20

    def __init__(self, sse: bool) -> None:
        self.sse = sse
        self._tail = b""
        self._body: list[bytes] = []
        self._size = 0
        self.usage: dict[str, Any] | None = None
        self._end = b"\n"  # the stream's start is a line start
        self.completed = False  # the stream's last event went by: a hang-up after it is no abort

    def feed(self, chunk: bytes) -> None:
        if self.sse and not self.completed:
            seen = self._end + chunk
            # three scans in C first; the exact markers only where one of their words is (per chunk:
            # 1.5 us, was 3 us for the five markers through a generator)
            maybe = b"[DONE]" in seen or b"completed" in seen or b"message_stop" in seen
            self.completed = maybe and any(m in seen for m in END_MARKERS)
            self._end = seen[-64:]
        if not self.sse:
            self._size += len(chunk)
            if self._size <= self.MAX_BODY:
                self._body.append(chunk)
            return
        data = self._tail + chunk
        if b'"usage"' not in data:
            self._tail = data[data.rfind(b"\n\n") + 2 :] if b"\n\n" in data else data[-4096:]
            return
        events = data.split(b"\n\n")
        self._tail = events.pop()
        if len(self._tail) > self.MAX_BODY:  # one endless event: keep only what could start the next one
            self._tail = self._tail[-4096:]
        for event in events:
            if b'"usage"' not in event:
                continue
            for line in event.split(b"\n"):  # `data:` first (OpenAI) or after an `event:` line
                if line.startswith(b"data:"):
                    self._take(line[5:])

    def finish(self) -> dict[str, Any] | None:
        if not self.sse and self._body and self._size <= self.MAX_BODY:
            self._take(b"".join(self._body))
        return self.usage

    def _take(self, raw: bytes) -> None:
        try:
            obj = json_loads(raw)
        except ValueError:
            return
        if not isinstance(obj, dict):
            return
        usage = obj.get("usage")
        if usage is None:  # Responses: {"type": "response.completed", "response": {..., "usage": {...}}}
            inner = obj.get("response") or obj.get("message")  # Anthropic: message_start's message
            usage = inner.get("usage") if isinstance(inner, dict) else None
        if isinstance(usage, dict):  # merged: message_start has the input, message_delta the output
            self.usage = {**(self.usage or {}), **{k: v for k, v in usage.items() if v is not None}}


def token_counts(usage: dict[str, Any]) -> dict[str, int]:
    """``prompt``/``completion`` from OpenAI's or Anthropic's/Responses' names."""
    out: dict[str, int] = {}
    for kind, names in (
        ("prompt", ("prompt_tokens", "input_tokens")),
        ("completion", ("completion_tokens", "output_tokens")),
    ):
        for name in names:
            value = usage.get(name)
            # a count past 2**53 is no usage (and past a float's range an internal OverflowError)
            if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_TOKENS:
                out[kind] = value
                break
    return out
