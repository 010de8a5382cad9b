// The grounding check on an LLM narrative: every step number, rank and kernel or
// operator name it cites must be in the prompt it was given. Deliberately simple
// (docs/explain.md): "step N" / "steps N, M and K" and "rank N" / "ranks N and M"
// against the prompt's step and rank sets; identifiers that look like kernel or
// operator names (with '_' or "::", or starting with nccl/cuda/cu/aten) against the
// prompt text, case-insensitively.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "explain/narrative_prompt.h"

namespace teller::explain {

// "step 9999", "rank 7", "fake_kernel": each mention not found in the prompt, once,
// in the order they appear in the reply.
std::vector<std::string> UnverifiedMentions(std::string_view reply,
                                            const NarrativeRequest& request);

}  // namespace teller::explain
