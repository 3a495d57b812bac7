#pragma once
/// A read-only memory-mapped file. Model weights are used in place from the
/// mapping whenever their on-disk dtype is the compute dtype (no second copy).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace orca {

class MappedFile {
 public:
  /// Maps `path` read-only. Errors name the path and the OS reason.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size) : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

/// Drops this process's mapping of the whole pages inside [data, data + bytes)
/// of a MappedFile (madvise MADV_DONTNEED): resident memory falls by those
/// pages, and the bytes stay readable (a later access re-reads them from the
/// page cache). For weights repacked into another layout at load. Only for
/// MappedFile memory: on anonymous memory the same call discards the data.
void ReleaseMappedPages(const void* data, size_t bytes);

/// Reads a whole (small) file into a string.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);
/// Writes `contents` to `path` atomically (temp file + rename).
absl::Status WriteStringToFile(const std::string& path, std::string_view contents);

}  // namespace orca
