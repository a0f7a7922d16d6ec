#include "contracts/job_spec_io.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/util/json_util.h"
#include "yaml-cpp/eventhandler.h"
#include "yaml-cpp/parser.h"
#include "yaml-cpp/yaml.h"

namespace shardwise {
namespace {

void AppendJsonString(const std::string& value, std::string* out) {
  out->push_back('"');
  for (unsigned char c : value) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\r':
        *out += "\\r";
        break;
      default:
        if (c < 0x20) {
          absl::StrAppend(out, "\\u00", absl::Hex(c, absl::kZeroPad2));
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

// Whether `s` is a number as JSON writes one: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
bool IsJsonNumber(absl::string_view s) {
  size_t i = 0;
  const auto digits = [&] {
    const size_t start = i;
    while (i < s.size() && absl::ascii_isdigit(static_cast<unsigned char>(s[i]))) ++i;
    return i - start;
  };
  if (i < s.size() && s[i] == '-') ++i;
  const size_t start = i;
  const size_t integer = digits();
  if (integer == 0 || (integer > 1 && s[start] == '0')) return false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (digits() == 0) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

// A plain YAML scalar that reads as a number, written as JSON writes it: YAML's ".5",
// "+10", "007" and "1." are 0.5, 10, 7 and 1.0, which protobuf's JSON parser would refuse
// as they stand. nullopt when it is not a number (it stays a string).
std::optional<std::string> AsJsonNumber(const std::string& value) {
  if (IsJsonNumber(value)) return value;  // as written: an int64 keeps every digit
  std::istringstream in(value);
  double parsed;
  in >> parsed;
  if (value.empty() || !in.eof() || in.fail()) return std::nullopt;
  std::string text = value;
  std::string sign;
  if (text[0] == '+' || text[0] == '-') {
    if (text[0] == '-') sign = "-";
    text.erase(0, 1);
  }
  size_t integer = 0;
  while (integer < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[integer]))) {
    ++integer;
  }
  std::string whole = text.substr(0, integer);
  whole.erase(0, std::min(whole.find_first_not_of('0'), whole.empty() ? 0 : whole.size() - 1));
  if (whole.empty()) whole = "0";
  std::string rest = text.substr(integer);
  if (!rest.empty() && rest[0] == '.' &&
      (rest.size() == 1 || !absl::ascii_isdigit(static_cast<unsigned char>(rest[1])))) {
    rest.insert(1, "0");
  }
  const std::string json = sign + whole + rest;
  if (!IsJsonNumber(json)) return std::nullopt;
  return json;
}

// A job spec is a few KiB: these bound what a careless or hostile document can cost (a
// few aliases can make a small YAML document expand exponentially).
constexpr size_t kMaxSpecBytes = size_t{1} << 20;
constexpr size_t kMaxJsonBytes = size_t{4} << 20;
constexpr int kMaxDepth = 64;

// The protobuf field a JSON key names: lowerCamelCase and snake_case name the same one.
std::string FieldKey(const std::string& key) {
  std::string field;
  for (char c : key) {
    if (c >= 'A' && c <= 'Z') {
      field += '_';
      field += static_cast<char>(c - 'A' + 'a');
    } else {
      field += c;
    }
  }
  return field;
}

// YAML -> JSON text. Plain (unquoted) scalars that read as numbers, booleans or null keep
// those types, since protobuf's JSON parser wants `true` for a bool, not "true"; quoted
// scalars stay strings. Refuses a key given twice, nesting deeper than kMaxDepth, and
// output beyond kMaxJsonBytes.
absl::Status YamlToJson(const YAML::Node& node, int depth, std::string* out) {
  if (depth >= kMaxDepth) {  // the document's root is level 1, at depth 0
    return absl::InvalidArgumentError(absl::StrCat("job spec line ", node.Mark().line + 1,
                                                   ": nested deeper than ", kMaxDepth, " levels"));
  }
  if (out->size() > kMaxJsonBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job spec expands to more than ", kMaxJsonBytes >> 20, " MiB (aliases repeated?)"));
  }
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      *out += "null";
      return absl::OkStatus();
    case YAML::NodeType::Scalar: {
      const std::string& value = node.Scalar();
      const bool plain = node.Tag() == "?";
      const std::optional<std::string> number =
          plain ? AsJsonNumber(value) : std::optional<std::string>();
      if (plain && (value == "true" || value == "false")) {
        *out += value;  // the same in JSON
      } else if (number.has_value()) {
        *out += *number;
      } else if (plain && (value == "null" || value == "~")) {
        *out += "null";
      } else {
        AppendJsonString(value, out);
      }
      return absl::OkStatus();
    }
    case YAML::NodeType::Sequence: {
      out->push_back('[');
      for (size_t i = 0; i < node.size(); ++i) {
        if (i > 0) out->push_back(',');
        absl::Status status = YamlToJson(node[i], depth + 1, out);
        if (!status.ok()) return status;
      }
      out->push_back(']');
      return absl::OkStatus();
    }
    case YAML::NodeType::Map: {
      out->push_back('{');
      bool first = true;
      std::set<std::string> fields;
      for (const auto& entry : node) {
        if (!entry.first.IsScalar()) {
          return absl::InvalidArgumentError(absl::StrCat("job spec line ",
                                                         entry.first.Mark().line + 1,
                                                         ": a mapping key must be a plain name"));
        }
        const std::string& key = entry.first.Scalar();
        if (!fields.insert(FieldKey(key)).second) {
          return absl::InvalidArgumentError(
              absl::StrCat("job spec line ", entry.first.Mark().line + 1, ": field '", key,
                           "' is given twice in the same mapping"));
        }
        if (!first) out->push_back(',');
        first = false;
        AppendJsonString(key, out);
        out->push_back(':');
        absl::Status status = YamlToJson(entry.second, depth + 1, out);
        if (!status.ok()) return status;
      }
      out->push_back('}');
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unhandled YAML node type");
}

// Reads YAML events and drops them: HasSecondDocument needs only to count documents.
class IgnoredEvents final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// Whether `text` holds a document after its first. Two documents are read at most:
// yaml-cpp's LoadAll never ends on some malformed streams (a lone "," makes a document
// that consumes nothing, again and again).
bool HasSecondDocument(const std::string& text) {
  std::istringstream stream(text);
  YAML::Parser parser(stream);
  IgnoredEvents ignored;
  return parser.HandleNextDocument(ignored) && parser.HandleNextDocument(ignored);
}

}  // namespace

absl::StatusOr<v1::JobSpec> ParseJobSpec(const std::string& text) {
  if (text.size() > kMaxSpecBytes) {
    return absl::InvalidArgumentError(absl::StrCat("job spec is ", text.size(), " bytes; at most ",
                                                   kMaxSpecBytes, " are allowed"));
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
    // A second document (after `---`) would be ignored: a spec edited below one would
    // submit the job above it.
    if (HasSecondDocument(text)) {
      return absl::InvalidArgumentError(
          "job spec holds more than one YAML document (separated by ---); a spec is one");
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("job spec is not valid YAML or JSON: ", e.what()));
  }
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        "job spec must be a mapping of fields (see docs/job-spec.md)");
  }
  std::string json;
  absl::Status status = YamlToJson(root, 0, &json);
  if (!status.ok()) return status;

  v1::JobSpec spec;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto parsed = google::protobuf::util::JsonStringToMessage(json, &spec, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("job spec: ", parsed.message().as_string()));
  }
  return spec;
}

absl::StatusOr<v1::JobSpec> ReadJobSpecFile(const std::string& path) {
  // A regular file of bounded size: a FIFO or a device would block or never end.
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (!std::filesystem::is_regular_file(status)) {
    const std::string why = !std::filesystem::exists(status) ? "no such file"
                            : error                          ? error.message()
                                                             : "not a regular file";
    return absl::NotFoundError(absl::StrCat("cannot read job spec file '", path, "': ", why));
  }
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (error || size > kMaxSpecBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": job spec is ", size, " bytes; at most ",
                                                   kMaxSpecBytes, " are allowed"));
  }
  std::ifstream file(path);
  if (!file.is_open()) {
    return absl::NotFoundError(
        absl::StrCat("cannot read job spec file '", path, "': ", std::strerror(errno)));
  }
  std::stringstream text;
  text << file.rdbuf();
  auto spec = ParseJobSpec(text.str());
  if (!spec.ok()) {
    return absl::Status(spec.status().code(), absl::StrCat(path, ": ", spec.status().message()));
  }
  return spec;
}

std::string JobSpecToJson(const v1::JobSpec& spec) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(spec, &json, options);
  return json;
}

}  // namespace shardwise
