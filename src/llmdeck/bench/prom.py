"""Re-export of :mod:`llmdeck.client.prom` (the /metrics parser lives in the client layer, where the
runtime may use it too)."""

from llmdeck.client.prom import MetricsSnapshot, parse_metrics, process_start_time

__all__ = ["MetricsSnapshot", "parse_metrics", "process_start_time"]
