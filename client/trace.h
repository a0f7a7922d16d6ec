#ifndef SHARDWISE_CLIENT_TRACE_H_
#define SHARDWISE_CLIENT_TRACE_H_

// A job's timeline as a Chrome trace (the JSON "Trace Event Format", which Perfetto and
// chrome://tracing open): one process per rank, named "rank R (worker W)", with a thread
// per lane (training, the communication threads, and on a GPU its streams: what the
// device ran of each span); each span is a complete ("X") event on its thread, so spans
// nest by time within a thread as they did on the rank.

#include <string>

#include "proto/job.pb.h"

namespace shardwise {

std::string ChromeTraceJson(const v1::Timeline& timeline);

}  // namespace shardwise

#endif  // SHARDWISE_CLIENT_TRACE_H_
