#include "bench/load/load_generator.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "bench/load/coordinator_process.h"
#include "client/client.h"
#include "common/status_macros.h"
#include "contracts/job_state.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "proto/job_service.grpc.pb.h"

namespace shardwise::load {
namespace {

v1::JobSpec LoadJobSpec(const LoadOptions& options, const std::string& name) {
  v1::JobSpec spec;
  spec.set_name(name);
  for (int width : {4, 8, 3}) spec.mutable_model()->add_layer_widths(width);
  spec.mutable_optimizer()->mutable_sgd()->set_lr(0.1);
  spec.mutable_data()->mutable_synthetic()->set_seed(1);
  spec.set_global_batch_size(int64_t{2} * options.world_size);
  spec.set_steps(options.job_steps);
  spec.set_world_size(options.world_size);
  return spec;
}

// The simulated workers, their connections, and the thread that makes them tick.
class Fleet {
 public:
  Fleet(const std::string& address, const LoadOptions& options, SimCounters* counters) {
    const int channels =
        options.channels > 0 ? options.channels : std::max(1, options.workers / 250 + 1);
    for (int c = 0; c < channels; ++c) {
      grpc::ChannelArguments args;
      // Distinct arguments make distinct connections rather than one shared subchannel.
      args.SetInt("shardwise.load_channel", c);
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      stubs_.push_back(v1::WorkerService::NewStub(
          grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args)));
    }
    absl::BitGen random;
    const absl::Time start = absl::Now();
    for (int w = 0; w < options.workers; ++w) {
      // Heartbeats spread over the interval, as a real fleet's are.
      const absl::Time first =
          start + absl::Uniform(random, 0.0, 1.0) * options.sim.heartbeat_interval;
      workers_.push_back(std::make_unique<SimWorker>(absl::StrFormat("sim-%05d", w),
                                                     stubs_[w % stubs_.size()].get(), options.sim,
                                                     counters, first));
    }
  }

  void Start() {
    for (auto& worker : workers_) worker->Start();
    ticker_ = std::thread([this] {
      while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(5))) {
        const absl::Time now = absl::Now();
        for (auto& worker : workers_) worker->Tick(now);
      }
    });
  }

  // Freezes the last `count` workers; their last heartbeats, by name.
  std::map<std::string, absl::Time> Freeze(int count) {
    std::map<std::string, absl::Time> frozen;
    for (int w = static_cast<int>(workers_.size()) - count; w < static_cast<int>(workers_.size());
         ++w) {
      if (w >= 0) frozen[workers_[w]->name()] = workers_[w]->Freeze();
    }
    return frozen;
  }

  ~Fleet() {
    stop_.Notify();
    if (ticker_.joinable()) ticker_.join();
    for (auto& worker : workers_) worker->Stop();
  }

 private:
  std::vector<std::unique_ptr<v1::WorkerService::Stub>> stubs_;
  std::vector<std::unique_ptr<SimWorker>> workers_;
  absl::Notification stop_;
  std::thread ticker_;
};

// One job followed from its submission to its end over WatchJob.
class JobWatch final : public grpc::ClientReadReactor<v1::Job> {
 public:
  JobWatch(v1::JobService::Stub* stub, const std::string& job_id, absl::Time submitted)
      : submitted_(submitted) {
    request_.set_job_id(job_id);
    stub->async()->WatchJob(&context_, &request_, this);
    StartRead(&job_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    absl::MutexLock lock(&mu_);
    if (!running_.has_value() && job_.state() != v1::PENDING && job_.state() != v1::SCHEDULED) {
      running_ = absl::ToDoubleSeconds(absl::Now() - submitted_);
    }
    if (IsTerminal(job_.state())) succeeded_ = job_.state() == v1::SUCCEEDED;
    StartRead(&job_);
  }

  void OnDone(const grpc::Status&) override {
    absl::MutexLock lock(&mu_);
    done_ = true;
  }

  bool WaitDone(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithDeadline(absl::Condition(&done_), deadline);
  }
  void Cancel() { context_.TryCancel(); }

  std::optional<double> running() {
    absl::MutexLock lock(&mu_);
    return running_;
  }
  bool succeeded() {
    absl::MutexLock lock(&mu_);
    return succeeded_;
  }

 private:
  const absl::Time submitted_;
  grpc::ClientContext context_;
  v1::WatchJobRequest request_;
  v1::Job job_;
  absl::Mutex mu_;
  std::optional<double> running_ ABSL_GUARDED_BY(mu_);
  bool succeeded_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

absl::Status WaitForIdleWorkers(Client& client, int workers, const SimCounters& counters) {
  const absl::Time deadline = absl::Now() + absl::Minutes(1);
  int idle_count = 0;
  while (absl::Now() < deadline) {
    auto idle = client.ListWorkers({.states = {v1::IDLE}});
    if (idle.ok()) idle_count = static_cast<int>(idle->size());
    if (idle_count >= workers) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(100));
  }
  auto all = client.ListWorkers();
  return absl::DeadlineExceededError(absl::StrCat(
      "only ", idle_count, " of the ", workers, " workers were IDLE after a minute (",
      all.ok() ? all->size() : 0, " registered at the coordinator; ", counters.registered.load(),
      " registrations answered, ", counters.registration_failures.load(), " failed, ",
      counters.sessions_ended.load(), " sessions ended",
      counters.sessions_ended.load() > 0 ? absl::StrCat(", first ", counters.FirstSessionEnd())
                                         : "",
      ")"));
}

// Submit-to-RUNNING of jobs submitted one at a time while their workers are idle.
absl::StatusOr<std::vector<double>> Probe(const LoadOptions& options, Client& client,
                                          v1::JobService::Stub* stub) {
  std::vector<double> seconds;
  for (int i = 0; i < options.probe_jobs; ++i) {
    const absl::Time submitted = absl::Now();
    auto job_id = client.Submit(LoadJobSpec(options, absl::StrCat("probe-", i)));
    if (!job_id.ok()) return job_id.status();
    auto watch = std::make_unique<JobWatch>(stub, *job_id, submitted);
    if (!watch->WaitDone(absl::Now() + absl::Minutes(1)) || !watch->running().has_value()) {
      watch->Cancel();
      watch->WaitDone(absl::InfiniteFuture());
      return absl::DeadlineExceededError(absl::StrCat("probe job ", *job_id, " did not end"));
    }
    seconds.push_back(*watch->running());
  }
  return seconds;
}

// Lists every job and gets one, in a loop, until stopped: what dashboards and CLIs do.
class Poller {
 public:
  explicit Poller(Client* client) : client_(client), thread_([this] { Run(); }) {}
  ~Poller() { Stop(); }
  void Stop() {
    if (!stop_.HasBeenNotified()) stop_.Notify();
    if (thread_.joinable()) thread_.join();
  }
  std::vector<double> list_seconds, get_seconds;  // read after Stop()

 private:
  void Run() {
    while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(200))) {
      absl::Time start = absl::Now();
      auto jobs = client_->ListJobs();
      if (!jobs.ok() || jobs->empty()) continue;
      list_seconds.push_back(absl::ToDoubleSeconds(absl::Now() - start));
      start = absl::Now();
      if (client_->Get((*jobs)[jobs->size() / 2].id()).ok()) {
        get_seconds.push_back(absl::ToDoubleSeconds(absl::Now() - start));
      }
    }
  }
  Client* const client_;
  absl::Notification stop_;
  std::thread thread_;
};

// The coordinator's threads and memory at their peak, sampled while the load runs.
class PeakSampler {
 public:
  explicit PeakSampler(const CoordinatorProcess* coordinator)
      : coordinator_(coordinator), thread_([this] { Run(); }) {}
  ~PeakSampler() { Stop(); }
  void Stop() {
    if (!stop_.HasBeenNotified()) stop_.Notify();
    if (thread_.joinable()) thread_.join();
  }
  int threads = 0;
  int64_t rss = 0;

 private:
  void Run() {
    do {
      auto stats = coordinator_->Stats();
      if (stats.ok()) {
        threads = std::max(threads, stats->threads);
        rss = std::max(rss, stats->rss_bytes);
      }
    } while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(250)));
  }
  const CoordinatorProcess* const coordinator_;
  absl::Notification stop_;
  std::thread thread_;
};

// How long after their last heartbeat the coordinator lists the frozen workers LOST.
std::vector<double> MeasureDetection(Client& client,
                                     const std::map<std::string, absl::Time>& frozen,
                                     absl::Duration timeout) {
  std::vector<double> seconds;
  std::set<std::string> seen;
  const absl::Time deadline = absl::Now() + 3 * timeout;
  while (seen.size() < frozen.size() && absl::Now() < deadline) {
    auto lost = client.ListWorkers({.states = {v1::LOST}});
    const absl::Time now = absl::Now();
    if (lost.ok()) {
      for (const v1::WorkerInfo& worker : *lost) {
        auto it = frozen.find(worker.id());
        if (it == frozen.end() || !seen.insert(worker.id()).second) continue;
        seconds.push_back(absl::ToDoubleSeconds(now - it->second));
      }
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return seconds;
}

void ReadCoordinatorMetrics(const CoordinatorProcess& coordinator, LoadResult* result) {
  auto metrics = coordinator.ScrapeMetrics();
  if (!metrics.ok()) return;
  const std::string name = "shardwise_coordinator_worker_message_seconds";
  for (auto [kind, latency] : {std::pair<const char*, Latency*>{"heartbeat", &result->heartbeat},
                               {"report", &result->report}}) {
    const std::string labels = absl::StrCat("kind=\"", kind, "\"");
    latency->p50 = HistogramQuantile(*metrics, name, labels, 0.5);
    latency->p99 = HistogramQuantile(*metrics, name, labels, 0.99);
    latency->max = HistogramMaxBound(*metrics, name, labels);
    latency->count = static_cast<int64_t>((*metrics)[absl::StrCat(name, "_count{", labels, "}")]);
  }
  for (const auto& [series, value] : *metrics) {
    if (absl::StartsWith(series, "shardwise_coordinator_failure_detections_total")) {
      result->failure_detections += value;
    }
  }
}

// The load phase: `jobs` jobs submitted at once and watched to their ends, while a
// client lists and gets jobs; the coordinator's threads, memory and CPU meanwhile.
absl::Status RunLoadPhase(const LoadOptions& options, const CoordinatorProcess& coordinator,
                          Client& client, v1::JobService::Stub* job_stub, LoadResult* result) {
  PeakSampler peak(&coordinator);
  const double cpu_before = coordinator.Stats().value_or(ProcessStats()).cpu_seconds;
  const absl::Time load_start = absl::Now();
  Poller poller(&client);
  std::vector<std::unique_ptr<JobWatch>> watches;
  std::vector<double> submits;
  for (int j = 0; j < options.jobs; ++j) {
    const absl::Time submitted = absl::Now();
    auto job_id = client.Submit(LoadJobSpec(options, absl::StrCat("load-", j)));
    if (!job_id.ok()) return job_id.status();
    submits.push_back(absl::ToDoubleSeconds(absl::Now() - submitted));
    watches.push_back(std::make_unique<JobWatch>(job_stub, *job_id, submitted));
  }
  const absl::Time deadline = load_start + options.max_duration;
  std::vector<double> running;
  for (auto& watch : watches) {
    if (!watch->WaitDone(deadline)) watch->Cancel();
    watch->WaitDone(absl::InfiniteFuture());
    if (auto seconds = watch->running()) {
      running.push_back(*seconds);
      ++result->jobs_running;
    }
    if (watch->succeeded()) ++result->jobs_succeeded;
  }
  result->load_seconds = absl::ToDoubleSeconds(absl::Now() - load_start);
  poller.Stop();
  peak.Stop();
  const double cpu_after = coordinator.Stats().value_or(ProcessStats()).cpu_seconds;
  result->cpu_percent = 100 * (cpu_after - cpu_before) / std::max(1e-9, result->load_seconds);
  result->threads_peak = peak.threads;
  result->rss_peak_bytes = peak.rss;
  result->queued_submit_to_running = Summarize(running);
  result->submit = Summarize(submits);
  result->list_jobs = Summarize(poller.list_seconds);
  result->get_job = Summarize(poller.get_seconds);
  return absl::OkStatus();
}

// The client flood, with the coordinator's threads and memory at their peak meanwhile.
void RunFlood(const LoadOptions& options, const CoordinatorProcess& coordinator,
              LoadResult* result) {
  PeakSampler peak(&coordinator);
  FloodOptions flood;
  flood.clients = options.clients;
  flood.rounds = options.client_rounds;
  flood.spec = LoadJobSpec(options, "flood");
  result->flood = RunClientFlood(coordinator.address(), flood);
  peak.Stop();
  result->flood_threads_peak = peak.threads;
  result->flood_rss_peak_bytes = peak.rss;
}

}  // namespace

absl::StatusOr<LoadResult> RunLoad(const LoadOptions& options) {
  auto coordinator = CoordinatorProcess::Start(
      options.coordinator_binary, options.dir,
      {absl::StrCat("--heartbeat_interval_ms=",
                    absl::ToInt64Milliseconds(options.sim.heartbeat_interval)),
       absl::StrCat("--heartbeat_timeout_ms=",
                    absl::ToInt64Milliseconds(options.heartbeat_timeout)),
       absl::StrCat("--max_workers=", options.workers + 100), "--check_paths=false"});
  if (!coordinator.ok()) return coordinator.status();
  LoadResult result;
  SimCounters counters;
  Client client((*coordinator)->address());
  auto job_stub = v1::JobService::NewStub(
      grpc::CreateChannel((*coordinator)->address(), grpc::InsecureChannelCredentials()));

  const absl::Time connect_start = absl::Now();
  auto fleet = std::make_unique<Fleet>((*coordinator)->address(), options, &counters);
  fleet->Start();
  if (absl::Status idle = WaitForIdleWorkers(client, options.workers, counters); !idle.ok()) {
    return idle;
  }
  result.connect_seconds = absl::ToDoubleSeconds(absl::Now() - connect_start);
  if (auto stats = (*coordinator)->Stats(); stats.ok()) {
    result.threads_idle = stats->threads;
    result.rss_idle_bytes = stats->rss_bytes;
  }

  auto probe = Probe(options, client, job_stub.get());
  if (!probe.ok()) return probe.status();
  result.idle_submit_to_running = Summarize(*probe);

  RETURN_IF_ERROR(RunLoadPhase(options, **coordinator, client, job_stub.get(), &result));
  if (options.clients > 0) RunFlood(options, **coordinator, &result);

  // Sessions that ended during the load (the frozen workers' are ended on purpose next).
  result.sessions_ended = counters.sessions_ended.load();
  result.first_session_end = counters.FirstSessionEnd();
  result.detection = Summarize(
      MeasureDetection(client, fleet->Freeze(options.frozen_workers), options.heartbeat_timeout));
  ReadCoordinatorMetrics(**coordinator, &result);
  if (auto lost = client.ListWorkers({.states = {v1::LOST}}); lost.ok()) {
    result.workers_lost = static_cast<int>(lost->size());
  }
  result.heartbeats_sent = counters.heartbeats.load();
  result.reports_sent = counters.reports.load();
  fleet.reset();
  return result;
}

std::string FormatLoadResult(const LoadOptions& options, const LoadResult& result) {
  auto ms = [](const Latency& l) {
    return absl::StrFormat("p50 %8.3f  p99 %8.3f  max %8.3f ms  (%d)", 1e3 * l.p50, 1e3 * l.p99,
                           1e3 * l.max, l.count);
  };
  auto s = [](const Latency& l) {
    return absl::StrFormat("p50 %8.3f  p99 %8.3f  max %8.3f s   (%d)", l.p50, l.p99, l.max,
                           l.count);
  };
  std::string out =
      absl::StrFormat("workers %d, jobs %d (world %d, %d steps of %s), heartbeat every %s\n",
                      options.workers, options.jobs, options.world_size, options.job_steps,
                      absl::FormatDuration(options.sim.step_time),
                      absl::FormatDuration(options.sim.heartbeat_interval));
  absl::StrAppend(
      &out, absl::StrFormat("  connect (all IDLE)          %.2f s\n", result.connect_seconds));
  absl::StrAppend(&out, "  heartbeat handling          ", ms(result.heartbeat), "\n");
  absl::StrAppend(&out, "  report handling             ", ms(result.report), "\n");
  absl::StrAppend(&out, "  submit-to-RUNNING, idle     ", s(result.idle_submit_to_running), "\n");
  absl::StrAppend(&out, "  submit-to-RUNNING, queued   ", s(result.queued_submit_to_running), "\n");
  absl::StrAppend(&out, "  SubmitJob call              ", ms(result.submit), "\n");
  absl::StrAppend(&out, "  get jobs (every page)       ", ms(result.list_jobs), "\n");
  absl::StrAppend(&out, "  get one job                 ", ms(result.get_job), "\n");
  absl::StrAppend(&out, "  frozen worker to LOST       ", s(result.detection), "  (timeout ",
                  absl::FormatDuration(options.heartbeat_timeout), ")\n");
  absl::StrAppend(
      &out, absl::StrFormat(
                "  load phase %.1f s: %d/%d jobs RUNNING, %d SUCCEEDED\n"
                "  coordinator: threads %d idle, %d peak; RSS %.1f MiB idle, %.1f MiB "
                "peak; CPU %.0f%% of a core\n"
                "  failures: %.0f detections, %d workers LOST (%d frozen on purpose), %d "
                "sessions ended early\n",
                result.load_seconds, result.jobs_running, options.jobs, result.jobs_succeeded,
                result.threads_idle, result.threads_peak, result.rss_idle_bytes / 1048576.0,
                result.rss_peak_bytes / 1048576.0, result.cpu_percent, result.failure_detections,
                result.workers_lost, options.frozen_workers, result.sessions_ended));
  if (result.sessions_ended > 0) {
    absl::StrAppend(&out, "    first ended: ", result.first_session_end, "\n");
  }
  if (options.clients > 0) {
    const FloodResult& f = result.flood;
    absl::StrAppend(
        &out, absl::StrFormat("  client flood: %d clients x %d rounds, %.1f s, %d calls, "
                              "%d failed%s\n",
                              options.clients, options.client_rounds, f.seconds, f.calls, f.failed,
                              f.failed > 0 ? " (" + f.first_failure + ")" : ""));
    absl::StrAppend(&out, "    submit                    ", ms(f.submit), "\n");
    absl::StrAppend(&out, "    get                       ", ms(f.get), "\n");
    absl::StrAppend(&out, "    list (one page of 100)    ", ms(f.list), "\n");
    absl::StrAppend(&out, "    cancel                    ", ms(f.cancel), "\n");
    absl::StrAppend(&out, "    watch to the end          ", ms(f.watch), "\n");
    absl::StrAppend(
        &out, absl::StrFormat("    coordinator: threads %d peak, RSS %.1f MiB peak\n",
                              result.flood_threads_peak, result.flood_rss_peak_bytes / 1048576.0));
  }
  return out;
}

std::string MarkdownRow(const LoadOptions& options, const LoadResult& result) {
  const auto& r = result;
  return absl::StrFormat(
      "| %d | %d (%d) | %.3f / %.3f / %.3f | %.3f / %.3f / %.3f | %.3f / %.3f | %.3f / %.3f | "
      "%.2f / %.2f | %d / %d | %.1f / %.1f | %.0f | %.2f / %.2f | %d of %d / %d |\n",
      options.workers, options.jobs, options.world_size, 1e3 * r.heartbeat.p50,
      1e3 * r.heartbeat.p99, 1e3 * r.heartbeat.max, 1e3 * r.report.p50, 1e3 * r.report.p99,
      1e3 * r.report.max, r.idle_submit_to_running.p50, r.idle_submit_to_running.p99,
      r.queued_submit_to_running.p50, r.queued_submit_to_running.p99, 1e3 * r.list_jobs.p50,
      1e3 * r.list_jobs.p99, r.threads_idle, r.threads_peak, r.rss_idle_bytes / 1048576.0,
      r.rss_peak_bytes / 1048576.0, r.cpu_percent, r.detection.p50, r.detection.max,
      static_cast<int>(r.failure_detections), options.frozen_workers, r.sessions_ended);
}

std::string FloodMarkdownRow(const LoadOptions& options, const LoadResult& result) {
  const FloodResult& f = result.flood;
  auto ms = [](const Latency& l) {
    return absl::StrFormat("%.1f / %.1f", 1e3 * l.p50, 1e3 * l.p99);
  };
  return absl::StrFormat("| %d x %d | %d | %d | %d | %s | %s | %s | %s | %s | %d | %.1f |\n",
                         options.clients, options.client_rounds, options.workers, f.calls, f.failed,
                         ms(f.submit), ms(f.get), ms(f.list), ms(f.cancel), ms(f.watch),
                         result.flood_threads_peak, result.flood_rss_peak_bytes / 1048576.0);
}

}  // namespace shardwise::load
