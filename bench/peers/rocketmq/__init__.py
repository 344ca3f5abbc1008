"""Apache RocketMQ 5.3.x as a local benchmark peer: fetched by Maven, run on 127.0.0.1 (peer.py)."""

__all__: list[str] = []
