import random
import socket
import threading
import time
from pathlib import Path

import pytest

from scaletune.cluster import GroupRendezvous, _rendezvous, free_port
from scaletune.cluster._rendezvous import FREE_WAIT_SECONDS, LOWEST_PORT


def test_trackers_no_worker_reached_are_freed_even_when_closed_at_once_from_several_threads() -> (
    None
):
    # XGBoost's tracker, freed as it starts, or while other threads open sockets, used to wait
    # forever (a job abandoned while it waited for room hung its tuning job).
    longest: list[float] = []

    def open_and_close(times: int) -> None:
        for _ in range(times):
            rendezvous = GroupRendezvous(2, xgboost_tracker=True, collective_timeout_seconds=30)
            began = time.monotonic()
            rendezvous.close(completed=False)
            longest.append(time.monotonic() - began)

    threads = [threading.Thread(target=open_and_close, args=(10,), daemon=True) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads), "a close() never returned"
    assert len(longest) == 40
    assert max(longest) < FREE_WAIT_SECONDS + 5


class _Picks(random.Random):
    """Picks the given ports in turn (then any)."""

    def __init__(self, ports: list[int]) -> None:
        super().__init__(0)
        self.ports = ports

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:
        return self.ports.pop(0) if self.ports else super().randrange(start, stop, step)


def test_a_free_port_is_picked_below_the_ephemeral_range_and_never_one_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Outgoing connections take their source ports from the ephemeral range: a rendezvous
    # port chosen there was taken before its job bound it (a retried attempt).
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("32768\t60999\n")
    monkeypatch.setattr(_rendezvous, "EPHEMERAL_RANGE", ranges)
    taken = free_port()
    other = next(port for port in iter(free_port, None) if port != taken)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", taken))  # held on one address: every address's bind fails
        assert free_port(rng=_Picks([taken, other])) == other
    ports = {free_port() for _ in range(20)}
    assert all(LOWEST_PORT <= p < 32768 for p in ports) and len(ports) > 1
    ranges.write_text("21000 60999")  # too little room below: the kernel picks
    assert free_port() >= 1024
    monkeypatch.setattr(_rendezvous, "EPHEMERAL_RANGE", tmp_path / "none")  # not Linux
    assert free_port() >= 1024
