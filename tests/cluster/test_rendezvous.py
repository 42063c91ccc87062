import threading
import time

from scaletune.cluster import GroupRendezvous
from scaletune.cluster._rendezvous import FREE_WAIT_SECONDS


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
