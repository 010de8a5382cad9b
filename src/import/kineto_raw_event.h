// One element of a Kineto traceEvents array as read, before it means anything to the
// trace (KinetoImporter dispatches it): its fields and the args the importer keeps,
// as text and integers. KinetoEventParser reads elements, one or a batch at a time;
// RawEventList keeps a batch's events for a later dispatch (the import in parts).
#pragma once

#include <simdjson.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "import/kineto_json_scanner.h"

namespace teller::import {

// The args the importer keeps (everything else is skipped unread).
enum ArgKey : uint8_t {
  kArgExternalId,
  kArgCorrelation,
  kArgDevice,
  kArgStream,
  kArgGrid,
  kArgBlock,
  kArgSequenceNumber,
  kArgFwdThreadId,
  kArgPythonId,
  kArgPythonParentId,
  kArgBytes,
  kArgName,
  kArgLabels,
  kArgCollectiveName,
  kArgDtype,
  kArgInMsgNelems,
  kArgOutMsgNelems,
  kArgGroupSize,
  kArgPgName,
  kArgPgDesc,
  kArgPgRanks,
  kArgRank,
  kArgSeq,
  kArgSrcRank,
  kArgDstRank,
  kArgSyncKind,
  kArgWaitOnStream,
  kArgWaitOnEventCorrelation,
  kArgMemoryBytes,
  kArgTotalAllocated,
  kArgTotalReserved,
  kArgDeviceId,
  kArgDeviceType,
  kArgCount,
  kArgNone = kArgCount,
};

// A decimal integer ("-12"); false for anything else.
bool ParseIntText(std::string_view text, int64_t* out);

// pid or tid: a number, or a string ("stream 7", "4093687616", "Spans", "CPU functions").
struct IdField {
  bool present = false;
  bool numeric = false;
  int64_t number = 0;
  std::string_view text;
  // A name rather than a number ("CPU functions"); "" and other JSON types are neither.
  bool named() const { return present && !numeric && !text.empty(); }
};

// The fields of an element other than its args.
struct RawEventFields {
  char ph = 0;
  bool has_name = false;
  bool has_ts = false;
  bool has_dur = false;
  bool has_id = false;
  std::string_view cat;
  std::string_view name;
  std::string_view ts;
  std::string_view dur;
  IdField pid;
  IdField tid;
  int64_t id = 0;
  uint64_t args_present = 0;
  uint64_t args_text = 0;  // args whose value is text (a string or a dim3 array)
  // ts and dur in ns once ParseTimes ran (the import in parts runs it on the thread
  // that parsed the event, where the text is still in cache).
  bool times_parsed = false;
  bool ts_ok = false;
  bool dur_ok = false;
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;

  void ParseTimes();
  // ts or dur in ns (base::ParseDecimalMicrosAsNs); false when it is not a decimal.
  bool TsNs(int64_t* ns) const;
  bool DurNs(int64_t* ns) const;
};

struct RawEvent : RawEventFields {
  std::array<int64_t, kArgCount> arg_int;
  // Not std::string_view: its constructor would clear the whole array per event.
  struct TextRef {
    const char* data;
    size_t size;
  };
  std::array<TextRef, kArgCount> arg_text;
  std::array<char, 48> grid_text;
  std::array<char, 48> block_text;

  bool Has(ArgKey key) const { return (args_present >> key) & 1; }
  bool IsText(ArgKey key) const { return (args_text >> key) & 1; }
  // An integer arg, also when written as a decimal string.
  bool HasInt(ArgKey key, int64_t* value) const {
    if (!Has(key)) return false;
    if (!IsText(key)) {
      *value = arg_int[key];
      return true;
    }
    return ParseIntText(std::string_view(arg_text[key].data, arg_text[key].size), value);
  }
  std::string_view Text(ArgKey key) const {
    if (!Has(key) || !IsText(key)) return {};
    return std::string_view(arg_text[key].data, arg_text[key].size);
  }
};

// Reads elements with one simdjson parser, allocated once. The texts of the events it
// gives stay valid until its next call (they lie in the parser's string buffer, its
// copy of an element, or the input).
class KinetoEventParser {
 public:
  // One element's text, KinetoJsonScanner::kPaddingBytes readable after it; false when
  // it is not a well-formed object.
  bool ParseEvent(std::string_view text, RawEvent* event);

  // A batch "[e1, ...]" (KinetoJsonScanner::kEventBatch): hands sink(const RawEvent&)
  // each element in order. Returns nullptr when all of it was used, else where exact
  // splitting must resume (KinetoJsonScanner::Resume): the batch's start when the
  // parser rejects it, or the element it stopped at.
  template <typename Sink>
  const char* ParseBatch(std::string_view wrapped, Sink&& sink);

  // For top-level values (distributedInfo, deviceProperties).
  simdjson::ondemand::parser& parser() { return parser_; }

 private:
  simdjson::ondemand::parser parser_;
  std::string padded_;  // ParseEvent's element, padded with spaces
};

// An object's fields into event; false when the object is malformed.
bool ParseRawObject(simdjson::ondemand::object& object, RawEvent* event);

// The events of one batch, kept for a dispatch in order after the batch was parsed on
// another thread: their fields and only the args they have. Their texts stay where the
// parser left them (its string buffer, the batch's text), so both must outlive the list.
class RawEventList {
 public:
  void Clear();
  void Add(const RawEvent& event);
  size_t size() const { return fields_.size(); }
  // The i-th event as it was added (the per-key arrays set where it has args).
  void Get(size_t i, RawEvent* event) const;

 private:
  struct Arg {
    int64_t value;     // an integer arg, or a text's offset in dim3_
    const char* data;  // a text arg outside dim3_
    uint32_t size;
    bool in_dim3;
  };
  std::vector<RawEventFields> fields_;
  std::vector<uint32_t> args_begin_;
  std::vector<Arg> args_;
  std::string dim3_;  // grid and block texts, which a RawEvent holds itself
};

template <typename Sink>
const char* KinetoEventParser::ParseBatch(std::string_view wrapped, Sink&& sink) {
  namespace od = simdjson::ondemand;
  const char* first = wrapped.data() + 1;
  // The parser matches brackets by depth, not kind: an element with '[1, 2}' would
  // swallow the next one silently. Such batches are split exactly.
  bool mismatched = false;
  if (FindJsonValueEnd(wrapped.data(), wrapped.data() + wrapped.size(), &mismatched) == nullptr ||
      mismatched) {
    return first;
  }
  od::document doc;
  if (parser_
          .iterate(wrapped.data(), wrapped.size(),
                   wrapped.size() + KinetoJsonScanner::kPaddingBytes)
          .get(doc)) {
    return first;
  }
  od::array array;
  if (doc.get_array().get(array)) return first;
  const char* last_done = nullptr;
  for (auto element_result : array) {
    od::value element;
    const char* start = nullptr;
    od::object object;
    if (std::move(element_result).get(element) || element.current_location().get(start) ||
        *start != '{' || element.get_object().get(object)) {
      break;
    }
    RawEvent event;
    if (!ParseRawObject(object, &event)) return start;
    sink(static_cast<const RawEvent&>(event));
    last_done = start;
  }
  if (!last_done) return first;
  // Stopped between elements: resume after the last one used, or nothing is left.
  const char* end = wrapped.data() + wrapped.size() - 1;
  const char* after = FindJsonValueEnd(last_done, end);
  while (after && after < end &&
         (*after == ',' || *after == ' ' || *after == '\n' || *after == '\r' || *after == '\t')) {
    ++after;
  }
  return after && after < end ? after : nullptr;
}

}  // namespace teller::import
