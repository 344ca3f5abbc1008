"""The broker's gRPC adapters: ``messaging`` (apache.rocketmq.v2.MessagingService and
ariane.ingest.v1.Ingest), ``admin_service`` and ``admin_convert`` (ariane.admin.v1.Admin), and
``frontend`` (the SO_REUSEPORT worker processes that relay calls to the store owner).

Each handler decodes the request, calls a processor (``broker.processors``) or a table, and
encodes the answer with the right RocketMQ ``Code``; state lives in the processors and tables.
"""
