"""Re-export: the one way to name a target (a URL or a server name) is :mod:`llmdeck.runtime.target`."""

from llmdeck.runtime.target import Target, looks_like_url, resolve_target

__all__ = ["Target", "looks_like_url", "resolve_target"]
