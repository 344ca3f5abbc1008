"""Protocol-neutral processors: what the broker does for a request, whatever wire it came on.

``send`` (SendProcessor, the one send core of both protocols: route, encode once, append; its
protocol adapters ``send_v2`` and ``send_classic`` make drafts, ``send_draft``), ``consume``
(ConsumeProcessor: the policy of receive/pop, ack, change invisible duration, DLQ forwarding over
the POP seam ``pop.receiver``), ``routes`` (RouteLookup for QueryRoute/QueryAssignment),
``long_polling`` (where receives park until a send wakes them) and ``renewal`` (the push
consumers' receipt handles whose invisible time the broker renews; ``renewal_settings`` is
``[renewal]``). The gRPC services in ``broker.grpc`` decode a request, call a processor and
encode its answer; the classic Remoting adapter (``broker.remoting``) calls the same processors.

Invariant (import-linter): no module here imports ``broker.grpc``, ``broker.server`` or
protobuf-generated code.
"""
