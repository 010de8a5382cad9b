#include "step_records/step_records.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "reconstruct/request_projection.h"
#include "step_records/request_steps.h"
#include "wire/labels_file.h"

namespace teller::step_records {
namespace {

// (rank, step, layer, name, ordinal) of an affected operator instance.
using InstanceKey = std::tuple<int32_t, int64_t, model::Layer, std::string, int32_t>;

struct BundleLabels {
  bool present = false;
  std::string engine;
  // request id -> (fault index, category) of faulty requests
  std::map<std::string, std::pair<int32_t, diagnose::FaultCategory>> faulty_requests;
  std::map<int64_t, int32_t> anomalous_steps;  // step -> fault index
  // (step, rank) of the ranks a fault changed (teller-labels/2); absent: every rank.
  std::set<std::pair<int64_t, int32_t>> anomalous_ranks;
  bool per_rank = false;
  std::vector<std::string> mechanisms;              // per fault index
  std::vector<diagnose::FaultCategory> categories;  // per fault index
  std::vector<std::vector<std::string>> explanations;

  diagnose::FaultCategory CategoryOf(int32_t fault) const {
    return fault >= 0 && static_cast<size_t>(fault) < categories.size()
               ? categories[static_cast<size_t>(fault)]
               : diagnose::FaultCategory::kNone;
  }
  std::set<InstanceKey> instances;
};

// The labels' facts a step record needs; none when the bundle has no labels.json.
base::StatusOr<BundleLabels> ReadBundleLabels(const std::string& text, const std::string& bundle) {
  BundleLabels labels;
  if (text.empty()) return labels;
  TELLER_ASSIGN_OR_RETURN(wire::Labels doc, wire::ParseLabels(text, bundle));
  labels.present = true;
  labels.engine = doc.engine;
  for (wire::LabelsFault& fault : doc.faults) {
    labels.mechanisms.push_back(fault.mechanism);
    labels.categories.push_back(diagnose::FaultCategoryFromName(fault.category));
    labels.explanations.push_back(std::move(fault.explanations));
  }
  for (const wire::LabelsRequest& r : doc.requests) {
    if (!r.is_fault) continue;
    labels.faulty_requests[r.id] = {r.fault.value_or(-1),
                                    diagnose::FaultCategoryFromName(r.fault_type.value_or(""))};
  }
  for (const wire::LabelsStep& s : doc.steps) {
    if (!s.is_anomaly) continue;
    labels.anomalous_steps[s.step] = s.fault.value_or(-1);
    labels.per_rank |= !s.ranks.empty();
    for (const wire::LabelsRankStep& r : s.ranks) {
      if (r.is_anomaly) labels.anomalous_ranks.emplace(s.step, r.rank);
    }
  }
  for (const wire::LabelsOperator& op : doc.affected_operators) {
    const auto layer = model::ParseLayer(op.layer);
    if (!layer || !wire::IsScoredInstance(op.role, op.kind)) continue;
    for (int32_t ordinal : op.ordinals) {
      labels.instances.emplace(op.rank, op.step, *layer, op.name, ordinal);
    }
  }
  return labels;
}

// Whether a fault changed one of the record's ranks in that step (every rank when the
// labels do not say per rank).
bool RanksChanged(const BundleLabels& labels, int64_t step, const std::vector<int32_t>& ranks) {
  if (!labels.per_rank) return true;
  for (int32_t rank : ranks) {
    if (labels.anomalous_ranks.count({step, rank})) return true;
  }
  return false;
}

}  // namespace

// Ordinal of each node of a step among the step's nodes of the same layer and name,
// in start-time order (the labels' definition of an operator instance).
std::vector<int32_t> InstanceOrdinals(const model::Trace& trace, model::StepIndex step) {
  const uint32_t begin = trace.steps.node_begin[step.value()].value();
  const uint32_t end = trace.steps.node_end[step.value()].value();
  std::vector<uint32_t> order(end - begin);
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = begin + i;
  auto start = [&](uint32_t n) { return trace.events.start_ns[trace.nodes.event[n].value()]; };
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return start(a) < start(b); });
  std::map<std::pair<model::Layer, uint32_t>, int32_t> seen;
  std::vector<int32_t> ordinal(order.size(), 0);
  for (uint32_t n : order) {
    const model::EventRow event = trace.nodes.event[n];
    ordinal[n - begin] =
        seen[{trace.events.layer[event.value()], trace.events.name[event.value()].value()}]++;
  }
  return ordinal;
}

TemplateVocabulary::TemplateVocabulary() {
  patterns_ = {"[PAD]", "[UNK]"};
  index_.emplace("[PAD]", kPadding);
  index_.emplace("[UNK]", kUnknown);
}

int32_t TemplateVocabulary::Intern(std::string_view pattern) {
  auto [it, inserted] =
      index_.emplace(std::string(pattern), static_cast<int32_t>(patterns_.size()));
  if (inserted) patterns_.emplace_back(pattern);
  return it->second;
}

int32_t TemplateVocabulary::Find(std::string_view pattern) const {
  auto it = index_.find(std::string(pattern));
  return it == index_.end() ? kUnknown : it->second;
}

std::vector<std::string> StepRecord::AffectedOperators(const tpe::SymbolTable& symbols) const {
  std::set<std::string> names;
  for (size_t k = 0; k < node_affected.size(); ++k) {
    if (node_affected[k]) names.emplace(symbols.Get(serialization.symbol[2 * k + 1]));
  }
  return {names.begin(), names.end()};
}

namespace {

// Builds one trace's step records: the nodes of each record's steps with their columns
// and affected flags, the steps' logs, and the labels.
class RecordBuilder {
 public:
  RecordBuilder(const model::Trace& trace, const RecordOptions& options, BundleLabels labels,
                RecordSet* set)
      : trace_(trace),
        options_(options),
        labels_(std::move(labels)),
        set_(set),
        serializer_(trace, &set->symbols,
                    options.operator_tokens ? tpe::NameSpelling::kOperatorToken
                                            : tpe::NameSpelling::kNormalized) {
    template_of_.resize(trace.templates.size());
    for (size_t t = 0; t < trace.templates.size(); ++t) {
      template_of_[t] = set->templates.Intern(trace.str(trace.templates.pattern[t]));
    }
    logs_of_step_.resize(trace.steps.size());
    for (size_t l = 0; l < trace.logs.size(); ++l) {
      const model::StepIndex step =
          trace.logs.step.empty() ? model::StepIndex() : trace.logs.step[l];
      if (step.valid() && step.value() < trace.steps.size()) {
        logs_of_step_[step.value()].push_back(static_cast<uint32_t>(l));
      }
    }
  }

  // One record per (request, step) of every request the options keep.
  base::Status AddRequestRecords() {
    for (size_t q = 0; q < trace_.requests.size(); ++q) {
      const std::string id(trace_.str(trace_.requests.id[q]));
      if (!Kept(id)) continue;
      const model::RequestIndex request(static_cast<uint32_t>(q));
      const auto faulty = labels_.faulty_requests.find(id);
      for (const auto& [number, steps] : GroupRequestSteps(trace_, request, options_.vertical)) {
        StepRecord record = NewRecord(id, number);
        for (model::StepIndex step : steps) {
          std::vector<model::NodeIndex> nodes = reconstruct::ProjectRequest(trace_, request, step);
          if (nodes.empty()) continue;
          std::sort(nodes.begin(), nodes.end());
          TELLER_RETURN_IF_ERROR(AddStep(step, nodes, &record));
        }
        if (record.serialization.size() == 0) continue;
        if (faulty != labels_.faulty_requests.end()) {
          record.request_faulty = true;
          Label(faulty->second.first, faulty->second.second, &record);
        }
        Finish(std::move(record));
      }
    }
    return base::OkStatus();
  }

  // Plain captures carry no request ids: one record per engine step (over every rank,
  // or per rank in the vertical view) holding all of its nodes, under the key
  // "bundle/" (the request part empty), labelled by the step.
  base::Status AddEngineStepRecords() {
    if (!Kept("")) return base::OkStatus();
    for (const RequestStep& group : GroupEngineSteps(trace_, options_.vertical)) {
      StepRecord record = NewRecord("", group.global_step);
      for (model::StepIndex step : group.steps) {
        const uint32_t begin = trace_.steps.node_begin[step.value()].value();
        const uint32_t end = trace_.steps.node_end[step.value()].value();
        std::vector<model::NodeIndex> nodes;
        for (uint32_t n = begin; n < end; ++n) nodes.emplace_back(n);
        if (nodes.empty()) continue;
        TELLER_RETURN_IF_ERROR(AddStep(step, nodes, &record));
      }
      if (record.serialization.size() == 0) continue;
      const auto anomalous = labels_.anomalous_steps.find(group.global_step);
      if (anomalous != labels_.anomalous_steps.end()) {
        const int32_t fault = anomalous->second;
        record.request_faulty = true;
        Label(fault, labels_.CategoryOf(fault), &record);
      }
      Finish(std::move(record));
    }
    return base::OkStatus();
  }

  void Close() {
    set_->label_instances += static_cast<int64_t>(labels_.instances.size());
    set_->matched_instances += static_cast<int64_t>(matched_.size());
  }

 private:
  bool Kept(const std::string& id) const {
    return options_.keys == nullptr || options_.keys->count(options_.bundle + "/" + id) > 0;
  }

  StepRecord NewRecord(const std::string& id, int64_t number) const {
    StepRecord record;
    record.bundle = options_.bundle;
    record.engine = labels_.engine;
    record.request = id;
    record.step = number;
    record.mechanism = "none";
    return record;
  }

  // The step's nodes (sorted) appended to the record, with their columns and logs.
  base::Status AddStep(model::StepIndex step, const std::vector<model::NodeIndex>& nodes,
                       StepRecord* record) {
    TELLER_ASSIGN_OR_RETURN(tpe::Serialization part, serializer_.SerializeNodes(step, nodes));
    tpe::AppendSerialization(part, &record->serialization);
    const int32_t rank = trace_.steps.rank[step.value()];
    record->ranks.push_back(rank);
    record->phase = trace_.steps.phase[step.value()];
    record->duration_ns = std::max(record->duration_ns, trace_.steps.end_ns[step.value()] -
                                                            trace_.steps.start_ns[step.value()]);
    const std::vector<int32_t>* ordinals = nullptr;
    if (!labels_.instances.empty()) {
      auto it = ordinals_of_step_.find(step.value());
      if (it == ordinals_of_step_.end()) {
        it = ordinals_of_step_.emplace(step.value(), InstanceOrdinals(trace_, step)).first;
      }
      ordinals = &it->second;
    }
    const uint32_t begin = trace_.steps.node_begin[step.value()].value();
    for (model::NodeIndex n : nodes) AddNode(n, rank, record->step, ordinals, begin, record);
    for (uint32_t l : logs_of_step_[step.value()]) {
      RecordLog log;
      const model::TemplateId t = trace_.logs.template_id[l];
      log.template_id = t.valid() && t.value() < template_of_.size() ? template_of_[t.value()]
                                                                     : TemplateVocabulary::kUnknown;
      log.level = trace_.logs.level[l];
      log.rank = trace_.logs.rank[l];
      log.text = std::string(trace_.str(trace_.logs.text[l]));
      record->logs.push_back(std::move(log));
    }
    return base::OkStatus();
  }

  void AddNode(model::NodeIndex n, int32_t rank, int64_t number,
               const std::vector<int32_t>* ordinals, uint32_t begin, StepRecord* record) {
    const model::EventRow event = trace_.nodes.event[n.value()];
    const model::Layer layer = trace_.events.layer[event.value()];
    const std::string_view name = trace_.str(trace_.events.name[event.value()]);
    record->node_rank.push_back(rank);
    record->node_layer.push_back(layer);
    record->node_family.push_back(localize::ClassifyOperator(layer, name));
    int64_t queue = 0;
    const model::NodeIndex parent = trace_.nodes.parent[n.value()];
    if (model::IsDeviceWork(layer) && parent.valid()) {
      const model::EventRow launch = trace_.nodes.event[parent.value()];
      const model::Layer parent_layer = trace_.events.layer[launch.value()];
      if (parent_layer == model::Layer::kRt || parent_layer == model::Layer::kDrv) {
        queue = std::max<int64_t>(
            0, trace_.events.start_ns[event.value()] - trace_.events.start_ns[launch.value()]);
      }
    }
    record->node_queue_ns.push_back(queue);
    uint8_t affected = 0;
    if (ordinals != nullptr) {
      InstanceKey key{rank, number, layer, std::string(name), (*ordinals)[n.value() - begin]};
      if (labels_.instances.count(key)) {
        affected = 1;
        matched_.insert(std::move(key));
      }
    }
    record->node_affected.push_back(affected);
  }

  // A record of a faulty request (or of a plain capture's faulty run) is abnormal when
  // its step is, for the same fault, on one of its ranks.
  void Label(int32_t fault, diagnose::FaultCategory category, StepRecord* record) const {
    const auto anomalous = labels_.anomalous_steps.find(record->step);
    record->is_anomaly = anomalous != labels_.anomalous_steps.end() && anomalous->second == fault &&
                         RanksChanged(labels_, record->step, record->ranks);
    if (!record->is_anomaly) return;
    record->fault_type = category;
    if (fault >= 0 && static_cast<size_t>(fault) < labels_.mechanisms.size()) {
      record->mechanism = labels_.mechanisms[static_cast<size_t>(fault)];
      record->explanations = labels_.explanations[static_cast<size_t>(fault)];
      if (!record->explanations.empty()) record->explanation = record->explanations.front();
    }
  }

  void Finish(StepRecord record) {
    if (record.logs.size() > options_.max_logs_per_record) {
      record.logs.erase(record.logs.begin(),
                        record.logs.end() - static_cast<ptrdiff_t>(options_.max_logs_per_record));
    }
    record.has_labels = labels_.present;
    set_->records.push_back(std::move(record));
  }

  const model::Trace& trace_;
  const RecordOptions& options_;
  const BundleLabels labels_;
  RecordSet* set_;
  tpe::StepSerializer serializer_;
  std::vector<int32_t> template_of_;
  std::vector<std::vector<uint32_t>> logs_of_step_;
  std::map<uint32_t, std::vector<int32_t>> ordinals_of_step_;  // computed when labels ask
  std::set<InstanceKey> matched_;
};

}  // namespace

base::Status AddTraceRecords(const model::Trace& trace, const RecordOptions& options,
                             RecordSet* set) {
  TELLER_ASSIGN_OR_RETURN(BundleLabels labels,
                          ReadBundleLabels(trace.meta.labels_json, options.bundle));
  RecordBuilder builder(trace, options, std::move(labels), set);
  TELLER_RETURN_IF_ERROR(trace.requests.size() > 0 ? builder.AddRequestRecords()
                                                   : builder.AddEngineStepRecords());
  builder.Close();
  return base::OkStatus();
}

}  // namespace teller::step_records
