"""The classic RocketMQ protocol (Remoting) on the broker: a second wire adapter.

Handlers for the request codes of ``specs/remoting.md`` (sends, pulls, offsets, heartbeats,
transactions, message queries) decode a ``RemotingCommand`` (``ariane.remoting``), call the same
protocol-neutral processors as the gRPC services (``broker.assembly.Processors``) and encode
their answer. The connection-level table of classic clients lives in ``clients``.

Invariant: no handler touches the store or the tables directly for what a processor does; what
the classic protocol needs beyond the gRPC one was added to the processors (the one send
processor, ``processors.send``, takes classic requests through ``processors.send_classic``).
"""
