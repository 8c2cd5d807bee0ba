"""Why a request cannot be served by its model now, and the start failure that carries it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from llmdeck.errors import InternalError


@dataclass(frozen=True)
class Refusal:
    """Why a request cannot be served by its model now (rendered as an OpenAI-style error)."""

    status: int
    message: str
    code: str
    retry_after_s: int | None = None


class StartFailed(InternalError):
    """A model that could not start, with the refusal every waiting request gets."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


def retrieve(task: asyncio.Task[None]) -> None:
    """A start nobody waits for any more: its failure is in the log and the model's state already."""
    if not task.cancelled():
        task.exception()
