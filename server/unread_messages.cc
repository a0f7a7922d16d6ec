#include "server/unread_messages.h"

namespace shardwise {

void UnreadMessages::Written(uint64_t written, absl::Time now) {
  if (written <= written_) return;
  written_ = written;
  if (written_ <= read_) return;  // a heartbeat overtook the poll that saw the write
  if (unread_.size() >= kMaxEntries) {
    unread_.back() = {written_, now};
  } else {
    unread_.emplace_back(written_, now);
  }
}

void UnreadMessages::Read(uint64_t read) {
  if (read <= read_) return;
  read_ = read;
  while (!unread_.empty() && unread_.front().first <= read_) unread_.pop_front();
}

std::optional<absl::Time> UnreadMessages::OldestUnreadSince() const {
  if (unread_.empty()) return std::nullopt;
  return unread_.front().second;
}

}  // namespace shardwise
