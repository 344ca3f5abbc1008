"""``ariane.admin.v1.Admin`` on the broker (placeholder until the admin branch merges).

Every RPC answers NOT_IMPLEMENTED through ``ariane.remoting.rpc``'s guard.
"""

from __future__ import annotations

from ariane.broker import runtime as runtime_mod


class AdminService:
    """The admin API of one broker."""

    def __init__(self, runtime: runtime_mod.BrokerRuntime) -> None:
        self._runtime = runtime
