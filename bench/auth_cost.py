"""``python -m bench.auth_cost``: the broker CPU ACL 2.0 adds per message (issue 21, item 7).

The only code a broker runs more with ``[auth]`` on is the gRPC gate
(``broker.grpc.auth_gate.GrpcAuthGate.check``) inside the status guard of ``grpcwire.guard``, on
the store owner. This bench times exactly that seam on the thread CPU clock, in one process, so
the neighbours' load (which moves end-to-end figures on this shared VM by 2x, see
``broker_cpu-2026-11-24.md``) barely touches it:

* ``guard_off`` / ``guard_on``: one guarded SendMessage call (a stub handler answering OK)
  without and with the gate, same request, same signed headers; the difference is the CPU auth
  adds to one call;
* ``check_hit``: ``check`` alone when the identity cache holds the signature (a client re-signs
  once per second: all calls of that second but the first);
* ``check_miss``: ``check`` with a new signature every call (HMAC-SHA1 verify each time);
* ``check_receive``: ``check`` of a ReceiveMessage (group + topic permissions);
* ``remoting_send``: the Remoting gate (``remoting.security_gate.RemotingGate.check``) on a
  classic SEND_MESSAGE_V2 as a Normal user, each message a new one (its born timestamp and
  unique key differ, so each pays its HMAC-SHA1 over the ext fields and the body, as a classic
  producer's sends do; the decision comes from the gate's decision cache after the first).

The added CPU is then set against the broker's CPU per message measured by
``bench.broker_cpu`` (``--owner-us`` and ``--workers-us``: owner + front-end workers, µs per
message; defaults: the SYNC_FLUSH ``send x1`` "after" figures of
``results/broker_cpu-2026-11-24.md``). Results: ``results/auth_cost-<UTC stamp>.md`` and
``.json`` unless ``--no-record``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import pathlib
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import Any, NoReturn, cast

from ariane.broker.grpc import auth_gate
from ariane.grpcwire import codes, guard, pb
from ariane.remoting import codes as remoting_codes
from ariane.remoting import command, security_gate, transport
from ariane.security import metadata_store, model, signing
from ariane.security import settings as auth_settings

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
SEND = "apache.rocketmq.v2.MessagingService/SendMessage"
RECEIVE = "apache.rocketmq.v2.MessagingService/ReceiveMessage"


class _Context:
    def __init__(self, headers: Iterable[tuple[str, str]]) -> None:
        self._headers = (("x-mq-client-id", "bench@1@0@x"), ("x-mq-language", "PYTHON"), *headers)

    def invocation_metadata(self) -> Iterable[tuple[str, str | bytes]]:
        return self._headers

    def peer(self) -> str:
        return "ipv4:127.0.0.1:50000"

    def time_remaining(self) -> float | None:
        return None

    async def abort(self, code: Any, details: str = "") -> NoReturn:
        raise AssertionError(details)


class _Stub:
    async def send_message(self, request: Any, context: Any) -> Any:
        return pb.v2_service.SendMessageResponse(status=codes.ok())


def _store(directory: pathlib.Path) -> metadata_store.AuthMetadataStore:
    store = metadata_store.AuthMetadataStore.open(directory)
    store.create_user(model.User(model.Username("bench"), "bench-secret"))
    entries = [
        {"resource": "Topic:bench", "actions": ["Pub", "Sub"], "decision": "Allow"},
        {"resource": "Group:bench-g", "actions": ["Sub"], "decision": "Allow"},
        {"resource": "Topic:other-*", "actions": ["Pub"], "decision": "Allow"},
    ]
    store.put_acl(
        model.acl_from_info({"subject": "User:bench", "policies": [{"entries": entries}]})
    )
    return store


def _signed(second: int) -> _Context:
    date_time = f"20250507T10{second // 60 % 60:02d}{second % 60:02d}Z"
    return _Context(
        signing.sign_grpc(access_key="bench", secret_key="bench-secret", date_time=date_time)
    )


class _Connection:
    """What the Remoting gate reads of a connection."""

    def __init__(self) -> None:
        self.remote_address = "127.0.0.1:50000"
        self.attributes: dict[str, object] = {}

    def add_close_callback(self, callback: object) -> None:
        pass


def _classic_sends(count: int) -> list[command.RemotingCommand]:
    """``count`` distinct SEND_MESSAGE_V2 commands to ``bench`` signed as the bench user."""
    sends = []
    for i in range(count):
        ext = {
            "a": "bench-producer", "b": "bench", "c": "TBW102", "d": "4", "e": str(i % 8),
            "f": "0", "g": str(1_700_000_000_000 + i), "h": "0", "j": "0", "k": "false",
            "i": f"UNIQ_KEY\x01{i:032X}\x02WAIT\x01true\x02",
        }  # fmt: skip
        body = b"x" * 64
        fields = signing.sign_remoting(
            ext, body, access_key="bench", secret_key="bench-secret", version=0
        )
        sends.append(command.request(remoting_codes.RequestCode.SEND_MESSAGE_V2, fields, body))
    return sends


def _remoting_send_us(
    store: metadata_store.AuthMetadataStore, on: auth_settings.AuthSettings, calls: int
) -> float:
    """Thread CPU per Remoting gate check of a distinct classic send, µs."""
    gate = security_gate.RemotingGate(store, on, cluster="bench")
    connection = cast(transport.Connection, _Connection())
    gate.connection_opened(connection)
    sends = _classic_sends(calls)
    index = iter(range(10**9))
    return _cpu_us(lambda: gate.check(connection, sends[next(index) % calls]), calls, 1)


def _cpu_us(run: Callable[[], object], calls: int, repeats: int) -> float:
    """Median over ``repeats`` of the thread CPU per call of ``run``, µs."""
    samples = []
    for _ in range(repeats):
        start = time.thread_time_ns()
        for _ in range(calls):
            run()
        samples.append((time.thread_time_ns() - start) / calls / 1000)
    return statistics.median(samples)


def measure(calls: int, repeats: int) -> dict[str, float]:
    """CPU µs per call of each case (see the module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        on = auth_settings.AuthSettings(authentication_enabled=True, authorization_enabled=True)
        gate = auth_gate.GrpcAuthGate(_store(pathlib.Path(tmp)), on, cluster="bench")
        message = pb.v2.Message(topic=pb.v2.Resource(name="bench"), body=b"x" * 64)
        send = pb.v2_service.SendMessageRequest(messages=[message])
        receive = pb.v2_service.ReceiveMessageRequest(
            group=pb.v2.Resource(name="bench-g"),
            message_queue=pb.v2.MessageQueue(topic=pb.v2.Resource(name="bench")),
        )
        context = _signed(0)
        loop = asyncio.new_event_loop()
        calls_by_gate = {}
        for name, with_gate in (("off", None), ("on", gate)):
            (method,) = [
                m
                for m in guard.guarded_methods(pb.MESSAGING_SERVICE, _Stub(), gate=with_gate)
                if m.path.endswith("/SendMessage")
            ]
            calls_by_gate[name] = method
        results: dict[str, float] = {}
        for name, method in calls_by_gate.items():

            def guarded(m: guard.GuardedMethod = method) -> object:
                return loop.run_until_complete(m.call(send, context))

            results[f"guard_{name}"] = _cpu_us(guarded, calls, repeats)
        results["check_hit"] = _cpu_us(lambda: gate.check(SEND, send, context), calls, repeats)
        fresh = iter(range(10**9))
        contexts = [_signed(next(fresh)) for _ in range(calls)]
        index = iter(range(10**9))
        results["check_miss"] = _cpu_us(
            lambda: gate.check(SEND, send, contexts[next(index) % calls]), calls, 1
        )
        results["check_receive"] = _cpu_us(
            lambda: gate.check(RECEIVE, receive, context), calls, repeats
        )
        results["remoting_send"] = _remoting_send_us(gate.store, on, calls)
        loop.close()
        return results


def main(argv: list[str] | None = None) -> int:
    """Run, print and (unless ``--no-record``) record the figures."""
    parser = argparse.ArgumentParser(prog="python -m bench.auth_cost", description=__doc__)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--owner-us", type=float, default=673.0)
    parser.add_argument("--workers-us", type=float, default=750.0)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    found = measure(args.calls, args.repeats)
    added = found["guard_on"] - found["guard_off"]
    broker = args.owner_us + args.workers_us
    found["added_per_send_us"] = added
    found["added_share_of_owner"] = added / args.owner_us
    found["added_share_of_broker"] = added / broker
    lines = [f"{k}: {v:.4f}" for k, v in found.items()]
    print("\n".join(lines))
    if not args.no_record:
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H%M%SZ")
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"auth_cost-{stamp}.json").write_text(json.dumps(found, indent=2) + "\n")
        (RESULTS / f"auth_cost-{stamp}.md").write_text(_report(found, args) + "\n")
    return 0


def _report(found: dict[str, float], args: argparse.Namespace) -> str:
    return "\n".join(
        [
            "# ACL 2.0 CPU per message on the broker (gRPC gate), thread CPU clock",
            "",
            f"`python -m bench.auth_cost --calls {args.calls} --repeats {args.repeats}"
            f" --owner-us {args.owner_us:g} --workers-us {args.workers_us:g}`"
            f" ({datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC)",
            "",
            "| case | µs CPU per call |",
            "|---|---|",
            *(f"| {k} | {found[k]:.2f} |" for k in
              ("guard_off", "guard_on", "check_hit", "check_miss", "check_receive",
               "remoting_send")),
            "",
            f"Added by auth per SendMessage (guard_on - guard_off): "
            f"**{found['added_per_send_us']:.1f} µs** = "
            f"{100 * found['added_share_of_owner']:.1f} % of the owner's {args.owner_us:g} µs/msg"
            f" and {100 * found['added_share_of_broker']:.1f} % of owner + workers "
            f"({args.owner_us + args.workers_us:g} µs/msg: the `broker_cpu` send x1 figures given"
            f" as `--owner-us {args.owner_us:g} --workers-us {args.workers_us:g}`). Goal: < 10 %.",
            "",
            f"The Remoting gate adds **{found['remoting_send']:.1f} µs** per classic send"
            " (`remoting_send`: HMAC over each new message included).",
        ]
    )  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
