# Sorts ThreadSanitizer reports (one log file per process, scripts/tsan.sh) into Orca's
# findings and reports about gRPC's internal state only.
#
# Each stack of a report that says who touched or locked something (the two accesses of a
# race, the acquisitions of a lock-order inversion; not where a mutex or thread was created or
# memory allocated) gets, reading from the top (innermost) frame down:
#  - its caller: "library" when a frame of an uninstrumented shared library
#    ("<null> (libgrpc.so.29+0x...)") comes before any frame of Orca's code, else "orca";
#  - its toucher: the first frame that is Orca's code, gRPC's header code (/usr/include/grpc*)
#    or an uninstrumented library; frames of libstdc++, protobuf, Abseil and protoc's
#    generated *.pb.{h,cc} (code that acts for whoever called it) are looked through.
# Orca's code is any other frame with a source file that is not under /usr/ nor Abseil's (its
# source or installed headers).
# A report is "LIBRARY" when every such stack is on gRPC's side (caller "library", or toucher
# gRPC's headers or a library) and at least one was called from inside gRPC; else "ORCA".
#
# Why: Debian's gRPC is not instrumented. The instrumented Abseil, libstdc++ and grpcpp header
# code that run on gRPC's own objects (absl::Status payloads, call-op sets, callback tags)
# hand them between gRPC's threads through atomics TSan cannot see: in such a report either
# both sides are called from inside gRPC, or one is gRPC's header code that Orca called
# (ServerWriteReactor::Finish filling its call-op set, serializing the response) and the other
# gRPC's completion of it (destroying the call's response message after OnDone).
# A race in which Orca's code touches memory itself, or two of Orca's calls race with each
# other (even inside gRPC's headers, e.g. Finish while a write is in flight), is "ORCA".
#
# Input: report files. Output: per report a line "@@@ FILE VERDICT" then the report.
function flush_section() {
  if (in_section && section_classified) {
    sections++
    if (caller == "") caller = "orca"
    if (caller == "library") library_called++
    if (caller == "orca" && toucher != "grpc" && toucher != "library") {
      orca_sections++
      if (first_orca ~ /::OnReadDone\(/) read_done_sections++
      if (pb_before_orca && library_after_orca && is_constructor(first_orca)) constructed_message_sections++
      if (vptr_report && !pb_before_orca && handler_after_orca && library_after_orca && is_constructor(first_orca))
        constructed_reactor_sections++
    }
  }
  in_section = 0
}
# Whether a frame line ("#6 Reader /path:41:18 (...)" as the symbolizer prints an inlined
# constructor, or "#6 ns::Reader::Reader(...) /path...") is a constructor's.
function is_constructor(frame,   f, n, parts) {
  f = frame
  sub(/^ *#[0-9]+ /, "", f)
  if (f ~ /^[A-Za-z_][A-Za-z0-9_]* \//) return 1
  sub(/\(.*/, "", f)
  n = split(f, parts, "::")
  return n >= 2 && parts[n] == parts[n - 1]
}
function flush_report(   verdict) {
  flush_section()
  if (report == "") return
  # Also gRPC's: a client reactor's OnReadDone on the message it reads into (then hands back
  # with StartRead) against gRPC deserializing the next message into it on another thread, the
  # other stack wholly inside gRPC; gRPC orders the two through atomics TSan cannot see.
  # Likewise a server reactor's message constructed with the reactor (protoc's constructor
  # called from a constructor that gRPC's method handler ran), against gRPC deserializing the
  # first message into it on another thread after the StartRead the constructor issued.
  # And the reactor itself: its constructor (run by gRPC's method handler, through protoc's
  # *.grpc.pb.h) writing its vptr, against gRPC's header code on another thread, called from
  # inside gRPC, making the virtual call of its first reaction (OnReadDone); gRPC starts
  # that read only when it binds the reactor, after the handler returned.
  verdict = (sections > 0 && library_called > 0 &&
             (orca_sections == 0 ||
              (orca_sections == 1 && sections >= 2 &&
               (read_done_sections == 1 || constructed_message_sections == 1 || constructed_reactor_sections == 1)))) \
                ? "LIBRARY" : "ORCA"
  printf "@@@ %s %s\n%s", FILENAME_OF_REPORT, verdict, report
  report = ""
}
/^WARNING: ThreadSanitizer:/ {
  flush_report()
  report = $0 "\n"; FILENAME_OF_REPORT = FILENAME
  sections = 0; orca_sections = 0; read_done_sections = 0; constructed_message_sections = 0; library_called = 0
  constructed_reactor_sections = 0
  vptr_report = ($0 ~ /data race on vptr \(ctor\/dtor vs virtual call\)/)
  in_section = 0
  next
}
report == "" { next }
/^==================/ { flush_report(); next }
{
  report = report $0 "\n"
  if ($0 ~ /^SUMMARY: ThreadSanitizer/) { flush_report(); next }
  if ($0 ~ /^ *$/) { flush_section(); next }
  if ($0 ~ /^  [A-Z].*:$/ || $0 ~ /^  [A-Z].*\):$/) {
    flush_section()
    in_section = 1
    caller = ""; toucher = ""; first_orca = ""; pb_before_orca = 0; library_after_orca = 0; handler_after_orca = 0
    # Not read: where mutexes and threads were created, where memory was allocated or freed.
    section_classified = !($0 ~ /created at|created by|Location is|allocated by|freed by/)
    next
  }
  if (in_section && $0 ~ /^ +#[0-9]+ /) {
    kind = ""
    if ($0 ~ /<null> \(lib[^ ]*\.so[^ ]*\+0x[0-9a-f]+\)/) {
      kind = "library"
    } else if (match($0, / \/[^ ]+:[0-9]+/) || match($0, / \/[^ ]+ \(/)) {
      path = substr($0, RSTART + 1, RLENGTH - 1)
      if (path ~ /^\/usr\/include\/grpc/) kind = "grpc"
      else if (path ~ /\.pb\.(cc|h)/) {  # protoc's code acts for its caller
        kind = ""
        if (first_orca == "") pb_before_orca = 1
        else if (path ~ /\.grpc\.pb\.h(:|$)/) handler_after_orca = 1
      }
      else if (path !~ /^\/usr\// && path !~ /\/abseil-[0-9]|\/include\/absl\//) kind = "orca"
    }
    if (kind == "library" && first_orca != "") library_after_orca = 1
    if (kind == "orca" && first_orca == "") first_orca = $0
    if (kind != "" && toucher == "") toucher = kind
    if ((kind == "library" || kind == "orca") && caller == "") caller = kind
  }
}
END { flush_report() }
