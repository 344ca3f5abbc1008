"""``python -m bench.security_variants``: which half of security costs the broker CPU, TLS or ACL.

``bench.broker_cpu --security off,on`` compares a plain cluster with ``ariane dev --secure``
(TLS enforcing + ACL 2.0 on), both halves at once. This diagnostic splits them: it runs the
``send1`` workload (one official Python producer, one synchronous send at a time;
``bench.broker_cpu``'s row) on four fresh clusters per pass, in the order given by
``--variants`` (default ``off,tls,auth,on,on,auth,tls,off``: each variant twice, mirrored, so a
drift of the neighbours' load shows as a difference between a variant's two runs):

* ``off``: plain ``ariane dev``;
* ``tls``: ``--secure`` with ``[auth] authentication_enabled = false`` (TLS enforcing, the
  drivers still sign, their headers ignored);
* ``auth``: ``--secure`` with ``[tls] server_mode = "disabled"`` (ACL 2.0 on, plaintext; the
  drivers sign without ``tls_enable``);
* ``on``: ``--secure`` (both).

Per run it prints the broker's owner and front-end worker CPU per message (utime + stime from
``/proc`` over the timed span, as ``bench.broker_cpu``), the outside load (``ext_cores``) and the
1-minute load average, then the mean per variant. Results: ``results/security_variants-<UTC
stamp>.md`` unless ``--no-record``. The variants are made by swapping ``ariane.dev``'s
``--secure`` TOML templates for the time of one cluster (restored after).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from ariane import dev
from ariane.benchmark import process_cpu
from bench import compare

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
VARIANTS = ("off", "tls", "auth", "on")
WARMUP_MESSAGES = 800
"""Untimed sends (8 producers) before each timed run."""


@contextlib.contextmanager
def _variant(name: str) -> Iterator[None]:
    """``ariane.dev``'s ``--secure`` templates (and the bench's TLS switches) for ``name``."""
    saved_auth, saved_tls = dev.SECURE_BROKER_AUTH_TOML, dev.SECURE_TOML
    saved_wait, saved_admin = dev.wait_until_registered, compare._admin_auth
    if name == "tls":
        dev.SECURE_BROKER_AUTH_TOML = saved_auth.replace(
            "authentication_enabled = true", "authentication_enabled = false"
        ).replace("authorization_enabled = true", "authorization_enabled = false")
    if name == "auth":
        dev.SECURE_TOML = saved_tls.replace('"enforcing"', '"disabled"')

        def plain_wait(*args: Any, ca_path: object = None, **kwargs: Any) -> Any:
            return saved_wait(*args, **kwargs)

        def plain_admin(endpoints: dev.DevEndpoints) -> dict[str, Any]:
            return {k: v for k, v in saved_admin(endpoints).items() if k != "tls"}

        dev.wait_until_registered = plain_wait
        compare._admin_auth = plain_admin
    try:
        yield
    finally:
        dev.SECURE_BROKER_AUTH_TOML, dev.SECURE_TOML = saved_auth, saved_tls
        dev.wait_until_registered, compare._admin_auth = saved_wait, saved_admin


def run_one(name: str, messages: int) -> dict[str, float]:
    """One fresh cluster of variant ``name``: warm-up, then ``messages`` single sends timed."""
    base = pathlib.Path(tempfile.mkdtemp(prefix="security-variants-"))
    tag = f"var-{name}-{int(time.time())}"
    with (
        _variant(name),
        compare.ariane_cluster(base, "ASYNC_FLUSH", tag, secure=name != "off") as cluster,
    ):
        if name == "auth":
            os.environ["RMQ_DRIVER_TLS"] = "0"  # secured_drivers restores it on exit
        warmup = compare.driver_args("produce", cluster, WARMUP_MESSAGES, 8, "")
        compare.run_drivers([warmup], None)
        workers = process_cpu.descendants(cluster.broker_pid)
        timed = compare.driver_args("produce", cluster, messages, 1, "")
        result = compare.run_drivers([timed], None)
        owner_pid = cluster.broker_pid
    count = max(result.timing.messages, 1)
    cpu = result.cpu_s_by_pid
    return {
        "owner_us": cpu.get(owner_pid, 0.0) / count * 1e6,
        "workers_us": sum(cpu.get(pid, 0.0) for pid in workers) / count * 1e6,
        "ext_cores": result.load.ext_cores,
        "load_1m": os.getloadavg()[0],
    }


def main(argv: list[str] | None = None) -> int:
    """Run the variants in order, print each run and the means, record unless told not to."""
    parser = argparse.ArgumentParser(prog="python -m bench.security_variants", description=__doc__)
    parser.add_argument("--variants", default="off,tls,auth,on,on,auth,tls,off")
    parser.add_argument("--send-messages", type=int, default=3000)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    order = args.variants.split(",")
    if not set(order) <= set(VARIANTS):
        parser.error(f"--variants takes {','.join(VARIANTS)}")
    started = datetime.datetime.now(datetime.UTC)
    load_start = os.getloadavg()
    lines = ["| variant | owner µs/msg | workers µs/msg | broker µs/msg | ext_cores | load 1m |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    runs: dict[str, list[dict[str, float]]] = {}
    for name in order:
        run = run_one(name, args.send_messages)
        runs.setdefault(name, []).append(run)
        broker = run["owner_us"] + run["workers_us"]
        lines.append(
            f"| {name} | {run['owner_us']:.0f} | {run['workers_us']:.0f} | {broker:.0f} "
            f"| {run['ext_cores']:.2f} | {run['load_1m']:.1f} |"
        )
        print(lines[-1], file=sys.stderr, flush=True)
    lines += ["", "| variant | mean broker µs/msg | runs |", "|---|---|---|"]
    for name in VARIANTS:
        if name in runs:
            mean = statistics.mean(r["owner_us"] + r["workers_us"] for r in runs[name])
            lines.append(f"| {name} | {mean:.0f} | {len(runs[name])} |")
    command = f"python -m bench.security_variants --variants {args.variants}"
    command += f" --send-messages {args.send_messages}"
    text = "\n".join(
        [
            "# Broker CPU per message of single sends: TLS and ACL apart",
            "",
            f"`{command}` ({started:%Y-%m-%d %H:%M} UTC, load average at start "
            f"{', '.join(f'{x:.1f}' for x in load_start)}; ASYNC_FLUSH, official Python "
            "client, the broker's default front-end workers).",
            "",
            *lines,
        ]
    )
    print(text)
    if not args.no_record:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"security_variants-{started:%Y-%m-%dT%H%M%SZ}.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
