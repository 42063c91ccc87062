import threading

from scaletune.store import JobStatus
from scaletune.training import Stopper


def test_the_first_request_wins() -> None:
    stopper = Stopper()
    stopper.request(JobStatus.COMPLETED, "reached its budget")
    stopper.request(JobStatus.STOPPED, "too late")
    assert stopper.is_set()
    assert (stopper.status, stopper.reason) == (JobStatus.COMPLETED, "reached its budget")


def test_a_listener_hears_the_first_request_once() -> None:
    stopper = Stopper()
    heard: list[str] = []
    stopper.when_requested(lambda: heard.append(stopper.reason))
    assert heard == []
    stopper.request(reason="first")
    stopper.request(reason="second")
    assert heard == ["first"]


def test_a_listener_added_after_the_request_hears_it_at_once() -> None:
    stopper = Stopper()
    stopper.request(reason="early")
    heard: list[str] = []
    stopper.when_requested(lambda: heard.append(stopper.reason))
    assert heard == ["early"]


def test_a_listener_runs_in_the_requesting_thread() -> None:
    stopper = Stopper()
    threads: list[str] = []
    stopper.when_requested(lambda: threads.append(threading.current_thread().name))
    requester = threading.Thread(target=stopper.request, name="requester")
    requester.start()
    requester.join()
    assert threads == ["requester"]
