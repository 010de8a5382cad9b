// The requests of a reconstructed trace as rows, so that a part of a run (some of its
// processes, reconstructed apart: cross_rank.h) sends its own and one place merges every
// part's by request id, in plan order, into the requests of the joined trace: BuildRequests
// numbers a request at the first step that carries it, and the joined trace's steps are the
// parts' steps, part after part. Log lines then align on the merged rows as reconstruction
// aligns them on the joined trace's steps (AlignLogsToRows).
//
// Cost on the wire (request_rows_wire.h): 28 bytes a step and 4 a step's request, and per
// request its id text and 28 bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/string_pool.h"
#include "model/trace.h"

namespace teller::reconstruct {

struct RequestRows {
  // Per step, in step order (the part's StepIndex; the joined trace's once merged): its
  // process (the part's index; the run's once merged), rank, start and end.
  std::vector<uint32_t> process;
  std::vector<int32_t> rank;
  std::vector<int64_t> start_ns;
  std::vector<int64_t> end_ns;
  // The requests each step serves, CSR (steps + 1 offsets), ascending as the trace's
  // step_requests: indexes of the request columns below.
  std::vector<uint32_t> requests_begin;
  std::vector<uint32_t> step_requests;
  // Per request, in the order of the first step that serves it: as model::RequestTable.
  std::vector<std::string> id;
  std::vector<int64_t> first_ns;
  std::vector<int64_t> last_ns;
  std::vector<uint32_t> step_count;
  uint32_t processes = 0;  // of the part (of every part once merged)

  size_t steps() const { return process.size(); }
  size_t requests() const { return id.size(); }
};

// The rows of a reconstructed part (or a whole trace).
RequestRows RequestRowsOfPart(const model::Trace& part);

// Every part's rows merged in order: steps and processes appended, requests merged by id
// (first and last times widened, step counts added), as BuildRequests numbers the requests
// of the parts' joined trace.
RequestRows MergeRequestRows(const std::vector<RequestRows>& parts);

// Whether rows that crossed a process boundary are whole: step columns of one length, CSR
// offsets from 0 ascending to the end, request and process indexes in range, each step's
// requests ascending and distinct, request columns of one length.
base::Status CheckRequestRows(const RequestRows& rows);

// Whether the rows are the trace's own steps and requests (a part's, or the joined trace's
// when they are every part's merged); the error names the first difference.
base::Status CheckRequestRowsAreTheTrace(const RequestRows& rows, const model::Trace& trace);

// How log lines aligned (reconstruction's kReconstructLogs* counters).
struct LogAlignmentCounts {
  int64_t by_request = 0;
  int64_t by_window = 0;
  int64_t unaligned = 0;
};

// Aligns every log line (its step and alignment) on the rows' steps exactly as
// reconstruction aligns it on the trace whose steps and requests they are: a line's process
// indexes the rows' processes, and its request id text (in `strings`) finds the rows'
// request. Checked rows only (CheckRequestRows).
LogAlignmentCounts AlignLogsToRows(const RequestRows& rows, const base::StringPool& strings,
                                   int64_t log_window_ns, model::LogTable* logs);

}  // namespace teller::reconstruct
