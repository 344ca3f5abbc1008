"""Connectors: bridges from Ariane topics to other systems, each in its own subpackage.

``connectors.spark`` is the PySpark Python Data Source ``rocketmq``. Connectors reach brokers
only through ``ariane.client`` (the import-linter layers: connectors sit beside broker,
namesrv and operator, above client), and only ``connectors.spark`` imports pyspark.
"""
