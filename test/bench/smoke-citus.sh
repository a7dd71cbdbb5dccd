#!/usr/bin/env bash
# The Citus benchmark (test/bench/citus.sh) in its smoke mode, for the full
# suite only: test/bench/smoke.sh citus.  The last line printed is
# "N passed, M failed".
exec "$(dirname "$0")/smoke.sh" citus
