"""vLLM launch command lines, one job per module.

* ``options``      vLLM's option tables (which flags take values, aliases, types): built in, or probed
* ``probe``        ask the launch's own interpreter for vLLM's table (never imported here), cached per version
* ``config_file``  the options a ``--config FILE`` sets, when vLLM cannot be asked
* ``argv``         the launch model (VllmLaunch, ArgToken, EntryPoint) and the parser
* ``edit``         set_arg, remove_arg, apply_action, apply_edits
* ``diff``         Change, diff_launches, render_diff
"""
