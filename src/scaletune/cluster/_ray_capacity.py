"""Which of a Ray cluster's nodes are spot capacity, and keeping each worker on its class.

A node offering the custom resource `spot` (ray start --resources='{"spot": 1}') is spot
capacity. A spot worker asks a tiny share of that resource, so only such nodes take it. An
on-demand worker cannot ask for the absence of a resource, so its bundle carries a label
selector instead: not on any of the spot nodes, by the `ray.io/node-id` label Ray gives every
node. Without it Ray's PACK would put an on-demand worker on a spot node with room, billed as
on-demand and lost with the node."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

# A spot worker asks this much of a node's `spot` resource: any node started with some
# (ray start --resources='{"spot": 1}') takes up to a thousand of them.
SPOT_RESOURCE, SPOT_MARK = "spot", 0.001
NODE_ID_LABEL = "ray.io/node-id"  # a label Ray sets on every node


def spot_nodes(nodes: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The ids of the live nodes that offer spot capacity, from `ray.nodes()`."""
    return frozenset(
        str(node["NodeID"])
        for node in nodes
        if node.get("Alive") and node.get("Resources", {}).get(SPOT_RESOURCE, 0.0) > 0
    )


def is_spot(room: Mapping[str, float]) -> bool:
    """Whether a node's resources (total or free) mark it as spot capacity."""
    return room.get(SPOT_RESOURCE, 0.0) >= SPOT_MARK - 1e-12


def off_spot_nodes(spot: frozenset[str]) -> dict[str, str]:
    """The label selector of an on-demand bundle: none of these nodes (none where there are
    no spot nodes)."""
    return {NODE_ID_LABEL: f"!in({','.join(sorted(spot))})"} if spot else {}


def fits_on(room: Mapping[str, float], bundle: Mapping[str, float]) -> int:
    """How many of `bundle` fit in a node's free `room`. The spot mark does not bound spot
    workers (a thousand fit); their CPUs do."""
    counts = [
        math.floor(room.get(key, 0.0) / value + 1e-9)
        for key, value in bundle.items()
        if value > 0 and key != SPOT_RESOURCE
    ]
    if not counts:
        return math.floor(room.get(SPOT_RESOURCE, 0.0) / SPOT_MARK + 1e-9)
    return min(counts)


def room_for(
    free: Mapping[str, Mapping[str, float]], bundle: Mapping[str, float], *, spot: bool
) -> int:
    """Workers of `bundle` that fit, node by node, on the nodes of one class."""
    return sum(fits_on(room, bundle) for room in free.values() if is_spot(room) == spot)
