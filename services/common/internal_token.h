#pragma once
/// The internal token: the shared secret that every Orca process of one
/// deployment holds and every internal port requires (internal_auth.h checks
/// and sends it; this file only reads, draws and writes it, without gRPC, so
/// that orca serve and the operator can make one).
///
/// A token file holds one token per line; blank lines and lines starting with
/// '#' are skipped. The first token is the one a process sends; every token
/// is accepted, so a token is rotated by adding the new one as a second line,
/// restarting everything, then making it the first.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace orca::services {

/// The environment variable that may hold the token itself (instead of a file).
inline constexpr char kInternalTokenEnv[] = "ORCA_INTERNAL_TOKEN";
/// A shorter token is refused: guessing one must stay out of reach.
inline constexpr size_t kMinInternalTokenLength = 16;
/// A longer one is refused too (it travels in every call's metadata).
inline constexpr size_t kMaxInternalTokenLength = 4096;

/// OK when `token` is kMinInternalTokenLength..kMaxInternalTokenLength printable
/// ASCII characters without spaces (a valid gRPC metadata value); otherwise
/// InvalidArgument naming `source` (a flag and file, or the variable) and the
/// rule, never the token.
absl::Status ValidateInternalToken(absl::string_view token, absl::string_view source);

/// The tokens of the file at `path`, each validated. Errors name `flag` and
/// `path`: unreadable, holding no token, or holding an invalid one (by line).
absl::StatusOr<std::vector<std::string>> ReadInternalTokenFile(const std::string& path, absl::string_view flag);

/// 32 bytes from /dev/urandom as 64 lowercase hex digits.
absl::StatusOr<std::string> GenerateInternalToken();

/// Creates `path` (which must not exist; a symlink is not followed) with mode
/// 0600 and writes `token` and a newline to it.
absl::Status WriteInternalTokenFile(const std::string& path, absl::string_view token);

}  // namespace orca::services
