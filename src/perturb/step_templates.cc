#include "perturb/step_templates.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <initializer_list>
#include <map>
#include <string_view>
#include <unordered_map>

#include "base/robust.h"
#include "import/import_inputs.h"
#include "localize/operator_family.h"
#include "model/classify.h"
#include "reconstruct/call_chain_builder.h"

namespace teller::perturb {
namespace {

using localize::OperatorFamily;

bool Contains(std::string_view text, std::string_view word) {
  return text.find(word) != std::string_view::npos;
}

std::string ToLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

wire::CopyKind CopyKindOfName(std::string_view name) {
  const std::string lower = ToLower(name);
  if (Contains(lower, "htod")) return wire::CopyKind::kHtoD;
  if (Contains(lower, "dtoh")) return wire::CopyKind::kDtoH;
  if (Contains(lower, "dtod")) return wire::CopyKind::kDtoD;
  if (Contains(lower, "htoh")) return wire::CopyKind::kHtoH;
  if (Contains(lower, "ptop")) return wire::CopyKind::kPtoP;
  return wire::CopyKind::kUnknown;
}

wire::SyncType SyncTypeOfName(std::string_view name) {
  const std::string lower = ToLower(name);
  if (Contains(lower, "wait")) return wire::SyncType::kStreamWaitEvent;
  if (Contains(lower, "event")) return wire::SyncType::kEventSynchronize;
  if (Contains(lower, "stream")) return wire::SyncType::kStreamSynchronize;
  if (Contains(lower, "context") || Contains(lower, "device")) {
    return wire::SyncType::kContextSynchronize;
  }
  return wire::SyncType::kUnknown;
}

// Host calls that return only when device work is done.
bool WaitsForDevice(std::string_view name) {
  if (Contains(name, "Synchronize")) return true;
  // Blocking copies (cudaMemcpy, hipMemcpy, cuMemcpyDtoH...), not the Async ones.
  return Contains(name, "Memcpy") && !Contains(name, "Async");
}

// Robust sigma (base::SigmaOfMad) of log durations of same-named events, the median over
// names with at least 3 events of 1 us or more; 0 when no name qualifies.
double MeasureSigma(const std::map<std::string_view, std::vector<double>>& durations) {
  std::vector<double> sigmas;
  for (const auto& [name, values] : durations) {
    if (values.size() < 3) continue;
    std::vector<double> logs;
    for (double v : values) logs.push_back(std::log(v));
    auto median = [](std::vector<double> x) {
      std::nth_element(x.begin(), x.begin() + static_cast<ptrdiff_t>(x.size() / 2), x.end());
      return x[x.size() / 2];
    };
    const double m = median(logs);
    for (double& l : logs) l = std::abs(l - m);
    sigmas.push_back(base::SigmaOfMad(median(logs)));
  }
  if (sigmas.empty()) return 0;
  std::nth_element(sigmas.begin(), sigmas.begin() + static_cast<ptrdiff_t>(sigmas.size() / 2),
                   sigmas.end());
  return sigmas[sigmas.size() / 2];
}

constexpr double kSameNameCap = 0.15;

// Robust sigma of the log-ratio of the same event (name and ordinal among its name) in
// consecutive steps of the same structure, over sqrt(2); 0 with fewer than 20 pairs.
double StepToStepSigma(const std::vector<StepTemplate>& steps, bool device) {
  auto counted = [&](const TemplateEvent& e) {
    if (e.dur_ns < 1000) return false;
    if (device) return e.kind == EventKind::kKernel || e.kind == EventKind::kMemcpy;
    return e.kind == EventKind::kApi && !e.waits;
  };
  std::vector<double> diffs;
  std::map<std::string_view, std::vector<int64_t>> previous;
  for (const StepTemplate& t : steps) {
    std::map<std::string_view, std::vector<int64_t>> current;
    for (const TemplateEvent& e : t.events) {
      if (counted(e)) current[e.name].push_back(e.dur_ns);
    }
    for (const auto& [name, durations] : current) {
      auto it = previous.find(name);
      if (it == previous.end() || it->second.size() != durations.size()) continue;
      for (size_t i = 0; i < durations.size(); ++i) {
        diffs.push_back(
            std::log(static_cast<double>(durations[i]) / static_cast<double>(it->second[i])));
      }
    }
    previous = std::move(current);
  }
  if (diffs.size() < 20) return 0;
  auto median = [](std::vector<double> x) {
    std::nth_element(x.begin(), x.begin() + static_cast<ptrdiff_t>(x.size() / 2), x.end());
    return x[x.size() / 2];
  };
  const double m = median(diffs);
  for (double& d : diffs) d = std::abs(d - m);
  return base::SigmaOfMad(median(diffs)) / std::sqrt(2.0);
}

// The process whose steps become templates: the one with the most steps (ties: the
// lowest rank, then the first).
int64_t BusiestProcess(const model::Trace& trace) {
  std::map<uint32_t, int64_t> count;
  for (size_t s = 0; s < trace.steps.size(); ++s) ++count[trace.steps.process[s].value()];
  int64_t best = -1, best_count = 0;
  for (const auto& [process, n] : count) {
    if (n > best_count) {
      best = process;
      best_count = n;
    }
  }
  return best;
}

// The integers of a shape arg's text ("[512, 1, 1]", "512,1,1", "[2, 1, 1];[128, 1, 1]"),
// into dims in order, three each.
void ReadDims(std::string_view text, std::initializer_list<wire::Dim3*> dims) {
  std::vector<int32_t> values;
  for (size_t i = 0; i < text.size();) {
    if (text[i] < '0' || text[i] > '9') {
      ++i;
      continue;
    }
    int64_t value = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      value = std::min<int64_t>(value * 10 + (text[i] - '0'), INT32_MAX);
    }
    values.push_back(static_cast<int32_t>(value));
  }
  size_t next = 0;
  for (wire::Dim3* dim : dims) {
    if (next + 3 > values.size()) return;
    *dim = {values[next], values[next + 1], values[next + 2]};
    next += 3;
  }
}

// The arg keys a kernel's launch shape is under, whichever importer wrote them (Kineto's
// one "grid;block", nsys' and bundles' "grid" and "block"); invalid where the trace has none.
struct LaunchShapeKeys {
  explicit LaunchShapeKeys(const model::Trace& trace)
      : grid_block(trace.FindArgKey("grid;block")),
        grid(trace.FindArgKey("grid")),
        block(trace.FindArgKey("block")) {}
  base::StringId grid_block, grid, block;
};

void ReadLaunchShape(const model::Trace& trace, const LaunchShapeKeys& keys, uint32_t row,
                     wire::Dim3* grid, wire::Dim3* block) {
  const model::EventRow event(row);
  base::StringId text;
  if (keys.grid_block.valid() && trace.FindStringArg(event, keys.grid_block, &text)) {
    ReadDims(trace.str(text), {grid, block});
  }
  if (keys.grid.valid() && trace.FindStringArg(event, keys.grid, &text)) {
    ReadDims(trace.str(text), {grid});
  }
  if (keys.block.valid() && trace.FindStringArg(event, keys.block, &text)) {
    ReadDims(trace.str(text), {block});
  }
}

// What an event of the source trace becomes; false when it is left out.
bool KindOf(const model::Trace& trace, uint32_t row, EventKind* kind) {
  const model::Layer layer = trace.events.layer[row];
  const model::ThreadIndex thread = trace.events.thread[row];
  const bool device = thread.valid() && trace.threads.is_device[thread.value()] != 0;
  const std::string_view name = trace.str(trace.events.name[row]);
  if (trace.events.phase[row] == model::EventPhase::kInstant) return false;
  if (device) {
    switch (layer) {
      case model::Layer::kK:
      case model::Layer::kComm:
        *kind = EventKind::kKernel;
        return true;
      case model::Layer::kMem:
        *kind = Contains(ToLower(name), "memset") ? EventKind::kMemset : EventKind::kMemcpy;
        return true;
      case model::Layer::kSync:
        *kind = EventKind::kSync;
        return true;
      default:
        return false;
    }
  }
  switch (layer) {
    case model::Layer::kRt:
    case model::Layer::kDrv:
    case model::Layer::kSync:
      *kind = EventKind::kApi;
      return true;
    case model::Layer::kStep:
    case model::Layer::kFe:
    case model::Layer::kBe:
    case model::Layer::kComm:
    case model::Layer::kOther:
      *kind = EventKind::kRange;
      return true;
    default:
      return false;
  }
}

class TemplateReader {
 public:
  TemplateReader(const model::Trace& trace, TraceTemplates* out)
      : trace_(trace), out_(out), shape_keys_(trace) {}

  std::string_view Intern(std::string_view name) {
    auto it = names_.find(name);
    if (it != names_.end()) return it->second;
    out_->names.emplace_back(name);
    std::string_view stored = out_->names.back();
    names_.emplace(stored, stored);
    return stored;
  }

  // One step's nodes as a template.
  StepTemplate Read(size_t step) {
    StepTemplate t;
    t.source_step = trace_.steps.number[step];
    t.phase = PhaseOf(trace_.steps.phase[step]);
    const uint32_t begin = trace_.steps.node_begin[step].value();
    const uint32_t end = trace_.steps.node_end[step].value();
    std::vector<uint32_t> rows;
    for (uint32_t n = begin; n < end; ++n) {
      const uint32_t row = trace_.nodes.event[n].value();
      if (trace_.events.flags[row] & model::kFlagSynthetic) continue;
      rows.push_back(row);
    }
    std::stable_sort(rows.begin(), rows.end(), [&](uint32_t a, uint32_t b) {
      return trace_.events.start_ns[a] < trace_.events.start_ns[b];
    });
    int64_t origin = trace_.steps.start_ns[step];
    for (uint32_t row : rows) origin = std::min(origin, trace_.events.start_ns[row]);
    const model::ThreadIndex main = trace_.steps.thread[step];
    t.main_tid = main.valid() ? trace_.threads.os_tid[main.value()] : 0;
    std::unordered_map<uint64_t, int32_t> launch_of;
    int64_t last_end = origin;
    for (uint32_t row : rows) {
      EventKind kind;
      if (!KindOf(trace_, row, &kind)) continue;
      TemplateEvent e = EventOf(row, kind, origin);
      if (e.kind == EventKind::kApi && e.correlation != 0) {
        launch_of.emplace(e.correlation, static_cast<int32_t>(t.events.size()));
      }
      const bool on_device = e.kind != EventKind::kRange && e.kind != EventKind::kApi;
      if (on_device && e.correlation != 0) {
        auto it = launch_of.find(e.correlation);
        if (it != launch_of.end()) e.launch = it->second;
      }
      if (!on_device) threads_.emplace(e.tid, trace_.events.thread[row]);
      last_end = std::max(last_end, origin + e.start_ns + e.dur_ns);
      Measure(e);
      t.events.push_back(e);
    }
    MarkCopyWaits(&t);
    t.duration_ns = last_end - origin;
    if (t.main_tid == 0 && !t.events.empty()) t.main_tid = t.events.front().tid;
    return t;
  }

  void Finish() {
    for (const auto& [tid, thread] : threads_) {
      HostThread h;
      h.tid = tid;
      if (thread.valid()) h.name = std::string(trace_.str(trace_.threads.name[thread.value()]));
      if (h.name.empty()) h.name = fmt::format("thread {}", tid);
      out_->threads.push_back(std::move(h));
    }
    double device = StepToStepSigma(out_->steps, true);
    double host = StepToStepSigma(out_->steps, false);
    out_->sigma_method = "step_to_step";
    if (device <= 0) {
      // Same-named kernels of different layers also differ in shape: capped.
      device = std::min(MeasureSigma(device_durations_), kSameNameCap);
      host = std::min(MeasureSigma(host_durations_), kSameNameCap);
      out_->sigma_method = "same_name";
    }
    out_->sigma_measured = device > 0;
    if (!out_->sigma_measured) out_->sigma_method = "fallback";
    out_->device_sigma = device > 0 ? std::clamp(device, 0.005, 0.3) : 0.02;
    out_->host_sigma = host > 0 ? std::clamp(host, 0.005, 0.3) : out_->device_sigma;
    if (!out_->sigma_measured) {
      out_->notes.push_back(
          "jitter: no kernel repeats across steps or 3 times by name, so device durations "
          "jitter by the fallback 2%");
    }
  }

 private:
  static std::string PhaseOf(model::StepPhase phase) {
    switch (phase) {
      case model::StepPhase::kPrefill:
        return "prefill";
      case model::StepPhase::kDecode:
        return "decode";
      default:
        return "mixed";
    }
  }

  TemplateEvent EventOf(uint32_t row, EventKind kind, int64_t origin) {
    TemplateEvent e;
    e.kind = kind;
    e.layer = trace_.events.layer[row];
    if (e.layer == model::Layer::kStep) e.layer = model::Layer::kFe;
    e.name = Intern(trace_.str(trace_.events.name[row]));
    e.start_ns = trace_.events.start_ns[row] - origin;
    e.dur_ns = std::max<int64_t>(0, trace_.events.dur_ns[row]);
    const model::ThreadIndex thread = trace_.events.thread[row];
    const int64_t os_tid = thread.valid() ? trace_.threads.os_tid[thread.value()] : 0;
    const model::CorrelationId correlation = trace_.events.correlation[row];
    e.correlation = correlation.valid() ? static_cast<uint64_t>(correlation.value()) : 0;
    switch (kind) {
      case EventKind::kRange:
        e.tid = os_tid;
        break;
      case EventKind::kApi:
        e.tid = os_tid;
        e.driver = e.layer == model::Layer::kDrv;
        e.waits = WaitsForDevice(e.name);
        break;
      default:
        e.graph_node = (trace_.events.flags[row] & model::kFlagGraphNode) != 0;
        e.stream = os_tid;
        e.device = thread.valid() ? std::max(0, trace_.threads.device[thread.value()]) : 0;
        e.family = FamilyOfDevice(e.layer, e.name);
        if (kind == EventKind::kKernel) {
          ReadLaunchShape(trace_, shape_keys_, row, &e.grid, &e.block);
        }
        e.copy_kind = CopyKindOfName(e.name);
        e.sync_type = SyncTypeOfName(e.name);
        break;
    }
    return e;
  }

  // A copy call (cudaMemcpyAsync to pageable memory, hipMemcpyWithStream) that returned
  // only after its copy ended waited for it: its replay ends after the replayed copy.
  static void MarkCopyWaits(StepTemplate* t) {
    for (size_t k = 0; k < t->events.size(); ++k) {
      const TemplateEvent& d = t->events[k];
      if (d.launch < 0 || d.kind == EventKind::kRange || d.kind == EventKind::kApi) continue;
      TemplateEvent& call = t->events[static_cast<size_t>(d.launch)];
      if (!Contains(call.name, "Memcpy") || call.waits_for >= 0) continue;
      if (d.start_ns + d.dur_ns <= call.start_ns + call.dur_ns) {
        call.waits_for = static_cast<int32_t>(k);
      }
    }
  }

  void Measure(const TemplateEvent& e) {
    if (e.dur_ns < 1000) return;
    const bool device = e.kind == EventKind::kKernel || e.kind == EventKind::kMemcpy;
    if (device) device_durations_[e.name].push_back(static_cast<double>(e.dur_ns));
    if (e.kind == EventKind::kApi && !e.waits) {
      host_durations_[e.name].push_back(static_cast<double>(e.dur_ns));
    }
  }

  const model::Trace& trace_;
  TraceTemplates* out_;
  const LaunchShapeKeys shape_keys_;
  std::map<std::string_view, std::string_view> names_;
  std::map<int64_t, model::ThreadIndex> threads_;
  std::map<std::string_view, std::vector<double>> device_durations_, host_durations_;
};

}  // namespace

sim::Family FamilyOfDevice(model::Layer layer, std::string_view name) {
  if (layer == model::Layer::kMem) return sim::Family::kMemory;
  if (layer == model::Layer::kSync) return sim::Family::kSync;
  switch (localize::ClassifyOperator(layer, name)) {
    case OperatorFamily::kGemm:
    case OperatorFamily::kConv:
    case OperatorFamily::kMoe:
    case OperatorFamily::kQuantization:
      return sim::Family::kGemm;
    case OperatorFamily::kAttention:
    case OperatorFamily::kSoftmax:
      return sim::Family::kAttention;
    case OperatorFamily::kNorm:
      return sim::Family::kNorm;
    case OperatorFamily::kRotary:
      return sim::Family::kRotary;
    case OperatorFamily::kActivation:
      return sim::Family::kActivation;
    case OperatorFamily::kKvCache:
      return sim::Family::kKvCache;
    case OperatorFamily::kEmbedding:
      return sim::Family::kEmbedding;
    case OperatorFamily::kSampling:
    case OperatorFamily::kSort:
      return sim::Family::kSampling;
    case OperatorFamily::kMemcpy:
    case OperatorFamily::kMemset:
      return sim::Family::kMemory;
    case OperatorFamily::kAllReduce:
    case OperatorFamily::kAllGather:
    case OperatorFamily::kReduceScatter:
    case OperatorFamily::kAllToAll:
    case OperatorFamily::kSendRecv:
    case OperatorFamily::kBroadcast:
    case OperatorFamily::kCollectiveOther:
      return sim::Family::kCommunication;
    default:
      return layer == model::Layer::kComm ? sim::Family::kCommunication : sim::Family::kElementwise;
  }
}

base::StatusOr<TraceTemplates> TemplatesOf(const model::Trace& trace, const std::string& source) {
  TraceTemplates out;
  out.source = source;
  const int64_t process = BusiestProcess(trace);
  if (process < 0) {
    return base::InvalidArgument(
        "{}: no step found (expected engine annotations, "
        "ProfilerStep#N or top-level host ranges)",
        source);
  }
  out.pid = trace.processes.os_pid[static_cast<size_t>(process)];
  out.rank = std::max(0, trace.processes.rank[static_cast<size_t>(process)]);
  TemplateReader reader(trace, &out);
  for (size_t s = 0; s < trace.steps.size(); ++s) {
    if (trace.steps.process[s].value() != static_cast<uint32_t>(process)) continue;
    if (out.step_source.empty()) {
      out.step_source = std::string(model::StepSourceName(trace.steps.source[s]));
    }
    StepTemplate t = reader.Read(s);
    bool device_work = false;
    for (const TemplateEvent& e : t.events) {
      device_work |= e.kind == EventKind::kKernel || e.kind == EventKind::kMemcpy;
    }
    if (!device_work || t.duration_ns <= 0) continue;
    out.steps.push_back(std::move(t));
  }
  if (out.steps.empty()) {
    return base::InvalidArgument(
        "{}: no usable step (expected a step with at least one kernel or copy)", source);
  }
  reader.Finish();
  out.notes.insert(out.notes.begin(),
                   fmt::format("templates: {} step(s) of {} (steps from {}), jitter sigma "
                               "{:.4f} device / {:.4f} host ({})",
                               out.steps.size(), source, out.step_source, out.device_sigma,
                               out.host_sigma, out.sigma_method));
  return out;
}

base::StatusOr<TraceTemplates> LoadTemplates(const std::vector<std::string>& paths) {
  if (paths.empty()) return base::InvalidArgument("perturb: no input trace given");
  model::Trace trace;
  import::ImportOptions options;
  TELLER_RETURN_IF_ERROR(import::ImportInputs(paths, options, &trace).status());
  TELLER_RETURN_IF_ERROR(reconstruct::BuildCallChains(&trace));
  std::string source;
  for (const std::string& p : paths) source += (source.empty() ? "" : ",") + p;
  return TemplatesOf(trace, source);
}

}  // namespace teller::perturb
