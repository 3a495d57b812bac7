#pragma once
// What `orca serve` and `orca bench sweep` need around their child processes
// (core/common/subprocess.h): where the sibling binaries are, and a probe of
// their HTTP endpoints.

#include <string>

namespace orca::cli {

/// Directory of the running executable (sibling binaries live there).
std::string ExecutableDir();
/// GET http://host:port/path with a short timeout; returns the HTTP status (0 when unreachable).
int HttpStatus(const std::string& host, int port, const std::string& path);

}  // namespace orca::cli
