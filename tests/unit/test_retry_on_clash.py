"""runtime/portpick's ``retry_on_clash``: the one "start again on another picked port" rule, generic in
what carries the port. Tune and quickstart (a LaunchSpec, through ``start_on_picked_ports``) and
``cluster up --local`` (Ray's client-server port, a bare int) had each written its own loop."""

from __future__ import annotations

import pytest

from llmdeck.errors import LlmdeckError, OperationError, UsageError
from llmdeck.runtime.portpick import PORT_TRIES, retry_on_clash


def _taken(port: int) -> OperationError:
    return OperationError(f"bind 127.0.0.1:{port}: Address already in use")


def _clash(exc: LlmdeckError, port: int) -> bool:
    return f":{port}" in exc.message


def test_a_clash_starts_again_on_the_next_pick_and_says_which_ports() -> None:
    picks = iter([20002, 20003])
    told: list[tuple[int, int]] = []

    def start(port: int) -> str:
        if port != 20003:
            raise _taken(port)
        return f"up on {port}"

    got = retry_on_clash(20001, start, lambda _: next(picks), _clash, lambda a, b, _: told.append((a, b)))
    assert got == ("up on 20003", 20003)
    assert told == [(20001, 20002), (20002, 20003)]


def test_the_last_start_error_propagates_after_port_tries_starts() -> None:
    started: list[int] = []
    picks = iter(range(30002, 30100))

    def start(port: int) -> str:
        started.append(port)
        raise _taken(port)

    with pytest.raises(OperationError, match=f":{30000 + PORT_TRIES}"):
        retry_on_clash(30001, start, lambda _: next(picks), _clash, lambda *_: None)
    assert len(started) == PORT_TRIES


def test_an_error_that_is_no_clash_propagates_at_once_without_a_pick() -> None:
    def start(port: int) -> str:
        raise UsageError("the model folder is missing")

    def pick(_: int) -> int:
        raise AssertionError("picked again for an error that was no clash")

    with pytest.raises(UsageError, match="model folder"):
        retry_on_clash(40001, start, pick, _clash, lambda *_: None)
