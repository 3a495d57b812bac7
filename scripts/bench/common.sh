# Shared by the benchmark runners: locate the build, print the machine's state.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${ORCA_BUILD_DIR:-$ROOT/build}"
BIN="$BUILD_DIR/bin"

require_bins() {
  for b in "$@"; do
    if [ ! -x "$BIN/$b" ]; then
      echo "missing $BIN/$b: ninja -C $BUILD_DIR $*" >&2
      exit 1
    fi
  done
}

# One line about the machine: these benchmarks share 2 cores with whatever else runs.
machine_note() {
  printf '# %s, %s cores, load average %s, %s\n' "$(uname -m)" "$(nproc)" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
}

# Runs and echoes a command (so the output records exactly what produced it).
run() {
  printf '$'; printf ' %q' "$@"; printf '\n'
  "$@"
}
