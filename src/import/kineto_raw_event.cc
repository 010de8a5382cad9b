#include "import/kineto_raw_event.h"

#include <bit>

#include "base/time.h"
#include "fmt/format.h"
#include "import/kineto_json_key.h"

namespace teller::import {
namespace {

namespace od = simdjson::ondemand;

ArgKey ParseArgKey(std::string_view key) {
  switch (key.size()) {
    case 3:
      if (Is(key, "Seq") || Is(key, "seq")) return kArgSeq;
      break;
    case 4:
      if (Is(key, "grid")) return kArgGrid;
      if (Is(key, "name")) return kArgName;
      if (Is(key, "Rank")) return kArgRank;
      break;
    case 5:
      if (Is(key, "block")) return kArgBlock;
      if (Is(key, "bytes")) return kArgBytes;
      if (Is(key, "dtype")) return kArgDtype;
      if (Is(key, "Bytes")) return kArgMemoryBytes;
      break;
    case 6:
      if (Is(key, "device")) return kArgDevice;
      if (Is(key, "stream")) return kArgStream;
      if (Is(key, "labels")) return kArgLabels;
      break;
    case 8:
      if (Is(key, "Src Rank")) return kArgSrcRank;
      if (Is(key, "Dst Rank")) return kArgDstRank;
      break;
    case 9:
      if (Is(key, "Python id")) return kArgPythonId;
      if (Is(key, "Device Id")) return kArgDeviceId;
      break;
    case 10:
      if (Is(key, "Group size")) return kArgGroupSize;
      break;
    case 11:
      if (Is(key, "External id") || Is(key, "external id")) return kArgExternalId;
      if (Is(key, "correlation")) return kArgCorrelation;
      if (Is(key, "Device Type")) return kArgDeviceType;
      break;
    case 13:
      if (Is(key, "Fwd thread id")) return kArgFwdThreadId;
      if (Is(key, "In msg nelems")) return kArgInMsgNelems;
      break;
    case 14:
      if (Is(key, "Out msg nelems")) return kArgOutMsgNelems;
      if (Is(key, "cuda_sync_kind")) return kArgSyncKind;
      if (Is(key, "wait_on_stream")) return kArgWaitOnStream;
      if (Is(key, "Total Reserved")) return kArgTotalReserved;
      break;
    case 15:
      if (Is(key, "Sequence number")) return kArgSequenceNumber;
      if (Is(key, "Collective name")) return kArgCollectiveName;
      if (Is(key, "Total Allocated")) return kArgTotalAllocated;
      break;
    case 16:
      if (Is(key, "Python parent id")) return kArgPythonParentId;
      break;
    case 18:
      if (Is(key, "Process Group Name")) return kArgPgName;
      break;
    case 19:
      if (Is(key, "Process Group Ranks")) return kArgPgRanks;
      break;
    case 25:
      if (Is(key, "Process Group Description")) return kArgPgDesc;
      break;
    case 33:
      if (Is(key, "wait_on_cuda_event_record_corr_id")) return kArgWaitOnEventCorrelation;
      break;
    default:
      break;
  }
  return kArgNone;
}

// Reads "x,y,z" from [x, y, z] into out; returns the text or "" on a bad array.
std::string_view ReadDim3(od::value value, std::array<char, 48>* out) {
  od::array array;
  if (value.get_array().get(array)) return {};
  size_t used = 0;
  for (auto element : array) {
    int64_t number = 0;
    if (element.get_int64().get(number)) return {};
    if (used + 22 > out->size()) return {};
    if (used > 0) (*out)[used++] = ',';
    auto result = fmt::format_to_n(out->data() + used, out->size() - used, "{}", number);
    used += result.size;
  }
  return std::string_view(out->data(), used);
}

bool ReadArgs(od::object args, RawEvent* event) {
  for (auto field_result : args) {
    od::field field;
    if (std::move(field_result).get(field)) return false;
    ArgKey key = ParseArgKey(RawKey(field.key()));
    if (key == kArgNone) continue;
    od::value value = field.value();
    od::json_type type;
    if (value.type().get(type)) continue;
    switch (type) {
      case od::json_type::number: {
        int64_t number = 0;
        if (!ParseIntText(TrimRight(value.raw_json_token()), &number)) continue;
        event->arg_int[key] = number;
        event->args_text &= ~(uint64_t{1} << key);
        break;
      }
      case od::json_type::string: {
        std::string_view text;
        if (value.get_string().get(text)) continue;
        event->arg_text[key] = {text.data(), text.size()};
        event->args_text |= uint64_t{1} << key;
        break;
      }
      case od::json_type::array: {
        if (key != kArgGrid && key != kArgBlock) continue;
        std::string_view text =
            ReadDim3(value, key == kArgGrid ? &event->grid_text : &event->block_text);
        if (text.empty()) continue;
        event->arg_text[key] = {text.data(), text.size()};
        event->args_text |= uint64_t{1} << key;
        break;
      }
      default:
        continue;
    }
    event->args_present |= uint64_t{1} << key;
  }
  return true;
}

}  // namespace

bool ParseIntText(std::string_view text, int64_t* out) {
  size_t i = !text.empty() && text[0] == '-' ? 1 : 0;
  if (i < text.size() && text.size() - i <= 18) {
    int64_t value = 0;
    for (size_t j = i; j < text.size(); ++j) {
      unsigned digit = static_cast<unsigned char>(text[j]) - '0';
      if (digit > 9) return false;
      value = value * 10 + digit;
    }
    *out = i ? -value : value;
    return true;
  }
  base::StatusOr<int64_t> value = base::ParseInt64(text);
  if (!value.ok()) return false;
  *out = *value;
  return true;
}

bool KinetoEventParser::ParseEvent(std::string_view text, RawEvent* event) {
  // The parser's verdict on a malformed element ('{"":"":}') can depend on the bytes
  // after it, which differ with where the input was cut: it reads a copy padded alike.
  padded_.assign(text);
  padded_.append(KinetoJsonScanner::kPaddingBytes, ' ');
  od::document doc;
  if (parser_.iterate(padded_.data(), text.size(), padded_.size()).get(doc)) {
    return false;
  }
  od::object object;
  if (doc.get_object().get(object)) return false;
  return ParseRawObject(object, event);
}

bool ParseRawObject(od::object& object, RawEvent* event) {
  for (auto field_result : object) {
    od::field field;
    if (std::move(field_result).get(field)) return false;
    std::string_view key = RawKey(field.key());
    od::value value = field.value();
    // A key without a value ('{"":}') is malformed in an array of events as alone: the
    // on-demand parser only finds out where the value is read, and fields not read here
    // would pass in a batch (the import in parts parses an element alone).
    od::json_type value_type;
    if (value.type().get(value_type)) return false;
    switch (key.size()) {
      case 2:
        if (Is(key, "ph")) {
          std::string_view ph;
          if (value.get_string().get(ph)) return false;
          event->ph = ph.size() == 1 ? ph[0] : '?';
        } else if (Is(key, "ts")) {
          od::json_type type;
          if (value.type().get(type)) return false;
          if (type == od::json_type::string) {
            if (value.get_string().get(event->ts)) return false;
          } else {
            event->ts = TrimRight(value.raw_json_token());
          }
          event->has_ts = true;
        } else if (Is(key, "id")) {
          od::json_type type;
          if (value.type().get(type)) return false;
          if (type == od::json_type::number) {
            event->has_id = ParseIntText(TrimRight(value.raw_json_token()), &event->id);
          } else if (type == od::json_type::string) {
            std::string_view id_text;
            if (value.get_string().get(id_text)) return false;
            event->has_id = ParseIntText(id_text, &event->id);
          }
        }
        break;
      case 3:
        if (Is(key, "cat")) {
          if (value.get_string().get(event->cat)) return false;
        } else if (Is(key, "pid") || Is(key, "tid")) {
          IdField& id = key[0] == 'p' ? event->pid : event->tid;
          od::json_type type;
          if (value.type().get(type)) return false;
          id.present = true;
          if (type == od::json_type::number) {
            id.numeric = ParseIntText(TrimRight(value.raw_json_token()), &id.number);
          } else if (type == od::json_type::string) {
            if (value.get_string().get(id.text)) return false;
            id.numeric = ParseIntText(id.text, &id.number);
          }
        } else if (Is(key, "dur")) {
          od::json_type type;
          if (value.type().get(type)) return false;
          if (type == od::json_type::string) {
            if (value.get_string().get(event->dur)) return false;
          } else {
            event->dur = TrimRight(value.raw_json_token());
          }
          event->has_dur = true;
        }
        break;
      case 4:
        if (Is(key, "name")) {
          if (value.get_string().get(event->name)) return false;
          event->has_name = true;
        } else if (Is(key, "args")) {
          od::object args;
          if (value.get_object().get(args)) break;  // non-object args are ignored
          if (!ReadArgs(args, event)) return false;
        }
        break;
      default:
        break;
    }
  }
  return true;
}

namespace {

bool MicrosAsNs(std::string_view text, int64_t* ns) {
  base::StatusOr<base::TimeNs> value = base::ParseDecimalMicrosAsNs(text);
  if (!value.ok()) return false;
  *ns = *value;
  return true;
}

}  // namespace

void RawEventFields::ParseTimes() {
  ts_ok = MicrosAsNs(ts, &ts_ns);
  dur_ok = MicrosAsNs(dur, &dur_ns);
  times_parsed = true;
}

bool RawEventFields::TsNs(int64_t* ns) const {
  if (!times_parsed) return MicrosAsNs(ts, ns);
  *ns = ts_ns;
  return ts_ok;
}

bool RawEventFields::DurNs(int64_t* ns) const {
  if (!times_parsed) return MicrosAsNs(dur, ns);
  *ns = dur_ns;
  return dur_ok;
}

void RawEventList::Clear() {
  fields_.clear();
  args_begin_.clear();
  args_.clear();
  dim3_.clear();
}

void RawEventList::Add(const RawEvent& event) {
  fields_.push_back(event);
  fields_.back().ParseTimes();
  args_begin_.push_back(static_cast<uint32_t>(args_.size()));
  for (uint64_t keys = event.args_present; keys != 0; keys &= keys - 1) {
    const auto key = static_cast<ArgKey>(std::countr_zero(keys));
    Arg arg{};
    if (!event.IsText(key)) {
      arg.value = event.arg_int[key];
    } else {
      const RawEvent::TextRef& text = event.arg_text[key];
      arg.size = static_cast<uint32_t>(text.size);
      if (text.data == event.grid_text.data() || text.data == event.block_text.data()) {
        arg.in_dim3 = true;
        arg.value = static_cast<int64_t>(dim3_.size());
        dim3_.append(text.data, text.size);
      } else {
        arg.data = text.data;
      }
    }
    args_.push_back(arg);
  }
}

void RawEventList::Get(size_t i, RawEvent* event) const {
  static_cast<RawEventFields&>(*event) = fields_[i];
  const Arg* arg = args_.data() + args_begin_[i];
  for (uint64_t keys = event->args_present; keys != 0; keys &= keys - 1, ++arg) {
    const auto key = static_cast<ArgKey>(std::countr_zero(keys));
    if (!event->IsText(key)) {
      event->arg_int[key] = arg->value;
    } else if (arg->in_dim3) {
      event->arg_text[key] = {dim3_.data() + arg->value, arg->size};
    } else {
      event->arg_text[key] = {arg->data, arg->size};
    }
  }
}

}  // namespace teller::import
