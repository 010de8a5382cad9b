#include "model/classify.h"

#include <array>

namespace teller::model {
namespace {

bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

}  // namespace

bool IsCollectiveKernelName(std::string_view name) {
  static constexpr std::array<std::string_view, 8> kParts = {
      "nccl",      "rccl",       "multimem_all_reduce", "all_reduce", "cross_device_reduce",
      "allreduce", "all_gather", "reduce_scatter"};
  for (std::string_view part : kParts) {
    if (Contains(name, part)) return true;
  }
  return false;
}

Layer ClassifyKernel(std::string_view name) {
  return IsCollectiveKernelName(name) ? Layer::kComm : Layer::kK;
}

Layer ClassifyApiCall(std::string_view name, bool from_driver_domain) {
  if (Contains(name, "Synchronize") || Contains(name, "StreamWaitEvent") ||
      Contains(name, "EventQuery") || Contains(name, "StreamQuery")) {
    return Layer::kSync;
  }
  if (from_driver_domain) return Layer::kDrv;
  if (StartsWith(name, "cu") && !StartsWith(name, "cuda")) return Layer::kDrv;
  if (StartsWith(name, "hipDrv") || StartsWith(name, "hipModule") ||
      StartsWith(name, "hipExtModule")) {
    return Layer::kDrv;
  }
  return Layer::kRt;
}

bool IsGraphLaunchName(std::string_view name) { return Contains(name, "GraphLaunch"); }

bool IsLaunchName(std::string_view name) {
  return Contains(name, "LaunchKernel") || Contains(name, "LaunchCooperativeKernel") ||
         Contains(name, "GraphLaunch") || Contains(name, "Memcpy") || Contains(name, "Memset") ||
         Contains(name, "ModuleLaunch") || Contains(name, "LaunchHostFunc");
}

}  // namespace teller::model
