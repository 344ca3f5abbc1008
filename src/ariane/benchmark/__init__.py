"""The client benchmark shipped with Ariane (``ariane bench produce|consume``) and the measurement
helpers every benchmark shares.

RocketMQ ships its benchmark in its distribution (``benchmark/producer.sh``, ``consumer.sh``);
Ariane does the same, so ``ariane bench`` works from a wheel. Modules: ``cli`` (the sub-command's
arguments), ``client_bench`` (scenarios, rounds, summary), ``client_results`` (its table and
dated results files), ``machine`` (the quiet-machine gate, outside load, machine facts),
``measure`` (timed loops, percentiles, spreads), ``process_cpu`` (CPU of a process tree) and
``report`` (JSON + Markdown records written whole). The repository's ``bench/`` (the side-by-side
comparison with Apache RocketMQ, the store benchmarks) imports these; nothing in this package
imports ``bench/``.

``official_client_driver.py`` is not imported here: it is a script run by path in its own
process (``client_bench.driver_command``), because the official client's generated protobuf
modules clash with Ariane's in one interpreter. It imports nothing of Ariane.

Invariants: this package sits above ``ariane.client``, ``ariane.dev`` and ``ariane.common``;
only ``ariane.cli`` imports it (``.importlinter``).
"""

from ariane.benchmark import (
    cli,
    client_bench,
    client_results,
    machine,
    measure,
    process_cpu,
    report,
)

__all__ = [
    "cli",
    "client_bench",
    "client_results",
    "machine",
    "measure",
    "process_cpu",
    "report",
]
