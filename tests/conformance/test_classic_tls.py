"""TLS on the Remoting ports with the official classic tools: the classic Java client 5.3.3 with
``-Dtls.enable=true`` sends and push-consumes through an ``enforcing`` name server and broker,
and ``mqadmin`` 5.3.3 with ``-Dtls.enable=true`` (what ``JAVA_OPT`` passes) lists topics over
TLS, while plaintext to either Remoting port is closed unanswered.

The classic client trusts any server certificate unless told otherwise (``tls.test.mode.enable``
defaults to true: trust-all, no client certificate; security.md §8.3), so these runs prove the
wire, not the client's verification. One module-scoped pair: the name server serves Remoting on
its own ``remoting_listen`` port (enforcing) and gRPC on ``listen`` (the brokers' registration);
the broker is enforcing on every port.
"""

from __future__ import annotations

import dataclasses
import subprocess
import time
from collections.abc import Iterator

import pytest

import ha_testing
import tls_testing
from ariane import dev
from ariane.security import ca
from conformance import classic_java_client
from conformance.classic_java_client import ClassicJava
from tls_testing import RC, RQ

pytestmark = pytest.mark.slow

TOPIC, GROUP = "tls-classic", "tls-classic-group"
MQADMIN_TIMEOUT_S = 120.0
TLS_JVM = {"tls.enable": "true"}


@dataclasses.dataclass(frozen=True)
class Secured:
    """The running pair: the name server's and the broker's Remoting addresses."""

    namesrv_remoting: str
    broker_remoting: str


def _wait_routed(secured: Secured, files: ca.LocalTlsFiles) -> None:
    context = tls_testing.client_context(files)
    deadline = time.monotonic() + ha_testing.DEADLINE_S
    header = {"topic": TOPIC}
    while (
        tls_testing.call(
            secured.namesrv_remoting, RQ.GET_ROUTEINFO_BY_TOPIC, header, context=context
        ).code
        != RC.SUCCESS
    ):
        assert time.monotonic() < deadline, f"{TOPIC} never routed"
        time.sleep(0.1)  # polling the name server, with a deadline


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """An enforcing name server (Remoting on its own port) and an enforcing broker; ``TOPIC``
    created over TLS and routed."""
    tmp = tmp_path_factory.mktemp("classic-tls")
    files = ca.write_local(tmp / "certs")
    toml = tls_testing.tls_toml(files, "enforcing")
    config = tmp / "namesrv.toml"
    config.write_text(toml)
    namesrv_remoting = f"127.0.0.1:{dev.free_port()}"
    extra = ("--config", str(config), "--remoting-listen", namesrv_remoting)
    with ha_testing.running_namesrv_process(tmp, extra) as (namesrv, _):
        remoting_port = dev.free_port()
        args = [
            "broker",
            *("--listen", f"127.0.0.1:{dev.free_port()}", "--store-dir", str(tmp / "store")),
            *("--namesrv", namesrv, "--workers", "0"),
            *("--remoting-listen", f"127.0.0.1:{remoting_port}"),
            *ha_testing.small_store_config(tmp, "broker", toml),
        ]
        proc = ha_testing.spawn(args, tmp / "broker.log")
        try:
            dev.wait_until_listening(
                "127.0.0.1", remoting_port, process=proc, timeout_s=ha_testing.DEADLINE_S
            )
            secured = Secured(namesrv_remoting, f"127.0.0.1:{remoting_port}")
            made = tls_testing.call(
                secured.broker_remoting,
                RQ.UPDATE_AND_CREATE_TOPIC,
                tls_testing.topic_header(TOPIC),
                context=tls_testing.client_context(files),
            )
            assert made.code == RC.SUCCESS, made.remark
            _wait_routed(secured, files)
            yield secured
        finally:
            dev.stop_process(proc)


def test_plaintext_is_closed_on_both_remoting_ports(secured: Secured) -> None:
    """A plaintext GET_ROUTEINFO_BY_TOPIC to the name server and a plaintext GET_TOPIC_CONFIG
    to the broker are both met by a closed connection."""
    header = {"topic": TOPIC}
    assert tls_testing.closed_without_answer(
        secured.namesrv_remoting, RQ.GET_ROUTEINFO_BY_TOPIC, header
    )
    assert tls_testing.closed_without_answer(secured.broker_remoting, RQ.GET_TOPIC_CONFIG, header)


def test_classic_java_client_sends_and_consumes_over_tls(
    secured: Secured, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """With ``-Dtls.enable=true`` the classic producer sends 3 messages and a push consumer
    receives them, through the enforcing name server and broker."""
    java = ClassicJava(
        classic_java_client.build(),
        secured.namesrv_remoting,
        tmp_path_factory.mktemp("classic-java-tls"),
        properties=TLS_JVM,
    )
    sent_run = java.run("send", "--topic", TOPIC, "--count", "3", "--mode", "sync")
    sent = {e["message_id"] for e in sent_run.events if e["event"] == "sent"}
    assert len(sent) == 3, sent_run.events
    pushed = java.run("push", "--topic", TOPIC, "--group", GROUP, "--count", "3")
    assert {e["message_id"] for e in pushed.events if e["event"] == "received"} >= sent


def test_mqadmin_lists_topics_over_tls(
    secured: Secured, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``mqadmin topicList`` with ``-Dtls.enable=true`` lists the topic from the enforcing name
    server; without it, it gets no topic list."""
    logs = tmp_path_factory.mktemp("mqadmin-tls-logs")
    classic = ClassicJava(classic_java_client.build(), secured.namesrv_remoting, logs)

    def topic_list(*jvm: str) -> str:
        done = subprocess.run(
            [
                *classic.java(classic_java_client.MQADMIN_MAIN, *jvm),
                *("topicList", "-n", secured.namesrv_remoting),
            ],
            capture_output=True,
            text=True,
            timeout=MQADMIN_TIMEOUT_S,
            check=False,
        )
        return done.stdout + done.stderr

    out = topic_list("-Dtls.enable=true")
    assert TOPIC in out and "Exception" not in out, out
    plain = topic_list()
    assert TOPIC not in plain, plain
