// Per-request projection C_q(s) of a reconstructed trace: the part of step s's
// call-chain tree that serves request q.
#pragma once

#include <string_view>
#include <vector>

#include "model/trace.h"

namespace teller::reconstruct {

// The request with this id text, or an invalid index.
model::RequestIndex FindRequest(const model::Trace& trace, std::string_view request_id);

// Steps that carry request q, in step order.
std::vector<model::StepIndex> StepsOfRequest(const model::Trace& trace,
                                             model::RequestIndex request);

// Nodes of C_q(s) in pre-order: empty when step s does not carry q. A batched
// step belongs to every request it carries, so C_q(s) is the step's whole tree,
// except subtrees whose root names its own requests ("request"/"requests" args)
// without q.
std::vector<model::NodeIndex> ProjectRequest(const model::Trace& trace, model::RequestIndex request,
                                             model::StepIndex step);

}  // namespace teller::reconstruct
