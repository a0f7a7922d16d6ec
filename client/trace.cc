#include "client/trace.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace shardwise {
namespace {

// A JSON string literal (names here are plain ASCII; anything else is escaped).
std::string Quote(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      absl::StrAppend(&out, "\\", std::string(1, static_cast<char>(c)));
    } else if (c < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// The host threads' lanes, then the GPU streams' (worker/runtime/stream_clock.h).
std::string LaneName(int lane) {
  switch (lane) {
    case 0:
      return "training";
    case 1:
      return "communication: all-gathers";
    case 2:
      return "communication: reductions";
    case 10:
      return "GPU: compute stream";
    case 11:
      return "GPU: unshard stream";
    case 12:
      return "GPU: post-backward stream";
    case 13:
      return "GPU: all-reduce stream";
  }
  return absl::StrCat("lane ", lane);
}

}  // namespace

std::string ChromeTraceJson(const v1::Timeline& timeline) {
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  auto event = [&](const std::string& json) {
    absl::StrAppend(&out, first ? "  " : ",\n  ", json);
    first = false;
  };
  for (const v1::RankTimeline& rank : timeline.ranks()) {
    event(absl::StrCat(
        "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": ", rank.rank(),
        ", \"args\": {\"name\": ",
        Quote(absl::StrCat("rank ", rank.rank(), " (worker ", rank.worker_id(), ")")), "}}"));
    event(absl::StrCat("{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": ", rank.rank(),
                       ", \"args\": {\"sort_index\": ", rank.rank(), "}}"));
    std::set<int> lanes = {0, 1, 2};
    for (const v1::Span& span : rank.spans()) lanes.insert(span.lane());
    for (int lane : lanes) {
      event(absl::StrCat("{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": ", rank.rank(),
                         ", \"tid\": ", lane, ", \"args\": {\"name\": ", Quote(LaneName(lane)),
                         "}}"));
    }
    for (const v1::Span& span : rank.spans()) {
      std::string args;
      if (span.unit() >= 0) absl::StrAppend(&args, "\"unit\": ", span.unit());
      if (span.step() >= 0)
        absl::StrAppend(&args, args.empty() ? "" : ", ", "\"step\": ", span.step());
      const std::string name =
          span.unit() >= 0 ? absl::StrCat(span.name(), " unit ", span.unit()) : span.name();
      event(absl::StrCat("{\"name\": ", Quote(name), ", \"cat\": \"shardwise\", \"ph\": \"X\", ",
                         "\"ts\": ", span.start_us(), ", \"dur\": ", span.duration_us(),
                         ", \"pid\": ", rank.rank(), ", \"tid\": ", span.lane(), ", \"args\": {",
                         args, "}}"));
    }
  }
  absl::StrAppend(&out, "\n]}\n");
  return out;
}

}  // namespace shardwise
