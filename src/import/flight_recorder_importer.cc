// PyTorch's Flight Recorder dumps (TORCH_NCCL_TRACE_BUFFER_SIZE, written on a watchdog
// timeout): one rank's last collectives per process group, with their state. Read in
// JSON (the pickle holds only dicts, lists, strings and numbers: docs/import.md gives the
// one-line conversion). Each entry becomes a COMM event of the rank's process with the
// collective's communicator ("PG <name>"), sequence, op and size; its state is the arg
// "fr_state" and an unfinished one is truncated: the hang report reads them
// (cause/hang_report.h).
#include <algorithm>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "import/importer.h"

namespace teller::import {
namespace {

using Json = nlohmann::json;

int64_t EntryInt(const Json& value, int64_t fallback = -1) {
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number()) return static_cast<int64_t>(value.get<double>());
  if (value.is_string()) {  // pg_status and some versions write numbers as text
    const std::string& text = value.get_ref<const std::string&>();
    char* end = nullptr;
    const long long parsed = std::strtoll(text.c_str(), &end, 10);
    if (end != text.c_str()) return parsed;
  }
  return fallback;
}

std::string EntryText(const Json& value) {
  return value.is_string() ? value.get<std::string>() : "";
}

// Bytes of one element of a PyTorch dtype as the recorder names it ("Float", "BFloat16").
int64_t RecorderElementBytes(std::string_view dtype) {
  if (dtype == "Double" || dtype == "Long" || dtype == "ComplexFloat") return 8;
  if (dtype == "Float" || dtype == "Int") return 4;
  if (dtype == "BFloat16" || dtype == "Half" || dtype == "Short") return 2;
  if (dtype == "Byte" || dtype == "Char" || dtype == "Bool" || dtype.rfind("Float8", 0) == 0)
    return 1;
  return -1;
}

// Bytes of the entry's inputs: the sum over tensors of elements times element size.
int64_t EntryInputBytes(const Json& entry) {
  const Json& sizes = entry.value("input_sizes", Json::array());
  const Json& dtypes = entry.value("input_dtypes", Json::array());
  if (!sizes.is_array() || !dtypes.is_array() || sizes.empty()) return -1;
  int64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!sizes[i].is_array() || i >= dtypes.size()) return -1;
    int64_t elements = 1;
    for (const Json& dim : sizes[i]) elements *= std::max<int64_t>(EntryInt(dim, 0), 0);
    const int64_t bytes = RecorderElementBytes(EntryText(dtypes[i]));
    if (bytes < 0) return -1;
    total += elements * bytes;
  }
  return total;
}

// "forward (model.py:123)": the innermost Python frame the recorder kept.
std::string EntryTopFrame(const Json& entry) {
  const Json& frames = entry.value("frames", Json::array());
  if (!frames.is_array() || frames.empty() || !frames[0].is_object()) return "";
  const Json& frame = frames[0];
  return fmt::format("{} ({}:{})", EntryText(frame.value("name", Json())),
                     EntryText(frame.value("filename", Json())),
                     EntryInt(frame.value("line", Json()), 0));
}

struct RecorderKeys {
  base::StringId state, timeout_ms, frame, pg_desc, pg_ranks;
  explicit RecorderKeys(base::StringPool* s)
      : state(s->Intern("fr_state")),
        timeout_ms(s->Intern("timeout_ms")),
        frame(s->Intern("fr_frame")),
        pg_desc(s->Intern("Process Group Description")),
        pg_ranks(s->Intern("Process Group Ranks")) {}
};

void AddRecorderEntry(const Json& entry, const Json& pg_config, const RecorderKeys& keys,
                      model::ProcessIndex process, model::ThreadIndex thread, model::Trace* trace) {
  base::StringPool& strings = trace->strings;
  const Json& group = entry.value("process_group", Json::array());
  const std::string pg_name = group.is_array() && !group.empty() ? EntryText(group[0]) : "";
  const std::string pg_desc = group.is_array() && group.size() > 1 ? EntryText(group[1]) : "";
  std::string op = EntryText(entry.value("profiling_name", Json()));
  if (const size_t colon = op.find(':'); colon != std::string::npos) op = op.substr(colon + 1);
  const std::string state = EntryText(entry.value("state", Json()));
  const bool completed = state == "completed";
  const int64_t created = EntryInt(entry.value("time_created_ns", Json()), 0);
  int64_t end =
      completed ? EntryInt(entry.value("time_discovered_completed_ns", Json()), created) : created;
  const model::EventRow row = trace->events.Append(
      model::Layer::kComm, model::EventPhase::kComplete, strings.Intern(op), process, thread,
      created, std::max<int64_t>(end - created, 0), model::EventId::Invalid(),
      model::CorrelationId::Invalid(), completed ? model::kFlagNone : model::kFlagTruncated);
  trace->AddStringArg(row, keys.state, strings.Intern(state));
  if (const int64_t timeout = EntryInt(entry.value("timeout_ms", Json())); timeout > 0) {
    trace->AddIntArg(row, keys.timeout_ms, timeout);
  }
  if (const std::string frame = EntryTopFrame(entry); !frame.empty()) {
    trace->AddStringArg(row, keys.frame, strings.Intern(frame));
  }
  if (!pg_desc.empty()) trace->AddStringArg(row, keys.pg_desc, strings.Intern(pg_desc));
  const Json& config = pg_config.is_object() ? pg_config.value(pg_name, Json()) : Json();
  const std::string ranks = config.is_object() ? EntryText(config.value("ranks", Json())) : "";
  if (!ranks.empty()) trace->AddStringArg(row, keys.pg_ranks, strings.Intern(ranks));

  model::CollectiveTable& c = trace->collectives;
  c.event.push_back(row);
  c.communicator.push_back(strings.Intern("PG " + pg_name));
  c.sequence.push_back(EntryInt(entry.value("collective_seq_id", Json())));
  c.op.push_back(strings.Intern(op));
  const Json& dtypes = entry.value("input_dtypes", Json::array());
  c.dtype.push_back(
      strings.Intern(dtypes.is_array() && !dtypes.empty() ? EntryText(dtypes[0]) : ""));
  c.size_bytes.push_back(EntryInputBytes(entry));
  c.group_size.push_back(-1);
  c.group_rank.push_back(-1);
}

}  // namespace

bool LooksLikeFlightRecorderDump(std::string_view head) {
  return head.find("\"entries\"") != std::string_view::npos &&
         (head.find("\"pg_status\"") != std::string_view::npos ||
          head.find("\"pg_config\"") != std::string_view::npos ||
          head.find("\"nccl_comm_state\"") != std::string_view::npos);
}

base::Status ImportFlightRecorder(const std::string& path, const ImportOptions& options,
                                  model::Trace* trace) {
  TELLER_ASSIGN_OR_RETURN(const std::string text, base::ReadFileMaybeGzip(path));
  Json dump = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (dump.is_discarded() || !dump.is_object()) {
    return base::InvalidArgument("{}: not a JSON object; expected a Flight Recorder dump", path);
  }
  const Json& entries = dump.value("entries", Json());
  if (!entries.is_array()) {
    return base::InvalidArgument("{}: \"entries\" is not a list; expected a Flight Recorder dump",
                                 path);
  }
  int32_t rank = options.rank_hint;
  if (dump.contains("rank")) rank = static_cast<int32_t>(EntryInt(dump["rank"], rank));
  base::StringPool& strings = trace->strings;
  const model::ProcessIndex process = trace->processes.Append(
      -1, base::StringPool::kEmpty, strings.Intern("flight recorder"), rank, strings.Intern(path));
  // A track of collectives like a device stream's, so that no step is made of them.
  const model::ThreadIndex thread = trace->threads.Append(
      process, 0, strings.Intern("flight recorder"), /*device_track=*/true, -1);
  const RecorderKeys keys(&strings);
  const Json& pg_config = dump.value("pg_config", Json::object());
  int64_t skipped = 0;
  for (const Json& entry : entries) {
    const bool p2p = entry.is_object() && entry.contains("is_p2p") &&
                     entry["is_p2p"].is_boolean() && entry["is_p2p"].get<bool>();
    if (!entry.is_object() || p2p) {
      ++skipped;  // point-to-point ops have their own sequence: not matched yet
      continue;
    }
    AddRecorderEntry(entry, pg_config, keys, process, thread, trace);
  }
  trace->meta.sources.push_back(path);
  trace->meta.AddInputFormat(model::TraceFormat::kLogs);
  trace->meta.notes.push_back(fmt::format(
      "{}: a Flight Recorder dump (version {}) of rank {}: {} collectives{}", path,
      EntryText(dump.value("version", Json())), rank, entries.size() - skipped,
      skipped > 0 ? fmt::format(", {} point-to-point or malformed entries skipped", skipped) : ""));
  return base::OkStatus();
}

}  // namespace teller::import
