"""Engines: how a LaunchSpec becomes a running vLLM server (CPU build, venv, Docker)."""
