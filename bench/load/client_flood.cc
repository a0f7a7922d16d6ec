#include "bench/load/client_flood.h"

#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/client.h"

namespace shardwise::load {
namespace {

// One client's samples, per call kind, and its failures.
struct ClientSamples {
  std::vector<double> submit, get, list, cancel, watch;
  int64_t calls = 0, failed = 0;
  std::string first_failure;

  // Runs `call`, timing it into `samples`; false (and the failure kept) if it failed.
  bool Time(std::vector<double>& samples, const char* kind,
            const std::function<absl::Status()>& call) {
    ++calls;
    const absl::Time start = absl::Now();
    const absl::Status status = call();
    samples.push_back(absl::ToDoubleSeconds(absl::Now() - start));
    if (status.ok()) return true;
    ++failed;
    if (first_failure.empty()) first_failure = absl::StrCat(kind, ": ", status.ToString());
    return false;
  }
};

void RunClient(const std::string& address, const FloodOptions& options, int index,
               const absl::Notification& go, ClientSamples* out) {
  Client client(address);
  go.WaitForNotification();
  for (int round = 0; round < options.rounds; ++round) {
    v1::JobSpec spec = options.spec;
    spec.set_name(absl::StrCat("flood-", index, "-", round));
    std::string job_id;
    if (!out->Time(out->submit, "submit", [&] {
          auto submitted = client.Submit(spec);
          if (submitted.ok()) job_id = *submitted;
          return submitted.status();
        })) {
      continue;
    }
    out->Time(out->get, "get", [&] { return client.Get(job_id).status(); });
    out->Time(out->list, "list", [&] {
      Client::JobFilter filter;
      filter.limit = 100;
      return client.ListJobs(filter).status();
    });
    out->Time(out->cancel, "cancel", [&] { return client.Cancel(job_id).status(); });
    out->Time(out->watch, "watch",
              [&] { return client.Watch(job_id, [](const v1::Job&) {}).status(); });
  }
}

void Append(std::vector<double>& to, const std::vector<double>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

}  // namespace

FloodResult RunClientFlood(const std::string& address, const FloodOptions& options) {
  std::vector<ClientSamples> samples(options.clients);
  absl::Notification go;
  std::vector<std::thread> clients;
  clients.reserve(options.clients);
  for (int c = 0; c < options.clients; ++c) {
    clients.emplace_back(RunClient, address, std::cref(options), c, std::cref(go), &samples[c]);
  }
  const absl::Time start = absl::Now();
  go.Notify();
  for (std::thread& client : clients) client.join();
  FloodResult result;
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  ClientSamples all;
  for (const ClientSamples& s : samples) {
    Append(all.submit, s.submit);
    Append(all.get, s.get);
    Append(all.list, s.list);
    Append(all.cancel, s.cancel);
    Append(all.watch, s.watch);
    result.calls += s.calls;
    result.failed += s.failed;
    if (result.first_failure.empty()) result.first_failure = s.first_failure;
  }
  result.submit = Summarize(all.submit);
  result.get = Summarize(all.get);
  result.list = Summarize(all.list);
  result.cancel = Summarize(all.cancel);
  result.watch = Summarize(all.watch);
  return result;
}

}  // namespace shardwise::load
