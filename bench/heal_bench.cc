// A replica group lost and healed live, on real processes: a coordinator and worker
// daemons on loopback training the GPT benchmark model (bench/bench_model.h) under
// HYBRID_SHARD, two groups of two ranks ({0, 1} and {2, 3}) plus a spare worker. Rank
// 3's worker is killed (SIGKILL) once the job is past step --kill_at; its group leaves,
// and a replacement (its drained mate and the spare) takes each shard from the live rank
// that holds it. Measured, from the job's events and the daemons' logs:
//  - detection: the kill to the coordinator's loss event; placement: the loss event to
//    the replacement's (the coordinator's decision);
//  - connect: the joiner's start to its first byte (the live ranks' step boundary, the
//    epoch's connections, its model built);
//  - transfer: bytes, time and MB/s of each shard's stream (its STATE_RECEIVED event),
//    and in total, against the same bytes through raw Gloo (as many pairs of threads of
//    this process, each sending its stream's bytes at once over loopback) and memcpy, in
//    the same run;
//  - catch-up: the steps the joiner trains to reach the live ranks (none: it joins at
//    the step they move at);
//  - the live groups' cost: the move to the healed epoch (their log's "after T": from
//    their failed collective, or from the step they agreed to move after), the step of
//    the heal
//    against the median step of the whole job before the loss, and the steps/s of the 20
//    steps around it against the 20 before the kill.
// bench/fault_tolerance.sh heal runs it and records its table in bench/RESULTS.md.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/bench_model.h"
#include "bench/load/job_samples.h"
#include "bench/load/local_cluster.h"
#include "common/status_macros.h"
#include "gloo/rendezvous/hash_store.h"
#include "worker/comm/gloo_communicator.h"

ABSL_FLAG(std::string, coordinator_binary, "", "the shardwise-coordinator to run");
ABSL_FLAG(std::string, worker_binary, "", "the shardwise-worker to run");
ABSL_FLAG(std::string, dir, "/tmp/shardwise-heal-bench", "state, logs, data and models");
ABSL_FLAG(int64_t, steps, 200, "steps of the job");
ABSL_FLAG(int64_t, kill_at, 80, "rank 3's worker is killed once the job is past this step");

namespace shardwise::bench {
namespace {

using load::FirstAt;
using load::Sample;

v1::JobSpec HealSpec(const std::string& dir) {
  v1::JobSpec spec;
  spec.set_name("healed");
  *spec.mutable_model()->mutable_gpt() = BenchGpt();
  spec.mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::HYBRID_SHARD);
  spec.mutable_fsdp()->set_shard_group_size(2);
  spec.mutable_optimizer()->mutable_adamw()->set_lr(1e-3);
  spec.mutable_data()->mutable_tokens()->set_train_path(WriteLicenseTokens(dir + "/tokens.bin"));
  spec.set_global_batch_size(16);
  spec.set_steps(absl::GetFlag(FLAGS_steps));
  spec.set_world_size(4);
  spec.mutable_fault_tolerance()->set_min_replicas(1);
  spec.mutable_fault_tolerance()->set_batch(v1::FaultTolerance::KEEP_GLOBAL);
  spec.mutable_output()->set_final_model_path(dir + "/healed.safetensors");
  spec.mutable_output()->set_overwrite(true);
  return spec;
}

// One shard's stream, from its STATE_RECEIVED event ("... in epoch E: B bytes in T ms").
struct Stream {
  int64_t bytes = 0;
  double ms = 0;
};

absl::StatusOr<std::vector<Stream>> Streams(const v1::Job& job) {
  std::vector<Stream> streams;
  for (const v1::JobEvent& event : job.events()) {
    const std::string& text = event.message();
    const size_t colon = text.find(": ", text.find(" took shard "));
    const size_t bytes_end = text.find(" bytes in ");
    if (text.find(" took shard ") == std::string::npos || colon == std::string::npos ||
        bytes_end == std::string::npos) {
      continue;
    }
    Stream stream;
    const size_t ms_end = text.find(" ms", bytes_end);
    if (!absl::SimpleAtoi(text.substr(colon + 2, bytes_end - colon - 2), &stream.bytes) ||
        !absl::SimpleAtod(text.substr(bytes_end + 10, ms_end - bytes_end - 10), &stream.ms)) {
      return absl::DataLossError(absl::StrCat("cannot read the transfer event: ", text));
    }
    streams.push_back(stream);
  }
  if (streams.empty()) return absl::NotFoundError("the job has no transfer events");
  return streams;
}

absl::StatusOr<absl::Time> EventTime(const v1::Job& job, const std::string& needle) {
  for (const v1::JobEvent& event : job.events()) {
    if (event.message().find(needle) != std::string::npos) {
      return absl::FromUnixMillis(event.time_ms());
    }
  }
  return absl::NotFoundError(absl::StrCat("no event with '", needle, "'"));
}

// MB/s in total of `streams` pairs of threads of this process, each sending `bytes` once
// over Gloo on loopback at the same time (as the heal's shards do).
double RawGlooMegabytesPerSecond(int64_t bytes, int streams) {
  gloo::rendezvous::HashStore store;
  std::vector<absl::Duration> took(streams);
  std::vector<std::thread> threads;
  for (int pair = 0; pair < streams; ++pair) {
    for (int rank : {0, 1}) {
      threads.emplace_back([&, pair, rank] {
        auto comm =
            GlooCommunicator::ConnectGroup(store, absl::StrCat("raw", pair), {0, 1}, rank, {});
        if (!comm.ok()) return;
        std::vector<char> buffer(bytes, 1);
        Communicator& c = **comm;
        // A byte first: both connected before the clock starts.
        (void)(rank == 0 ? c.Send(buffer.data(), 1, 1) : c.Recv(buffer.data(), 1, 0));
        const absl::Time start = absl::Now();
        if (rank == 0) {
          (void)c.Send(buffer.data(), buffer.size(), 1);
        } else {
          (void)c.Recv(buffer.data(), buffer.size(), 0);
          took[pair] = absl::Now() - start;
        }
      });
    }
  }
  for (std::thread& t : threads) t.join();
  const absl::Duration slowest = *std::max_element(took.begin(), took.end());
  return static_cast<double>(bytes) * streams / absl::ToDoubleSeconds(slowest) / 1e6;
}

double MemcpyMegabytesPerSecond(int64_t bytes) {
  std::vector<char> from(bytes, 1), to(bytes);
  std::memcpy(to.data(), from.data(), from.size());  // both touched first
  const absl::Time start = absl::Now();
  std::memcpy(to.data(), from.data(), from.size());
  return static_cast<double>(bytes) / absl::ToDoubleSeconds(absl::Now() - start) / 1e6;
}

// The median time between consecutive steps seen in [from, to).
absl::Duration MedianStep(const std::vector<Sample>& samples, int64_t from, int64_t to) {
  std::vector<absl::Duration> steps;
  for (int64_t s = from; s < to; ++s)
    steps.push_back(FirstAt(samples, s + 1) - FirstAt(samples, s));
  std::sort(steps.begin(), steps.end());
  return steps.empty() ? absl::ZeroDuration() : steps[steps.size() / 2];
}

absl::Status MeasureHeal() {
  const std::string dir = absl::GetFlag(FLAGS_dir);
  ASSIGN_OR_RETURN(auto cluster, load::LocalCluster::Start(absl::GetFlag(FLAGS_coordinator_binary),
                                                           absl::GetFlag(FLAGS_worker_binary), dir,
                                                           {"w0", "w1", "w2", "w3", "w9"}));
  ASSIGN_OR_RETURN(const load::LocalCluster::KilledRun run,
                   cluster->RunWithKill(HealSpec(dir), absl::GetFlag(FLAGS_kill_at), /*victim=*/3,
                                        [](const v1::Job&) { return absl::OkStatus(); }));
  const v1::Job& job = run.job;
  const std::vector<Sample>& samples = run.samples;
  const absl::Time killed_at = run.killed_at;
  const int64_t killed_step = run.killed_step;
  ASSIGN_OR_RETURN(const absl::Time lost_at, EventTime(job, " was lost"));
  ASSIGN_OR_RETURN(const absl::Time placed_at, EventTime(job, " joins (rank 2 on "));
  ASSIGN_OR_RETURN(const std::vector<Stream> streams, Streams(job));
  const std::string joiner = job.ranks(3).worker_id();
  ASSIGN_OR_RETURN(const load::LogLine started,
                   load::FindLogLine(cluster->LogPath(joiner), "joining the data plane"));
  ASSIGN_OR_RETURN(const load::LogLine received,
                   load::FindLogLine(cluster->LogPath(joiner), " took shard "));
  ASSIGN_OR_RETURN(const load::LogLine moved,
                   load::FindLogLine(cluster->LogPath(job.ranks(0).worker_id()),
                                     "membership epoch 2: 4 ranks train on from step "));
  int64_t healed_step = 0;
  absl::Duration move;
  const size_t from = moved.text.find(" from step ");
  const size_t after = moved.text.rfind(" after ");
  if (!absl::SimpleAtoi(moved.text.substr(from + 11, after - from - 11), &healed_step) ||
      !absl::ParseDuration(moved.text.substr(after + 7), &move)) {
    return absl::DataLossError(absl::StrCat("cannot read the move line: ", moved.text));
  }
  int64_t total_bytes = 0;
  double slowest_ms = 0;
  for (const Stream& s : streams) {
    total_bytes += s.bytes;
    slowest_ms = std::max(slowest_ms, s.ms);
  }
  const Stream& one = streams.front();
  const absl::Duration connect = received.at - absl::Milliseconds(one.ms) - started.at;
  const int64_t kill_at = absl::GetFlag(FLAGS_kill_at);
  const absl::Duration median = MedianStep(samples, 5, kill_at);
  const absl::Duration heal_step =
      FirstAt(samples, healed_step + 1) - FirstAt(samples, healed_step);
  const double around = load::Rate(samples, healed_step - 10, healed_step + 10);
  const double before = load::Rate(samples, kill_at - 20, kill_at);
  std::printf(
      "| %lld | %.0f ms | %.0f ms | %.0f ms | %zu x %.2f MB: %.1f ms, %.0f MB/s | %.0f MB/s | "
      "%.0f MB/s | %.0f MB/s | none (joins at step %lld) | %.0f ms; step %.0f ms vs median "
      "%.0f ms; %.2f of steps/s over 20 steps | %.0f ms |\n",
      static_cast<long long>(killed_step), absl::ToDoubleMilliseconds(lost_at - killed_at),
      absl::ToDoubleMilliseconds(placed_at - lost_at), absl::ToDoubleMilliseconds(connect),
      streams.size(), one.bytes / 1e6, one.ms, one.bytes / one.ms / 1e3,
      total_bytes / slowest_ms / 1e3,
      RawGlooMegabytesPerSecond(one.bytes, static_cast<int>(streams.size())),
      MemcpyMegabytesPerSecond(one.bytes), static_cast<long long>(healed_step),
      absl::ToDoubleMilliseconds(move), absl::ToDoubleMilliseconds(heal_step),
      absl::ToDoubleMilliseconds(median), around / before,
      absl::ToDoubleMilliseconds(FirstAt(samples, healed_step + 1) - killed_at));
  return absl::OkStatus();
}

}  // namespace
}  // namespace shardwise::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Status status = shardwise::bench::MeasureHeal();
  if (!status.ok()) {
    std::fprintf(stderr, "heal_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
