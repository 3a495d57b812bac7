#pragma once
/// A fuzz input as a file, for parsers that take a path (they memory-map it):
/// an anonymous in-memory file (memfd) reached through /proc/self/fd.

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace orca::fuzz {

class InputFile {
 public:
  InputFile(const uint8_t* data, size_t size) : fd_(memfd_create("orca-fuzz", 0)) {
    if (fd_ < 0) std::abort();
    for (size_t done = 0; done < size;) {
      const ssize_t n = write(fd_, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
  }
  ~InputFile() { close(fd_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

}  // namespace orca::fuzz
