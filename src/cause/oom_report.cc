#include "cause/oom_report.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <map>

#include <fmt/format.h>

#include "cause/crash_report.h"

namespace teller::cause {
namespace {

// A size written "<number> <unit>" (PyTorch's format_size: bytes, KiB, MiB, GiB).
struct Size {
  size_t begin = 0, end = 0;  // in the text
  double bytes = 0.0;
};

double UnitBytes(std::string_view unit) {
  static constexpr std::array<std::pair<std::string_view, double>, 10> kUnits = {{
      {"bytes", 1.0},
      {"B", 1.0},
      {"KiB", 1024.0},
      {"MiB", 1024.0 * 1024.0},
      {"GiB", 1024.0 * 1024.0 * 1024.0},
      {"TiB", 1024.0 * 1024.0 * 1024.0 * 1024.0},
      {"KB", 1e3},
      {"MB", 1e6},
      {"GB", 1e9},
      {"TB", 1e12},
  }};
  for (const auto& [name, bytes] : kUnits) {
    if (unit == name) return bytes;
  }
  return 0.0;
}

std::vector<Size> SizesOf(std::string_view text) {
  std::vector<Size> sizes;
  size_t i = 0;
  while (i < text.size()) {
    if (!std::isdigit(static_cast<unsigned char>(text[i])) ||
        (i > 0 && (std::isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '.'))) {
      ++i;
      continue;
    }
    double value = 0.0;
    const auto [number_end, error] =
        std::from_chars(text.data() + i, text.data() + text.size(), value);
    size_t j = static_cast<size_t>(number_end - text.data());
    if (error != std::errc() || j >= text.size() || text[j] != ' ') {
      i = std::max(j, i + 1);
      continue;
    }
    size_t unit_end = j + 1;
    while (unit_end < text.size() && std::isalpha(static_cast<unsigned char>(text[unit_end])))
      ++unit_end;
    const double unit = UnitBytes(text.substr(j + 1, unit_end - j - 1));
    if (unit > 0.0) sizes.push_back({i, unit_end, value * unit});
    i = unit_end;
  }
  return sizes;
}

// The size right after `key` ("Tried to allocate 2.00 GiB"), or right before it
// ("1.06 GiB is free"); -1 when the text has no such size.
double SizeAfter(std::string_view text, const std::vector<Size>& sizes, std::string_view key) {
  const size_t at = text.find(key);
  if (at == std::string_view::npos) return -1.0;
  for (const Size& size : sizes) {
    if (size.begin == at + key.size()) return size.bytes;
  }
  return -1.0;
}

double SizeBefore(std::string_view text, const std::vector<Size>& sizes, std::string_view key) {
  const size_t at = text.find(key);
  if (at == std::string_view::npos) return -1.0;
  for (const Size& size : sizes) {
    if (size.end == at) return size.bytes;
  }
  return -1.0;
}

int32_t DeviceOf(std::string_view text) {
  for (std::string_view key : {"(GPU ", "GPU "}) {
    const size_t at = text.find(key);
    if (at == std::string_view::npos) continue;
    int32_t device = -1;
    const char* begin = text.data() + at + key.size();
    if (std::from_chars(begin, text.data() + text.size(), device).ec == std::errc()) return device;
  }
  return -1;
}

// Other processes the message lists ("Process 4242 has 10.00 GiB memory in use."): their
// sum, -1 when it lists none.
double ListedProcesses(std::string_view text, const std::vector<Size>& sizes, int32_t* count) {
  double sum = -1.0;
  for (size_t at = text.find("Process "); at != std::string_view::npos;
       at = text.find("Process ", at + 1)) {
    const size_t has = text.find(" has ", at);
    if (has == std::string_view::npos || has > at + 24) continue;
    for (const Size& size : sizes) {
      if (size.begin == has + 5 && text.substr(size.end, 14) == " memory in use") {
        sum = std::max(sum, 0.0) + size.bytes;
        ++*count;
      }
    }
  }
  return sum;
}

// Other processes on a serving GPU are not its normal: when they hold more than the
// allocation asked for, it would have fit without them.
OomKind KindOf(const OomReport& r, double outside_bytes, const OomOptions& options) {
  const bool listed = r.other_processes > 0 && r.other_processes_bytes >= r.requested_bytes;
  if (listed ||
      (r.capacity_bytes > 0.0 && outside_bytes >= options.outside_share * r.capacity_bytes)) {
    return OomKind::kOutsidePyTorch;
  }
  const double reserve = r.reserved_unallocated_bytes;
  if (reserve > 0.0 && r.requested_bytes > 0.0 && reserve >= r.requested_bytes &&
      reserve >= options.fragmented_share * (std::max(r.allocated_bytes, 0.0) + reserve)) {
    return OomKind::kFragmented;
  }
  return OomKind::kFull;
}

void FindStepAndRequests(const model::Trace& trace, size_t log, OomReport* report) {
  const model::StepIndex step = trace.logs.step[log];
  if (!step.valid()) return;
  report->step = trace.steps.number[step.value()];
  report->requests = StepRequestIds(trace, step);
}

constexpr model::DurationNs kTrendWindowNs = 60'000'000'000;

// The trend of one GPU's samples (any order of times; ties in event order): those of the
// minute before the last.
MemoryTrend TrendOf(int32_t device, std::vector<MemorySample> samples) {
  MemoryTrend trend;
  std::stable_sort(samples.begin(), samples.end(),
                   [](const MemorySample& a, const MemorySample& b) { return a.ts < b.ts; });
  const model::TimeNs from = samples.back().ts - kTrendWindowNs;
  trend.device = device;
  for (const MemorySample& sample : samples) {
    if (sample.ts < from) continue;
    const double allocated = static_cast<double>(sample.allocated);
    if (trend.samples++ == 0) {
      trend.first_ns = sample.ts;
      trend.first_allocated = allocated;
    }
    trend.last_ns = sample.ts;
    trend.last_allocated = allocated;
    trend.peak_allocated = std::max(trend.peak_allocated, allocated);
    if (sample.reserved >= 0) {
      trend.last_reserved = static_cast<double>(sample.reserved);
      trend.peak_reserved = std::max(trend.peak_reserved, trend.last_reserved);
    }
  }
  trend.found = trend.samples >= 2;
  return trend;
}

}  // namespace

std::string_view OomKindName(OomKind kind) {
  switch (kind) {
    case OomKind::kFull:
      return "full";
    case OomKind::kFragmented:
      return "fragmented";
    case OomKind::kOutsidePyTorch:
      return "outside_pytorch";
  }
  return "full";
}

OomReport ParseOomMessage(std::string_view text, const OomOptions& options) {
  OomReport r;
  const bool caching_allocator = text.find("out of memory. Tried to allocate") != text.npos;
  const bool raw = text.find("CUDA error: out of memory") != text.npos ||
                   text.find("cudaErrorMemoryAllocation") != text.npos;
  if (!caching_allocator && !raw) return r;
  r.found = true;
  r.device = DeviceOf(text);
  if (!caching_allocator) return r;
  const std::vector<Size> sizes = SizesOf(text);
  r.requested_bytes = SizeAfter(text, sizes, "Tried to allocate ");
  // PyTorch >= 2.1 ("total capacty" in 2.1 itself), then the older form.
  r.capacity_bytes = std::max(SizeAfter(text, sizes, "total capacity of "),
                              SizeAfter(text, sizes, "total capacty of "));
  if (r.capacity_bytes < 0.0) r.capacity_bytes = SizeBefore(text, sizes, " total capacity");
  r.free_bytes = std::max(SizeBefore(text, sizes, " is free"), SizeBefore(text, sizes, " free;"));
  if (r.free_bytes < 0.0) r.free_bytes = SizeBefore(text, sizes, " free)");
  r.process_bytes = SizeAfter(text, sizes, "this process has ");
  r.allocated_bytes = std::max(SizeBefore(text, sizes, " is allocated by PyTorch"),
                               SizeBefore(text, sizes, " already allocated"));
  r.reserved_unallocated_bytes = SizeBefore(text, sizes, " is reserved by PyTorch but unallocated");
  const double reserved_total = SizeBefore(text, sizes, " reserved in total by PyTorch");
  if (r.reserved_unallocated_bytes < 0.0 && reserved_total >= 0.0 && r.allocated_bytes >= 0.0) {
    r.reserved_unallocated_bytes = std::max(0.0, reserved_total - r.allocated_bytes);
  }
  r.other_processes_bytes = ListedProcesses(text, sizes, &r.other_processes);
  if (r.other_processes_bytes < 0.0 && r.capacity_bytes > 0.0 && r.free_bytes >= 0.0 &&
      r.process_bytes >= 0.0) {
    r.other_processes_bytes = std::max(0.0, r.capacity_bytes - r.free_bytes - r.process_bytes);
  }
  // Outside this process's PyTorch: other processes, and its own CUDA context, NCCL
  // buffers and library workspaces.
  double outside = -1.0;
  const double pytorch = r.allocated_bytes >= 0.0 && r.reserved_unallocated_bytes >= 0.0
                             ? r.allocated_bytes + r.reserved_unallocated_bytes
                             : reserved_total;
  if (r.capacity_bytes > 0.0 && r.free_bytes >= 0.0 && pytorch >= 0.0) {
    outside = r.capacity_bytes - r.free_bytes - pytorch;
  }
  r.kind = KindOf(r, outside, options);
  return r;
}

MemoryTrendPart SummarizeMemoryTrend(const model::Trace& trace, model::TimeNs before_ns) {
  MemoryTrendPart part;
  const base::StringId name = trace.strings.Find("[memory]");
  const base::StringId allocated_key = trace.strings.Find("Total Allocated");
  if (!name.valid() || !allocated_key.valid()) return part;
  const base::StringId reserved_key = trace.strings.Find("Total Reserved");
  const base::StringId device_key = trace.strings.Find("Device Id");
  const base::StringId type_key = trace.strings.Find("Device Type");
  std::map<int32_t, std::vector<MemorySample>> by_device;
  for (uint32_t e = 0; e < trace.events.size(); ++e) {
    if (trace.events.name[e] != name || trace.events.start_ns[e] > before_ns) continue;
    const model::EventRow row(e);
    int64_t allocated = 0, reserved = -1, id = -1, type = 1;
    if (!trace.FindIntArg(row, allocated_key, &allocated)) continue;
    if (type_key.valid() && trace.FindIntArg(row, type_key, &type) && type != 1) continue;
    if (reserved_key.valid()) trace.FindIntArg(row, reserved_key, &reserved);
    if (device_key.valid()) trace.FindIntArg(row, device_key, &id);
    by_device[static_cast<int32_t>(id)].push_back({trace.events.start_ns[e], allocated, reserved});
  }
  for (auto& [device, samples] : by_device) {
    std::stable_sort(samples.begin(), samples.end(),
                     [](const MemorySample& a, const MemorySample& b) { return a.ts < b.ts; });
    const model::TimeNs from = samples.back().ts - kTrendWindowNs;
    DeviceSamples kept{device, samples.size(), {}};
    for (const MemorySample& sample : samples) {
      if (sample.ts >= from) kept.recent.push_back(sample);
    }
    part.push_back(std::move(kept));
  }
  return part;
}

MemoryTrend MergeMemoryTrends(const std::vector<MemoryTrendPart>& parts, int32_t device) {
  std::map<int32_t, DeviceSamples> by_device;
  for (const MemoryTrendPart& part : parts) {
    for (const DeviceSamples& samples : part) {
      DeviceSamples& merged = by_device[samples.device];
      merged.device = samples.device;
      merged.count += samples.count;
      merged.recent.insert(merged.recent.end(), samples.recent.begin(), samples.recent.end());
    }
  }
  auto chosen = by_device.find(device);
  if (device < 0 || chosen == by_device.end()) {
    chosen = std::max_element(by_device.begin(), by_device.end(), [](const auto& a, const auto& b) {
      return a.second.count < b.second.count;
    });
  }
  if (chosen == by_device.end() || (device >= 0 && chosen->first >= 0 && chosen->first != device)) {
    return {};
  }
  return TrendOf(chosen->first, std::move(chosen->second.recent));
}

MemoryTrend FindMemoryTrend(const model::Trace& trace, int32_t device, model::TimeNs before_ns) {
  return MergeMemoryTrends({SummarizeMemoryTrend(trace, before_ns)}, device);
}

std::string MemoryTrendDifference(const MemoryTrend& a, const MemoryTrend& b) {
  auto differ = [](std::string_view field, auto x, auto y) {
    return x == y ? std::string() : fmt::format("{} {} vs {}", field, x, y);
  };
  for (std::string text :
       {differ("found", a.found, b.found), differ("device", a.device, b.device),
        differ("samples", a.samples, b.samples), differ("first_ns", a.first_ns, b.first_ns),
        differ("last_ns", a.last_ns, b.last_ns),
        differ("first_allocated", a.first_allocated, b.first_allocated),
        differ("last_allocated", a.last_allocated, b.last_allocated),
        differ("peak_allocated", a.peak_allocated, b.peak_allocated),
        differ("last_reserved", a.last_reserved, b.last_reserved),
        differ("peak_reserved", a.peak_reserved, b.peak_reserved)}) {
    if (!text.empty()) return text;
  }
  return "";
}

OomSite FindOomSite(const model::LogTable& logs, const base::StringPool& strings) {
  for (size_t i = 0; i < logs.size(); ++i) {
    const OomReport message = ParseOomMessage(strings.Get(logs.text[i]));
    if (!message.found) continue;
    const model::TimeNs at_ns = logs.ts_ns[i];
    return {true, message.device, at_ns == INT64_MIN ? INT64_MAX : at_ns};
  }
  return {};
}

namespace {

// The first out-of-memory message of the lines with its rank, time and source; its line
// in `line`. found = false without one.
OomReport FindOomMessage(const model::LogTable& logs, const base::StringPool& strings,
                         const OomOptions& options, size_t* line) {
  for (size_t i = 0; i < logs.size(); ++i) {
    OomReport report = ParseOomMessage(strings.Get(logs.text[i]), options);
    if (!report.found) continue;
    report.rank = logs.rank[i];
    report.at_ns = logs.ts_ns[i];
    const std::string_view source = strings.Get(logs.source[i]);
    if (!source.empty()) report.source = fmt::format("{}:{}", source, logs.line_number[i]);
    *line = i;
    return report;
  }
  return {};
}

}  // namespace

OomReport FindOom(const model::Trace& trace, const OomOptions& options,
                  const MemoryTrend* trend) {
  size_t line = 0;
  OomReport report = FindOomMessage(trace.logs, trace.strings, options, &line);
  if (!report.found) return report;
  FindStepAndRequests(trace, line, &report);
  report.trend = trend != nullptr ? *trend
                                  : FindMemoryTrend(trace, report.device,
                                                    report.at_ns == INT64_MIN ? INT64_MAX
                                                                              : report.at_ns);
  return report;
}

OomReport FindOom(const model::LogTable& logs, const base::StringPool& strings,
                  const StepsOfLines& step_of, const MemoryTrend& trend,
                  const OomOptions& options) {
  size_t line = 0;
  OomReport report = FindOomMessage(logs, strings, options, &line);
  if (!report.found) return report;
  if (logs.step[line].valid()) {
    StepOfLine step = step_of(logs.step[line]);
    report.step = step.number;
    report.requests = std::move(step.requests);
  }
  report.trend = trend;
  return report;
}

std::string OomDifference(const OomReport& a, const OomReport& b) {
  if (a.found != b.found || a.rank != b.rank || a.device != b.device || a.at_ns != b.at_ns ||
      a.source != b.source) {
    return fmt::format("found {} rank {} GPU {} at {} ns ({}) against found {} rank {} GPU {} at "
                       "{} ns ({})",
                       a.found, a.rank, a.device, a.at_ns, a.source, b.found, b.rank, b.device,
                       b.at_ns, b.source);
  }
  const double figures_a[] = {a.requested_bytes, a.capacity_bytes,  a.free_bytes,
                              a.process_bytes,   a.allocated_bytes, a.reserved_unallocated_bytes,
                              a.other_processes_bytes};
  const double figures_b[] = {b.requested_bytes, b.capacity_bytes,  b.free_bytes,
                              b.process_bytes,   b.allocated_bytes, b.reserved_unallocated_bytes,
                              b.other_processes_bytes};
  for (size_t i = 0; i < std::size(figures_a); ++i) {
    if (figures_a[i] != figures_b[i]) {
      return fmt::format("byte figure {}: {} against {}", i, figures_a[i], figures_b[i]);
    }
  }
  if (a.other_processes != b.other_processes || a.kind != b.kind) {
    return fmt::format("{} other processes, {} against {}, {}", a.other_processes,
                       OomKindName(a.kind), b.other_processes, OomKindName(b.kind));
  }
  if (a.step != b.step || a.requests != b.requests) {
    return fmt::format("step {} serving {} requests against step {} serving {}", a.step,
                       a.requests.size(), b.step, b.requests.size());
  }
  const std::string trend = MemoryTrendDifference(a.trend, b.trend);
  return trend.empty() ? "" : "trend: " + trend;
}

}  // namespace teller::cause
