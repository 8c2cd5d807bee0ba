"""Scale past one box: the Ray cluster vLLM's distributed executor runs on, its network
environment, and the interconnect acceptance test (all-reduce bandwidth and latency)."""
