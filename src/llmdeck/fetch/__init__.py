"""llmdeck.fetch: download a model from the Hugging Face Hub (or a mirror) and verify it."""
