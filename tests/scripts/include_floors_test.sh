#!/usr/bin/env bash
# The floors of the tree (docs/DEVELOPING.md, "Layout and rules"): which module's code may include
# which other module's headers. A library includes only what is below it, so `kernels/` never
# reaches into `core/formats`, `core/loadgen` never into `sim/`, the gateway never into
# `core/sched` or `core/engine`, and nothing in `core/` or `kernels/` into `services/`. An include
# not allowed by the table below fails the test, named with its file and line; a module that
# appears in the tree but not in the table fails too, so that a new one states its floor.
#
#   include_floors_test.sh REPO_ROOT
set -euo pipefail
ROOT="${1:?usage: $0 REPO_ROOT}"
cd "$ROOT"

# module: the modules it may include besides itself (orca = the generated proto headers).
declare -A ALLOWED=(
  [core/common]=""
  [core/formats]="core/common"
  [core/metrics]="core/common"
  [core/sched]="core/common"
  [core/text]="core/common core/formats"
  [core/structured]="core/common core/text"
  [kernels]="core/common"
  [core/engine]="core/common core/formats core/structured core/text kernels"
  [core/convert]="core/common core/engine core/formats core/text"
  [core/loadgen]="core/common core/sched"
  [sim]="core/common core/loadgen core/sched"
  [services/common]="core/common core/engine core/metrics core/sched orca"
  [services/gateway]="core/common core/formats core/metrics core/structured core/text orca services/common"
  [services/scheduler]="core/common core/engine core/metrics core/sched core/structured orca services/common"
  [services/worker]="core/common core/engine core/metrics orca services/common"
  [services/operator]="core/common core/metrics services/common"
  [services/cli]="core/common core/convert core/engine core/formats core/loadgen core/text services/common sim"
)

# The module a path belongs to: core/X, services/X, or the top folder (kernels, sim, bench, tests, orca).
module_of() {
  case "$1" in
    core/*/* | services/*/*) echo "$1" | cut -d/ -f1-2 ;;
    *) echo "${1%%/*}" ;;
  esac
}

status=0
checked=0
while IFS= read -r file; do
  from=$(module_of "$file")
  if [ -z "${ALLOWED[$from]+set}" ]; then
    echo "FAIL: $file: module '$from' has no row in this test's floor table"
    status=1
    continue
  fi
  while IFS=: read -r line inc; do
    to=$(module_of "$inc")
    checked=$((checked + 1))
    [ "$to" = "$from" ] && continue
    case " ${ALLOWED[$from]} " in
      *" $to "*) ;;
      *) echo "FAIL: $file:$line includes \"$inc\": $from may include only: ${ALLOWED[$from]:-(nothing)}"
         status=1 ;;
    esac
  done < <(grep -noE '^#include "(core|kernels|services|sim|bench|tests|orca)/[^"]+"' "$file" |
             sed -E 's/^([0-9]+):#include "([^"]+)"/\1:\2/')
done < <(git ls-files 'core/*' 'kernels/*' 'sim/*' 'services/*' | grep -E '\.(h|cc|cu|cuh)$' |
           grep -vE '_test\.cc$')

[ "$checked" -gt 100 ] || { echo "FAIL: only $checked includes read: is this the repository root?"; exit 1; }
[ "$status" -eq 0 ] && echo "PASS: $checked project includes within their floors"
exit "$status"
