#pragma once
/// The command-line flags that describe a request trace, defined once: `orca bench`,
/// `orca bench sweep` and the benchmarks in bench/ add them to their FlagSet and read back the
/// LoadTraceOptions (or, for the simulated sweeps, the paper trace's TraceOptions) they give.
///
///   loadgen::TraceFlags trace;
///   trace.options.num_requests = 1000;  // this program's default
///   loadgen::AddTraceFlags(loadgen::TraceFlagScope::kPaper, &trace, &flags);
///   ... flags.Parse(...) ...
///   ORCA_ASSIGN_OR_RETURN(loadgen::LoadTraceOptions options, loadgen::TraceOptionsFromFlags(trace));

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/common/flags.h"
#include "core/loadgen/load_trace.h"

namespace orca::loadgen {

/// Which trace flags a program offers.
enum class TraceFlagScope {
  /// The paper's §6.2 trace: --num-requests, --seed, --min-prompt-tokens, --max-prompt-tokens,
  /// --min-new-tokens, --max-new-tokens.
  kPaper,
  /// kPaper's flags, --trace (paper, homogeneous, chat or a file) and the flags of the
  /// homogeneous, file and chat traces (--prompt-tokens, --output-tokens, --time-scale, --chat-*).
  kAll,
};

/// What the trace flags write to. The defaults --help shows are the values here when
/// AddTraceFlags runs (LoadTraceOptions' own unless the program sets others first).
struct TraceFlags {
  /// Every field but `seed` is a flag's destination; arrival_rate is no flag of this table
  /// (programs take one rate or a list of rates, each with its own meaning).
  LoadTraceOptions options;
  /// --seed (a signed flag; TraceOptionsFromFlags copies it to options.seed).
  int64_t seed = static_cast<int64_t>(LoadTraceOptions{}.seed);
};

/// Adds the flags of `scope` to `flags`, bound to `*values`, which must outlive the parse.
void AddTraceFlags(TraceFlagScope scope, TraceFlags* values, FlagSet* flags);

/// The trace the parsed flags describe. INVALID_ARGUMENT names the flag when a count or a
/// length is outside [0, 2^30]; the finer checks (min <= max, at least one request) are
/// MakeLoadTrace's and GeneratePoissonTrace's.
absl::StatusOr<LoadTraceOptions> TraceOptionsFromFlags(const TraceFlags& values);

}  // namespace orca::loadgen
