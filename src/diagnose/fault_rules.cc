#include "diagnose/fault_rules.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace teller::diagnose {

using localize::OperatorFamily;

FaultCategory CategoryOfFamily(OperatorFamily family) {
  switch (family) {
    case OperatorFamily::kUnnamed:
      return FaultCategory::kNone;
    case OperatorFamily::kKvCache:
    case OperatorFamily::kAlloc:
      return FaultCategory::kMemoryResource;
    case OperatorFamily::kMemcpy:
    case OperatorFamily::kMemset:
    case OperatorFamily::kSync:
    case OperatorFamily::kLaunch:
    case OperatorFamily::kGraphLaunch:
    case OperatorFamily::kCopy:
    case OperatorFamily::kRuntimeOther:
      return FaultCategory::kRuntimeDriver;
    case OperatorFamily::kHostOp:
    case OperatorFamily::kFrontend:
      return FaultCategory::kSchedulingSoftware;
    default:
      break;
  }
  if (localize::IsCollectiveFamily(family)) return FaultCategory::kCommunicationNetwork;
  return FaultCategory::kCudaKernel;
}

}  // namespace teller::diagnose
