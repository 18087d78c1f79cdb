"""The run directory: its layout (:mod:`.layout`), creating it, locking it and reading it back.

Everything that writes or reads ``run.json``, ``results.jsonl`` and ``summary.json`` goes
through this package, so the layout has one home.
"""
