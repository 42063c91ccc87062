"""Capacity classes on a Ray cluster's nodes: which are spot, the selector that keeps an
on-demand worker off them, and the room of each class, node by node."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from scaletune.cluster._ray import RayBackend, WorkerResources
from scaletune.cluster._ray_capacity import (
    SPOT_MARK,
    SPOT_RESOURCE,
    off_spot_nodes,
    room_for,
    spot_nodes,
)
from scaletune.errors import ClusterTooSmallError

NODES = [
    {"NodeID": "aa", "Alive": True, "Resources": {"CPU": 4.0}},
    {"NodeID": "bb", "Alive": True, "Resources": {"CPU": 2.0, SPOT_RESOURCE: 1.0}},
    {"NodeID": "cc", "Alive": False, "Resources": {"CPU": 2.0, SPOT_RESOURCE: 1.0}},
    {"NodeID": "dd", "Alive": True, "Resources": {"CPU": 2.0, SPOT_RESOURCE: 1.0}},
]


def test_live_nodes_offering_the_spot_resource_are_spot_capacity() -> None:
    assert spot_nodes(NODES) == {"bb", "dd"}
    assert spot_nodes(NODES[:1]) == frozenset()


def test_on_demand_bundles_are_kept_off_every_spot_node_and_spot_ones_are_not() -> None:
    resources = WorkerResources(cpus=1.0, spot_from=2)
    selectors = resources.label_selectors(3, frozenset({"dd", "bb"}))
    assert selectors == [{"ray.io/node-id": "!in(bb,dd)"}] * 2 + [{}]
    assert resources.bundles(3)[2] == {"CPU": 1.0, SPOT_RESOURCE: SPOT_MARK}
    # No spot node in the cluster: nothing to keep off.
    assert WorkerResources().label_selectors(2, frozenset()) == [{}, {}]
    assert off_spot_nodes(frozenset()) == {}


def test_room_is_counted_on_the_nodes_of_one_class_whole_workers_per_node() -> None:
    free = {
        "aa": {"CPU": 2.5},
        "bb": {"CPU": 1.5, SPOT_RESOURCE: 1.0},
        "dd": {"CPU": 2.0, SPOT_RESOURCE: 0.999},
    }
    bundle = {"CPU": 1.0}
    # 2 on-demand workers on aa: half a CPU there and one and a half on bb do not add up.
    assert room_for(free, bundle, spot=False) == 2
    assert room_for(free, {**bundle, SPOT_RESOURCE: SPOT_MARK}, spot=True) == 3
    # Workers that ask no CPU: the spot mark alone bounds them (a thousand a node).
    assert room_for({"bb": {SPOT_RESOURCE: 1.0}}, {SPOT_RESOURCE: SPOT_MARK}, spot=True) == 1000


def test_on_demand_workers_that_only_spot_nodes_could_hold_are_refused_naming_both() -> None:
    backend = SimpleNamespace(_ray=SimpleNamespace(nodes=lambda: NODES))
    fits = WorkerResources(cpus=2.0, spot_from=2)
    RayBackend._check_on_demand_fits(backend, 4, fits)  # type: ignore[arg-type]
    too_many = WorkerResources(cpus=2.0, spot_from=3)
    with pytest.raises(ClusterTooSmallError, match=r"3 on-demand workers .* without spot"):
        RayBackend._check_on_demand_fits(backend, 4, too_many)  # type: ignore[arg-type]
