#include "import/kineto_windows.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <utility>

#include "base/file_util.h"
#include "base/time.h"
#include "fmt/format.h"
#include "import/kineto_json_key.h"
#include "import/kineto_json_scanner.h"
#include "simdjson.h"

namespace teller::import {
namespace {

namespace od = simdjson::ondemand;

constexpr size_t kWindowReadChunkBytes = size_t{1} << 20;
constexpr size_t kMaxWindows = 4096;
// Ends beyond this (about year 2262) are damaged values; the timeline adds a cell to them.
constexpr int64_t kLatestEnd = INT64_MAX / 2;

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

// a - b, or the int64 bound it would pass.
int64_t SaturatingSub(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_sub_overflow(a, b, &out)) return b > 0 ? INT64_MIN : INT64_MAX;
  return out;
}

// a * b for b > 0, at most limit.
int64_t SaturatingMul(int64_t a, int64_t b, int64_t limit) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out) || out > limit) return limit;
  return out;
}

// What the plan needs of one event.
struct EventTimes {
  char ph = 0;
  bool has_ts = false;
  bool has_dur = false;
  bool blocks_cuts = true;  // false for Python frames and the profiler's own spans
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  std::string_view pid;  // raw JSON tokens, for pairing B/E
  std::string_view tid;
};

bool ParseTime(od::value value, int64_t* out) {
  od::json_type type;
  if (value.type().get(type)) return false;
  std::string_view text;
  if (type == od::json_type::string) {
    if (value.get_string().get(text)) return false;
  } else {
    text = TrimRight(value.raw_json_token());
  }
  base::StatusOr<base::TimeNs> ns = base::ParseDecimalMicrosAsNs(text);
  if (!ns.ok()) return false;
  *out = *ns;
  return true;
}

// False when the element is not a JSON object.
bool ReadEventTimes(od::parser* parser, std::string_view text, EventTimes* event) {
  od::document doc;
  if (parser->iterate(text.data(), text.size(), text.size() + KinetoJsonScanner::kPaddingBytes)
          .get(doc)) {
    return false;
  }
  od::object object;
  if (doc.get_object().get(object)) return false;
  for (auto field_result : object) {
    od::field field;
    if (std::move(field_result).get(field)) return false;
    std::string_view key = RawKey(field.key());
    od::value value = field.value();
    if (key == "ph") {
      std::string_view ph;
      if (value.get_string().get(ph)) return false;
      event->ph = ph.size() == 1 ? ph[0] : '?';
    } else if (key == "ts") {
      // Times past +-kLatestEnd (year 2116 as epoch ns) are damage, read as untimed.
      event->has_ts = ParseTime(value, &event->ts_ns) && event->ts_ns > -kLatestEnd &&
                      event->ts_ns < kLatestEnd;
    } else if (key == "dur") {
      event->has_dur = ParseTime(value, &event->dur_ns);
    } else if (key == "cat") {
      std::string_view cat;
      if (!value.get_string().get(cat)) {
        event->blocks_cuts = cat != "python_function" && cat != "Trace" && cat != "overhead";
      }
    } else if (key == "pid") {
      event->pid = value.raw_json_token();
    } else if (key == "tid") {
      event->tid = value.raw_json_token();
    }
  }
  return true;
}

// Scans a chrome trace and hands out each traceEvents element and each other
// top-level value. Batches from the scanner are split into their elements.
class ElementReader {
 public:
  static base::StatusOr<ElementReader> Open(const std::string& path) {
    TELLER_ASSIGN_OR_RETURN(std::unique_ptr<base::ChunkReader> reader,
                            base::ChunkReader::Open(path));
    return ElementReader(std::move(reader), path);
  }

  // on_event(text), on_top_level(key, text); progress in input bytes.
  template <typename OnEvent, typename OnTopLevel>
  base::Status Run(OnEvent on_event, OnTopLevel on_top_level, base::ProgressSink* progress,
                   std::string_view stage) {
    uint64_t last_progress = 0;
    uint64_t size = reader_->file_size();
    while (true) {
      TELLER_ASSIGN_OR_RETURN(KinetoJsonScanner::Item item, scanner_->Next());
      if (item.kind == KinetoJsonScanner::ItemKind::kEnd) break;
      if (item.kind == KinetoJsonScanner::ItemKind::kEvent) {
        on_event(item.text);
      } else if (item.kind == KinetoJsonScanner::ItemKind::kTopLevelValue) {
        on_top_level(item.key, item.text);
      } else {
        const char* at = item.text.data() + 1;
        const char* end = item.text.data() + item.text.size() - 1;  // the ']'
        while (true) {
          while (at < end &&
                 (*at == ',' || *at == ' ' || *at == '\n' || *at == '\r' || *at == '\t')) {
            ++at;
          }
          if (at >= end) break;
          const char* value_end = FindJsonValueEnd(at, end);
          if (!value_end || value_end == at) {  // cut short, or a stray closer
            scanner_->Resume(at);
            break;
          }
          on_event(std::string_view(at, value_end - at));
          at = value_end;
        }
      }
      if (progress && item.offset - last_progress > (8u << 20)) {
        last_progress = item.offset;
        progress->Update(stage, reader_->file_offset(), size);
      }
    }
    if (progress) progress->Finish(stage);
    if (!scanner_->saw_trace_events() && !scanner_->truncated()) {
      return base::InvalidArgument("{}: byte {}: the JSON object has no traceEvents array", path_,
                                   scanner_->bytes_consumed());
    }
    return base::OkStatus();
  }

  std::string Truncation() const {
    if (scanner_->truncated()) {
      return fmt::format("JSON ends at byte {} where {} was expected", scanner_->truncated_offset(),
                         scanner_->truncation_reason());
    }
    return scanner_->reader_error();
  }

 private:
  ElementReader(std::unique_ptr<base::ChunkReader> reader, std::string path)
      : reader_(std::move(reader)),
        path_(std::move(path)),
        scanner_(std::make_unique<KinetoJsonScanner>(reader_.get(), path_, kWindowReadChunkBytes)) {
  }

  std::unique_ptr<base::ChunkReader> reader_;
  std::string path_;
  std::unique_ptr<KinetoJsonScanner> scanner_;
};

// Event starts and the spans that forbid a cut, on a grid of cells that coarsens
// (doubling its cell) whenever the trace would need more than max_cells: memory is
// fixed, resolution is what gives way.
class Timeline {
 public:
  Timeline(int64_t resolution_ns, size_t max_cells)
      : resolution_(std::max<int64_t>(resolution_ns, 1)),
        max_cells_(std::max<size_t>(max_cells, 16)) {}

  void AddStart(int64_t ts) {
    Cover(ts, ts);
    ++starts_[FloorDiv(ts, resolution_) - first_];
  }

  // No cut strictly inside (begin, end).
  void AddSpan(int64_t begin, int64_t end) {
    if (end <= begin) return;
    // Cells through the boundary after the last crossed one, at the resolution the
    // indexes below use (covering may coarsen it).
    for (int64_t resolution = 0; resolution != resolution_;) {
      resolution = resolution_;
      Cover(begin, end + resolution_);
    }
    int64_t j0 = FloorDiv(begin, resolution_) + 1;
    int64_t j1 = FloorDiv(end - 1, resolution_);
    if (j0 > j1) return;
    ++crossing_diff_[j0 - first_];
    --crossing_diff_[j1 + 1 - first_];
  }

  // Cut times: the first quiet cell boundary after each window_events starts.
  std::vector<int64_t> QuietCuts(int64_t window_events) const {
    return Walk(window_events, [](int64_t crossing) { return crossing == 0; });
  }

  // Where each window reaches window_events starts: the boundary after that cell,
  // quiet or not (the refinement pass looks for a quiet instant from there).
  std::vector<int64_t> Targets(int64_t window_events) const {
    return Walk(window_events, [](int64_t) { return true; });
  }

  // Events per window under the given cuts (a cell counts in the window its start is in).
  void CountWindows(const std::vector<int64_t>& cuts, int64_t window_events,
                    KinetoWindowPlan* plan) const {
    size_t window = 0;
    int64_t in_window = 0;
    auto close = [&] {
      plan->largest_window_events = std::max(plan->largest_window_events, in_window);
      if (in_window > 2 * window_events) ++plan->windows_over_budget;
      in_window = 0;
    };
    for (size_t k = 0; k < starts_.size(); ++k) {
      int64_t cell_start = (first_ + static_cast<int64_t>(k)) * resolution_;
      while (window < cuts.size() && cuts[window] <= cell_start) {
        close();
        ++window;
      }
      in_window += starts_[k];
    }
    close();
  }

  int64_t resolution() const { return resolution_; }

 private:
  // Boundaries where cut(crossing) holds, the first after each window_events starts;
  // never one that would leave an empty last window.
  template <typename CutHere>
  std::vector<int64_t> Walk(int64_t window_events, CutHere cut_here) const {
    std::vector<int64_t> cuts;
    int64_t left = 0;
    for (uint32_t count : starts_) left += count;
    int64_t in_window = 0;
    int64_t crossing = 0;
    for (size_t k = 0; k < starts_.size(); ++k) {
      crossing += crossing_diff_[k];
      if (k > 0 && in_window >= window_events && left > 0 && cut_here(crossing)) {
        cuts.push_back((first_ + static_cast<int64_t>(k)) * resolution_);
        in_window = 0;
      }
      in_window += starts_[k];
      left -= starts_[k];
    }
    return cuts;
  }

  // Makes cells exist for every time in [lo, hi].
  void Cover(int64_t lo, int64_t hi) {
    while (true) {
      int64_t lo_cell = FloorDiv(lo, resolution_);
      int64_t hi_cell = FloorDiv(hi, resolution_);
      if (starts_.empty()) {
        if (static_cast<size_t>(hi_cell - lo_cell + 1) > max_cells_) {
          resolution_ *= 2;
          continue;
        }
        first_ = lo_cell;
        starts_.assign(hi_cell - lo_cell + 1, 0);
        crossing_diff_.assign(starts_.size(), 0);
        return;
      }
      int64_t last = first_ + static_cast<int64_t>(starts_.size()) - 1;
      int64_t new_first = std::min(first_, lo_cell);
      int64_t new_last = std::max(last, hi_cell);
      if (static_cast<size_t>(new_last - new_first + 1) > max_cells_) {
        Coarsen();
        continue;
      }
      if (new_first < first_) {
        // Grow to the left with slack, so that traces read backwards stay linear.
        int64_t slack = static_cast<int64_t>(starts_.size());
        int64_t room = static_cast<int64_t>(max_cells_) - (new_last - new_first + 1);
        new_first -= std::min(slack, std::max<int64_t>(room, 0));
        size_t grow = static_cast<size_t>(first_ - new_first);
        starts_.insert(starts_.begin(), grow, 0);
        crossing_diff_.insert(crossing_diff_.begin(), grow, 0);
        first_ = new_first;
      }
      if (new_last > last) {
        starts_.resize(new_last - first_ + 1, 0);
        crossing_diff_.resize(starts_.size(), 0);
      }
      return;
    }
  }

  // Doubles the cell. A start in cell i goes to cell floor(i / 2); boundary i's
  // crossing change goes to boundary ceil(i / 2), which keeps the running sum at every
  // surviving (even) boundary and cancels the changes of spans that crossed only an
  // odd one.
  void Coarsen() {
    int64_t last = first_ + static_cast<int64_t>(starts_.size()) - 1;
    int64_t new_first = FloorDiv(first_, 2);
    int64_t new_last = FloorDiv(last + 1, 2);
    std::vector<uint32_t> starts(new_last - new_first + 1, 0);
    std::vector<int32_t> diff(starts.size(), 0);
    for (size_t k = 0; k < starts_.size(); ++k) {
      int64_t i = first_ + static_cast<int64_t>(k);
      starts[FloorDiv(i, 2) - new_first] += starts_[k];
      diff[FloorDiv(i + 1, 2) - new_first] += crossing_diff_[k];
    }
    starts_ = std::move(starts);
    crossing_diff_ = std::move(diff);
    first_ = new_first;
    resolution_ *= 2;
  }

  int64_t resolution_;
  size_t max_cells_;
  int64_t first_ = 0;
  std::vector<uint32_t> starts_;
  std::vector<int32_t> crossing_diff_;
};

// Fine timelines over short regions, one per target of a coarse plan: a second
// pass marks the busy spans there at fine resolution, and each region's cut is its
// first quiet boundary. Memory: regions x cells.
class Refiner {
 public:
  Refiner(const std::vector<int64_t>& begins, int64_t width_ns, size_t cells)
      : begins_(begins),
        cells_(cells),
        resolution_(std::max<int64_t>(width_ns / static_cast<int64_t>(cells), 1)),
        crossing_diff_(begins.size() * (cells + 1), 0) {}

  void AddSpan(int64_t begin, int64_t end) {
    if (end <= begin) return;
    // Regions that start before end and end after begin.
    int64_t from = 0;
    if (__builtin_sub_overflow(begin, Width(), &from)) from = INT64_MIN;
    auto first = std::upper_bound(begins_.begin(), begins_.end(), from);
    for (auto it = first; it != begins_.end() && *it < end; ++it) {
      int64_t origin = *it;
      int64_t j0 = std::max<int64_t>(FloorDiv(SaturatingSub(begin, origin), resolution_) + 1, 0);
      int64_t j1 = std::min<int64_t>(FloorDiv(SaturatingSub(end - 1, origin), resolution_),
                                     static_cast<int64_t>(cells_) - 1);
      if (j0 > j1) continue;
      int32_t* diff = &crossing_diff_[(it - begins_.begin()) * (cells_ + 1)];
      ++diff[j0];
      --diff[j1 + 1];
    }
  }

  // The first quiet boundary of each region, in time order; regions without one
  // give no cut.
  std::vector<int64_t> Cuts() const {
    std::vector<int64_t> cuts;
    for (size_t r = 0; r < begins_.size(); ++r) {
      const int32_t* diff = &crossing_diff_[r * (cells_ + 1)];
      int64_t crossing = 0;
      for (size_t j = 0; j < cells_; ++j) {
        crossing += diff[j];
        int64_t at = begins_[r] + static_cast<int64_t>(j) * resolution_;
        if (crossing == 0 && (cuts.empty() || at > cuts.back())) {
          cuts.push_back(at);
          break;
        }
      }
    }
    return cuts;
  }

  int64_t resolution() const { return resolution_; }

 private:
  int64_t Width() const { return resolution_ * static_cast<int64_t>(cells_); }

  std::vector<int64_t> begins_;
  size_t cells_;
  int64_t resolution_;
  std::vector<int32_t> crossing_diff_;  // per region, cells + 1 boundaries
};

// Buffered output of one window file.
class WindowFile {
 public:
  WindowFile() = default;
  WindowFile(const WindowFile&) = delete;
  WindowFile& operator=(const WindowFile&) = delete;
  ~WindowFile() {
    if (file_) std::fclose(file_);
  }

  base::Status Open(const std::string& path) {
    path_ = path;
    file_ = std::fopen(path.c_str(), "wb");
    if (!file_) return base::IoError("{}: cannot create: {}", path, std::strerror(errno));
    std::setvbuf(file_, nullptr, _IOFBF, size_t{1} << 18);
    return Write("{\"traceEvents\":[\n");
  }
  base::Status AddEvent(std::string_view text) {
    if (events_++ > 0) TELLER_RETURN_IF_ERROR(Write(",\n"));
    return Write(text);
  }
  base::Status Close(const std::vector<std::pair<std::string, std::string>>& top_level) {
    TELLER_RETURN_IF_ERROR(Write("\n]"));
    for (const auto& [key, text] : top_level) {
      TELLER_RETURN_IF_ERROR(Write(",\n\""));
      TELLER_RETURN_IF_ERROR(Write(key));
      TELLER_RETURN_IF_ERROR(Write("\": "));
      TELLER_RETURN_IF_ERROR(Write(text));
    }
    TELLER_RETURN_IF_ERROR(Write("\n}\n"));
    int rc = std::fclose(file_);
    file_ = nullptr;
    if (rc != 0) return base::IoError("{}: cannot write: {}", path_, std::strerror(errno));
    return base::OkStatus();
  }

 private:
  base::Status Write(std::string_view text) {
    if (std::fwrite(text.data(), 1, text.size(), file_) != text.size()) {
      return base::IoError("{}: cannot write: {}", path_, std::strerror(errno));
    }
    return base::OkStatus();
  }

  std::string path_;
  FILE* file_ = nullptr;
  int64_t events_ = 0;
};

// Reads every event of path once: on_start(ts) for each timed event that is not
// metadata, on_span(begin, end) for each range that forbids a cut inside it.
template <typename OnStart, typename OnSpan>
base::Status ScanTimes(const std::string& path, base::ProgressSink* progress,
                       std::string_view stage, KinetoWindowPlan* plan, OnStart on_start,
                       OnSpan on_span) {
  TELLER_ASSIGN_OR_RETURN(ElementReader reader, ElementReader::Open(path));
  od::parser parser;
  // Open B ranges per (pid, tid): only ranges still open are held.
  std::unordered_map<std::string, std::vector<int64_t>> open_ranges;
  KinetoWindowPlan counts;
  auto on_event = [&](std::string_view text) {
    ++counts.events;
    EventTimes event;
    if (!ReadEventTimes(&parser, text, &event)) return;
    if (event.ph == 'M') {
      ++counts.metadata_events;
      return;
    }
    if (!event.has_ts) return;
    on_start(event.ts_ns);
    if (!event.blocks_cuts) return;
    int64_t end = 0;
    if (event.ph == 'X' && event.has_dur) {
      // A span whose end does not fit (a damaged dur) forbids nothing.
      if (event.dur_ns > 0 && !__builtin_add_overflow(event.ts_ns, event.dur_ns, &end) &&
          end < kLatestEnd) {
        on_span(event.ts_ns, end);
      }
    } else if (event.ph == 'B' || event.ph == 'E') {
      std::string key = fmt::format("{}/{}", event.pid, event.tid);
      std::vector<int64_t>& stack = open_ranges[key];
      if (event.ph == 'B') {
        stack.push_back(event.ts_ns);
      } else if (!stack.empty()) {
        if (event.ts_ns < kLatestEnd) on_span(stack.back(), event.ts_ns);
        stack.pop_back();
      }
    }
  };
  TELLER_RETURN_IF_ERROR(reader.Run(
      on_event, [](std::string_view, std::string_view) {}, progress, stage));
  plan->events = counts.events;
  plan->metadata_events = counts.metadata_events;
  plan->truncation = reader.Truncation();
  return base::OkStatus();
}

}  // namespace

base::StatusOr<KinetoWindowPlan> PlanKinetoWindows(const std::string& path,
                                                   const KinetoWindowOptions& options) {
  if (options.window_events <= 0) {
    return base::InvalidArgument("window_events must be positive, got {}", options.window_events);
  }
  KinetoWindowPlan plan;
  Timeline timeline(options.finest_resolution_ns, options.max_cells);
  TELLER_RETURN_IF_ERROR(ScanTimes(
      path, options.progress, "plan windows", &plan, [&](int64_t ts) { timeline.AddStart(ts); },
      [&](int64_t begin, int64_t end) { timeline.AddSpan(begin, end); }));
  if (timeline.resolution() <= options.finest_resolution_ns) {
    plan.cuts_ts = timeline.QuietCuts(options.window_events);
    plan.resolution_ns = timeline.resolution();
  } else {
    // The trace was too long for the finest cells: cut times are looked for again,
    // at that resolution, over a few coarse cells after each window's target.
    constexpr int64_t kRegionCoarseCells = 64;
    std::vector<int64_t> targets = timeline.Targets(options.window_events);
    int64_t width = SaturatingMul(kRegionCoarseCells, timeline.resolution(), kLatestEnd / 2);
    // All regions together keep at most max_cells cells, or 1024 each (4 MB in all
    // for the most windows there can be).
    int64_t most = std::max<int64_t>(
        static_cast<int64_t>(options.max_cells / std::max<size_t>(targets.size(), 1)), 1024);
    size_t cells =
        static_cast<size_t>(std::clamp<int64_t>(width / options.finest_resolution_ns, 1, most));
    Refiner refiner(targets, width, cells);
    KinetoWindowPlan again;
    TELLER_RETURN_IF_ERROR(ScanTimes(
        path, options.progress, "refine windows", &again, [](int64_t) {},
        [&](int64_t begin, int64_t end) { refiner.AddSpan(begin, end); }));
    plan.cuts_ts = refiner.Cuts();
    plan.resolution_ns = refiner.resolution();
  }
  timeline.CountWindows(plan.cuts_ts, options.window_events, &plan);
  if (plan.windows() > kMaxWindows) {
    return base::InvalidArgument(
        "{}: {} events make {} windows of {} events, over the limit of {}; use larger windows",
        path, plan.events, plan.windows(), options.window_events, kMaxWindows);
  }
  return plan;
}

base::StatusOr<std::vector<std::string>> SplitKinetoWindows(const std::string& path,
                                                            const KinetoWindowPlan& plan,
                                                            const std::string& directory,
                                                            const KinetoWindowOptions& options) {
  if (plan.windows() > kMaxWindows) {
    return base::InvalidArgument("{}: {} windows is over the limit of {}", path, plan.windows(),
                                 kMaxWindows);
  }
  TELLER_ASSIGN_OR_RETURN(ElementReader reader, ElementReader::Open(path));
  std::vector<std::string> paths;
  std::vector<std::unique_ptr<WindowFile>> files;
  for (size_t w = 0; w < plan.windows(); ++w) {
    paths.push_back(fmt::format("{}/window-{:05d}.json", directory, w));
    files.push_back(std::make_unique<WindowFile>());
    TELLER_RETURN_IF_ERROR(files.back()->Open(paths.back()));
  }
  std::vector<std::pair<std::string, std::string>> top_level;
  od::parser parser;
  base::Status write_error;
  auto on_event = [&](std::string_view text) {
    if (!write_error.ok()) return;
    EventTimes event;
    bool parsed = ReadEventTimes(&parser, text, &event);
    if (parsed && event.ph == 'M') {
      for (auto& file : files) {
        write_error = file->AddEvent(text);
        if (!write_error.ok()) return;
      }
      return;
    }
    size_t window = 0;
    if (parsed && event.has_ts) {
      window = std::upper_bound(plan.cuts_ts.begin(), plan.cuts_ts.end(), event.ts_ns) -
               plan.cuts_ts.begin();
    }
    write_error = files[window]->AddEvent(text);
  };
  auto on_top_level = [&](std::string_view key, std::string_view text) {
    top_level.emplace_back(std::string(key), std::string(text));
  };
  TELLER_RETURN_IF_ERROR(reader.Run(on_event, on_top_level, options.progress, "split windows"));
  TELLER_RETURN_IF_ERROR(write_error);
  for (auto& file : files) TELLER_RETURN_IF_ERROR(file->Close(top_level));
  return paths;
}

}  // namespace teller::import
