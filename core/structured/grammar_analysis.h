#pragma once
/// Checks on a compiled Grammar's rules that keep matching it bounded and
/// meaningful (the grammar-level limits of core/structured/limits.h). Run by
/// GrammarBuilder::Finish on every grammar, whatever compiled it:
///
///  1. Every rule can end (it is *productive*: some finite text takes it from
///     its start to its end). A JSON Schema `$ref` cycle that every instance
///     must follow forever ({"$ref": "#"}, a required property referring back
///     to its object) has no finite instance; matching it would only ever
///     yield an empty output, so it is refused.
///  2. No rule can call itself before reading a byte (left recursion): the
///     matcher would push frames until its depth cap on every step.
///  3. Entering a rule pushes at most kMaxClosureNodes parser stacks, nested
///     at most kMaxStackDepth deep, before its first byte: alternatives over
///     rule calls multiply (16 nested two-way choices between `$ref`s are
///     65,536 stacks), and the matcher explores every one on every step.
///
/// The analysis is linear in the grammar's size (a worklist fixed point for
/// 1, one pass over each rule's byte-free prefix and a depth-first walk of
/// the rules for 2 and 3), iterative throughout.

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "core/structured/grammar.h"

namespace orca::structured {

/// OK, or InvalidArgument naming the rule that breaks a check above by its
/// label (`labels`: by rule start state; e.g. "JSON Schema $ref '#' at
/// /properties/next") and the limit it crosses.
absl::Status CheckGrammarRules(const Grammar& grammar, const absl::flat_hash_map<int32_t, std::string>& labels);

}  // namespace orca::structured
