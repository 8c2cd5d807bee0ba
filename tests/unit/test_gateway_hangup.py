"""gateway/hangup.py: the one "wait for X unless the client hangs up" of ondemand, comeback and retry."""

from __future__ import annotations

import asyncio

import pytest

from llmdeck.gateway.hangup import HUNG_UP, unless_gone


async def _never() -> None:
    await asyncio.Event().wait()


async def _after(seconds: float, value: str = "done") -> str:
    await asyncio.sleep(seconds)
    return value


def test_the_work_that_ends_first_gives_its_result() -> None:
    assert asyncio.run(unless_gone(_after(0.01), _never)) == "done"
    assert asyncio.run(unless_gone(_after(0.01), None)) == "done"


def test_a_hang_up_first_cancels_the_work_and_waits_for_its_clean_up() -> None:
    """The work's own clean-up (a model's queue ticket given back) has run when HUNG_UP comes back."""
    cleaned: list[str] = []

    async def work() -> str:
        try:
            await asyncio.sleep(10)
        finally:
            cleaned.append("ticket back")
        return "late"

    async def main() -> object:
        return await unless_gone(work(), lambda: _after(0.01))

    assert asyncio.run(main()) is HUNG_UP and cleaned == ["ticket back"]


def test_its_own_cancellation_cancels_the_work() -> None:
    """The request's task cancelled (the server shutting down): the work is not left running."""
    cancelled: list[bool] = []

    async def work() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def main() -> None:
        waiting = asyncio.ensure_future(unless_gone(work(), _never))
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await asyncio.sleep(0.01)
        assert cancelled == [True]  # before asyncio.run's own shutdown cancels what is left

    asyncio.run(main())


def test_the_works_error_is_raised() -> None:
    async def boom() -> None:
        raise ValueError("x")

    with pytest.raises(ValueError):
        asyncio.run(unless_gone(boom(), _never))
