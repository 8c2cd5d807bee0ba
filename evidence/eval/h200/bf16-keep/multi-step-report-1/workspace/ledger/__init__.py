"""A tiny expense ledger."""
