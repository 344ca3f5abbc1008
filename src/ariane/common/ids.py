"""Identifier and offset types shared by every component.

Every id and offset kind is its own ``NewType`` so that mypy refuses to mix them: a
``CommitLogOffset`` (a byte position in the broker-wide CommitLog, RocketMQ's "physical offset")
can never be passed where a ``QueueOffset`` (an entry index in one ConsumeQueue, RocketMQ's
"logical offset") is expected, and vice versa.
"""

from __future__ import annotations

from typing import NewType

CommitLogOffset = NewType("CommitLogOffset", int)
"""Byte position of a record in the CommitLog (RocketMQ ``commitLogOffset``/``phyOffset``)."""

QueueOffset = NewType("QueueOffset", int)
"""Index of an entry in one ConsumeQueue (RocketMQ ``queueOffset``); counts messages, not bytes."""

QueueId = NewType("QueueId", int)
"""Queue number inside a topic on one broker, ``0 <= queue_id < queue count``."""

BrokerId = NewType("BrokerId", int)
"""Broker id inside a broker group: 0 is the master, above 0 are slaves."""

BrokerName = NewType("BrokerName", str)
"""Name of a broker group (master plus slaves share it)."""

ClusterName = NewType("ClusterName", str)
"""Name of the cluster a broker group belongs to."""

TopicName = NewType("TopicName", str)
"""A validated topic name (see ``ariane.common.topics.validate_topic``)."""

GroupName = NewType("GroupName", str)
"""A validated consumer or producer group name."""

MessageId = NewType("MessageId", str)
"""A message id: RocketMQ's ``UNIQ_KEY`` (32 upper-case hex characters) or an offset msgId."""

ClientId = NewType("ClientId", str)
"""The ``x-mq-client-id`` a client sends on every call; ties its calls into one session."""

TimestampMs = NewType("TimestampMs", int)
"""Milliseconds since the Unix epoch (UTC)."""

MIN_BROKER_ID = BrokerId(0)
MASTER_BROKER_ID = BrokerId(0)
