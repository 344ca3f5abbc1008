"""The broker's tables: pure, persisted state that every processor reads.

``topic_config`` (TopicConfigManager: topics, queue counts, permission, message type),
``subscriptions`` (SubscriptionGroupManager: consumer-group configs and retry policies),
``offsets`` (ConsumerOffsetManager: committed consumer offsets), ``clients`` (live client
sessions), ``consumers`` (ConsumerManager: live members of each consumer group), ``queue_locks``
(RebalanceLockManager: orderly consumers' queue locks), ``lite_topics`` (RocketMQ 5.5's lite
topics and their subscribers; ``lite_settings`` is their ``[lite]`` bounds and TTL) and
``persistence`` (atomic JSON metadata files, RocketMQ's ``ConfigManager``). ``clients``,
``consumers`` and ``queue_locks`` are in memory only, as RocketMQ's are.

Invariant: nothing here does network I/O or imports another broker subpackage; each table is
used from the broker's one event loop, and a persisted one writes itself atomically (temp +
fsync + rename).
"""
