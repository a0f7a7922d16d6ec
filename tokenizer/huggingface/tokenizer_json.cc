#include "tokenizer/huggingface/tokenizer_json.h"

#include "absl/strings/str_cat.h"
#include "common/printable_text.h"
#include "tokenizer/huggingface/json_fields.h"

namespace shardwise {
namespace tokenizer {
namespace hf {
namespace {

using Json = nlohmann::json;

// The document from nlohmann's SAX events, with model.vocab's members and model.merges'
// elements listed instead (ModelLists). Each open object or array is a frame; a value
// goes where the innermost frame says.
class Reader : public nlohmann::json_sax<Json> {
 public:
  // Fills `read`, which must outlive it.
  explicit Reader(TokenizerJson* read) : read_(*read) {}

  bool null() override { return Value(Json()); }
  bool boolean(bool value) override { return Value(Json(value)); }
  bool number_integer(number_integer_t value) override { return Value(Json(value)); }
  bool number_unsigned(number_unsigned_t value) override { return Value(Json(value)); }
  bool number_float(number_float_t value, const string_t&) override { return Value(Json(value)); }
  bool binary(binary_t&) override { return false; }  // not in JSON text
  bool string(string_t& value) override;
  bool key(string_t& key) override {
    frames_.back().key = std::move(key);
    return true;
  }
  bool start_object(std::size_t) override;
  bool end_object() override {
    frames_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override;
  bool end_array() override;
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;  // the caller says the file is not one JSON object
  }

 private:
  struct Frame {
    enum class Kind {
      kObject,  // of the document, in `container`
      kArray,   // of the document, in `container`
      kVocab,   // model.vocab: its members go to the list
      kMerges,  // model.merges: its elements go to the list
      kPair,    // an array in model.merges, so far of at most two strings
    };
    Kind kind;
    Json* container = nullptr;
    std::string key;  // kObject, kVocab: the key of the value to come
    int strings = 0;  // kPair: how many it has
  };
  using Kind = Frame::Kind;

  // Whether the value to come is model.`member`.
  bool IsModelMember(const char* member) const {
    return frames_.size() == 2 && frames_[0].kind == Kind::kObject && frames_[0].key == "model" &&
           frames_[1].kind == Kind::kObject && frames_[1].key == member;
  }
  // Puts `value` where the innermost frame says; where it is, for a container to fill.
  Json* Place(Json&& value);
  bool Value(Json&& value) {
    Place(std::move(value));
    return true;
  }
  Json* PlaceInObject(Frame& object, Json&& value);
  // The pair open in model.merges turned into an array of the document: it is no merge.
  void DemotePair();

  TokenizerJson& read_;
  std::vector<Frame> frames_;
};

Json* Reader::Place(Json&& value) {
  if (frames_.empty()) {
    read_.document = std::move(value);
    return &read_.document;
  }
  if (frames_.back().kind == Kind::kPair) DemotePair();
  Frame& frame = frames_.back();
  switch (frame.kind) {
    case Kind::kObject:
      return PlaceInObject(frame, std::move(value));
    case Kind::kArray:
      frame.container->push_back(std::move(value));
      return &frame.container->back();
    case Kind::kVocab:
      read_.model.vocab->emplace_back(std::move(frame.key), std::move(value));
      return &read_.model.vocab->back().second;
    case Kind::kMerges:
    case Kind::kPair: {
      MergeEntry& merge = read_.model.merges->emplace_back();
      merge.form = MergeEntry::Form::kOther;
      merge.other = std::move(value);
      return &merge.other;
    }
  }
  return nullptr;
}

Json* Reader::PlaceInObject(Frame& object, Json&& value) {
  // A key given twice: the later value stands, as nlohmann's parse and the library's
  // readers of the file take it (a listed member given again as another type is the
  // document's again).
  const bool model = frames_.size() == 1 && object.key == "model";
  if (model || IsModelMember("vocab")) read_.model.vocab.reset();
  if (model || IsModelMember("merges")) read_.model.merges.reset();
  Json& slot = (*object.container)[object.key];
  slot = std::move(value);
  return &slot;
}

void Reader::DemotePair() {
  Frame& pair = frames_.back();
  MergeEntry& merge = read_.model.merges->back();
  merge.form = MergeEntry::Form::kOther;
  merge.other = Json::array();
  if (pair.strings > 0) merge.other.push_back(std::move(merge.left));
  if (pair.strings > 1) merge.other.push_back(std::move(merge.right));
  pair = Frame{Kind::kArray, &merge.other};
}

bool Reader::string(string_t& value) {
  Frame* frame = frames_.empty() ? nullptr : &frames_.back();
  if (frame != nullptr && frame->kind == Kind::kMerges) {
    MergeEntry& merge = read_.model.merges->emplace_back();
    merge.left = std::move(value);
    return true;
  }
  if (frame != nullptr && frame->kind == Kind::kPair && frame->strings < 2) {
    MergeEntry& merge = read_.model.merges->back();
    (frame->strings++ == 0 ? merge.left : merge.right) = std::move(value);
    return true;
  }
  return Value(Json(std::move(value)));
}

bool Reader::start_object(std::size_t) {
  if (IsModelMember("vocab")) {
    frames_[1].container->erase("vocab");  // given before: the later value stands
    read_.model.vocab.emplace();
    frames_.push_back(Frame{Kind::kVocab});
    return true;
  }
  frames_.push_back(Frame{Kind::kObject, Place(Json::object())});
  return true;
}

bool Reader::start_array(std::size_t) {
  if (IsModelMember("merges")) {
    frames_[1].container->erase("merges");
    read_.model.merges.emplace();
    frames_.push_back(Frame{Kind::kMerges});
    return true;
  }
  if (!frames_.empty() && frames_.back().kind == Kind::kMerges) {
    read_.model.merges->emplace_back().form = MergeEntry::Form::kPair;
    frames_.push_back(Frame{Kind::kPair});
    return true;
  }
  frames_.push_back(Frame{Kind::kArray, Place(Json::array())});
  return true;
}

bool Reader::end_array() {
  if (frames_.back().kind == Kind::kPair && frames_.back().strings < 2) DemotePair();
  frames_.pop_back();
  return true;
}

}  // namespace

absl::StatusOr<TokenizerJson> ReadTokenizerJson(absl::string_view text, const std::string& name) {
  HF_RETURN_IF_ERROR(CheckJsonNesting(text, name));
  TokenizerJson read;
  Reader reader(&read);
  if (!Json::sax_parse(text, &reader) || !read.document.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": not a JSON object"));
  }
  return read;
}

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise
