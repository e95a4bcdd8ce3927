"""`rules lint`: named checks over a rule pack, each with an id, a level and its own tests.

One module per check family (yamllint's and ruff's layout): :mod:`.catalogue` (classes.yaml,
fix-defaults.yaml), :mod:`.data_files` (stages, benign lines), :mod:`.files` (rule files load, classes
exist, ids unique), :mod:`.patterns` (literal, backtracking, line-bound), :mod:`.templates`
(captured names), :mod:`.fixes` (actions, steps), :mod:`.example_checks` (examples through the
matcher), :mod:`.overlap` (duplicate and shadowed rules). :mod:`.registry` lists them all;
:mod:`.context` loads what they read once; :mod:`.run` runs the chosen ones; :mod:`.listing` prints
the checks (`rules lint --list-checks`) and problems as JSON.
"""
