// The coordinator's handling of what workers and clients send it: a real JobController
// over a real SQLite file, two registered workers with open sessions and a job scheduled
// on them, then the input as a sequence of messages, each
//   [1 byte: bits 0-1 the kind (heartbeat, report, hook ack, submitted spec),
//            bit 2 the worker (w0, w1)]
//   [2 bytes little-endian: the length] [the serialized protobuf message]
// Messages that do not parse are skipped. Nothing may crash; reports may end or re-queue
// the job, but the controller must stay consistent enough to answer afterwards.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "proto/worker_service.pb.h"
#include "server/job_controller.h"
#include "server/job_manager.h"
#include "server/rendezvous_store.h"
#include "server/state_store.h"
#include "server/worker_registry.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace shardwise;

v1::JobSpec TwoRankJob() {
  v1::JobSpec spec;
  for (int w : {4, 8, 3}) spec.mutable_model()->add_layer_widths(w);
  spec.mutable_optimizer()->mutable_sgd()->set_lr(0.1);
  spec.mutable_data()->mutable_synthetic()->set_seed(1);
  spec.set_global_batch_size(8);
  spec.set_steps(5);
  spec.set_world_size(2);
  return spec;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string state_file = fuzz::ScratchDir() + "/coordinator-state.db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(state_file + suffix);
  auto store = StateStore::Open(state_file);
  if (!store.ok()) __builtin_trap();
  auto jobs = JobManager::Create(store->get(), {});
  if (!jobs.ok()) __builtin_trap();
  WorkerRegistry workers;
  RendezvousStore rendezvous;
  JobController::Options options;
  options.check_paths = false;
  JobController controller(jobs->get(), &workers, &rendezvous, options);

  std::string ids[2];
  std::shared_ptr<SessionOutbox> sessions[2];
  for (int w = 0; w < 2; ++w) {
    v1::RegisterWorkerRequest request;
    request.set_name(w == 0 ? "w0" : "w1");
    request.set_device(v1::CPU);
    ids[w] = controller.RegisterWorker(request).worker_id();
    auto outbox = controller.OpenSession(ids[w]);
    if (!outbox.ok()) __builtin_trap();
    sessions[w] = *outbox;
  }
  if (!controller.Submit(TwoRankJob()).ok()) __builtin_trap();

  for (size_t at = 0; at + 3 <= size;) {
    const uint8_t tag = data[at];
    const size_t length = data[at + 1] | size_t{data[at + 2]} << 8;
    at += 3;
    const size_t take = std::min(length, size - at);
    const uint8_t* payload = data + at;
    at += take;
    const std::string& worker = ids[(tag >> 2) & 1];
    switch (tag & 3) {
      case 0: {
        v1::Heartbeat heartbeat;
        if (heartbeat.ParseFromArray(payload, static_cast<int>(take))) {
          controller.OnHeartbeat(worker, heartbeat);
        }
        break;
      }
      case 1: {
        v1::AttemptReport report;
        if (report.ParseFromArray(payload, static_cast<int>(take))) controller.OnReport(worker, report);
        break;
      }
      case 2: {
        v1::HookChangeAck ack;
        if (ack.ParseFromArray(payload, static_cast<int>(take))) controller.OnHookAck(worker, ack);
        break;
      }
      default: {
        v1::JobSpec spec;
        if (spec.ParseFromArray(payload, static_cast<int>(take))) (void)controller.Submit(spec);
        break;
      }
    }
  }
  controller.CheckHeartbeats();
  // Still answering, and consistent about the job it scheduled.
  if (!(*jobs)->Get("job-1").ok()) __builtin_trap();
  for (int w = 0; w < 2; ++w) controller.CloseSession(ids[w], sessions[w]);
  return 0;
}
