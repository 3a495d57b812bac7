#pragma once
// Subcommands of the `orca` CLI. Each takes the arguments after its name
// (argv[0] is the command path, e.g. "orca generate") and returns an exit code.

#include <string>

namespace orca::cli {

int RunGenerate(int argc, char** argv);
int RunModel(int argc, char** argv);
int RunServe(int argc, char** argv);
int RunBench(int argc, char** argv);

/// Where `orca` keeps its default synthetic model ($ORCA_HOME or ~/.cache/orca).
std::string OrcaHome();
/// The default model's directory, synthesized on first use.
std::string DefaultModelPath();
/// Makes sure the default model exists (writes it if missing); returns its path or "" on error.
std::string EnsureDefaultModel();

}  // namespace orca::cli
