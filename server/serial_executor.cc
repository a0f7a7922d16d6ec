#include "server/serial_executor.h"

#include <limits>
#include <utility>

namespace shardwise {

SerialExecutor::SerialExecutor()
    : pool_(/*threads=*/1, /*max_queued=*/std::numeric_limits<size_t>::max()) {}

void SerialExecutor::Post(std::function<void()> task) { pool_.TryPost(std::move(task)); }

void SerialExecutor::Shutdown() { pool_.Stop(); }

size_t SerialExecutor::queued() const { return pool_.queued(); }

}  // namespace shardwise
