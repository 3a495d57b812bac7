#include "core/common/flags.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/common/mapped_file.h"
#include "core/common/status_macros.h"

namespace orca {
namespace {

/// The words a bool flag takes as a separate argument (`--progress false`). Narrower than
/// SimpleAtob's set on purpose: "1", "y" or "no" after a bool flag stay positional arguments.
bool IsBoolLiteral(std::string_view arg) {
  std::string lower(arg);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower == "true" || lower == "false";
}

}  // namespace

FlagSet::FlagSet(std::string program, std::string description)
    : program_(std::move(program)), description_(std::move(description)) {}

std::string FlagSet::Normalize(std::string_view name) {
  std::string out(name);
  for (char& c : out)
    if (c == '_') c = '-';
  return out;
}

void FlagSet::Add(std::string name, Kind kind, void* dst, std::string help, std::string default_text) {
  name = Normalize(name);
  order_.push_back(name);
  flags_[name] = Flag{kind, dst, std::move(help), std::move(default_text)};
}

void FlagSet::AddString(std::string name, std::string* dst, std::string help) {
  Add(std::move(name), Kind::kString, dst, std::move(help), dst->empty() ? "" : "\"" + *dst + "\"");
}
void FlagSet::AddInt(std::string name, int64_t* dst, std::string help) {
  Add(std::move(name), Kind::kInt, dst, std::move(help), std::to_string(*dst));
}
void FlagSet::AddInt(std::string name, int* dst, std::string help) {
  Add(std::move(name), Kind::kInt32, dst, std::move(help), std::to_string(*dst));
}
void FlagSet::AddDouble(std::string name, double* dst, std::string help) {
  std::ostringstream os;
  os << *dst;
  Add(std::move(name), Kind::kDouble, dst, std::move(help), os.str());
}
void FlagSet::AddBool(std::string name, bool* dst, std::string help) {
  Add(std::move(name), Kind::kBool, dst, std::move(help), *dst ? "true" : "false");
}
void FlagSet::AddStringList(std::string name, std::vector<std::string>* dst, std::string help) {
  Add(std::move(name), Kind::kList, dst, std::move(help), "");
}
void FlagSet::EnableConfigFile() { config_enabled_ = true; }
void FlagSet::EnableEnvironment(std::string prefix) { env_prefix_ = std::move(prefix); }

bool FlagSet::IsSet(std::string_view name) const {
  auto it = flags_.find(Normalize(name));
  return it != flags_.end() && it->second.set;
}

absl::Status FlagSet::Set(std::string_view raw_name, std::string_view raw_value) {
  const std::string value(raw_value);
  std::string name = Normalize(raw_name);
  auto it = flags_.find(name);
  if (it == flags_.end()) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
  Flag& f = it->second;
  switch (f.kind) {
    case Kind::kString:
      *static_cast<std::string*>(f.dst) = value;
      break;
    case Kind::kInt: {
      int64_t v;
      if (!absl::SimpleAtoi(value, &v))
        return absl::InvalidArgumentError(absl::StrCat("--", name, ": expected an integer, got '", value, "'"));
      *static_cast<int64_t*>(f.dst) = v;
      break;
    }
    case Kind::kInt32: {
      int64_t v;
      if (!absl::SimpleAtoi(value, &v))
        return absl::InvalidArgumentError(absl::StrCat("--", name, ": expected an integer, got '", value, "'"));
      // Said with the value as given, never as it would wrap (1e12 is not -727379968).
      if (v > std::numeric_limits<int>::max())
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " must be at most ", std::numeric_limits<int>::max(), ", got ", v));
      if (v < std::numeric_limits<int>::min())
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " must be at least ", std::numeric_limits<int>::min(), ", got ", v));
      *static_cast<int*>(f.dst) = static_cast<int>(v);
      break;
    }
    case Kind::kDouble: {
      double v;
      if (!absl::SimpleAtod(value, &v))
        return absl::InvalidArgumentError(absl::StrCat("--", name, ": expected a number, got '", value, "'"));
      *static_cast<double*>(f.dst) = v;
      break;
    }
    case Kind::kBool: {
      bool v;
      if (!absl::SimpleAtob(value, &v))
        return absl::InvalidArgumentError(absl::StrCat("--", name, ": expected true or false, got '", value, "'"));
      *static_cast<bool*>(f.dst) = v;
      break;
    }
    case Kind::kList: {
      auto* list = static_cast<std::vector<std::string>*>(f.dst);
      if (!f.set) list->clear();
      for (auto part : absl::StrSplit(value, ',', absl::SkipEmpty())) list->emplace_back(part);
      break;
    }
  }
  f.set = true;
  return absl::OkStatus();
}

std::optional<int> FlagSet::ParseForMain(int argc, char** argv) {
  if (absl::Status s = Parse(argc, argv); !s.ok()) {
    std::cerr << program_ << ": " << s.message() << "\n";
    return 2;
  }
  if (help_requested_) {
    std::cout << Usage();
    return 0;
  }
  return std::nullopt;
}

absl::Status FlagSet::Parse(int argc, char** argv, int first, bool allow_positional) {
  std::map<std::string, bool> cli_set;
  for (int i = first; i < argc; ++i) {
    std::string_view arg(argv[i]);
    if (arg == "--help" || arg == "-h") {
      help_requested_ = true;
      continue;
    }
    if (arg == "--") {
      for (++i; i < argc; ++i) positional_.emplace_back(argv[i]);
      break;
    }
    if (arg.size() < 3 || arg.substr(0, 2) != "--") {
      if (!allow_positional)
        return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", std::string(arg), "' (see --help)"));
      positional_.emplace_back(arg);
      continue;
    }
    std::string_view body = arg.substr(2);
    std::string name;
    std::string value;
    bool has_value = false;
    if (auto eq = body.find('='); eq != std::string_view::npos) {
      name = Normalize(body.substr(0, eq));
      value = std::string(body.substr(eq + 1));
      has_value = true;
    } else {
      name = Normalize(body);
    }
    if (config_enabled_ && name == "config") {
      if (!has_value) {
        if (i + 1 >= argc) return absl::InvalidArgumentError("--config: expected a file path");
        value = argv[++i];
      }
      config_path_ = value;
      continue;
    }
    auto it = flags_.find(name);
    if (it == flags_.end() && !has_value && name.rfind("no-", 0) == 0) {
      auto neg = flags_.find(name.substr(3));
      if (neg != flags_.end() && neg->second.kind == Kind::kBool) {
        ORCA_RETURN_IF_ERROR(Set(name.substr(3), "false"));
        cli_set[name.substr(3)] = true;
        continue;
      }
    }
    if (it == flags_.end()) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (see --help)"));
    if (!has_value) {
      if (it->second.kind == Kind::kBool) {
        // `--flag false` as well as `--flag=false`: a following true/false literal is the value.
        value = "true";
        if (i + 1 < argc && IsBoolLiteral(argv[i + 1])) value = argv[++i];
      } else {
        if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat("--", name, ": expected a value"));
        value = argv[++i];
      }
    }
    ORCA_RETURN_IF_ERROR(Set(name, value));
    cli_set[name] = true;
  }
  if (!config_path_.empty()) ORCA_RETURN_IF_ERROR(LoadConfigFile(config_path_, cli_set));
  if (!env_prefix_.empty()) {
    for (const auto& [name, flag] : flags_) {
      if (flag.set) continue;  // command line or config file
      std::string var = env_prefix_;
      for (char c : name)
        var.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
      if (const char* value = std::getenv(var.c_str()); value != nullptr)
        ORCA_RETURN_IF_ERROR(Annotate(Set(name, value), "environment variable " + var));
    }
  }
  return absl::OkStatus();
}

absl::Status FlagSet::LoadConfigFile(const std::string& path, const std::map<std::string, bool>& cli_set) {
  ORCA_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid YAML/JSON: ", e.what()));
  }
  if (root.IsNull()) return absl::OkStatus();
  if (!root.IsMap())
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected a mapping of flag names to values"));
  for (const auto& kv : root) {
    std::string key = Normalize(kv.first.as<std::string>());
    if (cli_set.count(key)) continue;  // command line wins
    auto it = flags_.find(key);
    if (it == flags_.end()) return absl::InvalidArgumentError(absl::StrCat(path, ": unknown setting '", key, "'"));
    const YAML::Node& v = kv.second;
    if (v.IsSequence()) {
      if (it->second.kind != Kind::kList)
        return absl::InvalidArgumentError(absl::StrCat(path, ": '", key, "' does not take a list"));
      for (const auto& item : v) ORCA_RETURN_IF_ERROR(Annotate(Set(key, item.as<std::string>()), path));
    } else if (v.IsScalar()) {
      ORCA_RETURN_IF_ERROR(Annotate(Set(key, v.as<std::string>()), path));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(path, ": '", key, "' must be a scalar or a list"));
    }
  }
  return absl::OkStatus();
}

std::string FlagSet::Usage() const {
  std::ostringstream os;
  os << "Usage: " << program_ << " [flags]\n\n" << description_ << "\n\nFlags:\n";
  for (const auto& name : order_) {
    const Flag& f = flags_.at(name);
    std::string type;
    switch (f.kind) {
      case Kind::kString:
        type = "string";
        break;
      case Kind::kInt:
      case Kind::kInt32:
        type = "int";
        break;
      case Kind::kDouble:
        type = "number";
        break;
      case Kind::kBool:
        type = "bool";
        break;
      case Kind::kList:
        type = "list";
        break;
    }
    os << "  --" << name << " <" << type << ">\n      " << f.help;
    if (!f.default_text.empty()) os << " (default: " << f.default_text << ")";
    os << "\n";
  }
  if (config_enabled_) os << "  --config <file>\n      YAML or JSON file of flag values; the command line wins.\n";
  if (!env_prefix_.empty())
    os << "\nEvery flag can also be set in the environment: --some-flag as " << env_prefix_ << "SOME_FLAG.\n";
  os << "  --help\n      Show this help.\n";
  return os.str();
}

absl::StatusOr<std::vector<double>> ParsePositiveNumberList(const std::string& text, const std::string& flag) {
  std::vector<double> values;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    double v = 0;
    if (!absl::SimpleAtod(item, &v) || !(v > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": '", std::string(item), "' is not a positive number"));
    }
    values.push_back(v);
  }
  if (values.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  return values;
}

}  // namespace orca
