// Test helpers: tiny hand-built traces and a text dump of reconstructed trees.
#pragma once

#include <string>
#include <string_view>

#include "fmt/format.h"
#include "model/trace.h"

namespace teller::reconstruct::testing {

using model::EventPhase;
using model::EventRow;
using model::Layer;
using model::ProcessIndex;
using model::ThreadIndex;

class TinyTrace {
 public:
  ProcessIndex Process(int64_t pid, std::string_view host = "", int32_t rank = -1) {
    return trace.processes.Append(pid, trace.strings.Intern(host), trace.strings.Intern("python"),
                                  rank, base::StringPool::kEmpty);
  }
  ThreadIndex HostThread(ProcessIndex process, int64_t tid) {
    return trace.threads.Append(process, tid, base::StringPool::kEmpty, false, -1);
  }
  ThreadIndex Stream(ProcessIndex process, int64_t stream) {
    return trace.threads.Append(process, stream, base::StringPool::kEmpty, true, 0);
  }
  // A complete event; correlation -1 means none.
  EventRow X(ThreadIndex thread, Layer layer, std::string_view name, int64_t start_ns,
             int64_t dur_ns, int64_t correlation = -1, uint8_t flags = model::kFlagNone) {
    return trace.events.Append(
        layer, EventPhase::kComplete, trace.strings.Intern(name), ProcessOf(thread), thread,
        start_ns, dur_ns, model::EventId::Invalid(),
        correlation >= 0 ? model::CorrelationId(correlation) : model::CorrelationId::Invalid(),
        flags);
  }
  EventRow Begin(ThreadIndex thread, Layer layer, std::string_view name, int64_t start_ns,
                 int64_t id = -1) {
    return trace.events.Append(layer, EventPhase::kBegin, trace.strings.Intern(name),
                               ProcessOf(thread), thread, start_ns, 0, Id(id));
  }
  EventRow End(ThreadIndex thread, int64_t start_ns, int64_t id = -1) {
    return trace.events.Append(Layer::kFe, EventPhase::kEnd, base::StringPool::kEmpty,
                               ProcessOf(thread), thread, start_ns, 0, Id(id));
  }
  // A STEP range with the hook's args.
  EventRow Step(ThreadIndex thread, int64_t start_ns, int64_t dur_ns, int64_t number,
                std::string_view phase, std::string_view requests) {
    EventRow row = X(thread, Layer::kStep, "step", start_ns, dur_ns);
    trace.AddIntArg(row, trace.strings.Intern("step"), number);
    trace.AddStringArg(row, trace.strings.Intern("phase"), trace.strings.Intern(phase));
    trace.AddStringArg(row, trace.strings.Intern("requests"), trace.strings.Intern(requests));
    return row;
  }
  void Collective(EventRow row, std::string_view communicator, int64_t sequence,
                  std::string_view op) {
    model::CollectiveTable& c = trace.collectives;
    c.event.push_back(row);
    c.communicator.push_back(trace.strings.Intern(communicator));
    c.sequence.push_back(sequence);
    c.op.push_back(trace.strings.Intern(op));
    c.size_bytes.push_back(-1);
    c.dtype.push_back(base::StringPool::kEmpty);
    c.group_size.push_back(-1);
    c.group_rank.push_back(-1);
  }
  size_t Log(int64_t ts_ns, ProcessIndex process, int32_t rank, std::string_view request) {
    return trace.AppendLog(ts_ns, process, -1, rank, model::LogLevel::kInfo,
                           model::LogStream::kStdout, trace.strings.Intern(request),
                           model::TemplateId(0), trace.strings.Intern("line"),
                           base::StringPool::kEmpty, 1);
  }

  model::Trace trace;

 private:
  ProcessIndex ProcessOf(ThreadIndex thread) const { return trace.threads.process[thread.value()]; }
  static model::EventId Id(int64_t id) {
    return id >= 0 ? model::EventId(id) : model::EventId::Invalid();
  }
};

// One line per node: two spaces per depth level, layer, name.
inline std::string DumpStep(const model::Trace& trace, size_t step) {
  std::string out;
  for (uint32_t n = trace.steps.node_begin[step].value(); n < trace.steps.node_end[step].value();
       ++n) {
    uint32_t row = trace.nodes.event[n].value();
    out +=
        fmt::format("{:{}}{} {}\n", "", 2 * trace.nodes.depth[n],
                    model::LayerName(trace.events.layer[row]), trace.str(trace.events.name[row]));
  }
  return out;
}

}  // namespace teller::reconstruct::testing
