// The single-stream variant's row in `teller paper-tables` (learn/single_stream.h): trained on
// the train part when asked (`--methods single_stream`), its type token scored as
// step detection and fault type, its decoded sentences in slot form.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "eval/paper_tables.h"
#include "step_records/step_records.h"

namespace teller::eval {

inline constexpr std::string_view kSingleStreamMethod = "single_stream";

// labels / type_labels / engines: the test records', as the other rows use them. A
// note instead of a row when the trainer plugin is missing.
base::Status AddSingleStream(const step_records::RecordSet& train,
                             const step_records::RecordSet& test, const std::vector<int>& labels,
                             const std::vector<int>& type_labels,
                             const std::vector<std::string>& engines, const EvalOptions& options,
                             EvalReport* report);

}  // namespace teller::eval
