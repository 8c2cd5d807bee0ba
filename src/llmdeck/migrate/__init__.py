"""``llmdeck migrate``: move a setup from another server (Ollama) to vLLM behind llmdeck's gateway."""
