#include "diagnose/diagnosis_json.h"

#include <nlohmann/json.hpp>

#include "cause/cause_text.h"
#include "diagnose/fault_rules.h"
#include "diagnose/wording.h"

namespace teller::diagnose {
namespace {

using Json = nlohmann::ordered_json;

Json NodeJson(const model::Trace& trace, model::NodeIndex node) {
  const model::EventRow event = trace.nodes.event[node.value()];
  return Json{{"node", node.value()},
              {"layer", model::LayerName(trace.events.layer[event.value()])},
              {"name", trace.str(trace.events.name[event.value()])},
              {"start_ns", trace.events.start_ns[event.value()]},
              {"dur_ns", trace.events.dur_ns[event.value()]},
              {"depth", trace.nodes.depth[node.value()]}};
}

Json SliceJson(const model::Trace& trace, const slice::StepSlice& slice) {
  Json nodes = Json::array();
  for (size_t i = 0; i < slice.nodes.size(); ++i) {
    Json node = NodeJson(trace, slice.nodes[i]);
    node["relevance"] = slice.relevance[i];
    node["reasons"] = slice.reasons[i];
    const model::NodeIndex parent = trace.nodes.parent[slice.nodes[i].value()];
    node["parent"] = parent.valid() ? Json(parent.value()) : Json(nullptr);
    nodes.push_back(std::move(node));
  }
  Json peers = Json::array();
  for (model::NodeIndex node : slice.peer_nodes) peers.push_back(NodeJson(trace, node));
  return Json{{"step_nodes", slice.step_nodes},
              {"kept_nodes", slice.nodes.size()},
              {"kept_share", slice.KeptShare()},
              {"edges",
               {{"parent_child", slice.edges.parent_child.size()},
                {"temporal", slice.edges.temporal.size()},
                {"comm", slice.edges.comm.size()}}},
              {"nodes", std::move(nodes)},
              {"peer_nodes", std::move(peers)}};
}

Json HypothesisJson(const cause::Hypothesis& h) {
  Json json{
      {"kind", cause::CauseKindName(h.kind)},
      {"category", FaultCategoryName(CategoryOfCause(h))},
      {"location", cause::CauseLocation(h)},
      {"rank", h.rank >= 0 ? Json(h.rank) : Json(nullptr)},
      {"node", h.node >= 0 ? Json(h.node) : Json(nullptr)},
      {"host", h.node_name.empty() ? Json(nullptr) : Json(h.node_name)},
      {"family", h.family == localize::OperatorFamily::kUnnamed
                     ? Json(nullptr)
                     : Json(localize::OperatorFamilyName(h.family))},
      {"first_step", h.first_group},
      {"last_step", h.last_group},
      {"steps", h.steps},
      {"since_ns", h.since_ns},
      {"effect", h.effect},
      {"effect_unit",
       h.kind == cause::CauseKind::kRequestStarved     ? "ns waited"
       : h.kind == cause::CauseKind::kRequestPreempted ? "decode steps missed"
       : h.kind == cause::CauseKind::kRequestMisrouted ? "steps in the decode path"
       : h.additive ? (h.kind == cause::CauseKind::kReorder ? "instances per step" : "ns per step")
                    : "ratio minus 1"},
      {"score", h.score},
      {"explained", h.explained},
      // What putting its cells back would save, as a share of the window's steps.
      {"impact_share",
       h.step_baseline_ns > 0.0 ? Json(h.impact_ns / h.step_baseline_ns) : Json(nullptr)},
      {"sentence", cause::CauseSentence(h)}};
  if (h.kind == cause::CauseKind::kRequestMisrouted) {
    json["request"] = h.request;
    json["requests_misrouted"] = h.requests_misrouted;
  }
  if (h.kind == cause::CauseKind::kRequestPreempted) {
    json["request"] = h.request;
    json["requests_preempted"] = h.requests_preempted;
    json["requests_blocked"] = h.requests_blocked;
    if (h.requests_blocked > 0) {
      json["blocked_request"] = h.blocked_request;
      json["blocked_wait_ns"] = h.blocked_wait_ns;
    }
  }
  if (!h.also_families.empty()) {
    Json families = Json::array();
    for (localize::OperatorFamily family : h.also_families)
      families.push_back(localize::OperatorFamilyName(family));
    json["also_families"] = std::move(families);
  }
  if (h.lists_abnormal_steps) json["abnormal_steps"] = h.abnormal_groups;
  if (h.by_instance_peers) {
    json["by_instance_peers"] = true;
    json["peer_calls"] = h.peer_calls;
    json["peer_calls_slow"] = h.peer_calls_slow;
  }
  if (h.kind == cause::CauseKind::kRequestStarved) {
    json["request"] = h.request;
    json["never_scheduled"] = h.request_never_scheduled;
    json["requests_served_first"] = h.requests_served_first;
    json["steps_passed_over"] = h.steps_passed_over;
    json["typical_wait_ns"] = h.typical_wait_ns;
    json["wait_from_queue_counts"] = h.wait_from_queue_counts;
  }
  return json;
}

// A capture without a baseline of steps: its kernel calls compared with each other; null
// when steps were scored against a baseline.
Json PeerCheckJson(const cause::InstancePeerCheck& check) {
  if (!check.ran()) return nullptr;
  return {{"kernel_calls", check.kernels},
          {"calls_compared", check.calls_compared},
          {"calls_slow", check.calls_slow},
          {"compared_time_share", check.covered_share()},
          {"worst_rank", check.worst_rank},
          {"worst_rank_excess_share", check.worst_excess_share},
          {"worst_rank_compared_share", check.worst_covered_share},
          {"can_tell", check.can_tell()}};
}

Json CrashKernelJson(bool has, const cause::CrashKernel& kernel) {
  if (!has) return nullptr;
  return {{"name", kernel.name},
          {"start_ns", kernel.start_ns},
          {"dur_ns", kernel.dur_ns},
          {"normal_ns", kernel.normal_ns},
          {"launched_from", kernel.launched_from},
          {"launch_call", kernel.launch_call},
          {"in_graph", kernel.in_graph}};
}

// The crash report: null without a sticky CUDA error.
Json CrashJson(const cause::CrashReport& crash) {
  if (!crash.found) return nullptr;
  return {{"rank", crash.rank},
          {"call", crash.call},
          {"error", crash.error},
          {"error_name", crash.error_name},
          {"at_ns", crash.at_ns},
          {"step", crash.step},
          {"suspect_kernel", CrashKernelJson(crash.has_suspect, crash.suspect)},
          {"running_kernel", CrashKernelJson(crash.has_running, crash.running)},
          {"requests", crash.requests},
          {"sentence", cause::CrashSentence(crash)}};
}

// The out-of-memory report: null without one; byte figures the message lacks are null.
// PyTorch's allocator counters before an OOM: null without them.
Json TrendJson(const cause::MemoryTrend& trend) {
  if (!trend.found) return nullptr;
  auto bytes = [](double value) -> Json { return value >= 0.0 ? Json(value) : Json(nullptr); };
  return {{"device", trend.device},
          {"samples", trend.samples},
          {"first_ns", trend.first_ns},
          {"last_ns", trend.last_ns},
          {"first_allocated_bytes", bytes(trend.first_allocated)},
          {"last_allocated_bytes", bytes(trend.last_allocated)},
          {"peak_allocated_bytes", bytes(trend.peak_allocated)},
          {"last_reserved_bytes", bytes(trend.last_reserved)},
          {"peak_reserved_bytes", bytes(trend.peak_reserved)}};
}

Json OomJson(const cause::OomReport& oom) {
  if (!oom.found) return nullptr;
  auto bytes = [](double value) -> Json { return value >= 0.0 ? Json(value) : Json(nullptr); };
  return {{"rank", oom.rank},
          {"device", oom.device},
          {"at_ns", oom.at_ns},
          {"source", oom.source},
          {"kind", cause::OomKindName(oom.kind)},
          {"requested_bytes", bytes(oom.requested_bytes)},
          {"capacity_bytes", bytes(oom.capacity_bytes)},
          {"free_bytes", bytes(oom.free_bytes)},
          {"process_bytes", bytes(oom.process_bytes)},
          {"allocated_bytes", bytes(oom.allocated_bytes)},
          {"reserved_unallocated_bytes", bytes(oom.reserved_unallocated_bytes)},
          {"other_processes", oom.other_processes},
          {"other_processes_bytes", bytes(oom.other_processes_bytes)},
          {"step", oom.step},
          {"requests", oom.requests},
          {"trend", TrendJson(oom.trend)},
          {"sentence", cause::OomSentence(oom)},
          {"next_action", cause::NextActionOfOom(oom)}};
}

// The hang report: null without a hang.
Json HangJson(const cause::HangReport& hang) {
  if (!hang.found()) return nullptr;
  Json waits = Json::array();
  for (const cause::HangWait& wait : hang.waits) {
    waits.push_back({{"rank", wait.rank},
                     {"communicator", wait.communicator},
                     {"sequence", wait.sequence},
                     {"op", wait.op},
                     {"size_bytes", wait.size_bytes},
                     {"start_ns", wait.start_ns == INT64_MIN ? Json(nullptr) : Json(wait.start_ns)},
                     {"waited_ns", wait.waited_ns},
                     {"missing", wait.missing}});
  }
  Json states = Json::array();
  for (const cause::CulpritState& state : hang.states) {
    states.push_back({{"rank", state.rank},
                      {"last_sequence", state.last_sequence},
                      {"range", state.range},
                      {"range_open", state.range_open},
                      {"last_kernel", state.last_kernel},
                      {"last_runtime_call", state.last_runtime_call}});
  }
  Json stalled = Json::array();
  for (const cause::StalledStep& step : hang.stalled) {
    stalled.push_back({{"rank", step.rank},
                       {"pid", step.pid},
                       {"name", step.name},
                       {"start_ns", step.start_ns},
                       {"open_ns", step.open_ns},
                       {"longest_before_ns", step.longest_before_ns},
                       {"steps_before", step.steps_before},
                       {"waits_in", step.waits_in},
                       {"innermost_open", step.innermost_open}});
  }
  const char* evidence = hang.evidence == cause::HangEvidence::kTrace            ? "trace"
                         : hang.evidence == cause::HangEvidence::kFlightRecorder ? "flight_recorder"
                         : hang.evidence == cause::HangEvidence::kStalledStep    ? "stalled_step"
                                                                                 : "logs";
  return {{"evidence", evidence},
          {"culprits", hang.culprits},
          {"victims", hang.victims},
          {"silent", hang.silent},
          {"waits", std::move(waits)},
          {"culprit_states", std::move(states)},
          {"stalled_steps", std::move(stalled)},
          {"sentence", cause::HangSentence(hang)}};
}

Json CauseJson(const RootCause& cause) {
  Json json = HypothesisJson(cause.hypothesis);
  const cause::Hypothesis& h = cause.hypothesis;
  json["impact"] = {
      {"step_baseline_ns", h.step_baseline_ns},
      {"step_excess_ns", h.step_excess_ns},
      {"cause_ns", h.impact_ns},
      {"cause_share", h.step_baseline_ns > 0.0 ? h.impact_ns / h.step_baseline_ns : 0.0},
      // "critical_path": replayed through the steps' dependencies; "cells": summed.
      {"method", h.impact_replayed ? "critical_path" : "cells"}};
  json["confirmed_by_log"] =
      cause.confirmed_by_log.empty() ? Json(nullptr) : Json(cause.confirmed_by_log);
  json["victims"] = {{"ranks", h.victims},
                     {"wait_ns", h.victim_wait_ns},
                     {"collectives", h.collectives},
                     {"collectives_reached_last", h.collectives_late},
                     {"reached_last_by_chance", h.collectives_late_by_chance}};
  json["next_action"] = NextActionOfCause(cause.hypothesis);
  Json evidence = Json::array();
  for (const CauseEvidence& e : cause.evidence) {
    evidence.push_back({{"rank", e.rank},
                        {"step", e.step},
                        {"channel", cause::ChannelName(e.channel)},
                        {"family", e.family == localize::OperatorFamily::kUnnamed
                                       ? Json(nullptr)
                                       : Json(localize::OperatorFamilyName(e.family))},
                        {"value", e.value},
                        {"baseline", e.expected},
                        {"z", e.z},
                        {"role", e.victim ? "victim" : "culprit"}});
  }
  json["evidence"] = std::move(evidence);
  Json operators = Json::array();
  for (const CauseOperator& op : cause.operators) {
    operators.push_back({{"name", op.name},
                         {"layer", model::LayerName(op.layer)},
                         {"role", op.victim ? "victim" : "culprit"},
                         {"holds_moved_work", op.holds_moved},
                         {"started_later", op.started_later},
                         {"steps", op.groups}});
  }
  json["operators"] = std::move(operators);
  return json;
}

// What chose the cause; the learned decider's probability of each candidate.
Json DecisionJson(const Diagnosis& diagnosis) {
  Json decision = {{"by", diagnosis.decider}};
  if (!diagnosis.candidate_probabilities.empty()) {
    decision["threshold"] = diagnosis.decider_threshold;
    decision["file"] = diagnosis.decider_file;
    Json candidates = Json::array();
    for (size_t i = 0; i < diagnosis.candidates.size(); ++i) {
      const cause::Hypothesis& h = diagnosis.candidates[i].hypothesis;
      candidates.push_back({{"kind", cause::CauseKindName(h.kind)},
                            {"location", cause::CauseLocation(h)},
                            {"first_step", h.first_group},
                            {"last_step", h.last_group},
                            {"score", h.score},
                            {"probability", diagnosis.candidate_probabilities[i]}});
    }
    decision["candidates"] = std::move(candidates);
  }
  return decision;
}

}  // namespace

std::string DiagnosisToJson(const model::Trace& trace, const Diagnosis& diagnosis) {
  Json findings = Json::array();
  // Those that support the cause, then the others, at most max_findings of each.
  size_t written[2] = {0, 0};
  for (const Finding& finding : diagnosis.findings) {
    if (diagnosis.max_findings > 0 && written[finding.supports_cause]++ >= diagnosis.max_findings) {
      continue;
    }
    Json suspects = Json::array();
    for (model::NodeIndex node : finding.suspects) suspects.push_back(NodeJson(trace, node));
    Json entry{{"rank", finding.rank},
               {"step", finding.step_number},
               {"phase", model::StepPhaseName(trace.steps.phase[finding.step.value()])},
               {"family", localize::OperatorFamilyName(finding.family)},
               {"category", FaultCategoryName(CategoryOfFamily(finding.family))},
               {"feature", localize::FeatureName(finding.feature)},
               {"score", finding.score},
               {"flag_score", finding.flag_score},
               {"probability", finding.probability},
               {"peak_z", finding.peak_z},
               {"against_peers", finding.against_peers},
               {"rank_wide", finding.rank_wide},
               {"rank_excess", finding.rank_excess},
               {"forest_score", finding.forest_score},
               {"value", finding.value},
               {"baseline_median", finding.median},
               {"baseline_samples", finding.baseline_samples},
               {"also_steps", finding.also_steps},
               {"supports_cause", finding.supports_cause},
               {"suspects", std::move(suspects)}};
    if (finding.slice.step.valid()) entry["slice"] = SliceJson(trace, finding.slice);
    findings.push_back(std::move(entry));
  }
  Json steps = Json::array();
  for (const AbnormalStep& step : diagnosis.steps) {
    steps.push_back({{"rank", step.rank},
                     {"step", step.number},
                     {"score", step.score},
                     {"family", localize::OperatorFamilyName(step.family)},
                     {"supports_cause", step.supports_cause},
                     {"start_ns", trace.steps.start_ns[step.step.value()]},
                     {"end_ns", trace.steps.end_ns[step.step.value()]}});
  }
  Json requests = Json::array();
  for (const AbnormalRequest& request : diagnosis.requests) {
    requests.push_back({{"request", trace.str(trace.requests.id[request.request.value()])},
                        {"score", request.score},
                        {"steps", request.steps},
                        {"supports_cause", request.supports_cause}});
  }
  Json logs = Json::array();
  for (const LogEvidence& log : diagnosis.logs) {
    const model::StepIndex step = trace.logs.step[log.row];
    logs.push_back(
        {{"ts_ns", trace.logs.ts_ns[log.row]},
         {"rank", trace.logs.rank[log.row]},
         {"level", model::LogLevelName(trace.logs.level[log.row])},
         {"source", trace.str(trace.logs.source[log.row])},
         {"line", trace.logs.line_number[log.row]},
         {"step", step.valid() ? Json(trace.steps.number[step.value()]) : Json(nullptr)},
         {"category", FaultCategoryName(log.category)},
         {"signature", log.Label()},
         {"first_cause", log.first_cause},
         {"repeats", log.repeats},
         {"lines", {trace.logs.line_number[log.first_row], trace.logs.line_number[log.last_row]}},
         {"meaning", log.signature ? Json(log.signature->entry.meaning) : Json(nullptr)},
         {"text", trace.str(trace.logs.text[log.row])}});
  }
  Json votes = Json::array();
  for (const CategoryVote& vote : diagnosis.votes) {
    votes.push_back({{"category", FaultCategoryName(vote.category)},
                     {"weight", vote.weight},
                     {"reason", vote.reason}});
  }
  Json alternatives = Json::array();
  for (size_t i = 0; i < diagnosis.alternatives.size(); ++i) {
    Json alternative = HypothesisJson(diagnosis.alternatives[i]);
    if (i < diagnosis.alternative_probabilities.size()) {
      alternative["probability"] = diagnosis.alternative_probabilities[i];  // the decider's
    }
    alternatives.push_back(std::move(alternative));
  }
  Json out{{"schema", kDiagnosisSchema},
           {"hang", HangJson(diagnosis.hang)},
           {"crash", CrashJson(diagnosis.crash)},
           {"oom", OomJson(diagnosis.oom)},
           {"verdict", RunVerdictName(VerdictOf(diagnosis))},
           {"cause", diagnosis.causes.empty() ? Json(nullptr) : CauseJson(diagnosis.causes[0])},
           {"second_cause",
            diagnosis.causes.size() > 1 ? CauseJson(diagnosis.causes[1]) : Json(nullptr)},
           {"alternatives", std::move(alternatives)},
           {"cause_threshold", diagnosis.cause_threshold},
           {"decider", DecisionJson(diagnosis)},
           {"degraded", diagnosis.degraded},
           {"degraded_probability", diagnosis.degraded_probability},
           {"calibration", diagnosis.calibration},
           {"threshold", diagnosis.threshold},
           {"category", FaultCategoryName(diagnosis.category)},
           {"category_probability", diagnosis.category_probability},
           {"explanation", Explanation(trace, diagnosis)},
           {"next_action", NextActionOf(diagnosis)},
           {"first_abnormal_ns", diagnosis.first_abnormal_ns},
           {"findings", std::move(findings)},
           {"abnormal_steps", std::move(steps)},
           {"abnormal_requests", std::move(requests)},
           {"log_evidence", std::move(logs)},
           {"votes", std::move(votes)},
           {"collection",
            {{"events", trace.events.size()},
             {"steps", trace.steps.size()},
             {"steps_scored", diagnosis.steps_scored},
             {"baseline_keys", diagnosis.baseline_keys},
             {"instance_peers", PeerCheckJson(diagnosis.peer_check)},
             {"log_lines", trace.logs.size()},
             {"notes", diagnosis.notes}}}};
  Json tuning = Json::object();
  for (const auto& [name, value] : diagnosis.tuning) tuning[name] = value;
  out["tuning"] = std::move(tuning);
  const ModelOpinion& verdict = diagnosis.model;
  if (verdict.used || !verdict.reason.empty()) {
    Json model_steps = Json::array();
    for (const ModelStep& step : verdict.steps) {
      model_steps.push_back(
          {{"step", step.step}, {"request", step.request}, {"probability", step.probability}});
    }
    out["model"] = {{"used", verdict.used},
                    {"logs_only", verdict.logs_only},
                    {"folder", verdict.model},
                    {"reason", verdict.reason},
                    {"abnormal", verdict.abnormal},
                    {"abnormal_probability", verdict.abnormal_probability},
                    {"threshold", verdict.threshold},
                    {"steps", std::move(model_steps)},
                    {"category", FaultCategoryName(verdict.category)},
                    {"category_probability", verdict.category_probability},
                    {"operators", verdict.operators},
                    {"explanation", verdict.explanation},
                    {"explanation_grounded",
                     !verdict.explanation.empty() && verdict.explanation_problems.empty()},
                    {"explanation_problems", verdict.explanation_problems},
                    {"records", verdict.records},
                    {"unknown_name_share", verdict.unknown_name_share},
                    {"validation_step_f1", verdict.validation_step_f1},
                    {"seconds", verdict.seconds}};
  }
  // Trace and log text may hold broken UTF-8: replaced by U+FFFD instead of throwing.
  return out.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace teller::diagnose
