"""Simulated time: it moves only when the simulation moves it, so nothing ever sleeps."""

from __future__ import annotations

from scaletune.errors import ScaletuneError


class SimulatedClock:
    """A `Clock` whose monotonic time starts at 0 and whose epoch time is `start_time` then."""

    def __init__(self, start_time: float = 0.0) -> None:
        self._start_time = start_time
        self._now = 0.0

    def time(self) -> float:
        return self._start_time + self._now

    def monotonic(self) -> float:
        return self._now

    def advance_to(self, moment: float) -> None:
        """Move to `moment` (seconds of monotonic time); time never goes back."""
        if moment < self._now:
            raise ScaletuneError(f"simulated time cannot go back from {self._now} to {moment}")
        self._now = moment
