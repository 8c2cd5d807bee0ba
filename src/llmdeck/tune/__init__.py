"""`llmdeck tune`: find the vLLM flags that serve a workload best under the user's SLOs, with one real
server start per trial (plan prunes first, the runtime service starts, bench measures goodput)."""
