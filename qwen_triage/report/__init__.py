"""The report: its model (the versioned JSON contract) and one renderer per format.

``model`` is what every command returns; ``text`` and ``markdown`` are the only
modules that word a diagnosis or observation (for scan, live, the runner and
preflight alike); ``emit`` is the one switch over the output formats.
"""
