#pragma once
/// Minimal structured logging shared by every Orca program.
///
///   ORCA_LOG(INFO) << "loaded " << n << " tensors";
///   ORCA_LOG(WARNING).With("request_id", id) << "cancelled";
///
/// Lines go to stderr, either as human-readable text or as JSON lines
/// (`SetLogFormat(LogFormat::kJson)`), one object per line with `ts`, `level`,
/// `component`, `msg` and any `With()` fields (e.g. `request_id`).

#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace orca {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kFatal = 4 };
enum class LogFormat { kText, kJson };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
void SetLogFormat(LogFormat format);
/// Names the program in every line ("gateway", "scheduler", ...).
void SetLogComponent(std::string component);
/// Parses "debug|info|warning|error"; returns false for anything else.
bool ParseLogLevel(std::string_view text, LogLevel* level);

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;

  /// Attaches a structured field to this line.
  template <typename T>
  LogMessage& With(std::string_view key, const T& value) {
    std::ostringstream os;
    os << value;
    fields_.emplace_back(std::string(key), os.str());
    return *this;
  }
  std::ostream& stream() { return stream_; }
  template <typename T>
  LogMessage& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  LogLevel level_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
  std::vector<std::pair<std::string, std::string>> fields_;
};

/// Swallows a LogMessage expression when the level is disabled.
struct LogVoidify {
  void operator&(LogMessage&) {}
};

}  // namespace orca

#define ORCA_LOG_LEVEL_DEBUG ::orca::LogLevel::kDebug
#define ORCA_LOG_LEVEL_INFO ::orca::LogLevel::kInfo
#define ORCA_LOG_LEVEL_WARNING ::orca::LogLevel::kWarning
#define ORCA_LOG_LEVEL_ERROR ::orca::LogLevel::kError
#define ORCA_LOG_LEVEL_FATAL ::orca::LogLevel::kFatal

#define ORCA_LOG(severity)                              \
  !(ORCA_LOG_LEVEL_##severity >= ::orca::GetLogLevel()) \
      ? (void)0                                         \
      : ::orca::LogVoidify() & ::orca::LogMessage(ORCA_LOG_LEVEL_##severity, __FILE__, __LINE__)

/// Aborts with a message when an internal invariant is broken (never for user input).
#define ORCA_CHECK(cond)                                                                           \
  (cond) ? (void)0                                                                                 \
         : ::orca::LogVoidify() & ::orca::LogMessage(::orca::LogLevel::kFatal, __FILE__, __LINE__) \
                                      << "Check failed: " #cond " "
