#!/usr/bin/env bash
# tests/tsan/triage.awk's verdicts on ThreadSanitizer reports shaped like real ones (trimmed
# from scripts/tsan.sh logs): what it lets pass as gRPC's, and the near misses it must not.
# Usage: tsan_triage_test.sh TRIAGE_AWK
set -euo pipefail
shopt -s lastpipe  # expect, at the end of each pipe, counts failures in this shell
TRIAGE="$1"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
failures=0

# The message a server read reactor constructs with itself, against gRPC deserializing the
# first message into it (remote_engine_client_test, 2026-11-25). $1 and $2 replace the
# constructor's frames: the protoc frame above it, and the reactor constructor itself.
constructed_message_report() {
  cat <<REPORT
==================
WARNING: ThreadSanitizer: data race (pid=1)
  Read of size 8 at 0x7b3800017000 by thread T8:
    #0 HasUnknownFieldsTag /usr/include/google/protobuf/metadata_lite.h:202:12 (t+0x1)
    #1 orca::v1::ControlMessage::Clear() /work/build-tsan/orca/v1/worker.pb.cc:1326:23 (t+0x1)
    #2 google::protobuf::MessageLite::ParseFromZeroCopyStream(google::protobuf::io::ZeroCopyInputStream*) <null> (libprotobuf.so.32+0x11f589)
    #3 Deserialize /usr/include/grpcpp/impl/codegen/proto_utils.h:114:12 (t+0x2)
    #4 grpc::internal::CallbackWithSuccessTag::StaticRun(grpc_completion_queue_functor*, int) /usr/include/grpcpp/support/callback_common.h:199:47 (t+0x3)
    #5 <null> <null> (libgrpc++.so.1.51+0x897ba)

  Previous write of size 8 at 0x7b3800017000 by thread T7:
    #0 SetArena /usr/include/google/protobuf/metadata_lite.h:71:10 (t+0x4)
$1
$2
    #7 orca::scheduler::FakePipeline::Stage::Control(grpc::CallbackServerContext*, orca::v1::ControlSummary*) /work/tests/unit/services/remote_engine_client_test.cc:56:18 (t+0x5)
    #8 grpc::internal::CallbackClientStreamingHandler<orca::v1::ControlMessage, orca::v1::ControlSummary>::RunHandler(grpc::internal::MethodHandler::HandlerParameter const&) /usr/include/grpcpp/impl/codegen/server_callback_handlers.h:279:11 (t+0x6)
    #9 grpc::Server::CallbackRequest<grpc::CallbackServerContext>::CallbackCallTag::ContinueRunAfterInterception() <null> (libgrpc++.so.1.51+0xaf911)

  Location is heap block of size 216 at 0x7b3800016f80 allocated by thread T7:
    #0 operator new(unsigned long) <null> (t+0x7)
    #1 orca::scheduler::FakePipeline::Stage::Control(grpc::CallbackServerContext*, orca::v1::ControlSummary*) /work/tests/unit/services/remote_engine_client_test.cc:56:14 (t+0x8)

SUMMARY: ThreadSanitizer: data race /usr/include/google/protobuf/metadata_lite.h:202:12 in HasUnknownFieldsTag
==================
REPORT
}
PB='    #5 ControlMessage /work/build-tsan/./orca/v1/worker.pb.h:629:29 (t+0x9)'
INLINED_CTOR='    #6 Reader /work/tests/unit/services/remote_engine_client_test.cc:41:18 (t+0x9)'
OUTLINED_CTOR='    #6 orca::worker::ControlReader::ControlReader(orca::worker::WorkerNode*, orca::v1::ControlSummary*) /work/services/worker/worker_service.cc:15:3 (t+0x9)'
NOT_CTOR='    #6 orca::worker::ControlReader::Prime() /work/services/worker/worker_service.cc:15:3 (t+0x9)'
NO_PROTOC='    #5 MessageLite /usr/include/google/protobuf/message_lite.h:429:9 (t+0x9)'

expect() {  # NAME VERDICT (the report on stdin)
  cat >"$WORK/$1"
  local got
  got="$(awk -f "$TRIAGE" "$WORK/$1" | awk '/^@@@ /{print $3}' | tr '\n' ' ')"
  if [ "$got" = "$2 " ]; then
    echo "ok   $1: $2"
  else
    echo "FAIL $1: want $2, got '${got}'"
    failures=$((failures + 1))
  fi
}

constructed_message_report "$PB" "$INLINED_CTOR" | expect inlined_constructor LIBRARY
constructed_message_report "$PB" "$OUTLINED_CTOR" | expect outlined_constructor LIBRARY
# Near misses stay Orca's: not a constructor; no protoc-generated message constructor between
# the write and Orca's constructor; a constructor that gRPC did not run (no library frame below).
constructed_message_report "$PB" "$NOT_CTOR" | expect not_a_constructor ORCA
constructed_message_report "$NO_PROTOC" "$INLINED_CTOR" | expect no_protoc_message ORCA
constructed_message_report "$PB" "$INLINED_CTOR" | grep -v 'libgrpc++.so.1.51+0xaf911' | expect not_run_by_grpc ORCA

# The reactor itself: its constructor writing its vptr on the handler's thread, against
# gRPC's header code making the virtual call of its first reaction on another
# (remote_engine_client_test, 2026-11-29). $1 is the kind of race, $2 the reacting frame,
# $3 the writing frame.
constructed_reactor_report() {
  cat <<REPORT
==================
WARNING: ThreadSanitizer: $1 (pid=1)
  Read of size 8 at 0x7b3800017140 by thread T61:
$2
    #3 std::_Function_handler<void (bool), grpc::internal::CallbackClientStreamingHandler<orca::v1::ControlMessage, orca::v1::ControlSummary>::ServerCallbackReaderImpl::SetupReactor(grpc::ServerReadReactor<orca::v1::ControlMessage>*)::'lambda'(bool)>::_M_invoke(std::_Any_data const&, bool&&) /usr/bin/../lib/gcc/x86_64-linux-gnu/12/../../../../include/c++/12/bits/std_function.h:290:9 (t+0x1)
    #7 grpc::internal::CallbackWithSuccessTag::StaticRun(grpc_completion_queue_functor*, int) /usr/include/grpcpp/support/callback_common.h:199:47 (t+0x1)
    #8 <null> <null> (libgrpc++.so.1.51+0x897ba)

  Previous write of size 8 at 0x7b3800017140 by thread T62:
$3
    #1 orca::scheduler::FakePipeline::Stage::Control(grpc::CallbackServerContext*, orca::v1::ControlSummary*) /work/tests/unit/services/remote_engine_client_test.cc:66:18 (t+0x2)
    #2 operator() /work/build-tsan/./orca/v1/worker.grpc.pb.h:299:113 (t+0x3)
    #8 grpc::internal::CallbackClientStreamingHandler<orca::v1::ControlMessage, orca::v1::ControlSummary>::RunHandler(grpc::internal::MethodHandler::HandlerParameter const&) /usr/include/grpcpp/impl/codegen/server_callback_handlers.h:279:11 (t+0x4)
    #9 grpc::Server::CallbackRequest<grpc::CallbackServerContext>::CallbackCallTag::ContinueRunAfterInterception() <null> (libgrpc++.so.1.51+0xaf911)

  Location is heap block of size 216 at 0x7b3800017140 allocated by thread T62:
    #0 operator new(unsigned long) <null> (t+0x5)
    #1 orca::scheduler::FakePipeline::Stage::Control(grpc::CallbackServerContext*, orca::v1::ControlSummary*) /work/tests/unit/services/remote_engine_client_test.cc:66:14 (t+0x6)

SUMMARY: ThreadSanitizer: $1 /usr/include/grpcpp/impl/codegen/server_callback_handlers.h:385:22 in operator()
==================
REPORT
}
VPTR='data race on vptr (ctor/dtor vs virtual call)'
GRPC_CALLS='    #0 operator() /usr/include/grpcpp/impl/codegen/server_callback_handlers.h:385:22 (t+0x7)'
ORCA_CALLS='    #0 orca::scheduler::FakePipeline::OnControl(orca::v1::ControlMessage const&) /work/tests/unit/services/remote_engine_client_test.cc:130:5 (t+0x7)'
INLINED_READER='    #0 Reader /work/tests/unit/services/remote_engine_client_test.cc:42:50 (t+0x8)'
NOT_READER='    #0 orca::scheduler::FakePipeline::Stage::Prime() /work/tests/unit/services/remote_engine_client_test.cc:42:50 (t+0x8)'

constructed_reactor_report "$VPTR" "$GRPC_CALLS" "$INLINED_READER" | expect reactor_vptr LIBRARY
# Near misses stay Orca's: a plain data race on the reactor; Orca's code making the call; a
# write that is not a constructor's; a constructor not run by a gRPC method handler.
constructed_reactor_report "data race" "$GRPC_CALLS" "$INLINED_READER" | expect reactor_plain_race ORCA
constructed_reactor_report "$VPTR" "$ORCA_CALLS" "$INLINED_READER" | expect reactor_vptr_orca_call ORCA
constructed_reactor_report "$VPTR" "$GRPC_CALLS" "$NOT_READER" | expect reactor_vptr_not_constructor ORCA
constructed_reactor_report "$VPTR" "$GRPC_CALLS" "$INLINED_READER" | grep -v 'worker.grpc.pb.h' \
  | expect reactor_vptr_no_handler ORCA

# The older rule: a client reactor's OnReadDone on its message against gRPC deserializing
# the next one into it.
cat <<'REPORT' | expect client_on_read_done LIBRARY
==================
WARNING: ThreadSanitizer: data race (pid=1)
  Write of size 8 at 0x7b3800017000 by thread T8:
    #0 orca::v1::ControlMessage::Clear() /work/build-tsan/orca/v1/worker.pb.cc:1326:23 (t+0x1)
    #1 Deserialize /usr/include/grpcpp/impl/codegen/proto_utils.h:114:12 (t+0x2)
    #2 <null> <null> (libgrpc++.so.1.51+0x897ba)

  Previous read of size 8 at 0x7b3800017000 by thread T7:
    #0 orca::gateway::SchedulerCall::OnReadDone(bool) /work/services/gateway/scheduler_call.cc:40:5 (t+0x3)
    #1 <null> <null> (libgrpc++.so.1.51+0x897ba)

SUMMARY: ThreadSanitizer: data race /work/build-tsan/orca/v1/worker.pb.cc:1326:23 in Clear
==================
REPORT

# Two of Orca's functions racing: always Orca's.
cat <<'REPORT' | expect orca_against_orca ORCA
==================
WARNING: ThreadSanitizer: data race (pid=1)
  Write of size 8 at 0x7b3800017000 by thread T8:
    #0 orca::worker::WorkerNode::OnControl(orca::v1::ControlMessage const&) /work/services/worker/worker_node.cc:10:5 (t+0x1)
    #1 <null> <null> (libgrpc++.so.1.51+0x897ba)

  Previous read of size 8 at 0x7b3800017000 by thread T7:
    #0 orca::worker::WorkerNode::Step() /work/services/worker/worker_node.cc:20:5 (t+0x3)

SUMMARY: ThreadSanitizer: data race /work/services/worker/worker_node.cc:10:5 in OnControl
==================
REPORT

[ "$failures" -eq 0 ] || { echo "$failures verdict(s) wrong"; exit 1; }
