"""A wait that ends when the client hangs up: a managed model's start (ondemand), a `server:` backend
coming back from `llmdeck restart` (comeback), a retry's pause (retry). A request nobody waits for any
more leaves its queue then, and is not sent when the wait is over (a generation for nobody)."""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Awaitable, Callable
from typing import Literal, TypeVar

T = TypeVar("T")
Gone = Callable[[], Awaitable[None]]  # returns when the client hangs up


class HungUp(enum.Enum):
    HUNG_UP = "the client hung up"


HUNG_UP = HungUp.HUNG_UP


async def unless_gone(work: Awaitable[T], gone: Gone | None) -> T | Literal[HungUp.HUNG_UP]:
    """``work``'s result, or HUNG_UP when ``gone`` returned first: ``work`` is cancelled then, and awaited
    (a model's queue ticket goes back before this returns). Cancelled itself, it cancels ``work`` too."""
    task = asyncio.ensure_future(work)
    if gone is None:
        return await task
    watch = asyncio.ensure_future(gone())
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        raise
    finally:
        watch.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return HUNG_UP
