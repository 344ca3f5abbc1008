"""``ariane admin``: topics, groups, lag, offsets, messages and brokers of a cluster.

The command knows only the name servers (``--endpoints HOST:PORT[;HOST:PORT]`` or the
``NAMESRV_ADDR`` environment variable, as RocketMQ's ``mqadmin -n``) and reaches every broker
through ``ariane.client.AdminClient``::

    ariane admin --endpoints 127.0.0.1:9876 topic create orders --queues 8 --type FIFO
    ariane admin topic update|delete NAME …    topic list [--all]
    ariane admin group create billing [--fifo] [--max-delivery-attempts N]
        [--allocate-strategy AVG|AVG_BY_CIRCLE|CONSISTENT_HASH|CONFIG] [--allocate-queue T/B/ID]
    ariane admin group list|delete|lag|reset-offset …
    ariane admin message get --topic orders --id ID | --key KEY
    ariane admin dlq list GROUP | dlq resend GROUP --id ID | --all
    ariane admin broker list | wipe-write-perm NAME… | add-write-perm NAME…
    ariane admin broker promote --broker-name G --broker-id N [--role SYNC_MASTER]
                                [--lease-wait-s S]  (failover waits for the old master's lease)
                                [--force]  (failover: promote a slave the master's last in-sync
                                            report does not vouch for: may lose acked messages)
    ariane admin cluster | brokers | topics | groups | lag     (one-word views for people)
    ariane admin top [--interval-s 2] [--iterations N]       (live rates and lag)
    ariane admin user create|update|delete|get|list …   acl create|update|delete|get|list …
                                                  (ACL 2.0, ``auth``; mqadmin letters)

``topic create`` returns once the name servers route the topic (see ``topics``).

Brokers with ACL 2.0 on need signed calls: ``--access-key``/``--secret-key`` (or
``ARIANE_ACCESS_KEY``/``ARIANE_SECRET_KEY``) on any command. A cluster serving TLS needs
``--tls --ca-file PATH`` (or ``ARIANE_TLS=1``, ``ARIANE_CA_FILE``): name servers and brokers are
verified against that CA (without ``--ca-file``: the system's roots); a plaintext call to an
``enforcing`` port fails as unreachable, with that fix printed.

Output is a ``rich`` table, or JSON with ``--json`` (for scripts). Exit status: 0 done; 1 a
broker or name server refused (the RocketMQ code name is printed with what to fix) or a broker
did not answer; 2 a usage error; 3 no name server answered.

The package is split by concept: ``arguments`` (value types, the options of every command,
credentials and TLS), ``output`` (``Result`` rendered as tables or JSON), one module per resource
with its nouns and handlers (``topics``, ``groups``, ``messages``, ``brokers``, ``auth``), the
one-word ``views`` (with ``top``'s sums and rates), and ``main`` (composition, exit statuses).
"""

from __future__ import annotations

from ariane.admin_cli.arguments import UsageError, parse_duration_ms, parse_timestamp_ms
from ariane.admin_cli.main import (
    EXIT_NAMESRV_UNREACHABLE,
    EXIT_REFUSED,
    EXIT_USAGE,
    HINTS,
    add_arguments,
    execute,
    run,
)
from ariane.admin_cli.output import Result, render

__all__ = [
    "EXIT_NAMESRV_UNREACHABLE",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "HINTS",
    "Result",
    "UsageError",
    "add_arguments",
    "execute",
    "parse_duration_ms",
    "parse_timestamp_ms",
    "render",
    "run",
]
