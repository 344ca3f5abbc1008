"""RocketMQ's classic TCP protocol ("Remoting"): the classic Java and Go clients' and mqadmin's.

Modules (import the modules, not their names):

* ``codes``: ``RequestCode``, ``ResponseCode``, ``LanguageCode``, ``SerializeType`` (RocketMQ's
  values).
* ``command``: the frozen ``RemotingCommand``, ``encode``/``decode_frame`` for both header
  encodings (JSON as fastjson writes it, and ``ROCKETMQ`` binary), ``request``/``response``
  builders, ``FrameError``, ``FRAME_BYTES_MAX``.
* ``fastjson``: JSON bodies as fastjson writes them (compact, sorted, nulls omitted,
  ``MessageQueue`` objects as map keys) and a reader for the same.
* ``message_codec``: properties strings, batch bodies, stored records for pull bodies, offset
  message ids (over the store's record codec, which is RocketMQ's layout).
* ``transport``: asyncio ``RemotingServer`` (handler table, concurrent requests per connection),
  ``Connection`` (server→client requests, close callbacks) and ``RemotingClient``.

``codes``, ``command``, ``fastjson`` and ``message_codec`` are pure (no I/O, no clock; checked by
``.importlinter``). This ``__init__`` leaves ``message_codec`` out on purpose: it builds on the
store's record codec, and the name server, which imports this package, must not load the store
(``.importlinter``: namesrv-stands-alone). Import ``ariane.remoting.message_codec`` directly.
"""

from ariane.remoting import codes, command, fastjson, transport

__all__ = ["codes", "command", "fastjson", "transport"]
