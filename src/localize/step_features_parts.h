// Step features of a trace reconstructed in parts (reconstruct/cross_rank.h: some
// processes of a run each). Every column is local to its step, so to its process,
// except two that read other ranks: skew_ns (the ends of a collective match's members
// on every rank) and order_breaks (the usual kernel-pair counts over every rank's steps
// of the same composition). So the split runs in three phases:
//   1. each part: ComputeLocalStepFeatures -> its features with those two columns
//      still 0, and a StepFeatureSummary, the one thing it sends;
//   2. one place: MergeStepFeatureSummaries over every part's summary;
//   3. each part: FinishStepFeatures with the merged summary.
// ComputeStepFeatures runs the same three phases over one part, the whole trace, so the
// features of a part equal those of the joined trace restricted to the part's steps.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "localize/step_features.h"
#include "model/trace.h"

namespace teller::localize {

// What a part sends: columnar and much smaller than its events (no row per event; on
// the synthetic traces of step_features_parts_test.cc a few tens of bytes per rank-step).
struct StepFeatureSummary {
  // Per collective match with members in the part, ascending: the earliest and latest
  // end of those members (times after clock alignment).
  std::vector<uint32_t> match;
  std::vector<int64_t> match_min_end_ns;
  std::vector<int64_t> match_max_end_ns;
  // Per distinct composition of the part's steps (instances of each compute family, 0
  // for other families): kOperatorFamilyCount counts each, flattened, and the number of
  // the part's steps that ran it.
  std::vector<int32_t> composition_family_count;
  std::vector<int32_t> composition_steps;
  // Kernel pairs (bigram: family * kOperatorFamilyCount + predecessor's family) as a
  // histogram: `steps` steps of `composition` ran `bigram` `times` times. Steps that
  // did not run a bigram are not listed (the merge counts them as 0).
  std::vector<uint32_t> histogram_composition;
  std::vector<uint32_t> histogram_bigram;
  std::vector<int32_t> histogram_times;
  std::vector<int32_t> histogram_steps;

  size_t compositions() const { return composition_steps.size(); }
  // Bytes of the columns: what the summary costs to send.
  size_t ColumnBytes() const;
};

// The run's summary, from every part's.
struct MergedStepFeatureSummary {
  // Per match of the run (ids ascending): max end - min end over all its members.
  std::vector<uint32_t> match;
  std::vector<int64_t> match_skew_ns;
  // Per composition of the run, ascending by counts (flattened as in the summary): the
  // usual count of each kernel pair over its steps, the median with a step that did not
  // run the pair counting 0; pairs whose usual count is 0 are left out. CSR: pairs of
  // composition c are [usual_begin[c], usual_begin[c + 1]), bigrams ascending.
  std::vector<int32_t> composition_family_count;
  std::vector<uint32_t> usual_begin;
  std::vector<uint32_t> usual_bigram;
  std::vector<int32_t> usual_times;

  size_t compositions() const { return usual_begin.empty() ? 0 : usual_begin.size() - 1; }
  size_t ColumnBytes() const;
};

// What a part keeps between phases 1 and 3.
struct LocalStepFeatures {
  StepFeatures features;  // skew_ns and order_breaks 0 until FinishStepFeatures
  StepFeatureSummary summary;
  // Per step of the part: its composition (index into the summary's) and its kernel
  // pairs, CSR [step_bigrams_begin[s], step_bigrams_begin[s + 1]), bigrams ascending.
  std::vector<uint32_t> step_composition;
  std::vector<uint32_t> step_bigrams_begin;
  std::vector<uint32_t> step_bigram;
  std::vector<int32_t> step_bigram_times;
};

// Phase 1. Needs a reconstructed part (nodes, steps, its collective match rows).
LocalStepFeatures ComputeLocalStepFeatures(const model::Trace& part);

// Whether a summary that crossed a process boundary is whole: columns of one length,
// indexes in range. MergeStepFeatureSummaries expects checked summaries.
base::Status CheckStepFeatureSummary(const StepFeatureSummary& summary);

// Phase 2: the order of the summaries does not matter.
MergedStepFeatureSummary MergeStepFeatureSummaries(const std::vector<StepFeatureSummary>& parts);

// Phase 3: skew_ns and order_breaks from the merge. An error when the merge lacks one of
// the part's matches or compositions (its summary was not merged).
base::StatusOr<StepFeatures> FinishStepFeatures(const model::Trace& part, LocalStepFeatures local,
                                                const MergedStepFeatureSummary& merged);

}  // namespace teller::localize
