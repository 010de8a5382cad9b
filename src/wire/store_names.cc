#include "wire/store_names.h"

#include "model/classify.h"
#include "wire/wire_format.h"

namespace teller::wire {

model::Layer StoreLayerOf(RangeLayer layer, model::Layer unspecified) {
  switch (layer) {
    case RangeLayer::kUnspecified:
      return unspecified;
    case RangeLayer::kStep:
      return model::Layer::kStep;
    case RangeLayer::kFe:
      return model::Layer::kFe;
    case RangeLayer::kBe:
      return model::Layer::kBe;
    case RangeLayer::kRt:
      return model::Layer::kRt;
    case RangeLayer::kDrv:
      return model::Layer::kDrv;
    case RangeLayer::kK:
      return model::Layer::kK;
    case RangeLayer::kMem:
      return model::Layer::kMem;
    case RangeLayer::kComm:
      return model::Layer::kComm;
    case RangeLayer::kSync:
      return model::Layer::kSync;
    case RangeLayer::kOther:
      return model::Layer::kOther;
  }
  return unspecified;
}

model::Layer StoreLayerOf(const HostRangeRecord& record) {
  return StoreLayerOf(record.layer, model::Layer::kFe);
}

model::Layer StoreLayerOf(const ApiCallRecord& record) {
  return model::ClassifyApiCall(record.name, record.api == ApiKind::kDriver);
}

model::Layer StoreLayerOf(const KernelRecord& record) { return model::ClassifyKernel(record.name); }

std::string StoreNameOf(const MemcpyRecord& record) {
  return "Memcpy " + std::string(CopyKindName(record.copy_kind));
}

std::string_view StoreNameOf(const SyncRecord& record) { return SyncTypeName(record.type); }

}  // namespace teller::wire
