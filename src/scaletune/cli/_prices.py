"""`scaletune prices [--on-demand P --spot Q | --clear]`: the price of a worker-second on each
capacity class, kept in the store, for the costs of jobs whose file gives none."""

from __future__ import annotations

import math
from typing import Annotated

import typer

from scaletune.cli._options import JsonOption, StoreOption, open_store, out
from scaletune.cli._stdout import print_json
from scaletune.errors import InvalidInputError
from scaletune.spec._names import CapacityClass


def prices(
    on_demand: Annotated[
        float | None, typer.Option("--on-demand", help="An on-demand worker-second's price.")
    ] = None,
    spot: Annotated[float | None, typer.Option("--spot", help="A spot worker-second's.")] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Forget the prices set.")] = False,
    json_output: JsonOption = False,
    store: StoreOption = None,
) -> None:
    """Show, set or clear the price of a worker-second on each capacity class: the cost of
    every job whose file gives no cluster.prices (jobs show, the console, --json)."""
    given = {CapacityClass.ON_DEMAND.value: on_demand, CapacityClass.SPOT.value: spot}
    for name, price in given.items():
        if price is not None and not (math.isfinite(price) and price >= 0):
            raise InvalidInputError(f"--{name} {price:g}: a price is 0 or more")
    setting = [price is not None for price in given.values()]
    if clear and any(setting):
        raise InvalidInputError("--clear forgets the prices: give it alone")
    if any(setting) and not all(setting):
        raise InvalidInputError("give --on-demand and --spot together")
    with open_store(store) as records:
        if clear:
            records.set_prices(None)
        elif all(setting):
            records.set_prices({name: float(price or 0.0) for name, price in given.items()})
        current = records.prices()
    if json_output:
        print_json({"prices": current})
    elif current is None:
        out.print("no prices set: jobs show their worker-seconds alone")
    else:
        out.print(
            "a worker-second costs "
            + ", ".join(f"{price:g} on {name}" for name, price in current.items()),
            highlight=False,
        )
