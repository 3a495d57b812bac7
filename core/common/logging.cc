#include "core/common/logging.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>

namespace orca {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};
std::mutex g_mu;
std::string* g_component = new std::string("orca");

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
    case LogLevel::kFatal:
      return "fatal";
  }
  return "info";
}

void AppendJsonString(std::string& out, std::string_view s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

std::string Timestamp() {
  auto now = std::chrono::system_clock::now();
  auto secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

}  // namespace

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load()); }
void SetLogFormat(LogFormat format) { g_format = static_cast<int>(format); }
void SetLogComponent(std::string component) {
  std::lock_guard<std::mutex> lock(g_mu);
  *g_component = std::move(component);
}

bool ParseLogLevel(std::string_view text, LogLevel* level) {
  if (text == "debug")
    *level = LogLevel::kDebug;
  else if (text == "info")
    *level = LogLevel::kInfo;
  else if (text == "warning" || text == "warn")
    *level = LogLevel::kWarning;
  else if (text == "error")
    *level = LogLevel::kError;
  else
    return false;
  return true;
}

LogMessage::LogMessage(LogLevel level, const char* file, int line) : level_(level), file_(file), line_(line) {}

LogMessage::~LogMessage() {
  std::string line;
  std::string_view file(file_);
  if (auto slash = file.rfind('/'); slash != std::string_view::npos) file = file.substr(slash + 1);
  std::lock_guard<std::mutex> lock(g_mu);
  if (static_cast<LogFormat>(g_format.load()) == LogFormat::kJson) {
    line = "{\"ts\":";
    AppendJsonString(line, Timestamp());
    line += ",\"level\":";
    AppendJsonString(line, LevelName(level_));
    line += ",\"component\":";
    AppendJsonString(line, *g_component);
    line += ",\"src\":";
    AppendJsonString(line, std::string(file) + ":" + std::to_string(line_));
    line += ",\"msg\":";
    AppendJsonString(line, stream_.str());
    for (const auto& [k, v] : fields_) {
      line += ",";
      AppendJsonString(line, k);
      line += ":";
      AppendJsonString(line, v);
    }
    line += "}\n";
  } else {
    line = Timestamp() + " " + LevelName(level_) + " " + *g_component + " " + std::string(file) + ":" +
           std::to_string(line_) + "] " + stream_.str();
    for (const auto& [k, v] : fields_) line += " " + k + "=" + v;
    line += "\n";
  }
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  if (level_ == LogLevel::kFatal) std::abort();
}

}  // namespace orca
