// The one file that turns CUPTI activity records into teller's wire records. Pure:
// no CUPTI calls (API names come from a lookup the caller passes), so tests build
// records in memory. Records of kinds teller does not use are counted and skipped.
#pragma once

#include <cupti_activity.h>

#include <cstdint>

#include "wire/record_codec.h"

namespace teller::capture {

struct DecoderCounters {
  uint64_t decoded = 0;
  uint64_t skipped = 0;  // kinds teller does not record
};

class RecordDecoder {
 public:
  // Name of a runtime (driver=false) or driver API callback id; nullptr if unknown.
  using ApiNameFn = const char* (*)(bool driver, uint32_t cbid);

  explicit RecordDecoder(ApiNameFn api_name) : api_name_(api_name) {}

  // Decodes one record into the visitor (OnApiCall, OnKernel, OnMemcpy, OnMemset,
  // OnSync, OnExternalCorrelation). Returns false when the kind was skipped.
  bool Decode(const CUpti_Activity& record, wire::RecordVisitor* out);

  const DecoderCounters& counters() const { return counters_; }

 private:
  ApiNameFn api_name_;
  DecoderCounters counters_;
};

}  // namespace teller::capture
