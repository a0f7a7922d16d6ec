#include "tokenizer/sentencepiece_api.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <fstream>
#include <unordered_map>

namespace shardwise {
namespace tokenizer {
namespace spm {

namespace {

// Protobuf's wire format, as much as the edit below needs.
bool ReadVarint(const std::string& bytes, size_t* pos, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && *pos < bytes.size(); shift += 7) {
    const auto byte = static_cast<unsigned char>(bytes[(*pos)++]);
    *value |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

void AppendVarint(uint64_t value, std::string* out) {
  do {
    out->push_back(static_cast<char>((value & 0x7F) | (value > 0x7F ? 0x80 : 0)));
    value >>= 7;
  } while (value != 0);
}

// Each field of a message: its number, and where its tag and its payload lie. False when
// the bytes are not a message.
struct Field {
  uint64_t number;
  size_t start, payload, end;
};
bool Fields(const std::string& bytes, std::vector<Field>* fields) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    Field field{0, pos, 0, 0};
    uint64_t tag = 0, length = 0;
    if (!ReadVarint(bytes, &pos, &tag)) return false;
    field.number = tag >> 3;
    field.payload = pos;
    switch (tag & 7) {
      case 0:
        if (!ReadVarint(bytes, &pos, &length)) return false;
        break;
      case 1:
        pos += 8;
        break;
      case 2:
        if (!ReadVarint(bytes, &pos, &length) || length > bytes.size() - pos) return false;
        field.payload = pos;
        pos += length;
        break;
      case 5:
        pos += 4;
        break;
      default:
        return false;
    }
    if (pos > bytes.size()) return false;
    field.end = pos;
    fields->push_back(field);
  }
  return true;
}

// Debian's libsentencepiece carries its own copy of protobuf (whose symbols clash with
// the system's, so no Shardwise program links both) and ships no header for its model:
// the model is edited on the wire. ModelProto's field 3 is its NormalizerSpec, whose
// field 3 is add_dummy_prefix; this drops that field and appends it as false. Bytes that
// do not parse are returned as they are (the library then refuses them).
std::string WithoutDummyPrefixIn(const std::string& normalizer) {
  std::vector<Field> fields;
  if (!Fields(normalizer, &fields)) return normalizer;
  std::string out;
  for (const Field& field : fields) {
    if (field.number != 3) out.append(normalizer, field.start, field.end - field.start);
  }
  out += std::string("\x18\x00", 2);  // field 3, varint: false
  return out;
}

}  // namespace

std::string WithoutDummyPrefix(const std::string& model) {
  std::vector<Field> fields;
  if (!Fields(model, &fields)) return model;
  std::string out;
  bool edited = false;
  for (const Field& field : fields) {
    if (field.number != 3 || edited) {
      out.append(model, field.start, field.end - field.start);
      continue;
    }
    const std::string normalizer =
        WithoutDummyPrefixIn(model.substr(field.payload, field.end - field.payload));
    out.push_back(0x1A);  // field 3, length-delimited
    AppendVarint(normalizer.size(), &out);
    out += normalizer;
    edited = true;
  }
  if (!edited) out += std::string("\x1a\x02\x18\x00", 4);
  return out;
}

// Two processors of one model: as it is, and with its dummy prefix off (for the pieces of
// a document after its first).
struct Model::Processors {
  sentencepiece::SentencePieceProcessor as_is, continuing;
};

Model::Model(std::unique_ptr<Processors> processors) : processors_(std::move(processors)) {}
Model::~Model() = default;

std::unique_ptr<Model> Model::Load(const std::string& serialized, std::string* error) {
  auto processors = std::make_unique<Processors>();
  auto status = processors->as_is.LoadFromSerializedProto(serialized);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  status = processors->continuing.LoadFromSerializedProto(WithoutDummyPrefix(serialized));
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return std::unique_ptr<Model>(new Model(std::move(processors)));
}

void Model::Encode(std::string_view text, bool dummy_prefix, std::vector<int32_t>* ids) const {
  const auto& processor = dummy_prefix ? processors_->as_is : processors_->continuing;
  std::vector<int> piece_ids;
  (void)processor.Encode(text, &piece_ids);  // fails only when no model is loaded
  ids->insert(ids->end(), piece_ids.begin(), piece_ids.end());
}

std::string Model::Decode(const std::vector<int32_t>& ids) const {
  const int size = vocab_size();
  const auto outside = [size](int32_t id) { return id < 0 || id >= size; };
  std::string text;
  if (std::none_of(ids.begin(), ids.end(), outside)) {
    (void)processors_->as_is.Decode(std::vector<int>(ids.begin(), ids.end()), &text);
    return text;
  }
  // The library refuses the whole list for one id outside the vocabulary (a padded
  // model's sample): each is shown as <id>, as the other tokenizers show it, and each
  // stretch of ids inside as the text it adds after the id before it (a piece's leading
  // space is dropped only at the text's start; after an <id> first, an ordinary piece
  // stands for what came before), so the whole decodes in linear time.
  std::vector<int> stretch;
  int before = -1;  // the last id inside the vocabulary so far
  const auto flush = [&] {
    if (stretch.empty()) return;
    std::string context, now;
    if (before < 0 && !text.empty()) before = OrdinaryPiece();
    if (before >= 0) {
      (void)processors_->as_is.Decode(std::vector<int>{before}, &context);
      stretch.insert(stretch.begin(), before);
    }
    (void)processors_->as_is.Decode(stretch, &now);
    const size_t same = static_cast<size_t>(
        std::mismatch(context.begin(), context.end(), now.begin(), now.end()).first -
        context.begin());
    text += now.substr(same);
    before = stretch.back();
    stretch.clear();
  };
  for (int32_t id : ids) {
    if (!outside(id)) {
      stretch.push_back(id);
      continue;
    }
    flush();
    text += "<" + std::to_string(id) + ">";
  }
  flush();
  return text;
}

int Model::OrdinaryPiece() const {
  const sentencepiece::SentencePieceProcessor& processor = processors_->as_is;
  for (int id = 0; id < processor.GetPieceSize(); ++id) {
    if (!processor.IsControl(id) && !processor.IsUnknown(id) && !processor.IsByte(id) &&
        !processor.IsUnused(id)) {
      return id;
    }
  }
  return -1;
}

int Model::vocab_size() const { return processors_->as_is.GetPieceSize(); }
int Model::bos_id() const { return processors_->as_is.bos_id(); }
int Model::eos_id() const { return processors_->as_is.eos_id(); }
int Model::unk_id() const { return processors_->as_is.unk_id(); }

bool Model::IsSpecial(int id) const {
  if (id < 0 || id >= vocab_size()) return false;
  return processors_->as_is.IsControl(id) || processors_->as_is.IsUnknown(id);
}

std::string Model::IdToPiece(int id) const {
  if (id < 0 || id >= vocab_size()) return "";
  return processors_->as_is.IdToPiece(id);
}

namespace {

// The trainer's sentences: the lines of the input files, in order.
class LinesOf : public sentencepiece::SentenceIterator {
 public:
  explicit LinesOf(std::vector<std::string> paths) : paths_(std::move(paths)) { Next(); }
  bool done() const override { return done_; }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return status_; }
  void Next() override {
    while (true) {
      if (in_.is_open() && std::getline(in_, line_)) return;
      if (next_path_ == paths_.size()) {
        done_ = true;
        return;
      }
      in_ = std::ifstream(paths_[next_path_]);
      if (!in_) {
        status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kNotFound,
                                              paths_[next_path_] + ": cannot be read");
        done_ = true;
        return;
      }
      ++next_path_;
    }
  }

 private:
  std::vector<std::string> paths_;
  size_t next_path_ = 0;
  std::ifstream in_;
  std::string line_;
  bool done_ = false;
  sentencepiece::util::Status status_;
};

}  // namespace

std::string Train(const std::map<std::string, std::string>& options,
                  const std::vector<std::string>& input_paths, std::string* serialized_model) {
  LinesOf lines(input_paths);
  std::unordered_map<std::string, std::string> kwargs(options.begin(), options.end());
  auto status = sentencepiece::SentencePieceTrainer::Train(kwargs, &lines, serialized_model);
  if (!lines.status().ok()) return lines.status().ToString();
  return status.ok() ? "" : status.ToString();
}

}  // namespace spm
}  // namespace tokenizer
}  // namespace shardwise
