"""The flights pipeline: NYC 2013 departures through Ariane with the official RocketMQ client."""
