// Raw bundle -> trace model. Field mapping: docs/importers/bundle.md.
#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/parallel_for.h"
#include "capture/process_status.h"
#include "import/bundle_parts.h"
#include "import/importer.h"
#include "import/part_imports.h"
#include "model/classify.h"
#include "model/trace_append.h"
#include "wire/bundle_reader.h"
#include "wire/clock_fit.h"
#include "wire/store_names.h"

namespace teller::import {
namespace {

using model::CorrelationId;
using model::EventId;
using model::EventPhase;
using model::EventRow;
using model::Layer;
using model::ProcessIndex;
using model::StatSeverity;
using model::StringId;
using model::ThreadIndex;

CorrelationId ToCorrelation(uint64_t correlation) {
  return correlation == 0 ? CorrelationId::Invalid()
                          : CorrelationId(static_cast<int64_t>(correlation));
}

// Arg keys, interned once per import.
struct Keys {
  explicit Keys(base::StringPool* s)
      : domain(s->Intern("domain")),
        device(s->Intern("device")),
        stream(s->Intern("stream")),
        grid(s->Intern("grid")),
        block(s->Intern("block")),
        graph_id(s->Intern("graph_id")),
        graph_node_id(s->Intern("graph_node_id")),
        bytes(s->Intern("bytes")),
        kind(s->Intern("kind")),
        result(s->Intern("result")),
        event(s->Intern("event")) {}
  StringId domain, device, stream, grid, block, graph_id, graph_node_id, bytes, kind, result, event;
};

// A collective waits for the end of its process: its kernel may come later.
struct PendingCollective {
  wire::CollectiveRecord record;  // string views are not kept; see the ids below
  StringId communicator, op, dtype;
  int64_t start_ns = 0, end_ns = 0;
};

// Turns the records of one proc-* folder into rows of the trace.
class ProcessImporter : public wire::RecordVisitor {
 public:
  ProcessImporter(model::Trace* trace, const Keys& keys, const wire::BundleMeta& meta,
                  ProcessIndex process, std::string_view host)
      : trace_(trace),
        keys_(keys),
        meta_(meta),
        process_(process),
        first_row_(trace->events.size()) {
    SelectClocks(host);
  }

  void OnProcessInfo(const wire::ProcessInfoRecord& r) override {
    model::ProcessTable& p = trace_->processes;
    uint32_t i = process_.value();
    if (!r.host.empty()) {
      p.host[i] = Intern(r.host);
      if (!saw_timed_record_) SelectClocks(r.host);
    }
    if (!r.name.empty()) p.name[i] = Intern(r.name);
    if (r.pid != 0) p.os_pid[i] = r.pid;
    if (r.rank >= 0) p.rank[i] = r.rank;
  }

  void OnThreadInfo(const wire::ThreadInfoRecord& r) override {
    ThreadIndex thread = HostThread(r.tid);
    trace_->threads.name[thread.value()] = Intern(r.name);
  }

  void OnRangePush(const wire::RangePushRecord& r) override {
    ThreadIndex thread = HostThread(r.tid);
    Layer layer = wire::StoreLayerOf(r.layer, Layer::kFe);
    StringId name = Intern(r.name);
    EventRow row = trace_->events.Append(layer, EventPhase::kBegin, name, process_, thread,
                                         Time(r.clock, r.ts_ns), 0);
    AddDomain(row, r.domain);
    push_stacks_[thread.value()].push_back({layer, name});
  }

  void OnRangePop(const wire::RangePopRecord& r) override {
    ThreadIndex thread = HostThread(r.tid);
    // The end mirrors its push's layer and name; pairing is reconstruction's job.
    OpenRange open{Layer::kFe, base::StringPool::kEmpty};
    auto& stack = push_stacks_[thread.value()];
    if (!stack.empty()) {
      open = stack.back();
      stack.pop_back();
    }
    EventRow row = trace_->events.Append(open.layer, EventPhase::kEnd, open.name, process_, thread,
                                         Time(r.clock, r.ts_ns), 0);
    AddDomain(row, r.domain);
  }

  void OnRangeStart(const wire::RangeStartRecord& r) override {
    Layer layer = wire::StoreLayerOf(r.layer, Layer::kFe);
    StringId name = Intern(r.name);
    EventRow row =
        trace_->events.Append(layer, EventPhase::kBegin, name, process_, HostThread(r.tid),
                              Time(r.clock, r.ts_ns), 0, RangeId(r.range_id));
    AddDomain(row, r.domain);
    started_[r.range_id] = {layer, name};
  }

  void OnRangeEnd(const wire::RangeEndRecord& r) override {
    OpenRange open{Layer::kFe, base::StringPool::kEmpty};
    auto it = started_.find(r.range_id);
    if (it != started_.end()) {
      open = it->second;
      started_.erase(it);
    }
    EventRow row =
        trace_->events.Append(open.layer, EventPhase::kEnd, open.name, process_, HostThread(r.tid),
                              Time(r.clock, r.ts_ns), 0, RangeId(r.range_id));
    AddDomain(row, r.domain);
  }

  void OnMark(const wire::MarkRecord& r) override {
    EventRow row = trace_->events.Append(Layer::kOther, EventPhase::kInstant, Intern(r.name),
                                         process_, HostThread(r.tid), Time(r.clock, r.ts_ns), 0);
    AddDomain(row, r.domain);
    if (r.name.starts_with(wire::kUncaughtExceptionMark)) AppendUncaughtException(r, row);
  }

  // "teller record: process 4242 raised an uncaught RuntimeError: ...", a log line of
  // the process at the mark (the signature catalog's teller.record.uncaught_exception).
  void AppendUncaughtException(const wire::MarkRecord& r, EventRow row) {
    const int64_t pid = trace_->processes.os_pid[process_.value()];
    const std::string_view what = r.name.substr(wire::kUncaughtExceptionMark.size());
    trace_->AppendLog(
        trace_->events.start_ns[row.value()], process_, pid,
        trace_->processes.rank[process_.value()], model::LogLevel::kError,
        model::LogStream::kStderr, base::StringPool::kEmpty, model::TemplateId::Invalid(),
        Intern(fmt::format("teller record: process {} raised an uncaught {}", pid, what)),
        Intern(trace_->str(trace_->processes.source[process_.value()])), 1);
  }

  void OnHostRange(const wire::HostRangeRecord& r) override {
    int64_t start = Time(r.clock, r.start_ns);
    EventRow row = trace_->events.Append(
        wire::StoreLayerOf(r.layer, Layer::kFe), EventPhase::kComplete, Intern(r.name), process_,
        HostThread(r.tid), start, Duration(start, Time(r.clock, r.end_ns)), RangeId(r.range_id));
    if (r.range_id != 0) host_range_by_id_[r.range_id] = row;
    for (const wire::Arg& arg : r.args) {
      StringId key = Intern(arg.key);
      switch (arg.type) {
        case wire::ArgType::kInt:
          trace_->AddIntArg(row, key, arg.int_value);
          // Written while still open (`record --watch`): its end is when the ring was written.
          if (arg.key == "open" && arg.int_value == 1) {
            trace_->events.flags[row.value()] |= model::kFlagTruncated;
          }
          break;
        case wire::ArgType::kDouble:
          trace_->AddDoubleArg(row, key, arg.double_value);
          break;
        case wire::ArgType::kString:
          trace_->AddStringArg(row, key, Intern(arg.string_value));
          break;
        case wire::ArgType::kStringList:
          scratch_.clear();
          for (size_t i = 0; i < arg.list_value.size(); ++i) {
            if (i > 0) scratch_.push_back(',');
            scratch_.append(arg.list_value[i]);
          }
          trace_->AddStringArg(row, key, Intern(scratch_));
          break;
      }
    }
  }

  void OnApiCall(const wire::ApiCallRecord& r) override {
    Layer layer = wire::StoreLayerOf(r);
    uint8_t flags = model::IsGraphLaunchName(r.name) ? model::kFlagGraphLaunch : model::kFlagNone;
    int64_t start = Time(r.clock, r.start_ns);
    EventRow row =
        trace_->events.Append(layer, EventPhase::kComplete, Intern(r.name), process_,
                              HostThread(r.tid), start, Duration(start, Time(r.clock, r.end_ns)),
                              EventId::Invalid(), ToCorrelation(r.correlation), flags);
    if (r.result != 0) trace_->AddIntArg(row, keys_.result, r.result);
  }

  void OnKernel(const wire::KernelRecord& r) override {
    uint8_t flags = r.graph_id != 0 ? model::kFlagGraphNode : model::kFlagNone;
    int64_t start = Time(r.clock, r.start_ns);
    EventRow row = trace_->events.Append(wire::StoreLayerOf(r), EventPhase::kComplete,
                                         Intern(r.name), process_, Stream(r.device, r.stream),
                                         start, Duration(start, Time(r.clock, r.end_ns)),
                                         EventId::Invalid(), ToCorrelation(r.correlation), flags);
    trace_->AddIntArg(row, keys_.device, r.device);
    trace_->AddIntArg(row, keys_.stream, r.stream);
    trace_->AddStringArg(row, keys_.grid, Dim(r.grid));
    trace_->AddStringArg(row, keys_.block, Dim(r.block));
    if (r.graph_id != 0) {
      trace_->AddIntArg(row, keys_.graph_id, r.graph_id);
      trace_->AddIntArg(row, keys_.graph_node_id, static_cast<int64_t>(r.graph_node_id));
    }
    if (r.correlation != 0) {
      kernel_by_correlation_.emplace(r.correlation, row);
      if (trace_->events.layer[row.value()] == Layer::kComm) {
        comm_kernels_by_correlation_[r.correlation].push_back(row);
      }
    }
  }

  void OnMemcpy(const wire::MemcpyRecord& r) override {
    std::string_view kind = wire::CopyKindName(r.copy_kind);
    EventRow row = DeviceWork(Intern(wire::StoreNameOf(r)), r.clock, r.start_ns, r.end_ns, r.device,
                              r.stream, r.correlation, r.graph_id, r.graph_node_id);
    trace_->AddIntArg(row, keys_.bytes, static_cast<int64_t>(r.size_bytes));
    trace_->AddStringArg(row, keys_.kind, Intern(kind));
  }

  void OnMemset(const wire::MemsetRecord& r) override {
    EventRow row = DeviceWork(Intern("Memset"), r.clock, r.start_ns, r.end_ns, r.device, r.stream,
                              r.correlation, r.graph_id, r.graph_node_id);
    trace_->AddIntArg(row, keys_.bytes, static_cast<int64_t>(r.size_bytes));
  }

  void OnSync(const wire::SyncRecord& r) override {
    ThreadIndex thread = r.tid >= 0 ? HostThread(r.tid) : Stream(r.device, r.stream);
    int64_t start = Time(r.clock, r.start_ns);
    EventRow row = trace_->events.Append(
        Layer::kSync, EventPhase::kComplete, Intern(wire::StoreNameOf(r)), process_, thread, start,
        Duration(start, Time(r.clock, r.end_ns)), EventId::Invalid(), ToCorrelation(r.correlation));
    trace_->AddIntArg(row, keys_.device, r.device);
    if (r.stream >= 0) trace_->AddIntArg(row, keys_.stream, r.stream);
    if (r.event != 0) trace_->AddIntArg(row, keys_.event, r.event);
  }

  void OnExternalCorrelation(const wire::ExternalCorrelationRecord& r) override {
    if (r.correlation != 0) external_ids_.emplace(r.correlation, r.external_id);
  }

  void OnCollective(const wire::CollectiveRecord& r) override {
    PendingCollective c;
    c.record = r;
    c.record.communicator = c.record.op = c.record.dtype = {};
    c.communicator = Intern(r.communicator);
    c.op = Intern(r.op);
    c.dtype = Intern(r.dtype);
    if (r.start_ns != 0 || r.end_ns != 0) {
      c.start_ns = Time(r.clock, r.start_ns);
      c.end_ns = Time(r.clock, r.end_ns);
    }
    collectives_.push_back(c);
  }

  // The kernel of a collective. A CUDA-graph replay gives every kernel of the graph
  // the launch's correlation id, so among the collective kernels with that id take
  // the one nearest the collective's own start, else the next one not yet taken;
  // a non-collective kernel is the last resort.
  EventRow CollectiveKernel(const PendingCollective& c) {
    auto comm = comm_kernels_by_correlation_.find(c.record.correlation);
    if (comm != comm_kernels_by_correlation_.end()) {
      std::vector<EventRow>& rows = comm->second;
      if (c.start_ns != 0 || c.end_ns != 0) {
        EventRow best = rows.front();
        for (EventRow row : rows) {
          int64_t distance = std::llabs(trace_->events.start_ns[row.value()] - c.start_ns);
          if (distance < std::llabs(trace_->events.start_ns[best.value()] - c.start_ns)) best = row;
        }
        return best;
      }
      size_t& next = comm_kernels_taken_[c.record.correlation];
      return rows[std::min(next++, rows.size() - 1)];
    }
    auto any = kernel_by_correlation_.find(c.record.correlation);
    return any == kernel_by_correlation_.end() ? EventRow::Invalid() : any->second;
  }

  // Links what needed the whole process: collectives and external correlation ids.
  void Finish() {
    for (const PendingCollective& c : collectives_) {
      EventRow row = c.record.correlation != 0 ? CollectiveKernel(c) : EventRow::Invalid();
      if (row.valid()) {
        // linked to its kernel
      } else if (auto h = host_range_by_id_.find(c.record.range_id);
                 c.record.range_id != 0 && h != host_range_by_id_.end()) {
        row = h->second;
      } else if (c.start_ns != 0 || c.end_ns != 0) {
        if (c.record.correlation != 0)
          trace_->stats.Increment(model::stat::kBundleCollectiveKernelMissing);
        ThreadIndex thread =
            c.record.tid >= 0 ? HostThread(c.record.tid) : Stream(c.record.device, c.record.stream);
        row = trace_->events.Append(Layer::kComm, EventPhase::kComplete, c.op, process_, thread,
                                    c.start_ns, Duration(c.start_ns, c.end_ns), EventId::Invalid(),
                                    ToCorrelation(c.record.correlation));
      } else {
        trace_->stats.Increment(model::stat::kBundleCollectiveUnlinked);
        continue;
      }
      model::CollectiveTable& t = trace_->collectives;
      t.event.push_back(row);
      t.communicator.push_back(c.communicator);
      t.sequence.push_back(c.record.sequence);
      t.op.push_back(c.op);
      t.size_bytes.push_back(c.record.size_bytes);
      t.dtype.push_back(c.dtype);
      t.group_size.push_back(c.record.group_size);
      t.group_rank.push_back(c.record.group_rank);
    }
    if (!external_ids_.empty()) {
      model::EventTable& e = trace_->events;
      for (size_t i = first_row_; i < e.size(); ++i) {
        if (!e.correlation[i].valid() || e.id[i].valid()) continue;
        auto it = external_ids_.find(static_cast<uint64_t>(e.correlation[i].value()));
        if (it != external_ids_.end()) e.id[i] = EventId(static_cast<int64_t>(it->second));
      }
    }
    if (unpaired_clock_ > 0) {
      trace_->stats.Increment(model::stat::kBundleClockUnpaired, unpaired_clock_);
      trace_->meta.notes.push_back(fmt::format(
          "bundle: {} timestamps of process {} had no clock pairs for their clock and were "
          "taken as realtime",
          unpaired_clock_, trace_->processes.os_pid[process_.value()]));
    }
  }

 private:
  struct OpenRange {
    Layer layer;
    StringId name;
  };

  StringId Intern(std::string_view text) { return trace_->strings.Intern(text); }

  void SelectClocks(std::string_view host) { clocks_.emplace(meta_.ClockPairsOf(host)); }

  int64_t Time(wire::ClockDomain clock, int64_t ts_ns) {
    saw_timed_record_ = true;
    int64_t out = ts_ns;
    if (!clocks_->ToTrace(clock, ts_ns, &out)) ++unpaired_clock_;
    return out;
  }

  static int64_t Duration(int64_t start, int64_t end) { return end > start ? end - start : 0; }

  static EventId RangeId(uint64_t id) {
    return id == 0 ? EventId::Invalid() : EventId(static_cast<int64_t>(id));
  }

  void AddDomain(EventRow row, std::string_view domain) {
    if (!domain.empty()) trace_->AddStringArg(row, keys_.domain, Intern(domain));
  }

  StringId Dim(const wire::Dim3& d) {
    scratch_ = fmt::format("{},{},{}", d.x, d.y, d.z);
    return Intern(scratch_);
  }

  ThreadIndex HostThread(int64_t tid) {
    auto [it, inserted] = threads_.try_emplace(tid, ThreadIndex::Invalid());
    if (inserted) {
      it->second = trace_->threads.Append(process_, tid, base::StringPool::kEmpty, false, -1);
    }
    return it->second;
  }

  ThreadIndex Stream(int32_t device, int64_t stream) {
    auto [it, inserted] = streams_.try_emplace({device, stream}, ThreadIndex::Invalid());
    if (inserted) {
      StringId name = Intern(fmt::format("stream {}", stream));
      it->second = trace_->threads.Append(process_, stream, name, true, device);
    }
    return it->second;
  }

  EventRow DeviceWork(StringId name, wire::ClockDomain clock, int64_t start_raw, int64_t end_raw,
                      int32_t device, int64_t stream, uint64_t correlation, uint32_t graph_id,
                      uint64_t graph_node_id) {
    int64_t start = Time(clock, start_raw);
    EventRow row = trace_->events.Append(
        Layer::kMem, EventPhase::kComplete, name, process_, Stream(device, stream), start,
        Duration(start, Time(clock, end_raw)), EventId::Invalid(), ToCorrelation(correlation),
        graph_id != 0 ? model::kFlagGraphNode : model::kFlagNone);
    trace_->AddIntArg(row, keys_.device, device);
    trace_->AddIntArg(row, keys_.stream, stream);
    if (graph_id != 0) {
      trace_->AddIntArg(row, keys_.graph_id, graph_id);
      trace_->AddIntArg(row, keys_.graph_node_id, static_cast<int64_t>(graph_node_id));
    }
    return row;
  }

  model::Trace* trace_;
  const Keys& keys_;
  const wire::BundleMeta& meta_;
  ProcessIndex process_;
  size_t first_row_;
  std::optional<wire::HostClockConverter> clocks_;
  bool saw_timed_record_ = false;
  int64_t unpaired_clock_ = 0;
  std::string scratch_;
  std::unordered_map<int64_t, ThreadIndex> threads_;
  std::map<std::pair<int32_t, int64_t>, ThreadIndex> streams_;
  std::unordered_map<uint32_t, std::vector<OpenRange>> push_stacks_;
  std::unordered_map<uint64_t, OpenRange> started_;
  std::unordered_map<uint64_t, EventRow> kernel_by_correlation_;
  std::unordered_map<uint64_t, std::vector<EventRow>> comm_kernels_by_correlation_;
  std::unordered_map<uint64_t, size_t> comm_kernels_taken_;
  std::unordered_map<uint64_t, EventRow> host_range_by_id_;
  std::unordered_map<uint64_t, uint64_t> external_ids_;
  std::vector<PendingCollective> collectives_;
};

void ReportIssues(const std::vector<wire::ReadIssue>& issues, model::Trace* trace) {
  for (const wire::ReadIssue& issue : issues) {
    trace->stats.Increment(issue.counter, issue.count,
                           issue.data_loss ? StatSeverity::kDataLoss : StatSeverity::kInfo);
    if (issue.bytes_lost > 0) {
      trace->stats.Increment(model::stat::kBundleBytesLost, static_cast<int64_t>(issue.bytes_lost));
    }
    trace->meta.notes.push_back("bundle: " + issue.ToString());
  }
}

// The latest end of an event of the processes from `first` on, below `last`; INT64_MIN
// without one.
int64_t LastEventEndNs(const model::Trace& trace, ProcessIndex first, ProcessIndex last) {
  int64_t last_ns = INT64_MIN;
  for (uint32_t row = 0; row < trace.events.size(); ++row) {
    const auto process = trace.events.process[row].value();
    if (process < first.value() || process >= last.value()) continue;
    last_ns = std::max(last_ns, trace.events.start_ns[row] + trace.events.dur_ns[row]);
  }
  return last_ns;
}

// A process that died (its exit_status side file): one log line at its last event,
// "teller record: process 4242 was killed by signal 11 (SIGSEGV)", "... was killed by
// the kernel's OOM killer (SIGKILL)" or "... ended without an exit record: killed by
// SIGKILL ...", which the signature catalog (teller.json) reads.
void AppendProcessEnd(const std::string& folder, ProcessIndex process, model::Trace* trace) {
  const capture::ProcessExit exit = capture::ReadExitStatus(folder);
  if (exit.kind != capture::ExitKind::kSignal && exit.kind != capture::ExitKind::kVanished &&
      exit.kind != capture::ExitKind::kOomKilled) {
    return;
  }
  const int64_t last_ns = LastEventEndNs(*trace, process, ProcessIndex(process.value() + 1));
  const int64_t pid = trace->processes.os_pid[process.value()];
  trace->AppendLog(
      last_ns, process, pid, trace->processes.rank[process.value()], model::LogLevel::kError,
      model::LogStream::kStderr, base::StringPool::kEmpty, model::TemplateId::Invalid(),
      trace->strings.Intern(fmt::format("teller record: process {} {}{}", pid,
                                        exit.kind == capture::ExitKind::kVanished ? "" : "was ",
                                        capture::DescribeExit(exit))),
      trace->strings.Intern(folder + "/" + capture::kExitStatusFileName), 1);
}

model::LogStream ToLogStream(std::string_view stream, model::Trace* trace) {
  if (stream == "stdout") return model::LogStream::kStdout;
  if (stream == "stderr") return model::LogStream::kStderr;
  if (stream == "file") return model::LogStream::kFile;
  if (!stream.empty()) trace->stats.Increment(model::stat::kBundleLogUnknownStream);
  return model::LogStream::kUnknown;
}

}  // namespace

// A realtime clock that stepped against the monotonic one (an NTP step, a date
// change) between two clock pairs: the piecewise fit would spread the step over the
// samples around it, so times there could run backwards. Keeps the pairs from the
// last step on (the clock as the recording ended), counts and notes each step.
void DropClockPairsBeforeJumps(const std::string& meta_path, std::string_view host,
                               std::vector<wire::ClockPair>* pairs, model::Trace* trace) {
  constexpr int64_t kMinJumpNs = 1'000'000;  // NTP slews stay far below 1 ms per sample gap
  std::stable_sort(pairs->begin(), pairs->end(),
                   [](const auto& a, const auto& b) { return a.monotonic_ns < b.monotonic_ns; });
  size_t keep_from = 0;
  for (size_t i = 1; i < pairs->size(); ++i) {
    int64_t monotonic_step = (*pairs)[i].monotonic_ns - (*pairs)[i - 1].monotonic_ns;
    int64_t realtime_step = (*pairs)[i].realtime_ns - (*pairs)[i - 1].realtime_ns;
    int64_t jump_ns = realtime_step - monotonic_step;
    if (std::abs(jump_ns) <= std::max(kMinJumpNs, monotonic_step / 100)) continue;
    keep_from = i;
    trace->stats.Increment(model::stat::kBundleClockJump);
    trace->meta.notes.push_back(fmt::format(
        "{}: host {}: the realtime clock jumped by {} ns between clock pairs at monotonic {} "
        "and {} ns; times use the pairs from the last jump on",
        meta_path, host, jump_ns, (*pairs)[i - 1].monotonic_ns, (*pairs)[i].monotonic_ns));
  }
  pairs->erase(pairs->begin(), pairs->begin() + static_cast<std::ptrdiff_t>(keep_from));
}

base::StatusOr<BundleParts> BundleParts::Open(const std::string& directory) {
  TELLER_ASSIGN_OR_RETURN(wire::BundleReader reader, wire::BundleReader::Open(directory));
  BundleParts bundle(std::move(reader));
  bundle.meta_ = bundle.reader_.meta();
  const std::string meta_path = directory + "/meta.json";
  DropClockPairsBeforeJumps(meta_path, bundle.meta_.host, &bundle.meta_.clock_pairs,
                            &bundle.clock_notes_);
  for (wire::HostClocks& host : bundle.meta_.hosts) {
    DropClockPairsBeforeJumps(meta_path, host.host, &host.clock_pairs, &bundle.clock_notes_);
  }
  return bundle;
}

int32_t BundleParts::RankOf(size_t process) const {
  const wire::ProcessDirectory& dir = reader_.processes()[process];
  const std::string& host = dir.host.empty() ? meta_.host : dir.host;
  int32_t rank = -1;
  for (const wire::RankInfo& r : meta_.ranks) {
    if (r.pid == dir.pid && (r.host.empty() || r.host == host)) rank = r.rank;
  }
  return rank;
}

void BundleParts::NumberUnrankedProcesses(ProcessIndex first_process, model::Trace* trace) const {
  model::ProcessTable& processes = trace->processes;
  std::vector<uint32_t> unranked;
  for (size_t p = first_process.value(); p < processes.size(); ++p) {
    if (processes.rank[p] < 0) unranked.push_back(static_cast<uint32_t>(p));
  }
  if (unranked.size() < 2) return;
  // Only processes with events make steps; one with none (a launcher's parent that
  // only named a thread) stays unranked.
  std::vector<bool> has_events(processes.size() - first_process.value(), false);
  for (const ProcessIndex process : trace->events.process) {
    if (process.valid() && process.value() >= first_process.value()) {
      has_events[process.value() - first_process.value()] = true;
    }
  }
  std::erase_if(unranked, [&](uint32_t p) { return !has_events[p - first_process.value()]; });
  if (unranked.size() < 2) return;
  std::sort(unranked.begin(), unranked.end(), [&](uint32_t a, uint32_t b) {
    return std::pair(trace->str(processes.host[a]), processes.os_pid[a]) <
           std::pair(trace->str(processes.host[b]), processes.os_pid[b]);
  });
  // After every rank the trace holds (this bundle's, earlier inputs'), so none is shared.
  int32_t next_rank = 0;
  for (const int32_t rank : processes.rank) next_rank = std::max(next_rank, rank + 1);
  std::string assigned;
  for (const uint32_t p : unranked) {
    processes.rank[p] = next_rank++;
    if (!assigned.empty()) assigned += ", ";
    assigned += fmt::format("{} pid {} -> rank {}", trace->str(processes.host[p]),
                            processes.os_pid[p], processes.rank[p]);
  }
  for (size_t row = 0; row < trace->logs.size(); ++row) {  // the fatal-signal lines
    const ProcessIndex process = trace->logs.process[row];
    if (trace->logs.rank[row] < 0 && process.valid() && process.value() >= first_process.value()) {
      trace->logs.rank[row] = processes.rank[process.value()];
    }
  }
  trace->meta.notes.push_back(fmt::format(
      "{}: ranks assigned in (host, pid) order, since no launcher variable (RANK, "
      "OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, SLURM_PROCID), process group or meta.json "
      "said the ranks of {} processes: {}",
      reader_.directory(), unranked.size(), assigned));
}

void BundleParts::ImportHead(model::Trace* trace) const {
  const std::string& directory = reader_.directory();
  model::TraceMeta& m = trace->meta;
  m.notes.insert(m.notes.end(), clock_notes_.meta.notes.begin(), clock_notes_.meta.notes.end());
  trace->stats.Merge(clock_notes_.stats);
  m.AddInputFormat(model::TraceFormat::kBundle);
  m.sources.push_back(directory);
  if (m.meta_json.empty()) {
    m.meta_json = reader_.meta_json();
  } else {
    m.notes.push_back("bundle: several bundles merged; meta_json is the first one's, not " +
                      directory + "/meta.json");
  }
  if (reader_.labels_json()) {
    if (m.labels_json.empty()) {
      m.labels_json = *reader_.labels_json();
    } else {
      m.notes.push_back("bundle: labels of " + directory + " not kept (labels already set)");
    }
  }
  for (const std::string& note : meta_.notes) m.notes.push_back("bundle meta: " + note);
  for (const wire::CaptureLayer& layer : meta_.capture) {
    if (!layer.enabled) {
      m.notes.push_back(fmt::format("capture layer {} was disabled: {}", layer.layer,
                                    layer.reason.empty() ? "no reason given" : layer.reason));
    }
  }
  if (process_count() == 0) {
    trace->stats.Increment(model::stat::kBundleNoProcessData);
    m.notes.push_back(fmt::format(
        "{}: no proc-* folder, expected one per traced process: nothing was recorded (the "
        "program did not start, or every capture layer was off)",
        directory));
  }
}

base::Status BundleParts::ImportProcess(size_t index, const ImportOptions& options,
                                        model::Trace* trace) const {
  const wire::ProcessDirectory& dir = reader_.processes()[index];
  const std::string& host = dir.host.empty() ? meta_.host : dir.host;
  const int32_t rank = RankOf(index) >= 0 ? RankOf(index) : options.rank_hint;
  Keys keys(&trace->strings);
  ProcessIndex process =
      trace->processes.Append(dir.pid, trace->strings.Intern(host), base::StringPool::kEmpty, rank,
                              trace->strings.Intern(dir.path));
  ProcessImporter importer(trace, keys, meta_, process, host);
  std::vector<wire::ReadIssue> issues;
  TELLER_ASSIGN_OR_RETURN(wire::EventFileStats stats,
                          reader_.ReadProcess(index, &importer, &issues));
  (void)stats;
  importer.Finish();
  AppendProcessEnd(dir.path, process, trace);
  ReportIssues(issues, trace);
  return base::OkStatus();
}

base::Status BundleParts::ImportLogs(ProcessIndex first_process, model::Trace* trace) const {
  // (host, pid) -> process, for logs.
  std::map<std::pair<std::string, int64_t>, ProcessIndex> by_host_pid;
  std::unordered_map<int64_t, ProcessIndex> by_pid;
  for (size_t row = first_process.value(); row < trace->processes.size(); ++row) {
    const ProcessIndex process(static_cast<ProcessIndex::rep_type>(row));
    const int64_t pid = trace->processes.os_pid[row];
    by_host_pid[{std::string(trace->str(trace->processes.host[row])), pid}] = process;
    auto [it, inserted] = by_pid.try_emplace(pid, process);
    if (!inserted) it->second = ProcessIndex::Invalid();  // same pid on two hosts
  }
  std::vector<wire::ReadIssue> issues;
  std::map<std::string, wire::HostClockConverter, std::less<>> log_clocks;  // by host
  TELLER_RETURN_IF_ERROR(reader_.ReadLogs(
      [&](const wire::LogLineRecord& line, const std::string& file, int64_t line_number) {
        ProcessIndex process = ProcessIndex::Invalid();
        if (!line.host.empty()) {
          auto it = by_host_pid.find({std::string(line.host), line.pid});
          if (it != by_host_pid.end()) process = it->second;
        } else if (auto it = by_pid.find(line.pid); it != by_pid.end()) {
          process = it->second;
        }
        if (!process.valid() && line.pid >= 0) {
          trace->stats.Increment(model::stat::kBundleLogUnknownPid);
        }
        int64_t ts = line.ts_ns;
        if (line.clock == wire::ClockDomain::kMonotonic) {
          std::string_view host =
              process.valid() ? trace->str(trace->processes.host[process.value()])
                              : std::string_view(line.host.empty() ? meta_.host : line.host);
          auto it = log_clocks.find(host);
          if (it == log_clocks.end()) {
            it = log_clocks.emplace(std::string(host), meta_.ClockPairsOf(host)).first;
          }
          if (!it->second.ToTrace(line.clock, line.ts_ns, &ts)) {
            trace->stats.Increment(model::stat::kBundleClockUnpaired);
          }
        }
        int32_t rank = line.rank;
        if (rank < 0 && process.valid()) rank = trace->processes.rank[process.value()];
        StringId source =
            trace->strings.Intern(line.source.empty() ? std::string_view(file) : line.source);
        trace->AppendLog(ts, process, line.pid, rank, model::LogLevel::kUnknown,
                         ToLogStream(line.stream, trace), base::StringPool::kEmpty,
                         model::TemplateId::Invalid(), trace->strings.Intern(line.text), source,
                         line.line > 0 ? line.line : line_number);
      },
      &issues));
  ReportIssues(issues, trace);
  return base::OkStatus();
}

void BundleParts::AppendCommandExit(ProcessIndex first_process, model::Trace* trace) const {
  constexpr std::string_view kNote = "command exit status ";
  int status = 0;
  for (const std::string& note : meta_.notes) {
    if (note.rfind(kNote, 0) == 0) status = std::atoi(note.c_str() + kNote.size());
  }
  if (status == 0 || status == 128 + SIGINT || status == 128 + SIGTERM) return;
  int64_t last_ns =
      LastEventEndNs(*trace, first_process,
                     ProcessIndex(static_cast<ProcessIndex::rep_type>(trace->processes.size())));
  for (uint32_t row = 0; row < trace->logs.size(); ++row) {
    const ProcessIndex process = trace->logs.process[row];
    if (process.valid() && process.value() < first_process.value()) continue;
    last_ns = std::max(last_ns, trace->logs.ts_ns[row]);
  }
  if (last_ns == INT64_MIN) last_ns = meta_.start_time_ns;
  capture::ProcessExit exit;
  exit.kind =
      status > 128 && status < 128 + 65 ? capture::ExitKind::kSignal : capture::ExitKind::kExit;
  exit.code = status;
  exit.signal = status - 128;
  trace->AppendLog(
      last_ns, ProcessIndex::Invalid(), -1, -1, model::LogLevel::kError, model::LogStream::kStderr,
      base::StringPool::kEmpty, model::TemplateId::Invalid(),
      trace->strings.Intern(fmt::format("teller record: the recorded command {}{}",
                                        exit.kind == capture::ExitKind::kSignal ? "was " : "",
                                        capture::DescribeExit(exit))),
      trace->strings.Intern(reader_.directory() + "/meta.json"), 1);
}

// The process folders in order, imported on up to options.threads threads (0: one per
// core), each into a part of its own that joins the trace in order: the same trace as
// one thread makes (BundleParts).
base::Status ImportBundle(const std::string& directory, const ImportOptions& options,
                          model::Trace* trace) {
  TELLER_ASSIGN_OR_RETURN(BundleParts bundle, BundleParts::Open(directory));
  bundle.ImportHead(trace);
  const ProcessIndex first_process(static_cast<ProcessIndex::rep_type>(trace->processes.size()));
  const size_t folders = bundle.process_count();
  const int threads = base::ThreadCount(options.threads);
  ImportOptions part_options = options;
  part_options.progress = nullptr;  // the joining thread reports
  std::optional<PartImports> parts;
  if (threads > 1 && folders > 1) {
    parts.emplace(folders, threads, [&](size_t i, model::Trace* part) {
      return bundle.ImportProcess(i, part_options, part);
    });
  }
  for (size_t i = 0; i < folders; ++i) {
    base::ReportProgress(options.progress, "import bundle", i, folders);
    if (!parts) {
      TELLER_RETURN_IF_ERROR(bundle.ImportProcess(i, options, trace));
      continue;
    }
    TELLER_ASSIGN_OR_RETURN(const model::Trace part, parts->Take(i));
    TELLER_RETURN_IF_ERROR(model::AppendTrace(part, trace));
  }
  bundle.NumberUnrankedProcesses(first_process, trace);
  TELLER_RETURN_IF_ERROR(bundle.ImportLogs(first_process, trace));
  bundle.AppendCommandExit(first_process, trace);
  if (options.progress) options.progress->Finish("import bundle");
  return base::OkStatus();
}

}  // namespace teller::import
