"""The broker's background loops: what runs in a broker besides answering requests.

Naming rule: every long-running loop is a class named ``…Service`` with ``async def run()``
that loops until cancelled; ``BrokerServer`` builds each one and runs them all in its one
``TaskGroup`` (``server._run_services``, task names in brackets); the only other long-running
tasks are those a service starts and owns (named below). The loops live here, except where a
concept has its own package, whose loop stays with the state it drives:

* ``registration.RegistrationService`` [registration]: RegisterBroker with every name server
  every 30 s, on route changes, at once when a name server lost the broker
  (RocketMQ ``BrokerController.registerBrokerAll``);
* ``offset_persist.ConsumerOffsetPersistService`` [offset-persist]: committed consumer offsets
  to disk (``ConsumerOffsetManager.persist``, every ``flushConsumerOffsetInterval``);
* ``client_housekeeping.ClientHousekeepingService`` [client-expiry]: silent gRPC clients and
  stale queue locks expire (``ClientHousekeepingService``);
* ``retention.RetentionService`` [retention]: the store's ``CleanCommitLogService`` pass;
* ``receipt_renewal.ReceiptRenewalService`` [receipt-renewal]: push consumers' invisible time
  renewed (the proxy's ``DefaultReceiptHandleManager``; the table is ``processors.renewal``);
* ``lite_expiry.LiteExpiryService`` [lite-expiry]: idle lite topics expire (RIP-83);
* ``write_timeline.WriteTimelineService`` [write-timeline, with a broker role]: the CommitLog's
  end sampled each second, for the replication lag in seconds;
* ``replication.ReplicationService`` [replication, with a broker role]: role, epoch and the HA
  stream (it owns the store's ``HAService``/``HAClient`` loops);
* ``slave_sync.SlaveSyncService`` [slave-sync, with a broker role]: a slave copies its
  master's topics, groups, offsets, users and ACLs (``SlaveSynchronize``; settings beside it).

With their concept: ``pop.service.PopReviveService`` [pop-revive] (RocketMQ
``PopReviveService``), ``schedule.service.ScheduleService`` [schedule] (delay levels and timer
delivery), ``transaction.check_service.TransactionCheckService`` [transaction-check]
(``TransactionalMessageCheckService``). The two protocol adapters are services too and own
their connection loops: ``grpc.frontend`` [front-end] (it supervises the front-end worker
processes) and ``remoting.service.RemotingService`` [remoting, when served] (its push outbox,
its connections' expiry and its TPS sampler). ``orphan_topics`` is no loop: the topic
configs a promoted slave rebuilds.

Invariant: every loop ends when the broker stops (its task is cancelled); a loop that must
outlive a failed pass catches and logs the failure itself, and any other error ends the task
group, and so the broker.
"""
