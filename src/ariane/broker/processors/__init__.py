"""Protocol-neutral processors: what the broker does for a request, whatever wire it came on.

``send`` (SendProcessor: validate, pick the queue, append), ``consume`` (ConsumeProcessor:
the policy of receive/pop, ack, change invisible duration, DLQ forwarding over the POP seam
``pop.receiver``), ``routes`` (RouteLookup for
QueryRoute/QueryAssignment) and ``long_polling`` (where receives park until a send wakes them).
The gRPC services in ``broker.grpc`` decode a request, call a processor and encode its answer;
the classic Remoting adapter will call the same processors.

Invariant (import-linter): no module here imports ``broker.grpc``, ``broker.server`` or
protobuf-generated code.
"""
