"""The knowledge as data: rule and data-file schemas, the action vocabulary, strict YAML loading.

Nothing here scans; the engine compiles what this package validates.
"""
