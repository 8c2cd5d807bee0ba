"""llmdeck: one GPU box as a dependable local LLM server for coding agents."""

__version__ = "0.1.0"
