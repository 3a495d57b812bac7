#include "services/common/internal_token.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/common/mapped_file.h"

namespace orca::services {
namespace {

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  const int e = errno;
  return absl::Status(e == ENOENT ? absl::StatusCode::kNotFound : absl::StatusCode::kFailedPrecondition,
                      absl::StrCat(what, " ", path, ": ", std::strerror(e)));
}

}  // namespace

absl::Status ValidateInternalToken(absl::string_view token, absl::string_view source) {
  if (token.size() < kMinInternalTokenLength || token.size() > kMaxInternalTokenLength) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": the internal token must be ", kMinInternalTokenLength,
                                                   " to ", kMaxInternalTokenLength, " characters, got ", token.size(),
                                                   " (make one with: openssl rand -hex 32)"));
  }
  for (const char c : token) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": the internal token must be printable ASCII without spaces (it is sent as gRPC metadata)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ReadInternalTokenFile(const std::string& path, absl::string_view flag) {
  absl::StatusOr<std::string> contents = ReadFileToString(path);
  if (!contents.ok()) {
    return absl::Status(contents.status().code(), absl::StrCat(flag, ": ", contents.status().message()));
  }
  std::vector<std::string> tokens;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(*contents, '\n')) {
    ++line_number;
    const absl::string_view t = absl::StripAsciiWhitespace(line);
    if (t.empty() || t[0] == '#') continue;
    if (absl::Status s = ValidateInternalToken(t, absl::StrCat(flag, " ", path, " line ", line_number)); !s.ok())
      return s;
    tokens.emplace_back(t);
  }
  if (tokens.empty()) return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, " holds no token"));
  return tokens;
}

absl::StatusOr<std::string> GenerateInternalToken() {
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", "/dev/urandom");
  char bytes[32];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = ::read(fd, bytes + got, sizeof(bytes) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status s = ErrnoError("cannot read", "/dev/urandom");
      ::close(fd);
      return s;
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return absl::BytesToHexString(absl::string_view(bytes, sizeof(bytes)));
}

absl::Status WriteInternalTokenFile(const std::string& path, absl::string_view token) {
  // O_EXCL: never truncate or write through a file (or a planted symlink) someone else made.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("cannot create", path);
  // The umask cannot widen 0600, but a narrower one would make it unreadable to its owner.
  ::fchmod(fd, 0600);
  const std::string line = absl::StrCat(token, "\n");
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status s = ErrnoError("cannot write", path);
      ::close(fd);
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return ErrnoError("cannot write", path);
  return absl::OkStatus();
}

}  // namespace orca::services
