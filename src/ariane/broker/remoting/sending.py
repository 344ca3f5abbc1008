"""Classic sends: ``SEND_MESSAGE`` (10), ``SEND_MESSAGE_V2`` (310), ``SEND_BATCH_MESSAGE`` (320).

Mirrors RocketMQ's ``SendMessageProcessor``: the header is ``SendMessageRequestHeader`` (V1,
long names; Go sends it) or ``SendMessageRequestHeaderV2`` (one letter per field; Java sends
it), routed on the header's ``batch`` field, not the code. The body is the message body, or for
a batch ``MessageDecoder.encodeMessages`` output (``message_codec.decode_batch``). The reply's
ext fields are what ``MQClientAPIImpl.processSendResponse`` unboxes without null checks:
``msgId`` (offset message ids, comma-joined for a batch), ``queueId``, ``queueOffset`` (the
first), ``transactionId`` (a half message's; Java's END_TRANSACTION echoes it back), plus
``MSG_REGION`` and ``TRACE_ON``. A oneway send is stored and never answered.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ariane.broker.processors import retry, send, send_classic
from ariane.broker.remoting import replies
from ariane.common import errors, message
from ariane.remoting import codes, command, message_codec
from ariane.store import commit_log

_log = logging.getLogger(__name__)

RC = codes.ResponseCode
PMS = commit_log.PutMessageStatus

V2_NAMES = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
    "n": "brokerName",
}
"""``SendMessageRequestHeaderV2`` letters -> ``SendMessageRequestHeader`` names."""

REGION = "DefaultRegion"
"""``MSG_REGION`` of every reply (RocketMQ's default ``regionId``)."""

_STORED_WITH_WARNING = {
    PMS.FLUSH_DISK_TIMEOUT: RC.FLUSH_DISK_TIMEOUT,
    PMS.FLUSH_SLAVE_TIMEOUT: RC.FLUSH_SLAVE_TIMEOUT,
    PMS.SLAVE_NOT_AVAILABLE: RC.SLAVE_NOT_AVAILABLE,
}
"""Stored, but not as durably as configured: clients read these as a non-OK SendStatus."""

_REFUSED = {
    PMS.MESSAGE_ILLEGAL: RC.MESSAGE_ILLEGAL,
    PMS.PROPERTIES_SIZE_EXCEEDED: RC.MESSAGE_ILLEGAL,
    PMS.OS_PAGE_CACHE_BUSY: RC.SYSTEM_BUSY,
    PMS.SERVICE_NOT_AVAILABLE: RC.SERVICE_NOT_AVAILABLE,
    PMS.IN_SYNC_REPLICAS_NOT_ENOUGH: RC.SYSTEM_ERROR,
}
"""Not stored. IN_SYNC_REPLICAS_NOT_ENOUGH is SYSTEM_ERROR as in RocketMQ's
``SendMessageProcessor`` (remark "in-sync replicas not enough"): the clients retry it, safely,
since nothing was stored."""


def normalized_header(fields: Mapping[str, str]) -> dict[str, str]:
    """The V1 field names of a V1 or V2 send header (V2 letters renamed, others kept)."""
    if "b" not in fields:
        return dict(fields)
    return {V2_NAMES.get(k, k): v for k, v in fields.items()}


class SendHandler:
    """Serves the classic send codes over the send processor both protocols share
    (``send.SendProcessor.send_classic``), and ``CONSUMER_SEND_MSG_BACK`` (36) over the
    protocol-neutral ``RetryProcessor``.

    Args:
        sender: the send processor.
        retrier: the retry/DLQ processor (``Processors.retry``).
    """

    def __init__(self, sender: send.SendProcessor, retrier: retry.RetryProcessor) -> None:
        self._sender = sender
        self._retrier = retrier

    async def send_back(self, request: command.RemotingCommand) -> command.RemotingCommand:
        """36: retry the message at ``offset`` later through ``%RETRY%<group>``, or move it to
        ``%DLQ%<group>`` (``retry.RetryProcessor.send_msg_back_at``; ``originMsgId`` and
        ``originTopic`` are not read: the stored message's own ORIGIN_MESSAGE_ID / RETRY_TOPIC
        or id and topic are used, as RocketMQ's broker does)."""
        try:
            header = replies.Header(request.ext_fields)
            await self._retrier.send_msg_back_at(
                header.text("group"),
                header.integer("offset"),
                delay_level=header.integer("delayLevel", 0),
                max_reconsume_times=header.integer("maxReconsumeTimes", -1),
            )
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        return replies.ok(request)

    async def handle(
        self, born_host: message.HostAddress, request: command.RemotingCommand
    ) -> command.RemotingCommand | None:
        """Store the message(s) of one send request and answer where they went.

        Args:
            born_host: the producer's address as the connection shows it (BORNHOST).
            request: a 10, 310 or 320 request.

        Returns:
            the response, or ``None`` for a oneway request.
        """
        try:
            send_request = _decode(request, born_host)
            result = await self._sender.send_classic(send_request)
            response = _answer(request, result)
        except errors.ArianeError as exc:
            response = replies.error(request, exc)
        except message_codec.MessageCodecError as exc:
            response = replies.failed(request, RC.MESSAGE_ILLEGAL, f"batch body: {exc}")
        if request.is_oneway:
            if response.code != RC.SUCCESS:
                _log.info("oneway send refused (%d): %s", response.code, response.remark)
            return None
        return response


def _decode(
    request: command.RemotingCommand, born_host: message.HostAddress
) -> send_classic.ClassicSendRequest:
    fields = normalized_header(request.ext_fields)
    header = replies.Header(fields)
    batch = header.flag("batch") or request.code == codes.RequestCode.SEND_BATCH_MESSAGE
    sys_flag = header.integer("sysFlag")
    born_ms = header.integer("bornTimestamp")
    reconsume = header.integer("reconsumeTimes", 0)
    if batch:  # walked once by the send core: ``send_classic.ClassicDrafts.drafts``
        return send_classic.ClassicSendRequest(
            topic=header.text("topic"),
            queue_id=header.integer("queueId"),
            messages=(),
            batch=True,
            born_host=born_host,
            batch_body=request.body or b"",
            sys_flag=sys_flag,
            born_timestamp_ms=born_ms,
            reconsume_times=reconsume,
        )
    text = header.text("properties", "")
    messages = [
        send_classic.ClassicMessage(
            body=request.body,
            properties=message_codec.decode_properties(text),
            flag=header.integer("flag"),
            sys_flag=sys_flag,
            born_timestamp_ms=born_ms,
            reconsume_times=reconsume,
            properties_bytes=text.encode("utf-8", "surrogatepass"),
        )
    ]
    return send_classic.ClassicSendRequest(
        topic=header.text("topic"),
        queue_id=header.integer("queueId"),
        messages=messages,
        batch=False,
        born_host=born_host,
    )


def _answer(
    request: command.RemotingCommand, result: send_classic.ClassicSendResult
) -> command.RemotingCommand:
    status = result.status
    if not status.is_stored:
        code = _REFUSED.get(status, RC.SYSTEM_ERROR)
        return replies.failed(request, code, f"the store refused the message: {status.value}")
    ext = {
        "msgId": ",".join(result.offset_message_ids),
        "queueId": str(result.queue_id),
        "queueOffset": str(result.queue_offset),
        "MSG_REGION": REGION,
        "TRACE_ON": "true",
    }
    if result.transaction_id:
        ext["transactionId"] = result.transaction_id
    return command.response(request, _STORED_WITH_WARNING.get(status, RC.SUCCESS), ext_fields=ext)
