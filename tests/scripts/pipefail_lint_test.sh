#!/usr/bin/env bash
# Under `set -o pipefail` a pipe into a reader that quits early (`head`, `grep -q`, `grep -m`)
# fails at random: the writer gets SIGPIPE when it still has output once the reader is gone,
# and the script dies with status 141 (CI did, in scripts/tsan.sh's `sort | head -20`). Read
# everything instead (`sed -n 1,20p`), or test a captured value. This lists every such pipe
# in the repository's bash scripts that set pipefail.
set -euo pipefail
ROOT="${1:?usage: pipefail_lint_test.sh REPO_ROOT}"
cd "$ROOT"
bad=0
while IFS= read -r -d '' f; do
  grep -q 'pipefail' "$f" || continue
  # A pipe symbol followed by an early-quitting reader, outside comments.
  if hits="$(grep -nE '^[^#]*\|[[:space:]]*(head\b|grep[[:space:]]+(-[a-zA-Z]*[qm]|--quiet|--max-count))' "$f")"; then
    printf '%s:\n%s\n' "$f" "$hits" >&2
    bad=1
  fi
done < <(git ls-files -z -- '*.sh' '.ci/run')
if [ "$bad" != 0 ]; then
  echo "FAIL: pipes into a reader that quits early, in scripts with pipefail (see above)" >&2
  exit 1
fi
echo "PASS: no pipe into head / grep -q / grep -m in a pipefail script"
