#pragma once
/// The budget of one chat-template render. A model's chat template comes with
/// whatever checkpoint a user downloads, and `chat_template_kwargs`, tools and
/// messages come from the client, so the Jinja engine treats both as hostile:
/// every render runs under these limits and stops with a template error (never
/// a crash, hang or unbounded allocation) when one is exceeded.
///
/// With the defaults, real templates (Llama 2/3/3.1, Qwen3, Gemma 3, DeepSeek-V3,
/// Phi-3, Zephyr, ChatML) render a 1,000-message conversation with tool calls
/// within a fiftieth of every limit (about 70,000 steps at most;
/// tests/unit/text/jinja_budget_test.cc checks it), while a hostile template
/// stops within about a second of CPU in a release build.
///
/// Exceeding a limit is `absl::InvalidArgumentError` whose message starts with
/// "chat template: ", carries "line L, column C: " where the template position
/// is known, and names the limit's field (e.g. "max_steps"). InvalidArgument,
/// not ResourceExhausted: the same template on the same input fails the same
/// way every time (retrying cannot help, so it is a 400, not a 429) — except for
/// `deadline`, which depends on the machine; it is InvalidArgument too so that
/// callers see one code for "the template could not be rendered", and its
/// message says "deadline".
///
/// The budget is per render: nothing is shared between renders or threads.

#include <cstdint>

#include "absl/time/time.h"

namespace orca::text {

struct RenderBudget {
  /// Work units: one per statement executed, expression evaluated (calls,
  /// filters and tests included) and loop iteration, plus one per node that an
  /// equality or membership test compares. Bounds CPU time deterministically.
  int64_t max_steps = 5'000'000;
  /// Size of the rendered prompt in bytes.
  int64_t max_output_bytes = 16 << 20;
  /// Size of any single string built while rendering (concatenation, `* n`,
  /// filters, `{% set %}` blocks, macro output, str()/tojson of a value).
  int64_t max_string_bytes = 16 << 20;
  /// Elements of any single list or dict built while rendering, `range()`
  /// included, and of the sequence a `for` loop walks (a string's characters).
  int64_t max_items = 1 << 20;
  /// All strings, lists and dicts built during the render, counted when built
  /// (bytes; a list or dict element counts 32). Bounds memory, and the copying
  /// time that steps alone do not see.
  int64_t max_alloc_bytes = int64_t{256} << 20;
  /// Macro calls nested inside one another (recursion).
  int max_call_depth = 100;
  /// Nested evaluation: expressions within expressions, statements within
  /// blocks, across macro calls. Bounds the interpreter's stack use: under
  /// 1 KB a level in a release build (about 0.5 MB at this default; several
  /// times that under AddressSanitizer), so render on a thread with a normal
  /// (8 MB) stack, not a small one.
  int max_eval_depth = 500;
  /// Nesting of values: the JSON given as tools, tool calls and
  /// `chat_template_kwargs`, lists and dicts built by the template, and the
  /// walks that print or compare them (which also stops cyclic lists).
  int max_value_depth = 128;
  /// Wall-clock bound, checked every `deadline_check_steps` steps;
  /// InfiniteFuture (the default) checks nothing.
  absl::Time deadline = absl::InfiniteFuture();
  int64_t deadline_check_steps = 4096;
};

}  // namespace orca::text
