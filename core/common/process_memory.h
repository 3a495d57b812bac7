#pragma once
/// How much memory this process holds, from /proc/self/status (Linux): what every
/// service reports on its /ready page, so the memory of a stack can be read per process
/// without shell access to the pods.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace orca {

/// Resident memory in bytes. `rss_bytes` = `rss_anon_bytes` + `rss_file_bytes` +
/// `rss_shmem_bytes` (the kernel's split).
struct ProcessMemory {
  int64_t rss_bytes = 0;        ///< VmRSS: resident now.
  int64_t peak_rss_bytes = 0;   ///< VmHWM: the most ever resident (e.g. during loading).
  int64_t rss_anon_bytes = 0;   ///< RssAnon: heap, stacks, anonymous mappings.
  int64_t rss_file_bytes = 0;   ///< RssFile: pages of mapped files (code, memory-mapped weights).
  int64_t rss_shmem_bytes = 0;  ///< RssShmem: shared memory.
  int64_t num_threads = 0;      ///< Threads: threads of the process.

  /// {"rss_bytes": …, "peak_rss_bytes": …, "rss_anon_bytes": …, "rss_file_bytes": …,
  ///  "rss_shmem_bytes": …, "threads": …}
  std::string ToJson() const;
};

/// The text of a /proc/PID/status file parsed. INVALID_ARGUMENT when VmRSS is missing
/// or a field it reads is not "<number> kB".
absl::StatusOr<ProcessMemory> ParseProcStatus(absl::string_view status_text);

/// This process's memory now; UNAVAILABLE where /proc/self/status cannot be read.
absl::StatusOr<ProcessMemory> ReadProcessMemory();

}  // namespace orca
