"""asyncio's runner, but a second Ctrl-C soon after the first is let pass while the first's clean-up runs.

asyncio raises the second inside that clean-up (a bench writing its partial result): the cancelled gather
there then never ended, and 4 of 5 double Ctrl-Cs hung with no file written. The clean-up takes well
under a second; a Ctrl-C ``GRACE_S`` after the first still ends the run as asyncio does."""

from __future__ import annotations

import asyncio
import time
from typing import Any


class PatientRunner(asyncio.Runner):  # type: ignore[misc]
    # asyncio.Runner is final in the typing stubs; its Ctrl-C hook is what this class changes
    GRACE_S = 10.0
    _first = 0.0

    def _on_sigint(self, signum: int, frame: Any, main_task: asyncio.Task[Any]) -> None:
        if getattr(self, "_interrupt_count", 0) == 0:
            self._first = time.monotonic()
        elif time.monotonic() - self._first < self.GRACE_S:
            return
        super()._on_sigint(signum, frame, main_task)  # type: ignore[misc]
