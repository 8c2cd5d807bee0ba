"""The gateway: one OpenAI-compatible endpoint in front of the box's servers (aliases, keys, replicas)."""
