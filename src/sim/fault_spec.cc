#include "sim/fault_spec.h"

#include <fmt/format.h>

#include <charconv>

namespace teller::sim {
namespace {

using M = Mechanism;
using C = FaultCategory;

constexpr MechanismInfo kMechanisms[] = {
    {M::kKvCachePressure, "kv_cache_pressure", C::kMemory, 0.6, "fraction of KV blocks lost", 8,
     true, "another tenant takes KV-cache memory; the scheduler preempts and recomputes"},
    {M::kHostMemoryPressure, "host_memory_pressure", C::kMemory, 0.35, "slowdown of CPU-side ops",
     6, false, "host memory pressure (swapping, page reclaim) slows Python and CPU-side ops"},
    {M::kAllocatorSlowPath, "allocator_slow_path", C::kMemory, 0.3, "added step time as a fraction",
     6, false, "the caching allocator misses: cudaMalloc/cudaFree appear inside steps"},
    {M::kMemoryFragmentation, "memory_fragmentation", C::kMemory, 0.25,
     "added step time as a fraction", 6, false,
     "fragmented GPU memory: cached blocks are released (device sync + cudaFree) and "
     "re-allocated"},
    {M::kOutOfMemory, "out_of_memory", C::kMemory, 2.0, "GiB the failed allocation asked for", 1,
     true,
     "an allocation fails on one GPU (the caching allocator frees its cache, retries, and "
     "raises OutOfMemoryError); the engine dies"},
    {M::kGpuThrottle, "gpu_throttle", C::kCudaKernel, 0.3, "kernel slowdown on one GPU", 8, false,
     "thermal/power throttling slows every kernel of one GPU"},
    {M::kKernelSlowdown, "kernel_slowdown", C::kCudaKernel, 0.4, "slowdown of one kernel family", 6,
     false, "one kernel family (attention by default) runs slower"},
    {M::kKernelContention, "kernel_contention", C::kCudaKernel, 0.3,
     "mean slowdown from a co-located kernel", 6, false,
     "a co-located process's kernels share the SMs of one GPU: bursty slowdown"},
    {M::kIllegalMemoryAccess, "illegal_memory_access", C::kCudaKernel, 1.0, "(unused)", 1, true,
     "a kernel faults with an illegal memory access and the step dies"},
    {M::kLaunchLatency, "launch_latency", C::kRuntimeDriver, 0.6, "added launch-call time", 6,
     false, "kernel launch calls take longer (driver lock contention)"},
    {M::kMemcpyLatency, "memcpy_latency", C::kRuntimeDriver, 0.8, "added cudaMemcpyAsync time", 6,
     false, "host-device copies and their calls are slow (pinned memory exhausted)"},
    {M::kSyncLatency, "sync_latency", C::kRuntimeDriver, 0.5, "added synchronization time", 6,
     false, "stream/device synchronization calls wait longer than the work they wait for"},
    {M::kDriverRetry, "driver_retry", C::kRuntimeDriver, 0.2,
     "probability a driver launch fails and is retried", 6, false,
     "driver launch calls return an error and are retried"},
    {M::kLinkDegradation, "link_degradation", C::kCommunication, 0.5,
     "added inter-node transfer time", 8, true,
     "the inter-node link loses packets or gains latency: cross-node transfers slow"},
    {M::kStragglerRank, "straggler_rank", C::kCommunication, 0.4,
     "host slowdown of the straggler rank", 6, false,
     "one rank reaches every collective late and its peers wait inside the NCCL kernel"},
    {M::kNcclTimeout, "nccl_timeout", C::kCommunication, 1.0, "(unused)", 1, true,
     "a collective never completes on one rank; the NCCL watchdog times out"},
    {M::kOperatorReorder, "operator_reorder", C::kScheduling, 0.3,
     "fraction of layers with swapped ops", 6, false,
     "a software change runs two operators of a layer in the wrong order"},
    {M::kStarvedRequest, "starved_request", C::kScheduling, 1.0, "(unused)", 8, false,
     "the scheduler keeps skipping one waiting request"},
    {M::kDecodeMisroute, "decode_misroute", C::kScheduling, 1.0, "(unused)", 1, false,
     "a new request gets one scheduled token and is routed to the decode path"},
    {M::kEnginePause, "engine_pause", C::kScheduling, 0.6,
     "pause length as a fraction of the step time", 5, false,
     "GC or GIL pauses stall the engine loop between steps"},
};

bool ParseInt(std::string_view text, int32_t* out) {
  auto result = std::from_chars(text.data(), text.data() + text.size(), *out);
  return result.ec == std::errc() && result.ptr == text.data() + text.size();
}

bool ParseDouble(std::string_view text, double* out) {
  auto result = std::from_chars(text.data(), text.data() + text.size(), *out);
  return result.ec == std::errc() && result.ptr == text.data() + text.size();
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

base::StatusOr<FaultSpec> ParseOneFault(std::string_view text) {
  FaultSpec fault;
  const size_t colon = text.find(':');
  TELLER_ASSIGN_OR_RETURN(fault.mechanism, ParseMechanism(Trim(text.substr(0, colon))));
  if (colon == std::string_view::npos) return fault;
  std::string_view rest = text.substr(colon + 1);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = Trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return base::InvalidArgument("fault '{}': expected key=value, got '{}'", text, item);
    }
    std::string_view key = Trim(item.substr(0, eq));
    std::string_view value = Trim(item.substr(eq + 1));
    bool ok = true;
    if (key == "magnitude" || key == "mag") {
      ok = ParseDouble(value, &fault.magnitude);
    } else if (key == "onset") {
      ok = ParseInt(value, &fault.onset_step);
    } else if (key == "duration" || key == "dur") {
      ok = ParseInt(value, &fault.duration_steps);
    } else if (key == "rank") {
      ok = ParseInt(value, &fault.rank);
    } else if (key == "node") {
      ok = ParseInt(value, &fault.node);
    } else if (key == "family") {
      fault.family = std::string(value);
    } else if (key == "request") {
      fault.request = std::string(value);
    } else {
      return base::InvalidArgument(
          "fault '{}': unknown key '{}' (expected magnitude, onset, duration, rank, node, "
          "family, request)",
          text, key);
    }
    if (!ok) return base::InvalidArgument("fault '{}': bad value '{}' for {}", text, value, key);
  }
  return fault;
}

}  // namespace

std::string_view CategoryName(FaultCategory category) {
  switch (category) {
    case C::kMemory:
      return "memory_resource";
    case C::kCudaKernel:
      return "cuda_kernel";
    case C::kRuntimeDriver:
      return "runtime_driver";
    case C::kCommunication:
      return "communication_network";
    case C::kScheduling:
      return "scheduling_software";
  }
  return "unknown";
}

std::span<const MechanismInfo> AllMechanisms() { return kMechanisms; }

const MechanismInfo& InfoOf(Mechanism mechanism) {
  for (const MechanismInfo& info : kMechanisms) {
    if (info.mechanism == mechanism) return info;
  }
  return kMechanisms[0];
}

base::StatusOr<Mechanism> ParseMechanism(std::string_view name) {
  std::string names;
  for (const MechanismInfo& info : kMechanisms) {
    if (info.name == name) return info.mechanism;
    if (!names.empty()) names += ", ";
    names += info.name;
  }
  return base::InvalidArgument("unknown fault mechanism '{}' (expected one of: {})", name, names);
}

base::StatusOr<std::vector<FaultSpec>> ParseFaults(std::string_view text) {
  std::vector<FaultSpec> faults;
  while (!text.empty()) {
    const size_t semi = text.find(';');
    std::string_view one = Trim(text.substr(0, semi));
    text = semi == std::string_view::npos ? std::string_view() : text.substr(semi + 1);
    if (one.empty() || one == "none") continue;
    TELLER_ASSIGN_OR_RETURN(FaultSpec fault, ParseOneFault(one));
    faults.push_back(std::move(fault));
  }
  return faults;
}

std::string FormatFault(const FaultSpec& fault) {
  std::string out(InfoOf(fault.mechanism).name);
  std::string args;
  auto add = [&](std::string item) {
    args += args.empty() ? "" : ",";
    args += item;
  };
  if (fault.magnitude >= 0) add(fmt::format("magnitude={}", fault.magnitude));
  if (fault.onset_step >= 0) add(fmt::format("onset={}", fault.onset_step));
  if (fault.duration_steps >= 0) add(fmt::format("duration={}", fault.duration_steps));
  if (fault.rank >= 0) add(fmt::format("rank={}", fault.rank));
  if (fault.node >= 0) add(fmt::format("node={}", fault.node));
  if (!fault.family.empty()) add("family=" + fault.family);
  if (!fault.request.empty()) add("request=" + fault.request);
  if (!args.empty()) out += ":" + args;
  return out;
}

}  // namespace teller::sim
