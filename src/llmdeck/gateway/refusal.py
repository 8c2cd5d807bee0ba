"""Why a managed model cannot serve a request now (the manager's answer, rendered as an OpenAI error)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Refusal:
    """Why a request cannot be served by its model now (rendered as an OpenAI-style error)."""

    status: int
    message: str
    code: str
    retry_after_s: int | None = None


class StartFailed(Exception):
    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal
