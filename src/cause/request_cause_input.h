// What the request causes (request_causes.h) read of a run, as columns: its steps with
// the requests each serves, its requests, and the log lines that name a request or count
// an engine's queue. Made from a reconstructed trace, or, on the first process of a
// distributed run, from every part's request rows merged (reconstruct/request_rows.h),
// its findings' rows (localize/feature_rows.h: each step's phase, number and global step)
// and the log lines aligned on the merged rows: the same columns either way, so the
// causes are found one way.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/string_pool.h"
#include "localize/feature_rows.h"
#include "model/trace.h"
#include "reconstruct/request_rows.h"

namespace teller::cause {

struct RequestCauseInput {
  static constexpr uint32_t kNoRequest = std::numeric_limits<uint32_t>::max();

  // Per step, in step order: its rank, group (GroupOf: its global step, else its number),
  // phase, start and end, and the requests it serves (CSR, steps + 1 offsets: indexes of
  // the requests below).
  std::vector<int32_t> rank;
  std::vector<int64_t> group;
  std::vector<model::StepPhase> phase;
  std::vector<model::TimeNs> start_ns;
  std::vector<model::TimeNs> end_ns;
  std::vector<uint32_t> requests_begin;
  std::vector<uint32_t> step_requests;
  // Per request, its id: the scheduled ones (those a step serves) first, in the trace's
  // order, each with its first step's start; then those only log lines name, in order of
  // their first line. Views into the sources' strings, which outlive the input.
  std::vector<std::string_view> id;
  std::vector<model::TimeNs> first_ns;  // the scheduled requests' only
  // The log lines that name a request or count an engine's queue, in log order: time,
  // rank, request (an index of `id`, or kNoRequest), the step it is aligned on, and its
  // text when it counts the queue (else empty).
  std::vector<model::TimeNs> line_ts_ns;
  std::vector<int32_t> line_rank;
  std::vector<uint32_t> line_request;
  std::vector<model::StepIndex> line_step;
  std::vector<std::string_view> line_text;

  size_t steps() const { return rank.size(); }
  size_t scheduled() const { return first_ns.size(); }
  size_t lines() const { return line_ts_ns.size(); }
  uint32_t requests_count(size_t step) const {
    return requests_begin[step + 1] - requests_begin[step];
  }
};

// The input of a reconstructed trace.
RequestCauseInput RequestCauseInputOfTrace(const model::Trace& trace);

// The input of merged request rows, the findings' rows of the same steps (appended in the
// same order) and log lines aligned on the request rows (reconstruct::AlignLogsToRows;
// their text in `strings`): views into all four. An error when the rows are not of the
// same steps (their count, or a step's rank or start, differs).
base::StatusOr<RequestCauseInput> RequestCauseInputOfRows(const reconstruct::RequestRows& requests,
                                                          const localize::FeatureRows& steps,
                                                          const model::LogTable& logs,
                                                          const base::StringPool& strings);

}  // namespace teller::cause
