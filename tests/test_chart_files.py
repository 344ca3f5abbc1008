"""Static checks of the deployment files: chart CRDs, chart metadata and the Dockerfile."""

from __future__ import annotations

import json
import pathlib

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "ariane"


def test_chart_crds_are_byte_identical_to_top_level_crds() -> None:
    """charts/ariane/crds holds exactly the files of crds/, byte for byte."""
    top = {p.name: p.read_bytes() for p in (ROOT / "crds").iterdir()}
    chart = {p.name: p.read_bytes() for p in (CHART / "crds").iterdir()}

    assert top == chart
    assert len(top) == 4


def test_values_match_their_schema_keys() -> None:
    """Every top-level key of values.yaml is declared in values.schema.json and vice versa."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())

    assert set(values) == set(schema["properties"])
    assert schema["additionalProperties"] is False


def test_chart_app_version_is_the_package_version() -> None:
    """The chart's appVersion (the default image tag) is the ariane package version."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    pyproject = (ROOT / "pyproject.toml").read_text()

    assert f'version = "{chart["appVersion"]}"' in pyproject
