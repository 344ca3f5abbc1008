"""Inner authentication of broker registration with real ``ariane namesrv --config`` and
``ariane broker`` processes: a broker holding the inner credential registers (and keeps its
lease), while forged RegisterBroker/BrokerHeartbeat/UnregisterBroker calls without it, with a
wrong secret or with a stale signed date-time answer UNAUTHORIZED and leave the real route, the
real master's epoch and its writability untouched; route lookups stay open.

Own cluster: the name server and broker run with an inner credential, and forged registrations
target their route."""

from __future__ import annotations

import asyncio
import datetime
import pathlib
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

import ha_testing as ht
from ariane.common import errors
from ariane.grpcwire import convert, pb, rpc
from ariane.security import signing

pytestmark = pytest.mark.slow

OK = int(errors.Code.OK)
UNAUTHORIZED = int(errors.Code.UNAUTHORIZED)
ACCESS_KEY, SECRET = "ariane-inner", "inner-secret-1"
CREDENTIAL = (
    "[auth.inner_client_authentication_credentials]\n"
    f'access_key = "{ACCESS_KEY}"\n'
    f'secret_key = "{SECRET}"\n'
)
GROUP = "ha-group"


@pytest.fixture
def namesrv(tmp_path: pathlib.Path) -> Iterator[str]:
    config = tmp_path / "namesrv.toml"
    config.write_text(CREDENTIAL)
    with ht.running_namesrv_process(tmp_path, ("--config", str(config))) as (endpoint, _):
        yield endpoint


@pytest.fixture
def master(tmp_path: pathlib.Path, namesrv: str) -> Iterator[ht.Broker]:
    broker = ht.new_broker(tmp_path, "master")
    try:
        extra = ht.small_store_config(tmp_path, "master", CREDENTIAL)
        broker.start(tmp_path, namesrv, "ASYNC_MASTER", broker_id=0, extra=extra)
        yield broker
    finally:
        broker.stop()


def _signed(secret: str, when: datetime.datetime) -> tuple[tuple[str, str], ...]:
    date_time = signing.grpc_date_time(when)
    return signing.sign_grpc(access_key=ACCESS_KEY, secret_key=secret, date_time=date_time)


def _call(namesrv: str, name: str, request: Any, answer: type[Any], md: Any) -> Any:
    async def call() -> Any:
        async with grpc.aio.insecure_channel(namesrv) as channel:
            return await rpc.unary_call(
                channel, pb.REGISTRY_SERVICE, name, request, answer, timeout_s=10, metadata=md
            )

    return asyncio.run(call())


def _forgeries() -> list[tuple[tuple[str, str], ...]]:
    now = datetime.datetime.now(datetime.UTC)
    return [
        (),
        _signed("wrong-secret", now),
        _signed(SECRET, now - datetime.timedelta(minutes=30)),
    ]


def test_forged_registry_calls_are_refused_and_the_real_route_stays(
    tmp_path: pathlib.Path, namesrv: str, master: ht.Broker
) -> None:
    """Proves RegisterBroker, BrokerHeartbeat and UnregisterBroker under the real master's name
    and id 0 without a valid inner-credential signature answer UNAUTHORIZED and change nothing:
    the route still names the real master at its epoch, which stays writable."""
    real = ht.cluster_masters(namesrv)
    assert real == [(master.endpoint, 1)]
    register = pb.registry.RegisterBrokerRequest(
        cluster_name="DefaultCluster",
        broker_name=GROUP,
        broker_id=0,
        client_endpoint=convert.address("10.6.6.6", 8081),
        epoch=99,
    )
    heartbeat = pb.registry.BrokerHeartbeatRequest(
        cluster_name="DefaultCluster", broker_name=GROUP, broker_id=0, epoch=99
    )
    unregister = pb.registry.UnregisterBrokerRequest(
        cluster_name="DefaultCluster", broker_name=GROUP, broker_id=0, epoch=99
    )
    calls = [
        ("RegisterBroker", register, pb.registry.RegisterBrokerResponse),
        ("BrokerHeartbeat", heartbeat, pb.registry.BrokerHeartbeatResponse),
        ("UnregisterBroker", unregister, pb.registry.UnregisterBrokerResponse),
    ]
    for md in _forgeries():
        for name, request, answer_type in calls:
            answer = _call(namesrv, name, request, answer_type, md)
            assert answer.status.code == UNAUTHORIZED, (name, md, answer.status)
            assert SECRET not in answer.status.message
    assert ht.cluster_masters(namesrv) == real
    stats = ht.stats(master.endpoint)
    assert stats.epoch == 1 and stats.writable
    log = (tmp_path / "namesrv.log").read_text()
    assert "refused RegisterBroker" in log and SECRET not in log


def test_signed_registration_is_accepted_and_lookups_stay_open(
    namesrv: str, master: ht.Broker
) -> None:
    """Proves a call signed with the inner credential now is served (so the refusals above are
    the credential's doing) and that route lookups need no signature."""
    now = datetime.datetime.now(datetime.UTC)
    heartbeat = pb.registry.BrokerHeartbeatRequest(
        cluster_name="DefaultCluster", broker_name=GROUP, broker_id=0, epoch=1
    )
    answer = _call(
        namesrv,
        "BrokerHeartbeat",
        heartbeat,
        pb.registry.BrokerHeartbeatResponse,
        _signed(SECRET, now),
    )
    assert answer.status.code == OK
    ht.create_topic(master.endpoint, "open-route")
    ht.poll(
        lambda: (
            _call(
                namesrv,
                "GetTopicRoute",
                pb.registry.GetTopicRouteRequest(topic="open-route"),
                pb.registry.GetTopicRouteResponse,
                (),
            ).status.code
            == OK
        ),
        "an unsigned route lookup",
    )
