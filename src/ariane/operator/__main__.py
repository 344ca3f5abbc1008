"""``ariane operator``: runs the kopf operator (``handlers``) until SIGTERM/SIGINT.

One replica only (kopf has no leader election); ``--standalone`` skips kopf peering, as the
chart does. kopf and the Kubernetes client are imported only when the operator runs. The
watched scope is ``--namespace`` (repeatable, kopf globs) or every namespace; with plain
namespace names only, kopf scans neither namespaces nor CRDs (no cluster-wide reads: the chart's
namespaced Roles suffice). The operator's environment is read once, before kopf starts, into
``settings.OperatorSettings``: a bad value exits 2 with the variable named.
"""

from __future__ import annotations

import argparse
import logging
import sys

LOG_LEVELS = ("debug", "info", "warning", "error")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``operator`` sub-command's options (the chart's Deployment passes them)."""
    parser.add_argument("--standalone", action="store_true", help="no kopf peering (1 replica)")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace", "-n", action="append", default=[], help="watch only this namespace (glob)"
    )
    scope.add_argument("--all-namespaces", "-A", action="store_true", help="watch every namespace")
    parser.add_argument("--liveness", default=None, help="e.g. http://0.0.0.0:8080/healthz")
    parser.add_argument(
        "--metrics-port", type=int, default=0, help="serve /metrics on this port (0 = off)"
    )
    parser.add_argument("--log-level", type=str.lower, choices=LOG_LEVELS, default="info")


GLOB_CHARACTERS = frozenset("*?[]!,")


def exact_namespaces(namespaces: list[str]) -> bool:
    """Whether the watched scope is a list of plain namespace names (no kopf glob, not every
    namespace): then kopf needs no cluster-wide access (``settings.scanning.disabled``)."""
    return bool(namespaces) and not any(GLOB_CHARACTERS & set(n) for n in namespaces)


def run(args: argparse.Namespace) -> int:
    """Runs the operator until it is stopped; returns the exit status.

    Raises:
        ValueError: ``--metrics-port`` outside 0..65535.
    """
    if not 0 <= args.metrics_port <= 65535:
        raise ValueError(f"--metrics-port must be 0..65535, not {args.metrics_port}")
    from ariane.operator import settings as operator_settings  # see below: `ariane` loads this

    try:
        settings = operator_settings.OperatorSettings.from_env()
    except operator_settings.SettingsError as error:
        print(f"ariane operator: {error}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    # imported here, not at the top: every `ariane` command builds this sub-command's parser,
    # and a broker or name server should not load kopf and the Kubernetes client (~50 MB)
    import kopf

    from ariane.operator import handlers  # registers the change handlers with kopf

    handlers.register_timers(settings)
    logging.getLogger(__name__).info(
        "operator starting (resync every %.0f s)", settings.resync_interval_s
    )
    if args.metrics_port:
        handlers.METRICS.serve(args.metrics_port)
    kopf_settings = kopf.OperatorSettings()
    # exact namespaces: no cluster-wide read of namespaces or CRDs (kopf would try both and
    # fall back with a warning); the chart's namespaced Roles grant neither
    kopf_settings.scanning.disabled = exact_namespaces(args.namespace)
    kopf.run(
        settings=kopf_settings,
        standalone=args.standalone,
        namespaces=args.namespace,
        clusterwide=not args.namespace,
        liveness_endpoint=args.liveness,
        memo=kopf.Memo(settings=settings),
    )
    return 0
