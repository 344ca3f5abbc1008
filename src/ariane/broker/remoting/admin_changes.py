"""Classic admin deletes, the broker side of ``mqadmin deleteTopic`` and ``deleteSubGroup``.

Mirrors RocketMQ's ``AdminBrokerProcessor.deleteTopic`` / ``deleteSubscriptionGroup`` over the
protocol-neutral ``processors.admin.AdminProcessor`` (the one ``ariane admin topic delete`` and
the gRPC admin API call):

* ``DELETE_TOPIC_IN_BROKER`` (215), header ``topic``: the topic, its group offsets, POP state
  and ConsumeQueues go (``AdminProcessor.delete_topic``); the broker registers again at once,
  so the name servers drop its route. A blank name answers INVALID_PARAMETER (29), a system
  topic INVALID_PARAMETER with RocketMQ's remark. An absent topic answers SUCCESS, as
  RocketMQ's does: ``mqadmin deleteSubGroup -c`` deletes ``%RETRY%<group>`` and
  ``%DLQ%<group>``, which often never existed, and must not print an exception for them.
* ``DELETE_SUBSCRIPTIONGROUP`` (207), headers ``groupName``, ``cleanOffset``: the group's
  config, offsets and POP state go (``AdminProcessor.delete_group``). Ariane drops the offsets
  also without ``cleanOffset`` (mqadmin's default ``-r false``): RocketMQ keeps them, so a
  group created again under the name resumes from where the deleted one stood, which is rarely
  what deleting meant; ``ariane admin`` behaves the same. An absent group answers SUCCESS
  (RocketMQ's answer).

Both refuse on a slave with NO_PERMISSION (16). Invariant: no rule here, only decoding and
RocketMQ's codes; every handler answers and never raises.
"""

from __future__ import annotations

import logging

from ariane.broker.processors import admin
from ariane.broker.remoting import replies
from ariane.broker.tables import traffic_stats
from ariane.common import errors, topics
from ariane.remoting import codes, command

_log = logging.getLogger(__name__)

RC = codes.ResponseCode
Reply = command.RemotingCommand


class DeleteHandler:
    """Serves 215 and 207.

    Args:
        admin_processor: the broker's admin operations.
        traffic: the broker's per-topic and per-group counts; a deleted topic's or group's
            items go (RocketMQ ``BrokerStatsManager.onTopicDeleted``/``onGroupDeleted``).
    """

    def __init__(
        self, admin_processor: admin.AdminProcessor, traffic: traffic_stats.TrafficStats
    ) -> None:
        self._admin = admin_processor
        self._traffic = traffic

    async def delete_topic(self, request: Reply) -> Reply:
        """215: delete ``topic`` here (SUCCESS when it does not exist)."""
        try:
            self._admin.require_master()
            topic = replies.Header(request.ext_fields).text("topic").strip()
            if topics.is_system_topic(topic):
                return replies.failed(
                    request,
                    RC.INVALID_PARAMETER,
                    f"The topic[{topic}] is conflict with system topic.",
                )
            self._admin.delete_topic(topic)
            self._traffic.forget_topic(topic)
        except errors.TopicNotFoundError:
            _log.info("classic delete of absent topic %r: nothing to do", request.ext_fields)
        except errors.IllegalTopicError as exc:
            return replies.failed(request, RC.INVALID_PARAMETER, exc.message)
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        return replies.ok(request)

    async def delete_group(self, request: Reply) -> Reply:
        """207: delete ``groupName`` here with its offsets (SUCCESS when it does not exist)."""
        try:
            self._admin.require_master()
            group = replies.Header(request.ext_fields).text("groupName").strip()
            self._admin.delete_group(group)
            self._traffic.forget_group(group)
        except errors.ConsumerGroupNotFoundError:
            _log.info("classic delete of absent group %r: nothing to do", request.ext_fields)
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        return replies.ok(request)
