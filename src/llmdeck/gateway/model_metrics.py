"""Prometheus metrics of the models on demand, read from the model manager at each scrape."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from llmdeck.gateway.manager import ModelManager
from llmdeck.gateway.model_state import ModelStateName

STATES: tuple[ModelStateName, ...] = ("stopped", "starting", "running", "sleeping", "stopping", "failed")
GIB = 1 << 30


class ModelCollector:
    """``llmdeck_gateway_model_*``: state (1 for the current one), memory, queue, starts, evictions."""

    def __init__(self, manager: ModelManager) -> None:
        self.manager = manager

    def collect(self) -> Iterator[Any]:
        state = GaugeMetricFamily(
            "llmdeck_gateway_model_state", "1 for the model's current state.", labels=["model", "state"]
        )
        memory = GaugeMetricFamily(
            "llmdeck_gateway_model_memory_bytes",
            "Memory by kind: planned, measured (the peak while running), held now in the budget.",
            labels=["model", "kind"],
        )
        queue = GaugeMetricFamily("llmdeck_gateway_model_queue", "Requests waiting.", labels=["model"])
        starts = CounterMetricFamily("llmdeck_gateway_model_starts", "Starts.", labels=["model"])
        evictions = CounterMetricFamily("llmdeck_gateway_model_evictions", "Evictions.", labels=["model"])
        kind = self.manager.budget.kind
        for m in self.manager.models.values():
            for name in STATES:
                state.add_metric([m.name, name], 1.0 if m.state == name else 0.0)
            memory.add_metric([m.name, "planned"], float(m.backend.planned.bytes))
            memory.add_metric([m.name, "measured"], float(m.measured or 0))
            memory.add_metric([m.name, "held"], float(m.held(kind)))
            queue.add_metric([m.name], float(m.waiting))
            starts.add_metric([m.name], float(m.starts))
            evictions.add_metric([m.name], float(m.evictions))
        yield from (state, memory, queue, starts, evictions)
