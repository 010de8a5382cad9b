// The deviation map's measurement half: per engine step of a rank, what each channel
// measured (deviation_map.h), as columns, so that a part of a run (some processes,
// reconstructed apart: reconstruct/cross_rank.h) measures its own steps.
//
// What the map's fit and cells read of the trace: per step, its rank, node (process),
// number, group (global step, else number), start, shape (size, context, requests, padded
// size) and each channel's value and count; and what chooses and groups the scored steps:
// whether it serves requests, its name and phase (the baseline context), its structure
// bucket (when its batch is unknown), the operator families it ran (the ranks' roles) and
// whether it ran device work; per process, its node and host name; per part, whether it
// has step requests and the "tokens" arg. All are columns below, so the fit
// (FitDeviationMap, deviation_map.h) reads every part's rows and no trace: what needs every
// rank (the run's first serving step, the global steps where some rank prefills, the
// roles, the nodes' numbering) it computes there, from the rows of all parts.
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
#include <string>
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
  std::vector<double> context_spread;
  // The step's cells, CSR: [cells_begin[s], cells_begin[s + 1]), ascending by (channel,
  // family); a channel the step did not measure has no cell.
  std::vector<uint32_t> cells_begin;
  std::vector<Channel> channel;
  std::vector<localize::OperatorFamily> family;
  std::vector<double> value;  // ns, or a count
  std::vector<int64_t> count;

  // What chooses and groups the scored steps, per step: whether it serves requests, its
  // name without digits (into names) and phase, the structure bucket it has when its
  // batch is unknown (deviation_map.cc), the families its features count (bit per
  // OperatorFamily), whether any of its nodes ran on a device.
  std::vector<uint8_t> serving;
  std::vector<uint32_t> name;
  std::vector<model::StepPhase> phase;
  std::vector<int32_t> structure_bucket;
  std::vector<uint64_t> families;
  std::vector<uint8_t> device_work;
  // Per process of the part: its node as the trace says (-1: none) and its host (into
  // names, kNoHost: none).
  static constexpr uint32_t kNoHost = UINT32_MAX;
  std::vector<int32_t> process_node;
  std::vector<uint32_t> process_host;
  std::vector<std::string> names;  // own pool: parts have different string pools
  // Whether the part has step requests, and the "tokens" arg in its pool.
  bool has_step_requests = false;
  bool has_tokens_arg = false;

  size_t steps() const { return rank.size(); }
  size_t cells() const { return channel.size(); }
  StepShape Shape(size_t s) const {
    return {size[s], context[s], requests[s], padded_size[s], context_spread[s]};
  }
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
  // Whether its steps carry request ids (a tensor-parallel worker's may not).
  bool has_step_requests = false;

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

  // Whether any step of the run carries request ids: then a gap counts only where the
  // engine had work waiting (a request served on both sides), on every rank alike.
  bool any_step_requests = false;
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

// Per event of a part, the run's collective match it stands for, else -1: as
// CollectiveMatchOfEvents on the joined trace, host members counting only for matches
// without device ones on any rank (the merge says). An error when the merge lacks one of
// the part's matches.
base::StatusOr<std::vector<int32_t>> RunMatchOfEvents(const model::Trace& part,
                                                      const MergedMeasurementSummary& merged);

// The three phases over the whole trace.
StepMeasurements MeasureSteps(const model::Trace& trace, const localize::StepFeatures& features);

// Every part's rows appended in order (processes, names and cells renumbered), as the
// joined trace of the parts appended in that order holds its steps.
StepMeasurements ConcatMeasurements(const std::vector<StepMeasurements>& parts);

// The deviation map fitted from measurements alone, no trace: a whole run's rows, or
// every part's (MeasureStepsOfPart) appended in order (ConcatMeasurements).
// BuildDeviationMap (deviation_map.h) is MeasureSteps, then this. MapStep::step is the row
// in those rows: the joined trace's step for a whole trace, else the step's place among
// the parts' rows appended in order. Whatever the parts' order the map is the joined
// trace's, but for MapStep::step and node numbers (a host numbered at its first process,
// as the joined trace of the parts appended in that order numbers it).
DeviationMap FitDeviationMap(const StepMeasurements& rows, const DeviationOptions& options);
DeviationMap FitDeviationMap(const std::vector<StepMeasurements>& parts,
                             const DeviationOptions& options);

}  // namespace teller::cause
