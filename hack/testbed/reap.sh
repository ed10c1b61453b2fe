#!/usr/bin/env bash
# Kills test-bed processes whose parent has gone (it should not happen: every component is started
# with a parent-death signal) and says so, so that a leak is visible rather than silent.
# A running `make run` is left alone: its processes still have their parent.
set -u
leaked=()
for pid in $(pgrep -f '\.cache/testbed/' || true); do
  [ "$(ps -o ppid= -p "$pid" 2>/dev/null | tr -d ' ')" = "1" ] && leaked+=("$pid")
done
if [ ${#leaked[@]} -gt 0 ]; then
  echo "testbed: killing leftover control-plane processes: ${leaked[*]}" >&2
  kill -9 "${leaked[@]}" 2>/dev/null || true
fi
exit 0
