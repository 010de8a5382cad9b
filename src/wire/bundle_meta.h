// meta.json of a bundle: what was run, where, and how its clocks relate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace teller::wire {

// One simultaneous reading of the clocks of a host (taken back to back).
struct ClockPair {
  int64_t realtime_ns = 0;
  int64_t monotonic_ns = 0;
  std::optional<int64_t> gpu_ns;  // CUPTI timestamp, when CUPTI was active
  bool operator==(const ClockPair&) const = default;
};

struct HostClocks {
  std::string host;
  std::vector<ClockPair> clock_pairs;
  bool operator==(const HostClocks&) const = default;
};

struct RankInfo {
  int32_t rank = -1;
  int32_t local_rank = -1;
  std::string host;
  int64_t pid = 0;
  int32_t device = -1;
  bool operator==(const RankInfo&) const = default;
};

struct DeviceInfo {
  std::string host;
  int32_t index = -1;
  std::string name;
  std::string uuid;
  bool operator==(const DeviceInfo&) const = default;
};

// A capture layer (cupti_activity, nvtx, python_hooks, stdout, ...) and, when it
// was off, why.
struct CaptureLayer {
  std::string layer;
  bool enabled = true;
  std::string reason;
  bool operator==(const CaptureLayer&) const = default;
};

struct BundleMeta {
  int format_version = 1;
  std::string tool_version;
  std::string host;                    // host of `teller record` (or the simulator)
  std::vector<std::string> command;    // argv
  int64_t start_time_ns = 0;           // UTC epoch ns
  std::vector<ClockPair> clock_pairs;  // of `host`
  std::vector<HostClocks> hosts;       // other hosts' clocks (multi-node)
  std::vector<RankInfo> ranks;
  std::vector<DeviceInfo> devices;
  std::vector<CaptureLayer> capture;
  std::vector<std::string> notes;
  bool operator==(const BundleMeta&) const = default;

  // Clock pairs of a host: its own list in `hosts`, else the top-level list.
  const std::vector<ClockPair>& ClockPairsOf(std::string_view host_name) const;
};

// Parses meta.json text; errors name file_name and the field.
base::StatusOr<BundleMeta> ParseBundleMeta(std::string_view text, const std::string& file_name);
// Serializes meta.json (pretty, stable key order). Never throws.
base::StatusOr<std::string> FormatBundleMeta(const BundleMeta& meta);

}  // namespace teller::wire
