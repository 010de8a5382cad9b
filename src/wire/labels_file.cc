#include "wire/labels_file.h"

#include <fmt/format.h>

#include "wire/json_fields.h"

namespace teller::wire {
namespace {

using Json = OrderedJson;

template <typename T>
Json OrNull(const std::optional<T>& value) {
  return value ? Json(*value) : Json(nullptr);
}

bool IsV2(const Labels& labels) { return labels.schema == kLabelsSchema; }

Json EffectJson(const LabelsEffect& e) {
  Json j;
  j["abnormal_steps"] = e.abnormal_steps;
  j["moved_steps"] = e.moved_steps;
  j["median_step_delta"] = e.median_step_delta;
  j["culprit_instances"] = e.culprit_instances;
  j["victim_instances"] = e.victim_instances;
  return j;
}

Json FaultJson(const LabelsFault& f, bool v2) {
  Json j;
  j["index"] = f.index;
  j["mechanism"] = f.mechanism;
  j["category"] = f.category;
  j["magnitude"] = f.magnitude;
  j["magnitude_unit"] = f.magnitude_unit;
  j["onset_step"] = f.onset_step;
  j["duration_steps"] = f.duration_steps;
  Json target;
  target["rank"] = OrNull(f.target.rank);
  target["node"] = OrNull(f.target.node);
  target["gpu"] = OrNull(f.target.gpu);
  target["family"] = OrNull(f.target.family);
  target["request"] = OrNull(f.target.request);
  target["layer_index"] = OrNull(f.target.layer_index);
  j["target"] = target;
  j["leaves_logs"] = f.leaves_logs;
  j["log_lines"] = f.log_lines;
  j["manifested"] = f.manifested;
  j["affected_steps"] = f.affected_steps;
  j["affected_requests"] = f.affected_requests;
  j["affected_families"] = f.affected_families;
  j["window_realtime_ns"] =
      f.window_realtime_ns
          ? Json::array({f.window_realtime_ns->first, f.window_realtime_ns->second})
          : Json(nullptr);
  j["explanations"] = f.explanations;
  if (v2) j["effect"] = EffectJson(f.effect);
  return j;
}

Json RequestJson(const LabelsRequest& r, bool v2) {
  Json j;
  j["id"] = r.id;
  j["is_fault"] = r.is_fault;
  j["fault_type"] = OrNull(r.fault_type);
  j["fault"] = OrNull(r.fault);
  j["steps"] = r.steps;
  j["prompt_tokens"] = r.prompt_tokens;
  j["output_tokens"] = r.output_tokens;
  j["generated_tokens"] = r.generated_tokens;
  j["preemptions"] = r.preemptions;
  j["state"] = r.state;
  j["arrival_realtime_ns"] = r.arrival_realtime_ns;
  j["finish_realtime_ns"] = OrNull(r.finish_realtime_ns);
  j["dp_rank"] = r.dp_rank;
  if (v2) {
    j["latency_delta_ns"] = OrNull(r.latency_delta_ns);
    j["queue_delta_ns"] = OrNull(r.queue_delta_ns);
  }
  return j;
}

Json StepJson(const LabelsStep& s, bool v2) {
  Json j;
  j["step"] = s.step;
  j["phase"] = s.phase;
  j["is_anomaly"] = s.is_anomaly;
  j["fault"] = OrNull(s.fault);
  j["benign"] = OrNull(s.benign);
  j["requests"] = s.requests;
  j["events"] = s.events;
  if (v2) {
    j["delta_ns"] = s.delta_ns;
    j["duration_moved"] = s.duration_moved;
    j["paired"] = s.paired;
    Json ranks = Json::array();
    for (const LabelsRankStep& r : s.ranks) {
      ranks.push_back({{"rank", r.rank},
                       {"is_anomaly", r.is_anomaly},
                       {"delta_ns", r.delta_ns},
                       {"duration_moved", r.duration_moved}});
    }
    j["ranks"] = std::move(ranks);
  }
  return j;
}

Json OperatorJson(const LabelsOperator& a, bool v2) {
  Json j;
  j["step"] = a.step;
  j["rank"] = a.rank;
  j["layer"] = a.layer;
  j["name"] = a.name;
  j["family"] = a.family;
  j["ordinals"] = a.ordinals;
  if (v2) {
    j["role"] = a.role;
    j["kind"] = a.kind;
    j["delta_ns"] = a.delta_ns;
    j["ratio"] = a.ratio;
  }
  return j;
}

// Each element of the array at key, read as an object by read(fields, &item).
template <typename T, typename ReadFn>
base::Status ReadObjects(const JsonFields& parent, std::string_view source, std::string_view key,
                         ReadFn read, std::vector<T>* out) {
  TELLER_ASSIGN_OR_RETURN(const Json* array, parent.Array(key));
  if (array == nullptr) return base::OkStatus();
  for (size_t i = 0; i < array->size(); ++i) {
    const Json& item = (*array)[i];
    const std::string path = fmt::format("{}[{}]", parent.PathOf(key), i);
    if (!item.is_object()) return parent.Expected(path, "an object", item);
    T value;
    TELLER_RETURN_IF_ERROR(read(JsonFields(source, item, path), &value));
    out->push_back(std::move(value));
  }
  return base::OkStatus();
}

base::Status ReadTarget(const JsonFields& fault, std::string_view source, LabelsTarget* out) {
  const Json* target = fault.Find("target");
  if (target == nullptr || target->is_null()) return base::OkStatus();
  if (!target->is_object()) return fault.Expected(fault.PathOf("target"), "an object", *target);
  const JsonFields t(source, *target, fault.PathOf("target"));
  TELLER_RETURN_IF_ERROR(t.NullableInt("rank", &out->rank));
  TELLER_RETURN_IF_ERROR(t.NullableInt("node", &out->node));
  TELLER_RETURN_IF_ERROR(t.NullableInt("gpu", &out->gpu));
  TELLER_RETURN_IF_ERROR(t.NullableString("family", &out->family));
  TELLER_RETURN_IF_ERROR(t.NullableString("request", &out->request));
  return t.NullableInt("layer_index", &out->layer_index);
}

base::Status ReadWindow(const JsonFields& fault, std::optional<std::pair<int64_t, int64_t>>* out) {
  const Json* window = fault.Find("window_realtime_ns");
  if (window == nullptr || window->is_null()) return base::OkStatus();
  std::vector<int64_t> ends;
  TELLER_RETURN_IF_ERROR(fault.IntArray("window_realtime_ns", &ends));
  if (ends.size() != 2) {
    return fault.Expected(fault.PathOf("window_realtime_ns"), "[first_ns, last_ns] or null",
                          *window);
  }
  *out = std::make_pair(ends[0], ends[1]);
  return base::OkStatus();
}

// The /2 keys are read only from a /2 file: a /1 file means their defaults.
base::Status ReadFault(std::string_view source, bool v2, const JsonFields& f, LabelsFault* out) {
  TELLER_RETURN_IF_ERROR(f.Int("index", &out->index));
  TELLER_RETURN_IF_ERROR(f.String("mechanism", &out->mechanism));
  TELLER_RETURN_IF_ERROR(f.String("category", &out->category));
  TELLER_RETURN_IF_ERROR(f.Double("magnitude", &out->magnitude));
  TELLER_RETURN_IF_ERROR(f.String("magnitude_unit", &out->magnitude_unit));
  TELLER_RETURN_IF_ERROR(f.Int("onset_step", &out->onset_step));
  TELLER_RETURN_IF_ERROR(f.Int("duration_steps", &out->duration_steps));
  TELLER_RETURN_IF_ERROR(ReadTarget(f, source, &out->target));
  TELLER_RETURN_IF_ERROR(f.Bool("leaves_logs", &out->leaves_logs));
  TELLER_RETURN_IF_ERROR(f.Int("log_lines", &out->log_lines));
  TELLER_RETURN_IF_ERROR(f.Bool("manifested", &out->manifested));
  TELLER_RETURN_IF_ERROR(f.IntArray("affected_steps", &out->affected_steps));
  TELLER_RETURN_IF_ERROR(f.StringArray("affected_requests", &out->affected_requests));
  TELLER_RETURN_IF_ERROR(f.StringArray("affected_families", &out->affected_families));
  TELLER_RETURN_IF_ERROR(ReadWindow(f, &out->window_realtime_ns));
  TELLER_RETURN_IF_ERROR(f.StringArray("explanations", &out->explanations));
  const Json* effect = f.Find("effect");
  if (!v2 || effect == nullptr || effect->is_null()) return base::OkStatus();
  if (!effect->is_object()) return f.Expected(f.PathOf("effect"), "an object", *effect);
  const JsonFields e(source, *effect, f.PathOf("effect"));
  TELLER_RETURN_IF_ERROR(e.Int("abnormal_steps", &out->effect.abnormal_steps));
  TELLER_RETURN_IF_ERROR(e.Int("moved_steps", &out->effect.moved_steps));
  TELLER_RETURN_IF_ERROR(e.Double("median_step_delta", &out->effect.median_step_delta));
  TELLER_RETURN_IF_ERROR(e.Int("culprit_instances", &out->effect.culprit_instances));
  return e.Int("victim_instances", &out->effect.victim_instances);
}

base::Status ReadRequest(bool v2, const JsonFields& r, LabelsRequest* out) {
  TELLER_RETURN_IF_ERROR(r.String("id", &out->id));
  TELLER_RETURN_IF_ERROR(r.Bool("is_fault", &out->is_fault));
  TELLER_RETURN_IF_ERROR(r.NullableString("fault_type", &out->fault_type));
  TELLER_RETURN_IF_ERROR(r.NullableInt("fault", &out->fault));
  TELLER_RETURN_IF_ERROR(r.IntArray("steps", &out->steps));
  TELLER_RETURN_IF_ERROR(r.Int("prompt_tokens", &out->prompt_tokens));
  TELLER_RETURN_IF_ERROR(r.Int("output_tokens", &out->output_tokens));
  TELLER_RETURN_IF_ERROR(r.Int("generated_tokens", &out->generated_tokens));
  TELLER_RETURN_IF_ERROR(r.Int("preemptions", &out->preemptions));
  TELLER_RETURN_IF_ERROR(r.String("state", &out->state));
  TELLER_RETURN_IF_ERROR(r.Int("arrival_realtime_ns", &out->arrival_realtime_ns));
  TELLER_RETURN_IF_ERROR(r.NullableInt("finish_realtime_ns", &out->finish_realtime_ns));
  TELLER_RETURN_IF_ERROR(r.Int("dp_rank", &out->dp_rank));
  if (!v2) return base::OkStatus();
  TELLER_RETURN_IF_ERROR(r.NullableInt("latency_delta_ns", &out->latency_delta_ns));
  return r.NullableInt("queue_delta_ns", &out->queue_delta_ns);
}

base::Status ReadRankStep(const JsonFields& r, LabelsRankStep* out) {
  TELLER_RETURN_IF_ERROR(r.Int("rank", &out->rank));
  TELLER_RETURN_IF_ERROR(r.Bool("is_anomaly", &out->is_anomaly));
  TELLER_RETURN_IF_ERROR(r.Int("delta_ns", &out->delta_ns));
  return r.Bool("duration_moved", &out->duration_moved);
}

base::Status ReadStep(std::string_view source, bool v2, const JsonFields& s, LabelsStep* out) {
  TELLER_RETURN_IF_ERROR(s.Int("step", &out->step));
  TELLER_RETURN_IF_ERROR(s.String("phase", &out->phase));
  TELLER_RETURN_IF_ERROR(s.Bool("is_anomaly", &out->is_anomaly));
  TELLER_RETURN_IF_ERROR(s.NullableInt("fault", &out->fault));
  TELLER_RETURN_IF_ERROR(s.NullableString("benign", &out->benign));
  TELLER_RETURN_IF_ERROR(s.StringArray("requests", &out->requests));
  TELLER_RETURN_IF_ERROR(s.Int("events", &out->events));
  if (!v2) return base::OkStatus();
  TELLER_RETURN_IF_ERROR(s.Int("delta_ns", &out->delta_ns));
  TELLER_RETURN_IF_ERROR(s.Bool("duration_moved", &out->duration_moved));
  TELLER_RETURN_IF_ERROR(s.Bool("paired", &out->paired));
  return ReadObjects<LabelsRankStep>(s, source, "ranks", ReadRankStep, &out->ranks);
}

base::Status ReadOperator(bool v2, const JsonFields& o, LabelsOperator* out) {
  TELLER_RETURN_IF_ERROR(o.Int("step", &out->step));
  TELLER_RETURN_IF_ERROR(o.Int("rank", &out->rank));
  TELLER_RETURN_IF_ERROR(o.String("layer", &out->layer));
  TELLER_RETURN_IF_ERROR(o.String("name", &out->name));
  TELLER_RETURN_IF_ERROR(o.String("family", &out->family));
  TELLER_RETURN_IF_ERROR(o.IntArray("ordinals", &out->ordinals));
  if (!v2) return base::OkStatus();
  TELLER_RETURN_IF_ERROR(o.String("role", &out->role));
  TELLER_RETURN_IF_ERROR(o.String("kind", &out->kind));
  TELLER_RETURN_IF_ERROR(o.IntArray("delta_ns", &out->delta_ns));
  TELLER_RETURN_IF_ERROR(o.DoubleArray("ratio", &out->ratio));
  for (const auto& [key, size] :
       {std::pair<std::string_view, size_t>{"delta_ns", out->delta_ns.size()},
        {"ratio", out->ratio.size()}}) {
    if (size != 0 && size != out->ordinals.size()) {
      return o.Expected(o.PathOf(key),
                        fmt::format("{} values, one per ordinal", out->ordinals.size()),
                        *o.Find(key));
    }
  }
  return base::OkStatus();
}

base::Status ReadHeader(const JsonFields& root, std::string_view source, Labels* out) {
  TELLER_RETURN_IF_ERROR(root.String("run_id", &out->run_id));
  TELLER_RETURN_IF_ERROR(root.String("engine", &out->engine));
  TELLER_RETURN_IF_ERROR(root.Int("seed", &out->seed));
  if (const Json* model = root.Find("model"); model != nullptr) {
    if (!model->is_object()) return root.Expected("model", "an object", *model);
    const JsonFields m(source, *model, "model");
    TELLER_RETURN_IF_ERROR(m.String("name", &out->model.name));
    TELLER_RETURN_IF_ERROR(m.Int("layers", &out->model.layers));
    TELLER_RETURN_IF_ERROR(m.Int("mamba_period", &out->model.mamba_period));
  }
  if (const Json* cluster = root.Find("cluster"); cluster != nullptr) {
    if (!cluster->is_object()) return root.Expected("cluster", "an object", *cluster);
    const JsonFields c(source, *cluster, "cluster");
    TELLER_RETURN_IF_ERROR(c.Int("nodes", &out->cluster.nodes));
    TELLER_RETURN_IF_ERROR(c.Int("gpus_per_node", &out->cluster.gpus_per_node));
    TELLER_RETURN_IF_ERROR(c.Int("tp", &out->cluster.tp));
    TELLER_RETURN_IF_ERROR(c.Int("pp", &out->cluster.pp));
    TELLER_RETURN_IF_ERROR(c.String("gpu", &out->cluster.gpu));
  }
  return base::OkStatus();
}

}  // namespace

bool IsScoredInstance(std::string_view role, std::string_view kind) {
  return kind == "timing" || kind == "new" || (kind == "moved" && role == "culprit");
}

std::string WriteLabelsJson(const Labels& labels) {
  Json root;
  root["schema"] = labels.schema;
  root["run_id"] = labels.run_id;
  root["engine"] = labels.engine;
  root["seed"] = labels.seed;
  root["model"] = {{"name", labels.model.name},
                   {"layers", labels.model.layers},
                   {"mamba_period", labels.model.mamba_period}};
  root["cluster"] = {{"nodes", labels.cluster.nodes},
                     {"gpus_per_node", labels.cluster.gpus_per_node},
                     {"tp", labels.cluster.tp},
                     {"pp", labels.cluster.pp},
                     {"gpu", labels.cluster.gpu}};
  Json faults = Json::array();
  const bool v2 = IsV2(labels);
  for (const LabelsFault& f : labels.faults) faults.push_back(FaultJson(f, v2));
  root["faults"] = std::move(faults);
  Json requests = Json::array();
  for (const LabelsRequest& r : labels.requests) requests.push_back(RequestJson(r, v2));
  root["requests"] = std::move(requests);
  Json steps = Json::array();
  for (const LabelsStep& s : labels.steps) steps.push_back(StepJson(s, v2));
  root["steps"] = std::move(steps);
  Json affected = Json::array();
  for (const LabelsOperator& a : labels.affected_operators) {
    affected.push_back(OperatorJson(a, v2));
  }
  root["affected_operators"] = std::move(affected);
  if (v2) {
    root["twin"] = {{"paired_steps", labels.twin.paired_steps},
                    {"unpaired_steps", labels.twin.unpaired_steps},
                    {"step_noise", labels.twin.step_noise}};
  }
  return root.dump(1) + "\n";
}

base::StatusOr<Labels> ParseLabels(std::string_view text, std::string_view source) {
  const Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return base::InvalidArgument("{}: labels.json is not a JSON object", source);
  }
  const auto schema = doc.find("schema");
  const std::string found = schema == doc.end()   ? ""
                            : schema->is_string() ? schema->get<std::string>()
                                                  : schema->dump();
  if (found != kLabelsSchema && found != kLabelsSchemaV1) {
    return base::InvalidArgument("{}: labels.json schema is \"{}\", expected {} or {}", source,
                                 found, kLabelsSchema, kLabelsSchemaV1);
  }
  const std::string file = fmt::format("{}: labels.json", source);
  const JsonFields root(file, doc, "");
  Labels labels;
  labels.schema = found;
  const bool v2 = IsV2(labels);
  TELLER_RETURN_IF_ERROR(ReadHeader(root, file, &labels));
  TELLER_RETURN_IF_ERROR(ReadObjects<LabelsFault>(
      root, file, "faults",
      [&](const JsonFields& f, LabelsFault* out) { return ReadFault(file, v2, f, out); },
      &labels.faults));
  TELLER_RETURN_IF_ERROR(ReadObjects<LabelsRequest>(
      root, file, "requests",
      [&](const JsonFields& r, LabelsRequest* out) { return ReadRequest(v2, r, out); },
      &labels.requests));
  TELLER_RETURN_IF_ERROR(ReadObjects<LabelsStep>(
      root, file, "steps",
      [&](const JsonFields& s, LabelsStep* out) { return ReadStep(file, v2, s, out); },
      &labels.steps));
  TELLER_RETURN_IF_ERROR(ReadObjects<LabelsOperator>(
      root, file, "affected_operators",
      [&](const JsonFields& o, LabelsOperator* out) { return ReadOperator(v2, o, out); },
      &labels.affected_operators));
  const Json* twin = v2 ? root.Find("twin") : nullptr;
  if (twin != nullptr && !twin->is_null()) {
    if (!twin->is_object()) return root.Expected("twin", "an object", *twin);
    const JsonFields t(file, *twin, "twin");
    TELLER_RETURN_IF_ERROR(t.Int("paired_steps", &labels.twin.paired_steps));
    TELLER_RETURN_IF_ERROR(t.Int("unpaired_steps", &labels.twin.unpaired_steps));
    TELLER_RETURN_IF_ERROR(t.Double("step_noise", &labels.twin.step_noise));
  }
  return labels;
}

}  // namespace teller::wire
