#include "server/worker_text_bounds.h"

#include <string>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

bool EndsCut(const std::string& text) {
  const std::string mark = "(message cut)";
  return text.size() >= mark.size() &&
         text.compare(text.size() - mark.size(), mark.size(), mark) == 0;
}

// A report's 4 MiB message would become the job's reason, result and events whole.
TEST(BoundWorkerText, CutsAReportsTextsToWhatAPersonReads) {
  v1::WorkerMessage message;
  v1::AttemptReport* report = message.mutable_report();
  report->set_message(std::string(4 << 20, 'x'));
  report->mutable_progress()->set_phase(std::string(10000, 'p'));
  report->add_spans()->set_name(std::string(10000, 's'));
  report->add_spans()->set_name("forward");
  BoundWorkerText(&message);
  EXPECT_LE(report->message().size(), kMaxWorkerMessageBytes);
  EXPECT_TRUE(EndsCut(report->message()));
  EXPECT_LE(report->progress().phase().size(), kMaxWorkerLabelBytes);
  EXPECT_LE(report->spans(0).name().size(), kMaxWorkerLabelBytes);
  EXPECT_EQ(report->spans(1).name(), "forward");  // short texts are left as they are
}

TEST(BoundWorkerText, CutsProbeErrorsAndPositions) {
  v1::WorkerMessage probe;
  probe.mutable_probe_result()->add_outcomes()->set_error(std::string(100000, 'e'));
  probe.mutable_probe_result()->add_outcomes()->set_error("connection refused");
  BoundWorkerText(&probe);
  EXPECT_LE(probe.probe_result().outcomes(0).error().size(), kMaxWorkerMessageBytes);
  EXPECT_EQ(probe.probe_result().outcomes(1).error(), "connection refused");

  v1::WorkerMessage heartbeat;
  v1::RankPosition* position = heartbeat.mutable_heartbeat()->mutable_position();
  position->set_phase(std::string(1000, 'b'));
  position->set_collective("all-gather");
  heartbeat.mutable_heartbeat()->set_job_id(std::string(1 << 20, 'j'));  // echoed in an abort
  BoundWorkerText(&heartbeat);
  EXPECT_LE(position->phase().size(), kMaxWorkerLabelBytes);
  EXPECT_EQ(position->collective(), "all-gather");
  EXPECT_LE(heartbeat.heartbeat().job_id().size(), kMaxWorkerLabelBytes);
}

// A cut never splits a UTF-8 character: the text stays valid for a proto string.
TEST(BoundWorkerText, CutsAtCharacterBoundaries) {
  v1::WorkerMessage message;
  std::string text;
  while (text.size() < 2 * kMaxWorkerMessageBytes) text += "\xc3\xa9";  // é
  message.mutable_report()->set_message("x" + text);  // odd offset: a cut may land inside
  BoundWorkerText(&message);
  const std::string& cut = message.report().message();
  const size_t kept = cut.find(" ... (message cut)");
  ASSERT_NE(kept, std::string::npos);
  EXPECT_EQ((kept - 1) % 2, 0u) << kept;  // whole two-byte characters after the 'x'
}

}  // namespace
}  // namespace shardwise
