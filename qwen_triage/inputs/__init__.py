"""Every log source behind one interface: files, the systemd journal, the kernel log, a process's output.

node-problem-detector's log watchers are the model: each source is a :class:`~qwen_triage.inputs.base.Reader`
registered by name (:mod:`qwen_triage.inputs.registry`), read within a byte budget and a deadline, and leaving a
position to resume from. ``scan`` (whole files and stdin: :func:`~qwen_triage.inputs.file.open_source`),
``scan --follow``, ``attach``, ``journal``, ``run``, ``check`` and ``bugreport`` all read through this package;
turning the bytes read into bounded lines and records is the engine's job
(:mod:`qwen_triage.engine.sources`). Only this package runs the journal's command-line tool.
"""
