#ifndef SHARDWISE_WORKER_COMM_DATA_PLANE_PROBE_H_
#define SHARDWISE_WORKER_COMM_DATA_PLANE_PROBE_H_

// Which peers a worker can reach over the data plane. Gloo connects a rank to all of its
// peers at once and fails as a whole, so when an attempt's ranks reached the rendezvous
// but did not connect, its error cannot say whose port is blocked (a firewall, a wrong
// --data_address). Each worker daemon keeps a probe listener on its data-plane address
// for its whole life, and when the coordinator asks (DataPlaneProbe) it opens a TCP
// connection to each peer's listener: the peer no one reaches is the one to blame
// (server/data_plane_blame.h).

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace shardwise {

// A TCP listener that accepts connections and closes them at once: it only shows that
// its address can be reached.
class DataPlaneProbeListener {
 public:
  // Listens on `host` (an IPv4 or IPv6 literal or a name; the worker's --data_address) at
  // a port the kernel picks. UNAVAILABLE naming the host when it cannot.
  static absl::StatusOr<std::unique_ptr<DataPlaneProbeListener>> Start(const std::string& host);
  // Whether `host` resolves to an address this host can listen on (as Gloo's pairs will):
  // UNAVAILABLE naming the host and why not.
  static absl::Status CheckListenable(const std::string& host);
  ~DataPlaneProbeListener();
  DataPlaneProbeListener(const DataPlaneProbeListener&) = delete;
  DataPlaneProbeListener& operator=(const DataPlaneProbeListener&) = delete;

  // "address:port" ("[address]:port" for IPv6), the address bound in numbers (not the
  // name it was given), as peers connect to it.
  const std::string& address() const { return address_; }

 private:
  DataPlaneProbeListener(int fd, std::string address);
  void AcceptUntilStopped();

  const int fd_;
  const std::string address_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct ProbeTarget {
  int32_t rank = 0;
  std::string address;  // a DataPlaneProbeListener's
};

struct ProbeOutcome {
  int32_t rank = 0;
  bool reached = false;
  std::string error;  // why not: "connection refused", "timed out after 2s", ...
};

// Connects to every target at once and waits at most `timeout` for all of them; the
// outcomes are in the targets' order.
std::vector<ProbeOutcome> ProbePeers(const std::vector<ProbeTarget>& targets,
                                     absl::Duration timeout);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMM_DATA_PLANE_PROBE_H_
