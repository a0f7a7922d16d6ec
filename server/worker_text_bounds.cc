#include "server/worker_text_bounds.h"

#include <string>

#include "common/grpc_status.h"

namespace shardwise {
namespace {

void Cut(std::string* text, size_t max_bytes) {
  if (text->size() > max_bytes) *text = CutStatusMessage(*text, max_bytes);
}

void BoundPosition(v1::RankPosition* position) {
  Cut(position->mutable_phase(), kMaxWorkerLabelBytes);
  Cut(position->mutable_collective(), kMaxWorkerLabelBytes);
}

}  // namespace

void BoundWorkerText(v1::WorkerMessage* message) {
  switch (message->kind_case()) {
    case v1::WorkerMessage::kHeartbeat:
      // A job id is the coordinator's own ("job-12"): a longer one names no job, and is
      // echoed back in an abort.
      Cut(message->mutable_heartbeat()->mutable_job_id(), kMaxWorkerLabelBytes);
      if (message->heartbeat().has_position()) {
        BoundPosition(message->mutable_heartbeat()->mutable_position());
      }
      return;
    case v1::WorkerMessage::kReport: {
      v1::AttemptReport* report = message->mutable_report();
      Cut(report->mutable_message(), kMaxWorkerMessageBytes);
      if (report->has_progress()) {
        Cut(report->mutable_progress()->mutable_phase(), kMaxWorkerLabelBytes);
      }
      // A checksum is 32 hex digits (rank_state.h); it goes into the job's events.
      if (report->has_transfer()) Cut(report->mutable_transfer()->mutable_checksum(), 64);
      for (v1::Span& span : *report->mutable_spans()) {
        Cut(span.mutable_name(), kMaxWorkerLabelBytes);
      }
      return;
    }
    case v1::WorkerMessage::kProbeResult:
      for (auto& outcome : *message->mutable_probe_result()->mutable_outcomes()) {
        Cut(outcome.mutable_error(), kMaxWorkerMessageBytes);
      }
      return;
    default:
      return;
  }
}

}  // namespace shardwise
