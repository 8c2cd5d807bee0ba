"""Why a request cannot be served by its model now, and the start failure that carries it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from llmdeck.errors import InternalError

# The official SDKs (openai, anthropic) retry a 5xx twice by default unless the reply says
# ``x-should-retry: false``: a refusal that a retry seconds later meets again carries it, so the client
# gets the reason at once, not after 2-20 s of retries that change nothing.
NO_RETRY = {"x-should-retry": "false"}
# a model that does not fit the budget even alone; a start that failed (for budget.queue.failed_retry_s
# every request gets its diagnosis at once, and a start again would fail as it did)
FINAL_CODES = frozenset({"insufficient_memory", "model_start_failed"})


@dataclass(frozen=True)
class Refusal:
    """Why a request cannot be served by its model now (rendered as an OpenAI-style error)."""

    status: int
    message: str
    code: str
    retry_after_s: int | None = None

    def headers(self) -> dict[str, str]:
        """Retry-After when a retry may succeed later; ``x-should-retry: false`` when none will soon."""
        out = {"Retry-After": str(self.retry_after_s)} if self.retry_after_s else {}
        return {**out, **NO_RETRY} if self.code in FINAL_CODES else out


class StartFailed(InternalError):
    """A model that could not start, with the refusal every waiting request gets."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


def retrieve(task: asyncio.Task[None]) -> None:
    """A start nobody waits for any more: its failure is in the log and the model's state already."""
    if not task.cancelled():
        task.exception()
