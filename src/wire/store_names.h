// How the bundle importer names each raw record in the store: its layer and its name.
// One owner for both sides that must agree: the importer (import/bundle_importer.cc)
// interns these, and the simulator's labels (sim/labels.cc) name affected instances
// with them, so that every labelled instance resolves to an event of the store.
#pragma once

#include <string>
#include <string_view>

#include "model/layer.h"
#include "wire/records.h"

namespace teller::wire {

// A host range's layer as written (unspecified: `unspecified`).
model::Layer StoreLayerOf(RangeLayer layer, model::Layer unspecified);

model::Layer StoreLayerOf(const HostRangeRecord& record);  // FE when unspecified
model::Layer StoreLayerOf(const ApiCallRecord& record);    // RT or DRV by name and kind
model::Layer StoreLayerOf(const KernelRecord& record);     // K, COMM, MEM, SYNC by name
inline model::Layer StoreLayerOf(const MemcpyRecord&) { return model::Layer::kMem; }
inline model::Layer StoreLayerOf(const SyncRecord&) { return model::Layer::kSync; }

inline std::string_view StoreNameOf(const HostRangeRecord& record) { return record.name; }
inline std::string_view StoreNameOf(const ApiCallRecord& record) { return record.name; }
inline std::string_view StoreNameOf(const KernelRecord& record) { return record.name; }
std::string StoreNameOf(const MemcpyRecord& record);  // "Memcpy HtoD", ...
std::string_view StoreNameOf(const SyncRecord& record);  // "Stream Sync", ...

}  // namespace teller::wire
