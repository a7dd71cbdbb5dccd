#!/usr/bin/env bash
# The Citus benchmarks (test/bench/citus.sh, test/bench/citus-delegate.sh)
# in their smoke mode, for the full suite only: test/bench/smoke.sh citus
# citus-delegate.  The last line printed is
# "N passed, M failed".
exec "$(dirname "$0")/smoke.sh" citus citus-delegate
