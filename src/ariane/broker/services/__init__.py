"""The broker's background loops, each a ``…Service`` with an async ``run()`` that the
``BrokerServer`` starts in its task group: ``registration`` (RegisterBroker with every name
server every 30 s, on route changes, and at once when a name server lost the broker),
``write_timeline`` (the CommitLog's end sampled each second, for the replication lag in seconds).
"""
