// labels.json (schema teller-labels/2; /1 still read): the simulator's ground truth of one
// run, next to the bundle's meta.json. /2 labels mark what a fault changed, measured
// against its twin run (the same run without the fault); /1 marked what it touched. One writer (the
// simulator's LabelBuilder fills Labels and writes them with WriteLabelsJson) and one reader
// (ParseLabels: diagnose's scoring, step_records' step labels, eval's reference explanations).
// Spec: docs/format.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace teller::wire {

inline constexpr char kLabelsFileName[] = "labels.json";
inline constexpr char kLabelsSchema[] = "teller-labels/2";
inline constexpr char kLabelsSchemaV1[] = "teller-labels/1";

struct LabelsModel {
  std::string name;
  int32_t layers = 0;
  int32_t mamba_period = 0;

  friend bool operator==(const LabelsModel&, const LabelsModel&) = default;
};

struct LabelsCluster {
  int32_t nodes = 0;
  int32_t gpus_per_node = 0;
  int32_t tp = 0;
  int32_t pp = 0;
  std::string gpu;

  friend bool operator==(const LabelsCluster&, const LabelsCluster&) = default;
};

// Where a fault was injected; null when the mechanism names no such target.
struct LabelsTarget {
  std::optional<int32_t> rank;
  std::optional<int32_t> node;
  std::optional<int32_t> gpu;  // local rank on its node
  std::optional<std::string> family;
  std::optional<std::string> request;
  std::optional<int32_t> layer_index;

  friend bool operator==(const LabelsTarget&, const LabelsTarget&) = default;
};

// What a fault changed, measured against the twin run (zeros in /1 files).
struct LabelsEffect {
  int32_t abnormal_steps = 0;     // steps with an affected instance
  int32_t moved_steps = 0;        // steps whose duration moved past the noise
  double median_step_delta = 0;   // median relative step-time change over its window
  int64_t culprit_instances = 0;  // instances the fault acted on that changed
  int64_t victim_instances = 0;   // that changed because of them (moved ones not listed)

  friend bool operator==(const LabelsEffect&, const LabelsEffect&) = default;
};

struct LabelsFault {
  uint64_t index = 0;
  std::string mechanism = "unknown";  // read: "unknown" when absent
  std::string category;
  double magnitude = 0;
  std::string magnitude_unit;
  int32_t onset_step = 0;
  int32_t duration_steps = 0;
  LabelsTarget target;
  bool leaves_logs = false;
  int32_t log_lines = 0;
  bool manifested = false;  // it made at least one anomalous step
  std::vector<int32_t> affected_steps;
  std::vector<std::string> affected_requests;
  std::vector<std::string> affected_families;
  std::optional<std::pair<int64_t, int64_t>> window_realtime_ns;  // first, last effect
  std::vector<std::string> explanations;                          // reference phrasings
  LabelsEffect effect;                                            // /2: measured on the twin

  friend bool operator==(const LabelsFault&, const LabelsFault&) = default;
};

struct LabelsRequest {
  std::string id;
  bool is_fault = false;
  std::optional<std::string> fault_type;  // the fault's category
  std::optional<int32_t> fault;           // index into faults
  std::vector<int32_t> steps;
  int32_t prompt_tokens = 0;
  int32_t output_tokens = 0;
  int32_t generated_tokens = 0;
  int32_t preemptions = 0;
  std::string state;  // finished, aborted, unfinished
  int64_t arrival_realtime_ns = 0;
  std::optional<int64_t> finish_realtime_ns;
  int32_t dp_rank = 0;
  std::optional<int64_t> latency_delta_ns;  // /2: finish - arrival, minus the twin's
  std::optional<int64_t> queue_delta_ns;    // /2: first scheduled - arrival, minus the twin's

  friend bool operator==(const LabelsRequest&, const LabelsRequest&) = default;
};

// One rank's part of a step (/2).
struct LabelsRankStep {
  int32_t rank = 0;
  bool is_anomaly = false;  // an affected instance on this rank
  int64_t delta_ns = 0;     // this rank's step range, minus the twin's
  bool duration_moved = false;

  friend bool operator==(const LabelsRankStep&, const LabelsRankStep&) = default;
};

struct LabelsStep {
  int64_t step = -1;  // engine step
  std::string phase;
  bool is_anomaly = false;       // /2: an affected instance on some rank
  std::optional<int32_t> fault;  // index into faults
  std::optional<std::string> benign;
  std::vector<std::string> requests;
  int64_t events = 0;
  // /2: the engine step's duration minus the twin's; moved past max(5%, 2 sigma of the
  // run's step-to-step noise); false when the twin's step is not the same work (the
  // schedule diverged), which is then judged against the run's own earlier steps.
  int64_t delta_ns = 0;
  bool duration_moved = false;
  bool paired = true;
  std::vector<LabelsRankStep> ranks;

  friend bool operator==(const LabelsStep&, const LabelsStep&) = default;
};

// Operator instances a fault changed (/1: touched): the ordinal-th event of that layer
// and name (as the store names it) on that rank in that step, in start-time order.
struct LabelsOperator {
  int64_t step = -1;
  int32_t rank = -1;
  std::string layer;  // STEP FE BE RT DRV K MEM COMM SYNC
  std::string name;
  std::string family;
  std::vector<int32_t> ordinals;
  // /2: culprit (the fault acted on it) or victim (it changed because of a culprit).
  std::string role = "culprit";
  std::string kind = "timing";    // timing, new, missing, moved
  std::vector<int64_t> delta_ns;  // per ordinal: duration minus the twin's
  std::vector<double> ratio;      // per ordinal: duration over the twin's (0: new or missing)

  friend bool operator==(const LabelsOperator&, const LabelsOperator&) = default;
};

// How the run paired with its twin (/2).
struct LabelsTwin {
  int32_t paired_steps = 0;
  int32_t unpaired_steps = 0;  // the schedule diverged after the fault
  double step_noise = 0;       // relative sigma of step-to-step change in the twin

  friend bool operator==(const LabelsTwin&, const LabelsTwin&) = default;
};

struct Labels {
  std::string schema = kLabelsSchema;
  std::string run_id;
  std::string engine;
  uint64_t seed = 0;
  LabelsModel model;
  LabelsCluster cluster;
  std::vector<LabelsFault> faults;
  std::vector<LabelsRequest> requests;
  std::vector<LabelsStep> steps;
  std::vector<LabelsOperator> affected_operators;
  LabelsTwin twin;

  friend bool operator==(const Labels&, const Labels&) = default;
};

// Whether a changed instance belongs to the operator set a method is scored on: what
// changed its duration or is new, and what the fault moved itself (a reorder); not what
// only started later behind a culprit, nor what is missing (it is not in the trace).
bool IsScoredInstance(std::string_view role, std::string_view kind);

// labels.json text: every field in the order above, one-space indent, a final newline.
std::string WriteLabelsJson(const Labels& labels);

// Errors name source ("<source>: labels.json ...") and what was expected. A field that
// is absent keeps its default; one of the wrong type is an error; unknown fields are
// ignored.
base::StatusOr<Labels> ParseLabels(std::string_view text, std::string_view source);

}  // namespace teller::wire
