"""Test instrumentation, kept out of the production path: mechanisms that lie about their ε
and the audit suite that must catch them (``audit_suite``), fault-injecting populations and
clients, a malicious ServerApp, crash helpers for executors.
Nothing in ``fedrr`` outside this package imports it."""
