// Strong ids and row indexes of the trace model.
#pragma once

#include <cstdint>

#include "base/string_pool.h"
#include "base/strong_id.h"
#include "base/time.h"

namespace teller::model {

using base::DurationNs;
using base::StringId;
using base::TimeNs;

struct EventRowTag {};
struct ProcessIndexTag {};
struct ThreadIndexTag {};
struct NodeIndexTag {};
struct StepIndexTag {};
struct RequestIndexTag {};
struct TemplateIdTag {};
struct LogRowTag {};
struct CorrelationIdTag {};
struct EventIdTag {};
struct CollectiveMatchIdTag {};

using EventRow = base::StrongId<EventRowTag, uint32_t>;
using ProcessIndex = base::StrongId<ProcessIndexTag, uint32_t>;
using ThreadIndex = base::StrongId<ThreadIndexTag, uint32_t>;
using NodeIndex = base::StrongId<NodeIndexTag, uint32_t>;
using StepIndex = base::StrongId<StepIndexTag, uint32_t>;
using RequestIndex = base::StrongId<RequestIndexTag, uint32_t>;
using TemplateId = base::StrongId<TemplateIdTag, uint32_t>;
using LogRow = base::StrongId<LogRowTag, uint32_t>;
using CollectiveMatchId = base::StrongId<CollectiveMatchIdTag, uint32_t>;
// Links a host call to the device work it launched (CUPTI / Kineto correlation).
using CorrelationId = base::StrongId<CorrelationIdTag, int64_t>;
// The event's own id: NVTX range id, Kineto "External id", graph node id, ...
using EventId = base::StrongId<EventIdTag, int64_t>;

}  // namespace teller::model
