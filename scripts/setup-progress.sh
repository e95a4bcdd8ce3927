# shellcheck shell=bash
# Sourced by setup-vllm.sh: run a long step with its output in a log, and a progress line every
# PROGRESS_EVERY seconds that says what the step is doing. pip prints one line per package it
# collects, downloads or builds, and then nothing for minutes while it downloads or resolves: the
# last line of its log ("Successfully uninstalled setuptools-…") would be repeated for five
# minutes. The progress line names pip's latest action instead, with the seconds spent in this
# step and how much the venv has grown.
#
# Needs: log, die (functions); setup_log, venv (paths); PROGRESS_EVERY (seconds).

# pip's lines that say what it is doing now (the newest wins)
PIP_ACTION='^[[:space:]]*(Collecting|Downloading|Using cached|Processing|Preparing|Building|Installing|Looking in|Obtaining|Getting requirements|Attempting uninstall|Found existing installation|Uninstalling)'

progress_line() {  # $1: seconds this step has run
  local what grown
  what=$(grep -E "$PIP_ACTION" "$setup_log" 2>/dev/null | tail -n 1 | tr -d '\r' | sed 's/^[[:space:]]*//' | cut -c1-100)
  [ -n "$what" ] || what=$(tail -n 1 "$setup_log" 2>/dev/null | tr -d '\r' | cut -c1-100)
  grown=$(du -sm "$venv" 2>/dev/null | cut -f1)
  printf '... %ds in this step%s: %s' "$1" "${grown:+, venv ${grown} MiB}" "${what:-(no output yet)}"
}

run_logged() {  # run a command, its output to the log; progress on stderr while it runs; the tail on failure
  "$@" >>"$setup_log" 2>&1 &
  local pid=$! started=$SECONDS last=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if (( SECONDS - last >= PROGRESS_EVERY )); then
      last=$SECONDS
      log "  $(progress_line $((SECONDS - started)))"
    fi
  done
  if ! wait "$pid"; then
    tail -n 40 "$setup_log" >&2
    die "failed: $* (full log: $setup_log)"
  fi
}
