"""The broker's tables: pure, persisted state that every processor reads.

``topic_config`` (TopicConfigManager: topics, queue counts, permission, message type),
``subscriptions`` (SubscriptionGroupManager: consumer-group configs and retry policies),
``offsets`` (ConsumerOffsetManager: committed consumer offsets), ``clients`` (live client
sessions) and ``persistence`` (atomic JSON metadata files, RocketMQ's ``ConfigManager``).

Invariant: nothing here does network I/O or imports another broker subpackage; each table is
used from the broker's one event loop and persists itself atomically (temp + fsync + rename).
"""
