"""Tools for rule authors: lint, example tests, corpus evaluation and the rule catalogue.

Above the engine: they compile packs and scan examples and corpora with it.
"""
