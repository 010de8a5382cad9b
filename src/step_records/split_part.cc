#include "step_records/split_part.h"

#include "step_records/dataset.h"

namespace teller::step_records {

base::StatusOr<RecordSet> LoadSplitPartRecords(const std::string& folder, const std::string& split,
                                               const std::string& part, bool vertical,
                                               bool operator_tokens, base::ProgressSink* progress) {
  TELLER_ASSIGN_OR_RETURN(Dataset dataset, ReadDataset(folder));
  TELLER_ASSIGN_OR_RETURN(auto keys, ReadSplitKeys(folder, split, part));
  RecordSet set;
  LoadOptions options;
  options.keys = &keys;
  options.vertical = vertical;
  options.operator_tokens = operator_tokens;
  options.progress = progress;
  TELLER_RETURN_IF_ERROR(LoadDatasetRecords(dataset, options, &set));
  if (set.records.empty()) {
    return base::NotFound("{}: split {} part {} has no step records", folder, split, part);
  }
  return set;
}

}  // namespace teller::step_records
