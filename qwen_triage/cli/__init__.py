"""The command line: the only layer that imports click, and nothing imports it.

``main`` holds the group and the scan-side commands; other commands live in their
own modules and are imported only when asked for, so `scan` starts fast.
"""
