"""The remediation runner (``qwen-triage relaunch``).

``vllm/`` parses a vLLM launch command line (``options``: vLLM's option
tables, built in or probed from the launch's own vLLM by ``probe``;
``argv``: the launch model and parser), edits it (``edit``), and renders the
difference between two launches, argv + environment, each change with its
reason (``diff``). The rest, one job per module:

* ``profile``    the YAML profile and the merged run settings
* ``preflight``  check-model, doctor and plan applied to one command
* ``probes``     read-only machine probes (port holder, /dev/shm, model files)
* ``layout``     the valid layout closest to the request; CPU-build thread binding
* ``fixplan``    diagnoses -> launch edits and instructions; identical-attempt keys
* ``observed``   hangs, timeouts, idle GPUs as diagnoses
* ``readiness``  /health, /v1/models, a completion, per-GPU memory
* ``attempt``    the server of one launch (supervised or detached) and its log's triage
* ``one_attempt``  one attempt: start, prove ready, serve, stop and release, triage
* ``fixwait``    a step only the user can take: wait for it (--wait-for-fix) or end the run
* ``deps``/``stops``  what the loop reaches the machine through; how a run ends (exit statuses)
* ``loop``       the bounded relaunch loop: what to launch next, the journal's run records
* ``journal``    the JSONL journal
* ``render``     what is printed
* ``cli``/``main``  the click command, kept cheap to import
"""
