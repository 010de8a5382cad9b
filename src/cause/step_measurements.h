// The deviation map's measurement half: per engine step of a rank, what each channel
// measured (deviation_map.h), as columns, so that a part of a run (some processes,
// reconstructed apart: reconstruct/cross_rank.h) measures its own steps.
//
// What the map's fit and cells read of the trace, per scored step: its rank, node
// (process), number, group (global step, else number), start, shape (size, context,
// requests, padded size) and each channel's value and count (the columns below); and
// what they read besides, still from the joined trace: which steps are scored (the run's
// first serving step, every rank's first), the baseline contexts (step name and phase,
// the ranks' roles from every rank's features, the structure bucket of steps whose batch
// is unknown and the global steps where some rank prefills), the node names, and whether
// any scored step ran device work.
//
// Two measurements read other ranks: a collective's transfer (its end less the latest
// start of its match's members on every rank, and only for matches with two members or
// more, device members counting when the match has any) and a step's padded size (the
// largest size among the steps of its global step). So the split runs in three phases,
// as the step features' do (localize/step_features_parts.h):
//   1. each part: SummarizeMeasurementInputs -> a MeasurementSummary, what it sends;
//   2. one place: MergeMeasurementSummaries over every part's summary;
//   3. each part: MeasureStepsOfPart with the merge.
// MeasureSteps runs the three phases over one part, the whole trace, so the rows of a
// part equal those of the joined trace's steps that the part holds.
//
// Cost: a row is 68 bytes and a cell 18 (channel, family, value, count), so the issue's
// 23 cells per scored rank-step come to about 480 bytes; on the synthetic runs of
// step_measurements_test.cc (12 cells a step) 282 bytes per rank-step, the summaries 40.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "cause/baseline_fit.h"
#include "cause/deviation_map.h"
#include "localize/step_features.h"
#include "model/trace.h"

namespace teller::cause {

// One row per step of the trace (by StepIndex), scored or not (which are scored is the
// fit's choice: it reads the run's first serving step).
struct StepMeasurements {
  std::vector<int32_t> rank;
  std::vector<uint32_t> process;  // the step's process in its trace
  std::vector<int64_t> number;
  std::vector<int64_t> group;  // GroupOf
  std::vector<int64_t> start_ns;
  // The step's shape (StepShape), padded_size over every rank of its global step.
  std::vector<double> size, context, requests, padded_size;
  // The step's cells, CSR: [cells_begin[s], cells_begin[s + 1]), ascending by (channel,
  // family); a channel the step did not measure has no cell.
  std::vector<uint32_t> cells_begin;
  std::vector<Channel> channel;
  std::vector<localize::OperatorFamily> family;
  std::vector<double> value;  // ns, or a count
  std::vector<int64_t> count;

  size_t steps() const { return rank.size(); }
  size_t cells() const { return channel.size(); }
  StepShape Shape(size_t s) const { return {size[s], context[s], requests[s], padded_size[s]}; }
  // The cell of (channel, family) in step s, or -1.
  int64_t Find(size_t s, Channel cell_channel, localize::OperatorFamily cell_family) const;
  // Bytes of the columns.
  size_t ColumnBytes() const;
};

// What a part sends for the measurements that read other ranks.
struct MeasurementSummary {
  // Per collective match with members in the part, ids ascending: how many of its
  // members the part holds on device tracks and on host threads, and the latest start
  // of each kind (INT64_MIN: none).
  std::vector<uint32_t> match;
  std::vector<int32_t> device_members, host_members;
  std::vector<int64_t> device_last_start_ns, host_last_start_ns;
  // Per global step with steps in the part, ascending: the largest size among them.
  std::vector<int64_t> global_step;
  std::vector<double> largest_size;

  size_t ColumnBytes() const;
};

// The run's: per match, its members as CollectiveMatchOfEvents counts them (the device
// ones when it has any) and the latest start among them; per global step, its largest
// size.
struct MergedMeasurementSummary {
  std::vector<uint32_t> match;
  std::vector<int32_t> members;
  std::vector<uint8_t> has_device;
  std::vector<int64_t> last_arrival_ns;
  std::vector<int64_t> global_step;
  std::vector<double> largest_size;

  size_t ColumnBytes() const;
};

// Phase 1. Needs a reconstructed part (steps, nodes, its collective match rows).
MeasurementSummary SummarizeMeasurementInputs(const model::Trace& part);

// Whether a summary that crossed a process boundary is whole: columns of one length,
// matches and global steps ascending.
base::Status CheckMeasurementSummary(const MeasurementSummary& summary);

// Phase 2: the order of the summaries does not matter.
MergedMeasurementSummary MergeMeasurementSummaries(const std::vector<MeasurementSummary>& parts);

// Phase 3: the part's rows, from its features (localize::ComputeStepFeatures or the
// parts' FinishStepFeatures) and the merge. An error when the merge lacks one of the
// part's matches or global steps (its summary was not merged).
base::StatusOr<StepMeasurements> MeasureStepsOfPart(const model::Trace& part,
                                                    const localize::StepFeatures& features,
                                                    const MergedMeasurementSummary& merged);

// The three phases over the whole trace.
StepMeasurements MeasureSteps(const model::Trace& trace, const localize::StepFeatures& features);

}  // namespace teller::cause
