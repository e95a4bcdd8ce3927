"""Live triage: wrap a launch (`run`), follow a log (`scan --follow`), attach to a
running server (`attach`), read a systemd unit's journal (`journal`).

All four feed the engine's streaming matcher through :class:`~qwen_triage.live.session.LiveSession`
and end with the same :class:`~qwen_triage.report.model.Report` as `scan`.
:class:`~qwen_triage.live.supervisor.Supervisor` is the Python API for driving a child
process without the command line.

Nothing is imported here, so `qwen_triage.cli.live` stays cheap to import.
"""
