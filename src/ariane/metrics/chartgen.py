"""Write the chart's metrics files from their one Python source.

``python -m ariane.metrics.chartgen`` (``make chart-metrics``) writes into
``charts/ariane/files/``:

- ``prometheus-rules.json``: the ``spec`` of the chart's PrometheusRule, the rules of
  ``alerts.rules(alerts.CHART_SELECTOR)``;
- ``grafana-dashboard.json``: ``dashboard.dashboard()``.

The templates read them with ``.Files.Get`` (so Helm never parses PromQL or Grafana's ``{{…}}``
legends as templates). The output is deterministic; ``tests/test_chart_metrics.py`` fails while
the committed files differ from what this module renders.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from collections.abc import Sequence

from ariane.metrics import alerts, dashboard

RULES_FILE = "prometheus-rules.json"
DASHBOARD_FILE = "grafana-dashboard.json"
RULE_GROUP = "ariane"
"""Name of the chart's one rule group."""


def files() -> dict[str, str]:
    """File name -> text of every generated chart file."""

    def dump(value: object) -> str:
        return json.dumps(value, indent=2, sort_keys=False) + "\n"

    return {
        RULES_FILE: dump(
            {"groups": [{"name": RULE_GROUP, "rules": alerts.rules(alerts.CHART_SELECTOR)}]}
        ),
        DASHBOARD_FILE: dump(dashboard.dashboard()),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Write ``files()`` into the given directory (default ``charts/ariane/files``)."""
    parser = argparse.ArgumentParser(prog="python -m ariane.metrics.chartgen")
    parser.add_argument("out", nargs="?", default="charts/ariane/files", type=pathlib.Path)
    out: pathlib.Path = parser.parse_args(argv).out
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files().items():
        (out / name).write_text(text)
        print(out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
