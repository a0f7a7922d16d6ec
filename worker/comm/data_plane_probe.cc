#include "worker/comm/data_plane_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/host_port.h"

namespace shardwise {
namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { freeaddrinfo(info); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

// `host`:`port` resolved for a TCP socket; `passive` for one to listen on.
absl::StatusOr<AddrInfoPtr> Resolve(const std::string& host, const std::string& port,
                                    bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* found = nullptr;
  const int error = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (error != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", host, ":", port, ": ", gai_strerror(error)));
  }
  return AddrInfoPtr(found);
}

// A non-blocking connect to `address` under way: its socket (-1 when it could not start,
// with `error` set), or connected already.
struct Attempt {
  int fd = -1;
  bool connected = false;
  std::string error;
};

Attempt StartConnect(const std::string& address) {
  Attempt attempt;
  const std::optional<HostPort> split = SplitHostPort(address);
  if (!split.has_value() || split->port == 0) {
    attempt.error = absl::StrCat("no probe address (\"", address, "\")");
    return attempt;
  }
  auto resolved = Resolve(split->host, absl::StrCat(split->port), /*passive=*/false);
  if (!resolved.ok()) {
    attempt.error = std::string(resolved.status().message());
    return attempt;
  }
  const addrinfo* info = resolved->get();
  attempt.fd =
      socket(info->ai_family, info->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, info->ai_protocol);
  if (attempt.fd < 0) {
    attempt.error = absl::StrCat("socket: ", std::strerror(errno));
    return attempt;
  }
  if (connect(attempt.fd, info->ai_addr, info->ai_addrlen) == 0) {
    attempt.connected = true;
  } else if (errno != EINPROGRESS) {
    attempt.error = std::strerror(errno);
    close(attempt.fd);
    attempt.fd = -1;
  }
  return attempt;
}

// The outcome of a connect that poll() says is done.
std::string ConnectError(int fd) {
  int error = 0;
  socklen_t length = sizeof(error);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) return std::strerror(errno);
  return error == 0 ? "" : std::strerror(error);
}

// A socket listening on `host` at a port the kernel picks, and the address it is bound
// to; UNAVAILABLE naming the host when there is none.
absl::StatusOr<int> Listen(const std::string& host, sockaddr_storage* bound, socklen_t* length) {
  auto resolved = Resolve(host, "0", /*passive=*/true);
  if (!resolved.ok()) return resolved.status();
  const addrinfo* info = resolved->get();
  const int fd = socket(info->ai_family, info->ai_socktype | SOCK_CLOEXEC, info->ai_protocol);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  *length = sizeof(*bound);
  if (bind(fd, info->ai_addr, info->ai_addrlen) != 0 || listen(fd, 128) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(bound), length) != 0) {
    const std::string error = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ": ", error));
  }
  return fd;
}

}  // namespace

absl::Status DataPlaneProbeListener::CheckListenable(const std::string& host) {
  sockaddr_storage bound{};
  socklen_t length = 0;
  const absl::StatusOr<int> fd = Listen(host, &bound, &length);
  if (!fd.ok()) return fd.status();
  close(*fd);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DataPlaneProbeListener>> DataPlaneProbeListener::Start(
    const std::string& host) {
  sockaddr_storage bound{};
  socklen_t length = 0;
  const absl::StatusOr<int> listening = Listen(host, &bound, &length);
  if (!listening.ok()) {
    return absl::UnavailableError(
        absl::StrCat("data-plane probes: ", listening.status().message()));
  }
  const int fd = *listening;
  const int port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  // The address bound, in numbers, as Gloo advertises its pairs': peers need not resolve
  // this host's name (one only its own /etc/hosts knows, or one resolving in another
  // order elsewhere), and the coordinator tells ranks on one host by it.
  char numeric[NI_MAXHOST];
  const bool named = getnameinfo(reinterpret_cast<const sockaddr*>(&bound), length, numeric,
                                 sizeof(numeric), nullptr, 0, NI_NUMERICHOST) == 0;
  return std::unique_ptr<DataPlaneProbeListener>(
      new DataPlaneProbeListener(fd, JoinHostPort(named ? numeric : host, port)));
}

DataPlaneProbeListener::DataPlaneProbeListener(int fd, std::string address)
    : fd_(fd), address_(std::move(address)), thread_([this] { AcceptUntilStopped(); }) {}

DataPlaneProbeListener::~DataPlaneProbeListener() {
  stop_ = true;
  thread_.join();
  close(fd_);
}

void DataPlaneProbeListener::AcceptUntilStopped() {
  pollfd waiting{fd_, POLLIN, 0};
  while (!stop_) {
    // Woken every 100 ms to see stop_: shutting down a listening socket does not wake
    // every kernel's poll.
    if (poll(&waiting, 1, 100) <= 0) continue;
    const int peer = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (peer >= 0) close(peer);
  }
}

std::vector<ProbeOutcome> ProbePeers(const std::vector<ProbeTarget>& targets,
                                     absl::Duration timeout) {
  std::vector<ProbeOutcome> outcomes(targets.size());
  std::vector<Attempt> attempts;
  attempts.reserve(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    outcomes[i].rank = targets[i].rank;
    attempts.push_back(StartConnect(targets[i].address));
    outcomes[i].reached = attempts.back().connected;
    outcomes[i].error = attempts.back().error;
  }
  const absl::Time deadline = Clock::Real().Now() + timeout;
  while (true) {
    std::vector<pollfd> pending;
    std::vector<size_t> index;
    for (size_t i = 0; i < attempts.size(); ++i) {
      if (attempts[i].fd >= 0 && !attempts[i].connected) {
        pending.push_back({attempts[i].fd, POLLOUT, 0});
        index.push_back(i);
      }
    }
    const int64_t left = absl::ToInt64Milliseconds(deadline - Clock::Real().Now());
    if (pending.empty() || left <= 0) break;
    if (poll(pending.data(), pending.size(), static_cast<int>(left)) < 0 && errno != EINTR) break;
    for (size_t k = 0; k < pending.size(); ++k) {
      if (pending[k].revents == 0) continue;
      Attempt& attempt = attempts[index[k]];
      outcomes[index[k]].error = ConnectError(attempt.fd);
      outcomes[index[k]].reached = outcomes[index[k]].error.empty();
      close(attempt.fd);
      attempt.fd = -1;
    }
  }
  for (size_t i = 0; i < attempts.size(); ++i) {
    if (attempts[i].fd < 0) continue;
    close(attempts[i].fd);
    if (!attempts[i].connected) {
      outcomes[i].error = absl::StrCat("timed out after ", absl::FormatDuration(timeout));
    }
  }
  return outcomes;
}

}  // namespace shardwise
