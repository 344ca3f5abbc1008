"""Values, names, errors and the clock shared by every Ariane component (standard library only).

Modules: ``ids`` (NewTypes for ids and offsets), ``message`` (message values, property names),
``route`` (MessageQueue and route values, perm bits), ``topics`` (name rules, retry/DLQ names),
``delay`` (delay levels), ``errors`` (RocketMQ ``Code`` and the error tree), ``clock`` (the time
seam), ``limits`` (protocol limits), ``log_limits`` (rate-limited log lines), ``histogram``
(fixed-bucket counts for metrics), ``allocate`` (RocketMQ's queue allocation strategies),
``promotion`` (the pure failover decision). Import the modules, not their names.
"""

from ariane.common import (
    allocate,
    clock,
    delay,
    errors,
    histogram,
    ids,
    limits,
    log_limits,
    message,
    promotion,
    route,
    topics,
)

__all__ = [
    "allocate",
    "clock",
    "delay",
    "errors",
    "histogram",
    "ids",
    "limits",
    "log_limits",
    "message",
    "promotion",
    "route",
    "topics",
]
