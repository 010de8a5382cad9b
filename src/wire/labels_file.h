// labels.json (schema teller-labels/1): the simulator's ground truth of one run, next to
// the bundle's meta.json. One writer (the simulator's LabelBuilder fills Labels and
// writes them with WriteLabelsJson) and one reader (ParseLabels: diagnose's scoring,
// records' step labels, eval's reference explanations). Spec: docs/format.md.
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
inline constexpr char kLabelsSchema[] = "teller-labels/1";

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

  friend bool operator==(const LabelsRequest&, const LabelsRequest&) = default;
};

struct LabelsStep {
  int64_t step = -1;  // engine step
  std::string phase;
  bool is_anomaly = false;
  std::optional<int32_t> fault;  // index into faults
  std::optional<std::string> benign;
  std::vector<std::string> requests;
  int64_t events = 0;

  friend bool operator==(const LabelsStep&, const LabelsStep&) = default;
};

// Operator instances a fault touched: the ordinal-th event of that layer and name on
// that rank in that step, in start-time order.
struct LabelsOperator {
  int64_t step = -1;
  int32_t rank = -1;
  std::string layer;  // STEP FE BE RT DRV K MEM COMM SYNC
  std::string name;
  std::string family;
  std::vector<int32_t> ordinals;

  friend bool operator==(const LabelsOperator&, const LabelsOperator&) = default;
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

  friend bool operator==(const Labels&, const Labels&) = default;
};

// labels.json text: every field in the order above, one-space indent, a final newline.
std::string WriteLabelsJson(const Labels& labels);

// Errors name source ("<source>: labels.json ...") and what was expected. A field that
// is absent keeps its default; one of the wrong type is an error; unknown fields are
// ignored.
base::StatusOr<Labels> ParseLabels(std::string_view text, std::string_view source);

}  // namespace teller::wire
