"""Classic message queries: ``VIEW_MESSAGE_BY_ID`` (33) and ``QUERY_MESSAGE`` (12).

Mirrors RocketMQ's ``QueryMessageProcessor``: 33 names a CommitLog ``offset`` (decoded by the
client from an offset message id that dials this broker) and answers the one stored record;
12 looks up ``key`` in ``topic`` through the key index (``_UNIQUE_KEY_QUERY=true``: the key is a
UNIQ_KEY) and answers the records newest first, with ``indexLastUpdateTimestamp`` and
``indexLastUpdatePhyoffset`` ext fields, or ``QUERY_NOT_FOUND`` (22). Both go through the admin
processor's reads, which check CRCs and skip unreadable records.
"""

from __future__ import annotations

from ariane.broker.processors import admin
from ariane.broker.remoting import replies
from ariane.common import errors
from ariane.remoting import command, message_codec


class QueryHandler:
    """Serves 33 and 12.

    Args:
        admin_processor: message reads by id and by key.
    """

    def __init__(self, admin_processor: admin.AdminProcessor) -> None:
        self._admin = admin_processor

    async def view_by_id(self, request: command.RemotingCommand) -> command.RemotingCommand:
        """33: the record at ``offset``."""
        try:
            header = replies.Header(request.ext_fields)
            offset = header.integer("offset")
            if offset < 0:
                raise errors.BadRequestError(f"offset {offset} is negative")
            found = self._admin.message_at(offset)
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        return replies.ok(request, body=message_codec.encode_stored(found))

    async def query(self, request: command.RemotingCommand) -> command.RemotingCommand:
        """12: the messages of ``topic`` carrying ``key`` (or UNIQ_KEY ``key``)."""
        try:
            header = replies.Header(request.ext_fields)
            topic, key = header.text("topic"), header.text("key")
            if header.flag("_UNIQUE_KEY_QUERY"):
                found = self._admin.messages_by_id(key, topic)
            else:
                found = self._admin.messages_by_key(
                    topic,
                    key,
                    max_messages=max(0, header.integer("maxNum", 0)),
                    window_ms=(
                        max(0, header.integer("beginTimestamp", 0)),
                        max(0, header.integer("endTimestamp", 0)),
                    ),
                )
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        ext = {
            "indexLastUpdateTimestamp": str(max(m.store_timestamp_ms for m in found)),
            "indexLastUpdatePhyoffset": str(max(m.commit_log_offset for m in found)),
        }
        body = b"".join(message_codec.encode_stored(m) for m in found)
        return replies.ok(request, ext, body)
