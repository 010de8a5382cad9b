// What the findings read of a trace (diagnose's ScoreFindings: the baselines, their
// isolation forests and the peer scores), as columns, so that a part of a run (some
// processes, reconstructed apart: reconstruct/cross_rank.h) makes its own rows from its
// finished step features (step_features_parts.h), and one place scores every part's rows
// appended in plan order, as it would score the joined trace's.
//
// Per step: its rank, number, global step, phase, name without digits (the baseline
// context), batch bucket (BatchBucket), requests served, start, duration and first node.
// Per feature row: the StepFeatures columns the scores read (StepFeatures::Value), its step
// the row of the step here, and its examples: the instances a finding names (diagnose's
// suspects), the most telling first, by duration and by launch-to-start delay, at most
// `examples` of each. Baselines and peers need every rank's rows, so the rows cross whole:
// no merge of small summaries stands for a median, a MAD or a forest of every rank.
//
// Cost on the wire (feature_rows_wire.h): a feature row 62 bytes, an example 2 (4 past
// u16), a step 53; about 1.3 KB per rank-step on the simulated runs of
// fleet/analysis_parts_test.cc (17 feature rows and 120 examples a rank-step), which
// prints them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "localize/step_features.h"
#include "model/trace.h"

namespace teller::localize {

// Examples a part sends per feature row and ordering (diagnose::DiagnoseOptions::max_suspects).
inline constexpr uint32_t kFeatureRowExamples = 8;

struct FeatureRows {
  // Per step, in step order (the part's StepIndex; the joined trace's once appended).
  std::vector<int32_t> rank;
  std::vector<int64_t> number;
  std::vector<int64_t> global_step;
  std::vector<model::StepPhase> phase;
  std::vector<uint32_t> name;  // into names: the step's name without its digits
  std::vector<int32_t> batch_bucket;
  std::vector<uint32_t> requests;  // step requests it serves
  std::vector<int64_t> start_ns;
  std::vector<int64_t> dur_ns;
  // Its first node (the step's root): examples are offsets from it.
  std::vector<uint32_t> first_node;
  // The feature rows: `step` indexes the steps above; instances and queue_total_ns empty.
  StepFeatures features;
  // Per feature row, CSR: its instances the longest first (ties: the earlier node), and
  // by launch-to-start delay (start less its parent's start; its duration without a
  // parent), as offsets from the step's first node. An empty delay range with instances
  // in the row: the same as the longest.
  std::vector<uint32_t> longest_begin;
  std::vector<uint32_t> longest;
  std::vector<uint32_t> delayed_begin;
  std::vector<uint32_t> delayed;
  std::vector<std::string> names;  // own pool: parts have different string pools
  uint32_t examples = 0;           // the most examples of each kind per row
  uint32_t nodes = 0;              // nodes of the part (of every part once appended)
  bool has_step_requests = false;  // whether any step of the part serves a request

  size_t steps() const { return rank.size(); }
  // The row's first `count` examples for `feature` (by delay for kQueueMaxNs, else the
  // longest) as nodes of the rows' trace, ascending; `count` at most `examples`.
  std::vector<model::NodeIndex> Examples(size_t row, Feature feature, size_t count) const;
};

// The rows of a reconstructed part (or a whole trace) from its finished features, with at
// most `examples` examples of each kind per feature row.
FeatureRows FeatureRowsOfPart(const model::Trace& part, const StepFeatures& features,
                              uint32_t examples = kFeatureRowExamples);

// Every part's rows appended in order (steps, nodes and names renumbered), as the joined
// trace of the parts appended in that order holds its steps and nodes; `examples` the
// fewest any part lists.
FeatureRows ConcatFeatureRows(const std::vector<FeatureRows>& parts);

// Whether rows that crossed a process boundary are whole: every index the scores follow in
// range, a row per step in every step column, CSR offsets from 0 ascending, feature rows in
// step order, examples inside their step and at most `examples` a row.
base::Status CheckFeatureRows(const FeatureRows& rows);

}  // namespace teller::localize
