#include "worker/train/injected_faults.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace shardwise {
namespace {

// Records the forward's units in reverse order from step `from` on, as a rank whose
// model ran them in another order would: the coordinator's validation must catch it.
class UnitOrderReversed final : public TrainingHooks {
 public:
  explicit UnitOrderReversed(int64_t from) : from_(from) {}

  void AlterExecutionOrder(int64_t step, v1::ExecutionOrder* order) override {
    if (step < from_) return;
    std::reverse(order->mutable_pre_forward()->begin(), order->mutable_pre_forward()->end());
    std::reverse(order->mutable_post_forward()->begin(), order->mutable_post_forward()->end());
  }

 private:
  const int64_t from_;
};

// Takes its assignments and never joins their rendezvous: the coordinator's join
// deadline must blame it and keep it out of scheduling.
class NeverJoinsRendezvous final : public TrainingHooks {
 public:
  bool StayOutOfRendezvous() override { return true; }
};

// Where a fault strikes: a step (or any) and a phase or collective of it.
struct FaultPoint {
  static constexpr int64_t kAnyStep = -1;
  int64_t step = kAnyStep;
  std::string point;

  bool Matches(int64_t at_step, const char* at_point) const {
    return (step == kAnyStep || at_step == step) && point == at_point;
  }
};

// Dies by SIGKILL where it is told, as a worker whose host fails there: fault tolerance
// must carry the other replicas past it.
class KilledAt final : public TrainingHooks {
 public:
  explicit KilledAt(FaultPoint at) : at_(std::move(at)) {}

  void AtPoint(int64_t step, const char* point) override {
    if (at_.Matches(step, point)) raise(SIGKILL);
  }

 private:
  const FaultPoint at_;
};

// Strikes the first time the rank gets where it is told (AtPoint runs on several threads;
// the first one there is struck), in the worker's life: a later attempt runs unharmed.
class StrikesOnceAt : public TrainingHooks {
 public:
  explicit StrikesOnceAt(FaultPoint at) : at_(std::move(at)) {}

  void AtPoint(int64_t step, const char* point) final {
    if (at_.Matches(step, point) && !struck_.exchange(true)) Strike(step, point);
  }

 protected:
  virtual void Strike(int64_t step, const char* point) = 0;

 private:
  const FaultPoint at_;
  std::atomic<bool> struck_{false};
};

// Stops for a while, as a rank on a host that stalls there (or a slow link): a window in
// which a test can fail something else (the coordinator mid-heal).
class PausedAt final : public StrikesOnceAt {
 public:
  PausedAt(FaultPoint at, absl::Duration pause, PauseFunction sleep)
      : StrikesOnceAt(std::move(at)), pause_(pause), sleep_(std::move(sleep)) {}

 private:
  void Strike(int64_t step, const char* point) override {
    // In the worker's log, for the test that acts in the window.
    std::cerr << "fault injection: paused at " << point << " of step " << step << " for "
              << absl::FormatDuration(pause_) << std::endl;
    sleep_(pause_);
  }

  const absl::Duration pause_;
  const PauseFunction sleep_;
};

// Stops until a file exists: a pause whose end the test decides, so that what it does in
// the window does not race the job's end however loaded the machine is.
class HeldAt final : public StrikesOnceAt {
 public:
  HeldAt(FaultPoint at, std::string file) : StrikesOnceAt(std::move(at)), file_(std::move(file)) {}

 private:
  void Strike(int64_t step, const char* point) override {
    std::cerr << "fault injection: held at " << point << " of step " << step << " until " << file_
              << " exists" << std::endl;
    std::error_code ignored;
    while (!std::filesystem::exists(file_, ignored)) absl::SleepFor(absl::Milliseconds(20));
  }

  const std::string file_;
};

// Throws what std::thread throws on a host out of threads (a pids cgroup's limit), on the
// thread that enters the point: the attempt must fail, not the worker. Only for a point
// the training thread enters (a phase: "forward", "optimizer"), whose caller catches it.
class ThreadStartFailsAt final : public StrikesOnceAt {
 public:
  explicit ThreadStartFailsAt(FaultPoint at) : StrikesOnceAt(std::move(at)) {}

 private:
  void Strike(int64_t step, const char* point) override {
    std::cerr << "fault injection: no thread could start at " << point << " of step " << step
              << std::endl;
    throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                            "fault injection: std::thread");
  }
};

// Takes a part after a step (a checkpoint, an evaluation) that it finished with its peers
// as failed, once: UNAVAILABLE, as a rank whose ring lost its last messages sees it while
// its peers go on. The ranks must agree on where to go on from when they recover.
class FailsAfter final : public TrainingHooks {
 public:
  explicit FailsAfter(FaultPoint after) : after_(std::move(after)) {}

  absl::Status AfterPart(int64_t steps, const char* part) override {
    if (!after_.Matches(steps, part) || failed_.exchange(true)) return absl::OkStatus();
    std::cerr << "fault injection: " << part << " after " << steps << " steps taken as failed"
              << std::endl;
    return absl::UnavailableError(
        absl::StrCat("fault injection: the ", part, " after ", steps, " steps failed here"));
  }

 private:
  const FaultPoint after_;
  std::atomic<bool> failed_{false};
};

// Leaves with its group after a step, as a rank whose worker is shutting down: a
// membership history fixed up front, which a run with a loss must reproduce.
class LeavesAfter final : public TrainingHooks {
 public:
  explicit LeavesAfter(int64_t step) : step_(step) {}
  bool LeaveAfter(int64_t step) override { return step >= step_; }

 private:
  const int64_t step_;
};

// Several faults, each asked in turn, through the hooks the faults above use.
class AllOf final : public TrainingHooks {
 public:
  explicit AllOf(std::vector<std::shared_ptr<TrainingHooks>> faults) : faults_(std::move(faults)) {}

  void AlterExecutionOrder(int64_t step, v1::ExecutionOrder* order) override {
    for (const auto& fault : faults_) fault->AlterExecutionOrder(step, order);
  }
  void AtPoint(int64_t step, const char* point) override {
    for (const auto& fault : faults_) fault->AtPoint(step, point);
  }
  absl::Status AfterPart(int64_t steps, const char* part) override {
    for (const auto& fault : faults_) RETURN_IF_ERROR(fault->AfterPart(steps, part));
    return absl::OkStatus();
  }
  bool LeaveAfter(int64_t step) override {
    bool leave = false;
    for (const auto& fault : faults_) leave = fault->LeaveAfter(step) || leave;
    return leave;
  }
  bool StayOutOfRendezvous() override {
    bool stay = false;
    for (const auto& fault : faults_) stay = fault->StayOutOfRendezvous() || stay;
    return stay;
  }

 private:
  const std::vector<std::shared_ptr<TrainingHooks>> faults_;
};

// "STEP:POINT" or "any:POINT".
bool ParseFaultPoint(absl::string_view text, FaultPoint* at) {
  const size_t colon = text.find(':');
  if (colon == absl::string_view::npos || colon + 1 >= text.size()) return false;
  const absl::string_view step_text = text.substr(0, colon);
  if (step_text == "any") {
    at->step = FaultPoint::kAnyStep;
  } else if (!absl::SimpleAtoi(step_text, &at->step) || at->step < 0) {
    return false;
  }
  at->point = std::string(text.substr(colon + 1));
  return true;
}

// "pause_at=" or "hold_at=" and then "STEP:POINT:LAST", LAST after the second colon (no
// point has one; a file may).
bool ParseFaultPointAndLast(absl::string_view text, absl::string_view prefix, FaultPoint* at,
                            std::string* last) {
  if (!absl::ConsumePrefix(&text, prefix)) return false;
  const size_t first = text.find(':');
  const size_t colon = first == absl::string_view::npos ? first : text.find(':', first + 1);
  if (colon == absl::string_view::npos || colon + 1 >= text.size()) return false;
  *last = std::string(text.substr(colon + 1));
  return ParseFaultPoint(text.substr(0, colon), at);
}

std::shared_ptr<TrainingHooks> ParseOneFault(absl::string_view text, const PauseFunction& sleep) {
  if (text == "unit_order_reversed") return std::make_shared<UnitOrderReversed>(0);
  if (text == "never_join_rendezvous") return std::make_shared<NeverJoinsRendezvous>();
  int64_t from = 0;
  absl::string_view rest = text;
  if (absl::ConsumePrefix(&rest, "unit_order_reversed_from=") && absl::SimpleAtoi(rest, &from)) {
    return std::make_shared<UnitOrderReversed>(from);
  }
  rest = text;
  if (absl::ConsumePrefix(&rest, "leave_after=") && absl::SimpleAtoi(rest, &from) && from >= 0) {
    return std::make_shared<LeavesAfter>(from);
  }
  rest = text;
  FaultPoint at;
  std::string last;
  if (absl::ConsumePrefix(&rest, "sigkill_at=") && ParseFaultPoint(rest, &at)) {
    return std::make_shared<KilledAt>(at);
  }
  rest = text;
  if (absl::ConsumePrefix(&rest, "fail_after=") && ParseFaultPoint(rest, &at)) {
    return std::make_shared<FailsAfter>(at);
  }
  rest = text;
  if (absl::ConsumePrefix(&rest, "no_thread_at=") && ParseFaultPoint(rest, &at)) {
    return std::make_shared<ThreadStartFailsAt>(at);
  }
  int64_t pause_ms = 0;
  if (ParseFaultPointAndLast(text, "pause_at=", &at, &last) && absl::SimpleAtoi(last, &pause_ms) &&
      pause_ms > 0) {
    return std::make_shared<PausedAt>(at, absl::Milliseconds(pause_ms), sleep);
  }
  if (ParseFaultPointAndLast(text, "hold_at=", &at, &last)) {
    return std::make_shared<HeldAt>(at, last);
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<std::shared_ptr<TrainingHooks>> ParseInjectedFaults(const std::string& text,
                                                                   const PauseFunction& sleep) {
  if (text.empty()) return nullptr;
  std::vector<std::shared_ptr<TrainingHooks>> faults;
  for (absl::string_view one : absl::StrSplit(text, ',')) {
    faults.push_back(ParseOneFault(one, sleep));
    if (faults.back() != nullptr) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "--fault_injection '", text, "': unknown fault '", one,
        "' (expected unit_order_reversed, unit_order_reversed_from=STEP, "
        "never_join_rendezvous, sigkill_at=STEP|any:POINT, no_thread_at=STEP|any:POINT, "
        "fail_after=STEPS|any:PART, "
        "pause_at=STEP|any:POINT:MS, "
        "hold_at=STEP|any:POINT:FILE or leave_after=STEP, several joined by commas)"));
  }
  if (faults.size() == 1) return faults.front();
  return std::make_shared<AllOf>(std::move(faults));
}

}  // namespace shardwise
