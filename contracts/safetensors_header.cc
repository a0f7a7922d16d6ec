#include "contracts/safetensors_header.h"

#include <algorithm>
#include <limits>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/printable_text.h"
#include "nlohmann/json.hpp"

namespace shardwise {
namespace {

using Json = nlohmann::json;

// An entry as the header spells it, before it is checked against the data.
struct RawEntry {
  std::string dtype;
  std::vector<uint64_t> shape, offsets;
  bool has_dtype = false, has_shape = false, has_offsets = false;
};

// The JSON events of a header, taken in one of three places: the top object (depth 1: a
// tensor's name or "__metadata__"), inside an entry or the metadata (depth 2), inside a
// shape or data_offsets (depth 3). A key the format does not know, inside an entry, is
// skipped whole, as the reference implementation skips it.
class HeaderEvents final : public nlohmann::json_sax<Json> {
 public:
  bool null() override { return Scalar("null"); }
  bool boolean(bool value) override { return Scalar(value ? "true" : "false"); }
  bool number_integer(number_integer_t value) override { return Scalar(absl::StrCat(value)); }
  bool number_unsigned(number_unsigned_t value) override;
  bool number_float(number_float_t, const string_t& text) override { return Scalar(text); }
  bool string(string_t& value) override;
  bool binary(binary_t&) override { return Fail("holds binary data"); }
  bool start_object(std::size_t) override { return Open(/*object=*/true); }
  bool key(string_t& key) override;
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(/*object=*/false); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception&) override {
    return Fail(absl::StrCat("is not JSON (at byte ", position, ")"));
  }

  const absl::Status& status() const { return status_; }
  std::map<std::string, RawEntry>& entries() { return entries_; }
  std::map<std::string, std::string>& metadata() { return metadata_; }

 private:
  static constexpr int kMaxSkippedDepth = 16;

  bool Fail(const std::string& why) {
    if (status_.ok()) status_ = absl::InvalidArgumentError(absl::StrCat("its header ", why));
    return false;
  }
  // Where a value lands, for messages: "tensor 'NAME'" and its field.
  std::string Here() const {
    if (in_metadata_) {
      return field_.empty() ? "__metadata__" : absl::StrCat("__metadata__.", ShownValue(field_));
    }
    return absl::StrCat("tensor '", ShownValue(name_), "'", field_.empty() ? "" : " ",
                        ShownValue(field_));
  }
  bool Skipping() const { return skip_depth_ > 0; }
  bool Scalar(const std::string& text);
  bool Open(bool object);
  bool Close();

  absl::Status status_;
  int depth_ = 0;
  int skip_depth_ = 0;  // > 0 inside a value of a key the format does not know
  bool in_metadata_ = false;
  std::string name_, field_;
  RawEntry entry_;
  std::vector<uint64_t>* numbers_ = nullptr;  // the array being read, at depth 3
  std::map<std::string, RawEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

bool HeaderEvents::number_unsigned(number_unsigned_t value) {
  if (Skipping()) return true;
  if (depth_ == 3 && numbers_ != nullptr) {
    numbers_->push_back(value);
    return true;
  }
  return Scalar(absl::StrCat(value));
}

bool HeaderEvents::string(string_t& value) {
  if (Skipping()) return true;
  if (depth_ == 2 && in_metadata_) {
    metadata_[field_] = std::move(value);
    return true;
  }
  if (depth_ == 2 && field_ == "dtype") {
    entry_.dtype = std::move(value);
    entry_.has_dtype = true;
    return true;
  }
  return Scalar(absl::StrCat("\"", ShownValue(value), "\""));
}

// A value that is none of the above where it stands: out of place unless skipped.
bool HeaderEvents::Scalar(const std::string& text) {
  if (Skipping() || (depth_ == 2 && !in_metadata_ && field_ != "dtype" && field_ != "shape" &&
                     field_ != "data_offsets")) {
    return true;
  }
  if (depth_ == 0) return Fail("is not a JSON object");
  if (depth_ == 1) return Fail(absl::StrCat("has ", Here(), " ", text, ", not an object"));
  if (in_metadata_) return Fail(absl::StrCat("has ", Here(), " ", text, ", not a string"));
  if (depth_ == 2 && field_ == "dtype") {
    return Fail(absl::StrCat("has ", Here(), " ", text, ", not a string"));
  }
  return Fail(absl::StrCat("has ", Here(), " holding ", text,
                           depth_ == 2 ? ", not an array" : ", not an integer >= 0"));
}

bool HeaderEvents::key(string_t& key) {
  if (Skipping()) return true;
  if (depth_ == 1) {
    name_ = std::move(key);
    field_.clear();
    in_metadata_ = name_ == "__metadata__";
    if (!in_metadata_ && entries_.count(name_) != 0) {
      return Fail(absl::StrCat("names tensor '", ShownValue(name_), "' twice"));
    }
    if (!in_metadata_ && entries_.size() >= kMaxSafetensorsEntries) {
      return Fail(absl::StrCat("has more than ", kMaxSafetensorsEntries, " entries"));
    }
  } else {
    field_ = std::move(key);
  }
  return true;
}

bool HeaderEvents::Open(bool object) {
  const char* what = object ? "an object" : "an array";
  if (Skipping()) {
    if (++skip_depth_ > kMaxSkippedDepth) return Fail("is nested too deep");
    return true;
  }
  if (depth_ == 0 && !object) return Fail("is not a JSON object");
  if (depth_ == 1 && !object) return Fail(absl::StrCat("has ", Here(), " holding ", what));
  if (depth_ == 2) {
    if (in_metadata_)
      return Fail(absl::StrCat("has ", Here(), " holding ", what, ", not a string"));
    if (field_ == "shape" || field_ == "data_offsets") {
      if (object) return Fail(absl::StrCat("has ", Here(), " holding an object, not an array"));
      numbers_ = field_ == "shape" ? &entry_.shape : &entry_.offsets;
      numbers_->clear();
      (field_ == "shape" ? entry_.has_shape : entry_.has_offsets) = true;
    } else if (field_ == "dtype") {
      return Fail(absl::StrCat("has ", Here(), " holding ", what, ", not a string"));
    } else {
      skip_depth_ = 1;  // a key the format does not know: its value is skipped whole
      return true;
    }
  }
  if (depth_ == 3) return Fail(absl::StrCat("has ", Here(), " holding ", what));
  if (depth_ == 1) entry_ = RawEntry();
  ++depth_;
  return true;
}

bool HeaderEvents::Close() {
  if (Skipping()) {
    --skip_depth_;
    return true;
  }
  --depth_;
  if (depth_ == 2) numbers_ = nullptr;
  if (depth_ == 1 && !in_metadata_) entries_[name_] = std::move(entry_);
  if (depth_ == 1) field_.clear();
  return true;
}

// The entry checked against its dtype and the data; its offsets are checked together
// after.
absl::StatusOr<SafetensorsHeaderEntry> CheckEntry(const std::string& name, const RawEntry& raw,
                                                  uint64_t data_size,
                                                  int (*element_size)(const std::string&)) {
  const std::string tensor = absl::StrCat("tensor '", ShownValue(name), "'");
  if (!raw.has_dtype || !raw.has_shape || !raw.has_offsets) {
    return absl::InvalidArgumentError(absl::StrCat(tensor, " lacks ",
                                                   !raw.has_dtype   ? "dtype"
                                                   : !raw.has_shape ? "shape"
                                                                    : "data_offsets"));
  }
  SafetensorsHeaderEntry entry;
  entry.dtype = raw.dtype;
  const int element = element_size(raw.dtype);
  if (element == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(tensor, " has dtype \"", ShownValue(raw.dtype), "\""));
  }
  // Every partial product must fit int64_t (shapes are multiplied as int64_t later, in any
  // order, so [60000, 60000, 60000, 60000, 0] is refused although it holds nothing).
  uint64_t numel = 1, magnitude = 1;  // magnitude: the product with zeros taken as ones
  for (const uint64_t dim : raw.shape) {
    if (__builtin_mul_overflow(magnitude, std::max<uint64_t>(dim, 1), &magnitude) ||
        magnitude > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(
          absl::StrCat(tensor, " has a dimension of ", dim, " that does not fit the file"));
    }
    numel *= dim;
    entry.shape.push_back(static_cast<int64_t>(dim));
  }
  uint64_t bytes = 0;
  if (raw.offsets.size() != 2 || raw.offsets[0] > raw.offsets[1] || raw.offsets[1] > data_size ||
      __builtin_mul_overflow(numel, static_cast<uint64_t>(element), &bytes) ||
      raw.offsets[1] - raw.offsets[0] != bytes) {
    std::string offsets;
    for (const uint64_t o : raw.offsets) absl::StrAppend(&offsets, offsets.empty() ? "" : ", ", o);
    return absl::InvalidArgumentError(absl::StrCat(tensor, " has data_offsets [", offsets,
                                                   "] that do not fit its shape or the file"));
  }
  entry.begin = raw.offsets[0];
  entry.end = raw.offsets[1];
  return entry;
}

// The tensors' bytes tile the data: sorted by where they begin (then end: an empty tensor
// lies where the next one begins, as Hugging Face's writer puts it), each begins where the
// one before ended, from the first byte to the last.
absl::Status CheckTiling(const std::map<std::string, SafetensorsHeaderEntry>& tensors,
                         uint64_t data_size) {
  std::vector<std::tuple<uint64_t, uint64_t, const std::string*>> begins;
  begins.reserve(tensors.size());
  for (const auto& [name, entry] : tensors) begins.emplace_back(entry.begin, entry.end, &name);
  // By the name last, not by where it lies in memory: the order, and the error, repeat.
  std::sort(begins.begin(), begins.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a), *std::get<2>(a)) <
           std::tie(std::get<0>(b), std::get<1>(b), *std::get<2>(b));
  });
  uint64_t end = 0;
  for (const auto& [begin, unused_end, name] : begins) {
    if (begin != end) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", ShownValue(*name), "' begins at byte ", begin, " of the data, where ",
          begin < end ? "the tensor before it still lies" : "a gap follows the tensor before it",
          " (the tensors must lie back to back)"));
    }
    end = tensors.at(*name).end;
  }
  if (end != data_size) {
    return absl::InvalidArgumentError(absl::StrCat("the tensors end at byte ", end,
                                                   " of the data, and ", data_size - end,
                                                   " bytes follow them"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(absl::string_view json, uint64_t data_size,
                                                         int (*element_size)(const std::string&)) {
  if (json.empty() || json[0] != '{') {
    return absl::InvalidArgumentError("its header does not start with '{'");
  }
  HeaderEvents events;
  const bool parsed =
      Json::sax_parse(json.begin(), json.end(), &events, nlohmann::detail::input_format_t::json,
                      /*strict=*/true);
  if (!events.status().ok()) return events.status();
  if (!parsed) return absl::InvalidArgumentError("its header is not JSON");
  SafetensorsHeader header;
  header.metadata = std::move(events.metadata());
  for (const auto& [name, raw] : events.entries()) {
    auto entry = CheckEntry(name, raw, data_size, element_size);
    if (!entry.ok()) return entry.status();
    header.tensors[name] = std::move(*entry);
  }
  if (absl::Status tiled = CheckTiling(header.tensors, data_size); !tiled.ok()) return tiled;
  return header;
}

}  // namespace shardwise
