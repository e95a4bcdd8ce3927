"""The scan pipeline: sources → records → prefilter and matcher → correlator.

``scanner.Scanner`` drives it; everything here streams in bounded memory and
knows nothing of terminals, click or the runner.
"""
