#include "diagnose/log_reading.h"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "import/log_line_parser.h"

namespace teller::diagnose {

using model::FaultCategory;
using wire::SignatureRole;
using wire::SignatureSeverity;

std::string LogEvidence::Label() const {
  if (signature != nullptr) return signature->entry.id;
  return fmt::format("keyword:{}", keyword);
}

namespace {

// Words that place an error line no signature knows; most specific first. Weak words
// ("cuda" in "this may lead to CUDA errors") do not place a Python programming error
// (ValueError, KeyError, ...): that is the engine's own software or its configuration.
struct Keyword {
  std::string_view word;  // lower case
  FaultCategory category;
  bool strong;
};
constexpr std::array<Keyword, 22> kKeywords = {{
    {"out of memory", FaultCategory::kMemoryResource, true},
    {"outofmemory", FaultCategory::kMemoryResource, true},
    {"kv cache", FaultCategory::kMemoryResource, false},
    {"oom", FaultCategory::kMemoryResource, false},
    {"illegal memory", FaultCategory::kCudaKernel, true},
    {"triton", FaultCategory::kCudaKernel, false},
    {"cublas", FaultCategory::kCudaKernel, true},
    {"cudnn", FaultCategory::kCudaKernel, true},
    {"kernel", FaultCategory::kCudaKernel, false},
    {"nvml", FaultCategory::kRuntimeDriver, true},
    {"driver", FaultCategory::kRuntimeDriver, false},
    {"xid", FaultCategory::kRuntimeDriver, true},
    {"cuda", FaultCategory::kRuntimeDriver, false},
    {"nccl", FaultCategory::kCommunicationNetwork, true},
    {"collective", FaultCategory::kCommunicationNetwork, false},
    {"all_reduce", FaultCategory::kCommunicationNetwork, false},
    {"allreduce", FaultCategory::kCommunicationNetwork, false},
    {"connection", FaultCategory::kCommunicationNetwork, false},
    {"socket", FaultCategory::kCommunicationNetwork, false},
    {"timed out", FaultCategory::kCommunicationNetwork, false},
    {"scheduler", FaultCategory::kSchedulingSoftware, false},
    {"tokenizer", FaultCategory::kSchedulingSoftware, false},
}};

// Python's own exceptions for programming and input errors.
bool IsProgrammingError(std::string_view message) {
  for (std::string_view name :
       {"ValueError", "KeyError", "TypeError", "AttributeError", "IndexError", "AssertionError",
        "NotImplementedError", "ZeroDivisionError", "NameError", "ImportError",
        "ModuleNotFoundError", "FileNotFoundError", "JSONDecodeError"}) {
    const size_t at = message.find(name);
    if (at != std::string_view::npos && at + name.size() < message.size() &&
        message[at + name.size()] == ':') {
      return true;
    }
  }
  return false;
}

const Keyword* FindKeyword(std::string_view text, bool strong_only) {
  std::string lowered(text);
  for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const Keyword& keyword : kKeywords) {
    if (strong_only && !keyword.strong) continue;
    if (lowered.find(keyword.word) != std::string::npos) return &keyword;
  }
  return nullptr;
}

double LogWeight(SignatureSeverity severity) {
  switch (severity) {
    case SignatureSeverity::kFatal:
    case SignatureSeverity::kError:
      return kFailingLogWeight;
    case SignatureSeverity::kWarning:
      return kDegradingLogWeight;
    case SignatureSeverity::kInfo:
      return 0.0;
  }
  return 0.0;
}

// How much an event says about the root cause, best first: a catalog cause that failed
// something, a catalog cause that degraded it, an unknown error placed by a keyword, a
// consequence.
int Tier(const LogEvidence& event) {
  if (event.signature == nullptr) return 2;
  const wire::SignatureEntry& entry = event.signature->entry;
  if (entry.role == SignatureRole::kConsequence) return 3;
  return entry.severity >= SignatureSeverity::kError ? 0 : 1;
}

// A candidate for one row: a non-benign signature, or a keyword of an error line.
struct RowReading {
  bool found = false;
  LogEvidence event;
  size_t literal_chars = 0;
};

bool Quiet(const wire::SignatureEntry& entry) {
  return entry.role == SignatureRole::kBenign || entry.severity == SignatureSeverity::kInfo;
}

// True when other matched more of the line around match: a longer pattern over the same
// text refines it ("NVRM: Xid (*): 45," over "NVRM: Xid (PCI:").
bool Refines(const signatures::SignatureMatch& other, const signatures::SignatureMatch& match) {
  return other.literal_chars > match.literal_chars && other.begin <= match.begin &&
         match.end <= other.end;
}

// The line's best signature that is not benign: a cause before a consequence (a wrapper's
// text beside the error it wraps: "CUDA runtime error in f(): an illegal memory access"),
// then the most specific. A match that a longer one refines drops out, so a benign message
// silences a generic entry inside its text. Null when none is left.
const signatures::SignatureMatch* BestMatch(const std::vector<signatures::SignatureMatch>& matches,
                                            bool* quiet_seen) {
  const signatures::SignatureMatch* best = nullptr;
  for (const signatures::SignatureMatch& match : matches) {
    if (Quiet(match.signature->entry)) {
      *quiet_seen = true;
      continue;
    }
    const bool refined =
        std::any_of(matches.begin(), matches.end(),
                    [&](const signatures::SignatureMatch& other) { return Refines(other, match); });
    if (refined) continue;
    const bool consequence = match.signature->entry.role == SignatureRole::kConsequence;
    if (best == nullptr ||
        (best->signature->entry.role == SignatureRole::kConsequence && !consequence)) {
      best = &match;
    }
  }
  return best;
}

RowReading ReadRow(const model::Trace& trace, const signatures::SignatureCatalog& catalog,
                   size_t row, std::string_view message) {
  RowReading reading;
  const std::string_view text = trace.str(trace.logs.text[row]);
  const std::vector<signatures::SignatureMatch> matches = catalog.MatchAll(text);
  bool quiet_seen = false;
  if (const signatures::SignatureMatch* match = BestMatch(matches, &quiet_seen)) {
    const wire::SignatureEntry& entry = match->signature->entry;
    reading.found = true;
    reading.event.signature = match->signature;
    reading.event.category = entry.category;
    reading.event.weight = LogWeight(entry.severity);
    reading.literal_chars = match->literal_chars;
  } else {
    if (quiet_seen) return reading;  // known and harmless: never a keyword's either
    // An error no signature knows: only exception lines and ERROR/CRITICAL lines count.
    const model::LogLevel level = trace.logs.level[row];
    // A line that says INFO or WARNING is not an exception, whatever its words.
    const bool exception =
        (level == model::LogLevel::kUnknown || level >= model::LogLevel::kError) &&
        import::IsExceptionLine(message);
    if (!exception && level < model::LogLevel::kError) return reading;
    const Keyword* keyword = FindKeyword(message, IsProgrammingError(message));
    if (keyword == nullptr) {
      if (!exception && !IsProgrammingError(message)) return reading;
      // An exception in the engine's own code that names nothing else.
      static constexpr Keyword kException = {"exception", FaultCategory::kSchedulingSoftware, true};
      keyword = &kException;
    }
    reading.found = true;
    reading.event.keyword = keyword->word;
    reading.event.category = keyword->category;
    reading.event.weight =
        exception || level == model::LogLevel::kCritical ? kFailingLogWeight : kDegradingLogWeight;
  }
  reading.event.row = reading.event.first_row = reading.event.last_row = row;
  return reading;
}

// Better evidence of the same event (a traceback's lines): lower tier, then more specific.
bool Better(const RowReading& a, const RowReading& b) {
  if (!b.found) return a.found;
  if (!a.found) return false;
  if (Tier(a.event) != Tier(b.event)) return Tier(a.event) < Tier(b.event);
  return a.literal_chars > b.literal_chars;
}

// Rows grouped into events: a traceback (its head, frames and exception line, per process)
// is one event, any other row its own.
struct RowGroup {
  size_t first = 0, last = 0;
};

std::vector<RowGroup> GroupRows(const model::Trace& trace,
                                std::vector<std::string_view>* messages) {
  std::vector<RowGroup> groups;
  // Open traceback of each (source, process label or pid), as an index into groups.
  std::map<std::tuple<uint32_t, std::string_view, int64_t>, size_t> open;
  const import::LogParseContext context;
  messages->resize(trace.logs.size());
  for (size_t row = 0; row < trace.logs.size(); ++row) {
    const import::ParsedLogLine parsed =
        import::ParseLogLine(trace.str(trace.logs.text[row]), context);
    (*messages)[row] = parsed.message;
    const auto key = std::make_tuple(trace.logs.source[row].value(), parsed.process_label,
                                     parsed.process_label.empty() ? parsed.pid : -1);
    auto it = open.find(key);
    if (parsed.traceback_head) {
      open[key] = groups.size();
      groups.push_back({row, row});
      continue;
    }
    if (it != open.end()) {
      const bool frame = import::IsTracebackFrameLine(parsed.message);
      if (frame || import::IsExceptionLine(parsed.message)) {
        groups[it->second].last = row;
        // Chained tracebacks go on after the exception line; others end there.
        if (!frame && parsed.message.find("During handling") == std::string_view::npos) {
          open.erase(it);
        }
        continue;
      }
      open.erase(it);
    }
    groups.push_back({row, row});
  }
  return groups;
}

bool EarlierInLog(const model::Trace& trace, const LogEvidence& a, const LogEvidence& b) {
  const model::TimeNs ta = trace.logs.ts_ns[a.row], tb = trace.logs.ts_ns[b.row];
  if (ta != INT64_MIN && tb != INT64_MIN && ta != tb) return ta < tb;
  return a.row < b.row;
}

}  // namespace

std::vector<LogEvidence> ReadLogEvidence(const model::Trace& trace,
                                         const signatures::SignatureCatalog& catalog,
                                         const LogReadingOptions& options) {
  std::vector<std::string_view> messages;
  const std::vector<RowGroup> groups = GroupRows(trace, &messages);
  std::vector<LogEvidence> events;
  std::map<std::string, size_t> event_of_label;
  for (const RowGroup& group : groups) {
    const model::TimeNs ts = trace.logs.ts_ns[group.first];
    if (ts != INT64_MIN && ts < options.from_ns) continue;
    RowReading best;
    for (size_t row = group.first; row <= group.last; ++row) {
      RowReading reading = ReadRow(trace, catalog, row, messages[row]);
      if (Better(reading, best)) best = reading;
    }
    if (!best.found) continue;
    best.event.first_row = group.first;
    best.event.last_row = group.last;
    best.event.rank = trace.logs.rank[best.event.row];
    const model::StepIndex step = trace.logs.step[best.event.row];
    best.event.step = step.valid() ? trace.steps.number[step.value()] : -1;
    const std::string label = best.event.Label();
    auto seen = event_of_label.find(label);
    if (seen != event_of_label.end()) {
      // One event per signature, shown by its earliest line (rows of several processes'
      // logs are not in time order).
      LogEvidence& kept = events[seen->second];
      if (EarlierInLog(trace, best.event, kept)) {
        best.event.repeats = kept.repeats;
        kept = best.event;
      }
      ++kept.repeats;
      continue;
    }
    event_of_label[label] = events.size();
    events.push_back(best.event);
  }
  if (events.empty()) return events;
  // The first cause: the best tier, then the earliest.
  auto first = std::min_element(events.begin(), events.end(),
                                [&](const LogEvidence& a, const LogEvidence& b) {
                                  if (Tier(a) != Tier(b)) return Tier(a) < Tier(b);
                                  return EarlierInLog(trace, a, b);
                                });
  first->first_cause = true;
  std::rotate(events.begin(), first, first + 1);
  std::stable_sort(
      events.begin() + 1, events.end(),
      [&](const LogEvidence& a, const LogEvidence& b) { return EarlierInLog(trace, a, b); });
  if (events.size() > options.max_events) events.resize(options.max_events);
  return events;
}

}  // namespace teller::diagnose
