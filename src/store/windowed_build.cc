#include "store/windowed_build.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fmt/format.h"
#include "import/import_inputs.h"
#include "import/input_format.h"
#include "import/kineto_windows.h"
#include "store/trace_store.h"

namespace teller::store {
namespace {

using model::StatSeverity;
using model::StringId;
using model::Trace;

// Maps each window's ids onto the final trace and keeps what crosses windows.
class WindowMerger {
 public:
  WindowMerger(std::string source, Trace* shared) : source_(std::move(source)), shared_(shared) {
    source_id_ = shared_->strings.Intern(source_);
  }

  // The first step ordinal of each of the window's processes (steps of earlier windows).
  std::vector<int64_t> StepOrdinalBase(const Trace& window) {
    std::vector<int64_t> base(window.processes.size(), 0);
    for (size_t p = 0; p < window.processes.size(); ++p) {
      auto it = process_ids_.find(ProcessKey(window, p));
      if (it != process_ids_.end()) base[p] = steps_of_process_[it->second];
    }
    return base;
  }

  // Rewrites the window's ids as the final trace's and merges its shared facts.
  void Merge(const std::string& window_path, Trace* window) {
    std::vector<StringId> strings(window->strings.size());
    for (size_t i = 0; i < strings.size(); ++i) {
      std::string_view text = window->strings.Get(StringId(static_cast<uint32_t>(i)));
      strings[i] = text == window_path ? source_id_ : shared_->strings.Intern(text);
    }
    auto map_string = [&](StringId* id) {
      if (id->valid() && id->value() < strings.size()) *id = strings[id->value()];
    };
    std::vector<model::ProcessIndex> processes(window->processes.size());
    for (size_t p = 0; p < processes.size(); ++p) processes[p] = MergeProcess(*window, p, strings);
    std::vector<model::ThreadIndex> threads(window->threads.size());
    for (size_t t = 0; t < threads.size(); ++t) {
      threads[t] = MergeThread(*window, t, processes, strings);
    }
    model::EventTable& e = window->events;
    for (size_t i = 0; i < e.size(); ++i) {
      map_string(&e.name[i]);
      e.process[i] = processes[e.process[i].value()];
      e.thread[i] = threads[e.thread[i].value()];
    }
    for (StringId& id : window->args.key) map_string(&id);
    for (StringId& id : window->args.string_value) map_string(&id);
    model::CollectiveTable& c = window->collectives;
    for (size_t i = 0; i < c.size(); ++i) {
      map_string(&c.communicator[i]);
      map_string(&c.op[i]);
      map_string(&c.dtype[i]);
    }
    model::StepTable& s = window->steps;
    for (size_t i = 0; i < s.size(); ++i) {
      map_string(&s.name[i]);
      ++steps_of_process_[processes[s.process[i].value()].value()];
      s.process[i] = processes[s.process[i].value()];
      s.thread[i] = threads[s.thread[i].value()];
    }
    std::vector<model::RequestIndex> requests(window->requests.size());
    for (size_t r = 0; r < requests.size(); ++r) requests[r] = MergeRequest(*window, r, strings);
    for (model::RequestIndex& request : window->step_requests) {
      if (request.valid()) request = requests[request.value()];
    }
    for (const auto& [name, entry] : window->stats.entries()) {
      shared_->stats.Increment(name, entry.value, entry.severity);
    }
    for (const std::string& note : window->meta.notes) {
      std::string text = note;
      for (size_t at = text.find(window_path); at != std::string::npos;
           at = text.find(window_path, at + source_.size())) {
        text.replace(at, window_path.size(), source_);
      }
      if (notes_seen_.insert(text).second) shared_->meta.notes.push_back(text);
    }
    shared_->meta.AddInputFormat(window->meta.format);
  }

 private:
  using ProcessKeyT = std::pair<int64_t, std::string>;  // os pid, host
  static ProcessKeyT ProcessKey(const Trace& window, size_t p) {
    return {window.processes.os_pid[p], std::string(window.str(window.processes.host[p]))};
  }

  model::ProcessIndex MergeProcess(const Trace& window, size_t p,
                                   const std::vector<StringId>& strings) {
    ProcessKeyT key = ProcessKey(window, p);
    auto it = process_ids_.find(key);
    if (it != process_ids_.end()) return model::ProcessIndex(it->second);
    const model::ProcessTable& from = window.processes;
    model::ProcessTable& to = shared_->processes;
    model::ProcessIndex index = to.Append(from.os_pid[p], strings[from.host[p].value()],
                                          strings[from.name[p].value()], from.rank[p], source_id_);
    to.node.back() = from.node[p];
    to.clock_offset_ns.back() = from.clock_offset_ns[p];
    to.clock_uncertainty_ns.back() = from.clock_uncertainty_ns[p];
    process_ids_.emplace(std::move(key), index.value());
    steps_of_process_.push_back(0);
    return index;
  }

  model::ThreadIndex MergeThread(const Trace& window, size_t t,
                                 const std::vector<model::ProcessIndex>& processes,
                                 const std::vector<StringId>& strings) {
    const model::ThreadTable& from = window.threads;
    auto key = std::make_tuple(processes[from.process[t].value()].value(), from.os_tid[t],
                               from.is_device[t], from.device[t]);
    auto it = thread_ids_.find(key);
    if (it != thread_ids_.end()) return model::ThreadIndex(it->second);
    model::ThreadIndex index = shared_->threads.Append(
        processes[from.process[t].value()], from.os_tid[t], strings[from.name[t].value()],
        from.is_device[t] != 0, from.device[t]);
    thread_ids_.emplace(key, index.value());
    return index;
  }

  model::RequestIndex MergeRequest(const Trace& window, size_t r,
                                   const std::vector<StringId>& strings) {
    const model::RequestTable& from = window.requests;
    StringId id = strings[from.id[r].value()];
    model::RequestTable& to = shared_->requests;
    auto it = request_ids_.find(id.value());
    if (it == request_ids_.end()) {
      uint32_t index = static_cast<uint32_t>(to.size());
      to.id.push_back(id);
      to.first_ns.push_back(from.first_ns[r]);
      to.last_ns.push_back(from.last_ns[r]);
      to.step_count.push_back(from.step_count[r]);
      request_ids_.emplace(id.value(), index);
      return model::RequestIndex(index);
    }
    uint32_t index = it->second;
    to.first_ns[index] = std::min(to.first_ns[index], from.first_ns[r]);
    to.last_ns[index] = std::max(to.last_ns[index], from.last_ns[r]);
    to.step_count[index] += from.step_count[r];
    return model::RequestIndex(index);
  }

  std::string source_;
  Trace* shared_;
  StringId source_id_;
  std::map<ProcessKeyT, uint32_t> process_ids_;
  std::vector<int64_t> steps_of_process_;  // by final process index
  std::map<std::tuple<uint32_t, int64_t, uint8_t, int32_t>, uint32_t> thread_ids_;
  std::unordered_map<uint32_t, uint32_t> request_ids_;
  std::set<std::string> notes_seen_;
};

// Removes the spill folder (and what is left in it) when the build ends.
struct SpillFolder {
  std::string path;
  bool created = false;
  ~SpillFolder() {
    if (!created) return;
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

base::StatusOr<int64_t> ChooseWindowEvents(const std::vector<std::string>& inputs,
                                           int64_t requested) {
  const int64_t default_window_events = WindowedBuildOptions().window_events;
  if (requested == 0) return int64_t{0};
  std::error_code ec;
  bool one_kineto_file = false;
  uint64_t bytes = 0;
  if (inputs.size() == 1 && std::filesystem::is_regular_file(inputs[0], ec)) {
    base::StatusOr<import::InputFormat> format = import::DetectFormat(inputs[0]);
    one_kineto_file = format.ok() && *format == import::InputFormat::kKineto;
    bytes = std::filesystem::file_size(inputs[0], ec);
    if (ec) bytes = 0;
    std::string_view name = inputs[0];
    if (name.size() > 3 && name.substr(name.size() - 3) == ".gz") bytes *= 15;
  }
  if (requested > 0) {
    if (!one_kineto_file) {
      return base::InvalidArgument(
          "--window-events: a windowed build takes exactly one Kineto JSON file; got {} "
          "input(s){}",
          inputs.size(), inputs.size() == 1 ? " that is not a Kineto JSON file" : "");
    }
    return requested;
  }
  return one_kineto_file && bytes >= kWindowedBuildBytes ? default_window_events : int64_t{0};
}

base::StatusOr<WindowedBuildSummary> BuildStoreWindowed(const std::string& kineto_path,
                                                        const std::string& store_path,
                                                        const WindowedBuildOptions& options) {
  base::ProgressSink* progress = options.import.progress;
  import::KinetoWindowOptions window_options;
  window_options.window_events = options.window_events;
  window_options.progress = progress;
  TELLER_ASSIGN_OR_RETURN(import::KinetoWindowPlan plan,
                          import::PlanKinetoWindows(kineto_path, window_options));

  SpillFolder spill;
  spill.path = options.spill_directory.empty() ? store_path + ".windows" : options.spill_directory;
  std::error_code ec;
  if (std::filesystem::exists(spill.path, ec)) {
    return base::InvalidArgument("{}: exists; the windowed build needs it as a new folder",
                                 spill.path);
  }
  if (!std::filesystem::create_directories(spill.path, ec) || ec) {
    return base::IoError("{}: cannot create the folder for window files: {}", spill.path,
                         ec ? ec.message() : "unknown error");
  }
  spill.created = true;
  TELLER_ASSIGN_OR_RETURN(
      std::vector<std::string> window_paths,
      import::SplitKinetoWindows(kineto_path, plan, spill.path, window_options));

  TELLER_ASSIGN_OR_RETURN(StoreWriter writer, StoreWriter::Create(store_path));
  Trace shared;
  shared.meta.sources.push_back(kineto_path);
  WindowMerger merger(kineto_path, &shared);
  import::ImportOptions import_options = options.import;
  import_options.progress = nullptr;
  for (size_t w = 0; w < window_paths.size(); ++w) {
    base::ReportProgress(progress, "windows", w, window_paths.size());
    Trace window;
    TELLER_RETURN_IF_ERROR(import::ImportKineto(window_paths[w], import_options, &window));
    std::filesystem::remove(window_paths[w], ec);
    if (options.reconstruct) {
      reconstruct::BuildOptions build = options.build;
      build.progress = nullptr;
      build.step_ordinal_base = merger.StepOrdinalBase(window);
      TELLER_RETURN_IF_ERROR(reconstruct::BuildCallChains(&window, build));
    }
    merger.Merge(window_paths[w], &window);
    TELLER_RETURN_IF_ERROR(writer.Append(window));
  }
  base::ReportProgress(progress, "windows", window_paths.size(), window_paths.size());
  if (progress) progress->Finish("windows");

  model::Stats& stats = shared.stats;
  // Metadata events were read once per window.
  stats.Set(model::stat::kKinetoEventsRead, plan.events);
  TELLER_RETURN_IF_ERROR(import::CheckEventsKept(kineto_path, import::InputFormat::kKineto,
                                                 model::Stats(), stats, writer.events_written()));
  stats.Set(model::stat::kBuildWindows, static_cast<int64_t>(plan.windows()));
  if (plan.windows_over_budget > 0) {
    stats.Set(model::stat::kBuildWindowsOverBudget, plan.windows_over_budget);
  }
  if (!plan.truncation.empty()) {
    stats.Set(model::stat::kKinetoTruncatedFile, 1);
    shared.meta.notes.push_back(
        fmt::format("{}: truncated file: {}; the {} complete events before the cut were imported",
                    kineto_path, plan.truncation, plan.events));
  }
  shared.meta.notes.push_back(fmt::format(
      "built in {} time windows of about {} events (the largest {}), cut where no event ran "
      "(timeline resolution {} us); step numbers without an input number continue across "
      "windows, clock offsets are estimated per window",
      plan.windows(), options.window_events, plan.largest_window_events,
      plan.resolution_ns / 1000));
  shared.reconstructed = options.reconstruct;

  WindowedBuildSummary summary;
  summary.windows = static_cast<int64_t>(plan.windows());
  summary.events = writer.events_written();
  summary.steps = writer.steps_written();
  summary.nodes = writer.nodes_written();
  summary.requests = static_cast<int64_t>(shared.requests.size());
  summary.largest_window_events = plan.largest_window_events;
  summary.windows_over_budget = plan.windows_over_budget;
  TELLER_RETURN_IF_ERROR(writer.Finish(shared));
  return summary;
}

}  // namespace teller::store
