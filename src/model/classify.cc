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

Layer ClassifyHostOp(std::string_view name) {
  bool comm =
      name == "record_param_comms" || StartsWith(name, "nccl:") || StartsWith(name, "c10d::");
  return comm ? Layer::kComm : Layer::kBe;
}

Layer ClassifyUserAnnotation(std::string_view name) {
  return StartsWith(name, "nccl:") ? Layer::kComm : Layer::kFe;
}

Layer ClassifyHostRange(std::string_view name) {
  // Autograd nodes: "AddmmBackward0", "MseLossBackward0", older "AddmmBackward".
  std::string_view node = name;
  while (!node.empty() && node.back() >= '0' && node.back() <= '9') node.remove_suffix(1);
  bool autograd_node = node.size() > 8 && node.substr(node.size() - 8) == "Backward" &&
                       node.find_first_of(" #.(") == std::string_view::npos;
  if (Contains(name, "::") || autograd_node || name == "record_param_comms") {
    return ClassifyHostOp(name);
  }
  return ClassifyUserAnnotation(name);
}

}  // namespace teller::model
