#pragma once
/// The limits on the work one structured-output constraint may cause, stated
/// once. They hold whatever the entry point (the gateway's HTTP API, the
/// gRPC Generation API, a scheduler or a worker compiling a spec it was sent),
/// because they are enforced by the compilers and the matcher themselves.
/// A constraint past a limit is an InvalidArgument naming the limit and where
/// it was crossed (a JSON pointer, a regex offset, a $ref), never a crash, a
/// hang or an unbounded allocation:
///
///   input        kMaxSchemaBytes, kMaxRegexBytes, kMaxChoiceBytes (bytes of text)
///   parsing      orca::kMaxJsonDepth (core/common/json_parse.h: 128 levels of a
///                schema's JSON, checked while it is parsed), kMaxRegexDepth
///   compiling    kMaxSchemaDepth (nested subschemas; `$ref` targets are compiled
///                from a worklist, so a chain of $refs adds no recursion),
///                kMaxGrammarStates (automaton states: every rule, literal,
///                repetition and character class is made of them)
///   the grammar  checked once compiled (GrammarBuilder::Finish): every rule
///                can end (a `$ref` cycle that no finite value satisfies is
///                refused), no rule calls itself before reading a byte (left
///                recursion), and entering a rule pushes at most
///                kMaxClosureNodes parser stacks, at most kMaxStackDepth deep,
///                before its first byte
///   matching     kMaxStackDepth frames per parser stack, kMaxStepNodes stacks
///                explored per byte and kMaxMaskNodes per token mask (sound cuts:
///                fewer outputs offered, never a wrong one)

#include <cstddef>
#include <cstdint>

namespace orca::structured {

/// Bytes of one JSON Schema's text (a tool-call constraint: all tools' schemas together).
inline constexpr size_t kMaxSchemaBytes = size_t{1} << 20;
/// Bytes of a regex (`guided_regex`, a schema's `pattern`).
inline constexpr size_t kMaxRegexBytes = size_t{64} << 10;
/// Bytes of all `guided_choice` strings together.
inline constexpr size_t kMaxChoiceBytes = size_t{1} << 20;

/// Subschemas nested inside one another (properties, items, anyOf, ...) while compiling.
inline constexpr int kMaxSchemaDepth = 128;
/// Groups and quantifiers nested inside one another in a regex: `((a))` nests 2, `(a*)+` 3.
inline constexpr int kMaxRegexDepth = 128;

/// Automaton states of one compiled grammar (about 100 bytes each).
inline constexpr int64_t kMaxGrammarStates = 1'000'000;
/// Automaton states a GrammarCache keeps in all (its grammars' memory: ~200 MB), whatever its count
/// capacity: 256 distinct grammars of the maximum size would otherwise hold 25 GB.
inline constexpr int64_t kMaxCachedGrammarStates = 2 * kMaxGrammarStates;

/// Parser stacks a rule may push, summed over its alternatives, between being entered and reading its
/// first byte (the fan-out of alternatives over `$ref`s multiplies: 16 nested two-way choices are 65,536).
inline constexpr int64_t kMaxClosureNodes = int64_t{1} << 16;
/// Frames on one parser stack; deeper recursion (e.g. arrays nested 129 deep) is not generated.
inline constexpr int32_t kMaxStackDepth = 128;
/// Parser stacks explored while reading one byte (run time). Past it the remaining stacks are dropped:
/// what is generated stays valid, some valid continuations are no longer offered.
inline constexpr int64_t kMaxStepNodes = int64_t{1} << 18;
/// Parser stacks explored while computing one token mask (every byte of every vocabulary token the
/// grammar may read next). Past it the walk of the vocabulary stops: the tokens not reached yet are not
/// offered (sound), and if none was reached the request may end. Realistic schemas and regexes over
/// GPT-2's vocabulary need at most ~20,000 (limits_test); `(.{1,100}){1,100}` after a few hundred
/// characters would need billions.
inline constexpr int64_t kMaxMaskNodes = int64_t{1} << 20;

}  // namespace orca::structured
