#ifndef SHARDWISE_SERVER_EXECUTION_ORDER_AGREEMENT_H_
#define SHARDWISE_SERVER_EXECUTION_ORDER_AGREEMENT_H_

// Validates one attempt's FSDP execution order (docs/semantics.md, "Execution order and
// prefetch"). Every rank must run its units in the same order, or the ranks' collectives pair up
// wrongly (a hang, or tensors silently mixed). PyTorch checks this only in its most verbose debug
// mode; here every rank reports its first iteration's order, and once all have, they
// are compared: agreeing orders are recorded with the prefetch plan derived from them,
// disagreeing ones fail the job at once, naming the ranks and the first difference. A
// later change of order (warned once per attempt) is re-planned.
//
// Pure decisions: the JobController records, sends and fails as told.
//
// Thread-safety: none; the JobController calls it under its lock.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"
#include "proto/worker_service.pb.h"

namespace shardwise {

class ExecutionOrderAgreement {
 public:
  // `recorded`: the job's order is already recorded (an attempt re-attached after a
  // coordinator restart); only changes are handled then.
  ExecutionOrderAgreement(int32_t world_size, bool recorded)
      : world_size_(world_size), recorded_(recorded) {}

  struct Decision {
    enum class Kind {
      kNone,    // waiting for more ranks, or nothing to do
      kRecord,  // every rank agrees: record `order` and `plan` (version 1), `message` as event
      kFail,    // the ranks disagree: fail the job with `message` (every attempt would)
      kReplan,  // an order changed: record `plan` (next version) with `message`, send it
      kWarn,    // an order changed and cannot be planned: record `message`, keep the plan
    };
    Kind kind = Kind::kNone;
    v1::ExecutionOrder order;
    v1::PrefetchPlan plan;
    std::string message;
  };

  // A rank's ORDER_RECORDED or ORDER_CHANGED report; `job` is the job as it stands (its
  // spec, and its recorded order and plan).
  Decision OnReport(const v1::Job& job, const v1::AttemptReport& report);

  // The controller recorded a kRecord decision. A change that arrived before the last
  // first order is handled now (its decision), since it could not be compared before.
  Decision Recorded(const v1::Job& job);

 private:
  Decision OnFirstOrder(const v1::Job& job, int32_t rank, const v1::ExecutionOrder& order);
  Decision OnChange(const v1::Job& job, const v1::AttemptReport& report);
  // The plan for `order`, its unit ids checked against the job's unit count.
  absl::StatusOr<v1::PrefetchPlan> Plan(const v1::Job& job, const v1::ExecutionOrder& order);

  const int32_t world_size_;
  bool recorded_;
  std::map<int32_t, v1::ExecutionOrder> first_orders_;  // until every rank's arrived
  // A change reported before every rank's first order arrived, handled after them.
  std::optional<v1::AttemptReport> early_change_;
  bool change_warned_ = false;
  std::optional<absl::StatusOr<int>> num_units_;  // the job's, once first needed
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_EXECUTION_ORDER_AGREEMENT_H_
