"""``ariane.connectors.spark``: the PySpark Python Data Source ``rocketmq`` (PySpark >= 4.2).

Usage::

    from ariane.connectors.spark import RocketMQDataSource
    spark.dataSource.register(RocketMQDataSource)
    df = spark.read.format("rocketmq").option("endpoints", "127.0.0.1:9876") \\
        .option("topics", "orders").load()

Modules: ``options`` (validation, pure), ``ranges`` (offset maps and partition ranges, pure),
``broker_io`` (everything asked of the brokers, through ``ariane.client``), ``source`` (the
pyspark classes). Only this package imports pyspark (``.importlinter``).
"""

from ariane.connectors.spark.broker_io import SCHEMA, DataLossError
from ariane.connectors.spark.options import OptionError
from ariane.connectors.spark.ranges import QueryLag, offsets_behind_latest
from ariane.connectors.spark.source import RocketMQDataSource

__all__ = [
    "SCHEMA",
    "DataLossError",
    "OptionError",
    "QueryLag",
    "RocketMQDataSource",
    "offsets_behind_latest",
]
