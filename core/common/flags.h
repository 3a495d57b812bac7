#pragma once
/// A small typed command-line parser shared by every Orca program.
///
///   FlagSet flags("orca-scheduler", "Runs the iteration-level scheduler.");
///   int64_t max_bs = 16;
///   flags.AddInt("max-bs", &max_bs, "Maximum requests per iteration (paper: max_bs)");
///   if (std::optional<int> exit_code = flags.ParseForMain(argc, argv)) return *exit_code;
///
/// Accepts `--name=value`, `--name value`, `--bool-flag`, `--no-bool-flag`, and for bool
/// flags `--bool-flag=false` or `--bool-flag false` (a following `true`/`false`, any case).
/// `--config FILE` (YAML or JSON mapping) sets flags too; names may use '-' or
/// '_'; the command line wins over the file. With EnableEnvironment, unset
/// flags also come from environment variables (e.g. ORCA_WORKER_STAGE).
/// Errors name the flag and the expected type; unknown flags are errors.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace orca {

class FlagSet {
 public:
  FlagSet(std::string program, std::string description);

  void AddString(std::string name, std::string* dst, std::string help);
  void AddInt(std::string name, int64_t* dst, std::string help);
  void AddInt(std::string name, int* dst, std::string help);
  void AddDouble(std::string name, double* dst, std::string help);
  void AddBool(std::string name, bool* dst, std::string help);
  /// Repeatable flag (`--x a --x b`) or comma-separated list (`--x a,b`).
  void AddStringList(std::string name, std::vector<std::string>* dst, std::string help);
  /// Enables `--config FILE`.
  void EnableConfigFile();
  /// Reads unset flags from the environment too: `--num-stages` from
  /// `<prefix>NUM_STAGES`. Precedence: command line, config file, environment.
  void EnableEnvironment(std::string prefix);

  /// Parses argv[first..argc). Positional arguments are collected into
  /// positional() (error if `allow_positional` is false and one appears).
  absl::Status Parse(int argc, char** argv, int first = 1, bool allow_positional = false);
  /// Parse(argc, argv) for a program's main(): an exit code when it should stop now (2 after
  /// printing "<program>: <error>" to stderr, 0 after printing Usage() for --help), nullopt to go on.
  std::optional<int> ParseForMain(int argc, char** argv);
  /// Sets one flag from text, as if given on the command line.
  absl::Status Set(std::string_view name, std::string_view value);

  bool help_requested() const { return help_requested_; }
  /// True if the flag was set explicitly (command line or config file).
  bool IsSet(std::string_view name) const;
  const std::vector<std::string>& positional() const { return positional_; }
  std::string Usage() const;

 private:
  enum class Kind { kString, kInt, kInt32, kDouble, kBool, kList };
  struct Flag {
    Kind kind;
    void* dst;
    std::string help;
    std::string default_text;
    bool set = false;
  };
  void Add(std::string name, Kind kind, void* dst, std::string help, std::string default_text);
  static std::string Normalize(std::string_view name);
  absl::Status LoadConfigFile(const std::string& path, const std::map<std::string, bool>& cli_set);

  std::string program_;
  std::string description_;
  std::vector<std::string> order_;
  std::map<std::string, Flag> flags_;
  std::vector<std::string> positional_;
  bool help_requested_ = false;
  bool config_enabled_ = false;
  std::string env_prefix_;
  std::string config_path_;
};

/// Parses a comma-separated list of positive numbers given as the text of flag
/// `--flag` (e.g. arrival rates "0.5,1,2"). InvalidArgument naming the flag and the
/// item when one is not a positive number, or when the list is empty.
absl::StatusOr<std::vector<double>> ParsePositiveNumberList(const std::string& text, const std::string& flag);

}  // namespace orca
