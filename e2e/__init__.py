"""End-to-end tests against a real Kubernetes control plane built by ``e2e/testenv/build.sh``.

Run with ``make e2e`` (part of ``make test``); ``e2e/conftest.py`` provides the fixtures.
"""
