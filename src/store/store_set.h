// A store set: the units of one import plan (import/import_inputs.h) written as store
// files of their own, each by the MPI process that imported it (`teller diagnose
// --distributed --store-dir DIR`, docs/fleet.md), and the plan beside them. Opening
// the folder joins the units in plan order the way the distributed open did, so
// `teller show`, `stats` and `diagnose` read the set as one trace.
//   DIR/set.json       {"format": "teller-store-set", "format_version": 1, "files": [...],
//                       "formats": [...], "units": [{"path", "file", "bundle_process",
//                       "rank", "store" | "left_out"}]}
//   DIR/unit-NNNNN.db  a unit's imported trace (store/trace_store.h), not reconstructed
// The inputs that are not units (logs, Flight Recorder dumps, a bundle's meta.json and
// logs) are read again from their paths when the set is opened.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "import/import_inputs.h"
#include "model/trace.h"

namespace teller::store {

inline constexpr const char* kStoreSetManifest = "set.json";

// "unit-00003.db".
std::string UnitStoreName(size_t unit);

// Writes DIR/set.json; units left out are listed with why.
base::Status WriteStoreSetManifest(const import::ImportPlan& plan,
                                   const std::vector<import::SkippedUnit>& left_out,
                                   const std::string& directory);

// True when directory holds a set.json.
bool IsStoreSet(const std::string& directory);

// The set joined in plan order (not reconstructed); units listed as left out stay out.
// A unit store missing or damaged is an error naming it.
base::StatusOr<model::Trace> OpenStoreSet(const std::string& directory,
                                          const import::ImportOptions& options);

}  // namespace teller::store
