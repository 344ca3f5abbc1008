"""Chaos runs against a real name server and master/slave broker group (issue 13): a nemesis
injects faults while Ariane's client produces and consumes, and a checker in the style of
OpenMessaging Chaos counts lost, duplicated and out-of-order messages and unavailability.
``python -m e2e.chaos --help``; ``make chaos`` for the long runs."""
