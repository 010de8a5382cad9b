// Every named counter of model::Stats, declared once: its name, severity and what it
// counts. Code increments a counter by its constant (model::stat::kKinetoEventBadTs),
// `teller counters` lists them and docs/counters.md is generated from this list
// (`teller counters --markdown > docs/counters.md`; model_test checks the page).
//
//   STAT(constant, "name", severity, "description")
//   STAT_FAMILY(constant, "name_prefix_", "<suffix>", severity, "description")
// A family's counters are named at run time: the prefix plus the suffix it describes.
// Severity: kInfo (a fact), kDataLoss (input was lost or cut), kError (input was wrong).
#pragma once

#define TELLER_STATS(STAT)                                                                         \
  /* model */                                                                                      \
  STAT(kModelEventArgsOverLimit, "model_event_args_over_limit", kError,                            \
       "events with more fields than an event can hold; the extra fields are dropped")             \
  /* Kineto / PyTorch profiler JSON (docs/importers/kineto.md) */                                  \
  STAT(kKinetoEventsRead, "kineto_events_read", kInfo,                                             \
       "elements of traceEvents read (len(traceEvents) for a whole file)")                         \
  STAT(kKinetoEventsImported, "kineto_events_imported", kInfo,                                     \
       "events that became rows of the events table")                                              \
  STAT(kKinetoMetadataEvents, "kineto_metadata_events", kInfo,                                     \
       "metadata events (ph M: process and thread names, sort indexes)")                           \
  STAT(kKinetoFlowEvents, "kineto_flow_events", kInfo, "flow events (ph s, f, t)")                 \
  STAT(kKinetoFlowBoundCorrelation, "kineto_flow_bound_correlation", kInfo,                        \
       "events without a correlation id that got one from a launch flow")                          \
  STAT(kKinetoFlowCorrelationMismatch, "kineto_flow_correlation_mismatch", kInfo,                  \
       "launch flows whose id differs from the correlation id of their event")                     \
  STAT(kKinetoCounterEventsSkipped, "kineto_counter_events_skipped", kInfo,                        \
       "counter events (ph C), skipped")                                                           \
  STAT(kKinetoAsyncEventsSkipped, "kineto_async_events_skipped", kInfo,                            \
       "async events (ph b, e, n), skipped")                                                       \
  STAT(kKinetoProfilerSpanSkipped, "kineto_profiler_span_skipped", kInfo,                          \
       "profiler trace spans (cat Trace), skipped")                                                \
  STAT(kKinetoOverheadSkipped, "kineto_overhead_skipped", kInfo,                                   \
       "profiler overhead events, skipped")                                                        \
  STAT(kKinetoGlobalInstantSkipped, "kineto_global_instant_skipped", kInfo,                        \
       "instant events without a numeric pid (global marks), skipped")                             \
  STAT(kKinetoUnknownCategory, "kineto_unknown_category", kInfo,                                   \
       "events of a category teller does not know, imported as OTHER")                             \
  STAT(kKinetoDeviceEventWithoutDevice, "kineto_device_event_without_device", kInfo,               \
       "device events without a device index")                                                     \
  STAT(kKinetoEventNamedPid, "kineto_event_named_pid", kInfo,                                      \
       "events whose pid is a name (the legacy profiler's \"CPU functions\"), imported")           \
  STAT(kKinetoEventNotObject, "kineto_event_not_object", kError,                                   \
       "elements of traceEvents that are not JSON objects, dropped")                               \
  STAT(kKinetoEventMalformed, "kineto_event_malformed", kError,                                    \
       "event objects that do not parse, dropped")                                                 \
  STAT(kKinetoEventMissingPh, "kineto_event_missing_ph", kError,                                   \
       "events without a phase (ph), dropped")                                                     \
  STAT(kKinetoEventUnknownPhase, "kineto_event_unknown_phase", kError,                             \
       "events of an unknown phase, dropped")                                                      \
  STAT(kKinetoEventMissingName, "kineto_event_missing_name", kError,                               \
       "events without a name, dropped")                                                           \
  STAT(kKinetoEventMissingTs, "kineto_event_missing_ts", kError,                                   \
       "events without a timestamp (ts), dropped")                                                 \
  STAT(kKinetoEventBadTs, "kineto_event_bad_ts", kError,                                           \
       "events whose ts is not a decimal number of microseconds, dropped")                         \
  STAT(kKinetoEventMissingDur, "kineto_event_missing_dur", kError,                                 \
       "complete events (ph X) without a duration, kept with duration 0")                          \
  STAT(kKinetoEventBadDur, "kineto_event_bad_dur", kError,                                         \
       "events whose dur is not a decimal number of microseconds, dropped")                        \
  STAT(kKinetoEventNegativeDur, "kineto_event_negative_dur", kError,                               \
       "events with a negative duration, kept with duration 0")                                    \
  STAT(kKinetoEventBadPid, "kineto_event_bad_pid", kError,                                         \
       "host events whose pid is missing, empty or neither a number nor a name, dropped")          \
  STAT(kKinetoEventMissingTid, "kineto_event_missing_tid", kError,                                 \
       "host events without a usable tid, dropped")                                                \
  STAT(kKinetoBadBaseTime, "kineto_bad_base_time", kError,                                         \
       "a baseTimeNanoseconds that is not an integer")                                             \
  STAT(kKinetoBadTopLevelValue, "kineto_bad_top_level_value", kError,                              \
       "top-level values of the wrong type (deviceProperties, distributedInfo, ...)")              \
  STAT(kKinetoBadDeviceProperty, "kineto_bad_device_property", kError,                             \
       "entries of deviceProperties that do not parse")                                            \
  STAT(kKinetoEventBracketsMismatched, "kineto_event_brackets_mismatched", kError,                 \
       "events with mismatched brackets (kept when they still parse)")                             \
  STAT(kKinetoTruncatedFile, "kineto_truncated_file", kDataLoss,                                   \
       "a JSON or gzip stream cut short; the events before the cut are kept")                      \
  /* Nsight Systems SQLite export (docs/importers/nsys.md) */                                      \
  STAT(kNsysTableUnreadable, "nsys_table_unreadable", kDataLoss,                                   \
       "tables of the export that could not be read")                                              \
  STAT(kNsysNegativeDuration, "nsys_negative_duration", kError, "rows that end before they start") \
  STAT(kNsysSessionStartUnknown, "nsys_session_start_unknown", kDataLoss,                          \
       "an export without the session start time; times stay relative")                            \
  STAT(kNsysStringIdOutOfRange, "nsys_string_id_out_of_range", kError,                             \
       "string ids outside the StringIds table")                                                   \
  STAT(kNsysUnresolvedStringId, "nsys_unresolved_string_id", kError, "string ids with no string")  \
  STAT(kNsysDeviceProcessFromCorrelation, "nsys_device_process_from_correlation", kInfo,           \
       "device work given the process of the API call with its correlation id")                    \
  STAT(kNsysDeviceProcessFromOnlyProcess, "nsys_device_process_from_only_process", kInfo,          \
       "device work given the only process of the export")                                         \
  STAT(kNsysDeviceWorkWithoutProcess, "nsys_device_work_without_process", kDataLoss,               \
       "device work no process could be found for, dropped")                                       \
  STAT(kNsysApiCallWithoutThread, "nsys_api_call_without_thread", kDataLoss,                       \
       "API calls without a thread, dropped")                                                      \
  STAT(kNsysMemcpyUnknownCopyKind, "nsys_memcpy_unknown_copy_kind", kError,                        \
       "memory copies of an unknown copy kind")                                                    \
  STAT(kNsysSyncUnknownType, "nsys_sync_unknown_type", kError,                                     \
       "synchronizations of an unknown type")                                                      \
  STAT(kNsysNvtxWithoutThread, "nsys_nvtx_without_thread", kDataLoss,                              \
       "NVTX events without a thread, dropped")                                                    \
  STAT(kNsysNvtxRangeWithoutEnd, "nsys_nvtx_range_without_end", kInfo,                             \
       "NVTX ranges without an end")                                                               \
  STAT(kNsysNvtxSkippedEventType, "nsys_nvtx_skipped_event_type", kInfo,                           \
       "NVTX events of types teller does not import, skipped")                                     \
  STAT(kNsysNvtxWithoutText, "nsys_nvtx_without_text", kInfo, "NVTX events without text")          \
  STAT(kNsysNvtxUnknownDomain, "nsys_nvtx_unknown_domain", kError,                                 \
       "NVTX events of a domain the export does not define")                                       \
  /* teller bundles (docs/format.md); the reader's issues are wire/bundle_reader.h's */            \
  STAT(kBundleCollectiveKernelMissing, "bundle_collective_kernel_missing", kError,                 \
       "collective records whose kernel is not in the bundle (kept as their own event)")           \
  STAT(kBundleCollectiveUnlinked, "bundle_collective_unlinked", kError,                            \
       "collective records with no kernel, range or times, dropped")                               \
  STAT(kBundleClockUnpaired, "bundle_clock_unpaired", kError,                                      \
       "timestamps on a clock without clock pairs, taken as realtime")                             \
  STAT(kBundleBytesLost, "bundle_bytes_lost", kDataLoss,                                           \
       "bytes of the bundle skipped by the reader's issues")                                       \
  STAT(kBundleLogUnknownStream, "bundle_log_unknown_stream", kInfo,                                \
       "log files of a stream teller does not know")                                               \
  STAT(kBundleClockJump, "bundle_clock_jump", kDataLoss,                                           \
       "clock pairings that jump; times around the jump may be off")                               \
  STAT(kBundleNoProcessData, "bundle_no_process_data", kDataLoss,                                  \
       "process directories without any data")                                                     \
  STAT(kBundleLogUnknownPid, "bundle_log_unknown_pid", kInfo,                                      \
       "log lines of a pid that is not a process of the bundle")                                   \
  STAT(kBundleChunkTruncated, "bundle_chunk_truncated", kDataLoss,                                 \
       "chunks cut short (a file ends inside a chunk)")                                            \
  STAT(kBundleChunkBadHeader, "bundle_chunk_bad_header", kDataLoss,                                \
       "chunks whose header does not parse; the reader resynchronizes")                            \
  STAT(kBundleChunkCrcMismatch, "bundle_chunk_crc_mismatch", kDataLoss,                            \
       "chunks whose CRC does not match, skipped")                                                 \
  STAT(kBundleChunkUnsupportedVersion, "bundle_chunk_unsupported_version", kDataLoss,              \
       "chunks of a format version this reader does not read, skipped")                            \
  STAT(kBundleChunkUnknownKind, "bundle_chunk_unknown_kind", kInfo,                                \
       "chunks of a kind newer than this reader, skipped")                                         \
  STAT(kBundleChunkMalformed, "bundle_chunk_malformed", kDataLoss,                                 \
       "chunks whose payload does not parse")                                                      \
  STAT(kBundleRecordUnknownKind, "bundle_record_unknown_kind", kInfo,                              \
       "records of kinds newer than this reader, skipped")                                         \
  STAT(kBundleRecordMalformed, "bundle_record_malformed", kDataLoss,                               \
       "records shorter than their kind's fields")                                                 \
  STAT(kBundleStringUnresolved, "bundle_string_unresolved", kInfo,                                 \
       "string ids no string table entry defines")                                                 \
  STAT(kBundleLogLineMalformed, "bundle_log_line_malformed", kDataLoss,                            \
       "lines of a bundle log file that do not parse")                                             \
  /* engine logs (docs/importers/logs.md) */                                                       \
  STAT(kLogLines, "log_lines", kInfo, "log lines read")                                            \
  STAT(kLogLineUnknownFormat, "log_line_unknown_format", kInfo, "lines of no known log format")    \
  STAT(kLogLineBlank, "log_line_blank", kInfo, "blank lines")                                      \
  STAT(kLogLineTruncated, "log_line_truncated", kDataLoss, "lines cut at the line length limit")   \
  STAT(kLogLineInvalidBytes, "log_line_invalid_bytes", kInfo,                                      \
       "lines with bytes that are not valid UTF-8")                                                \
  STAT(kLogLineAnsiStripped, "log_line_ansi_stripped", kInfo,                                      \
       "lines whose ANSI escape codes were stripped")                                              \
  STAT(kLogLineCarriageReturn, "log_line_carriage_return", kInfo, "lines with a carriage return")  \
  STAT(kLogLineTsInherited, "log_line_ts_inherited", kInfo,                                        \
       "lines without a timestamp that took the one of the line before")                           \
  STAT(kLogLineNoTs, "log_line_no_ts", kInfo,                                                      \
       "lines without a timestamp and no line before to take one from")                            \
  STAT(kLogLineTracebackContinuation, "log_line_traceback_continuation", kInfo,                    \
       "traceback lines joined to the line that started them")                                     \
  STAT(kLogYearRollover, "log_year_rollover", kInfo,                                               \
       "year-less timestamps that went back in time, taken as the next year")                      \
  STAT(kLogGzipTruncated, "log_gzip_truncated", kDataLoss,                                         \
       "gzip log files cut short; the lines before the cut are kept")                              \
  /* the windowed build (docs/store.md) */                                                         \
  STAT(kBuildWindows, "build_windows", kInfo, "windows of the windowed build")                     \
  STAT(kBuildWindowsOverBudget, "build_windows_over_budget", kInfo,                                \
       "windows larger than the event budget (a step longer than a window)")                       \
  /* reconstruction (docs/reconstruct.md) */                                                       \
  STAT(kReconstructKernelsBound, "reconstruct_kernels_bound", kInfo,                               \
       "device work bound to the host call that launched it")                                      \
  STAT(kReconstructKernelsUnbound, "reconstruct_kernels_unbound", kInfo,                           \
       "device work bound to no launch")                                                           \
  STAT(kReconstructDuplicateCorrelation, "reconstruct_duplicate_correlation", kDataLoss,           \
       "launches whose correlation id another launch of the process also has")                     \
  STAT(kReconstructUnmatchedPop, "reconstruct_unmatched_pop", kDataLoss,                           \
       "range ends (pops) with no open range")                                                     \
  STAT(kReconstructUnclosedRange, "reconstruct_unclosed_range", kDataLoss,                         \
       "ranges never closed, closed at the end of their thread")                                   \
  STAT(kReconstructPartialOverlap, "reconstruct_partial_overlap", kInfo,                           \
       "host events that overlap a sibling without nesting in it")                                 \
  STAT(kReconstructSteps, "reconstruct_steps", kInfo, "steps found")                               \
  STAT(kReconstructNodes, "reconstruct_nodes", kInfo, "call-chain nodes of all steps")             \
  STAT(kReconstructEventsOutsideSteps, "reconstruct_events_outside_steps", kInfo,                  \
       "events in no step's call-chain tree")                                                      \
  STAT(kReconstructDepthOverLimit, "reconstruct_depth_over_limit", kError,                         \
       "nodes deeper than the depth column holds (depth clamped)")                                 \
  STAT(kReconstructRequests, "reconstruct_requests", kInfo, "requests found in steps")             \
  STAT(kReconstructCollectiveMatches, "reconstruct_collective_matches", kInfo,                     \
       "collectives matched across ranks")                                                         \
  STAT(kReconstructCollectivesUnmatched, "reconstruct_collectives_unmatched", kInfo,               \
       "collectives matched to no other rank")                                                     \
  STAT(kReconstructCollectivesMatchedByOrder, "reconstruct_collectives_matched_by_order", kInfo,   \
       "collectives without sequence numbers matched by their order per communicator")             \
  STAT(kReconstructCollectiveOrderOpMismatch, "reconstruct_collective_order_op_mismatch",          \
       kDataLoss, "collectives matched by order whose ops differ across ranks")                    \
  STAT(kReconstructCollectivesMatchedByStepOrder, "reconstruct_collectives_matched_by_step_order", \
       kInfo,                                                                                      \
       "matches of collective kernels without collective metadata, by their order in the step")    \
  STAT(kReconstructCollectivesStepOrderSkipped, "reconstruct_collectives_step_order_skipped",      \
       kInfo, "collective kernels without metadata left unmatched: their step's ranks differ")     \
  STAT(kReconstructClockUnalignedHosts, "reconstruct_clock_unaligned_hosts", kDataLoss,            \
       "hosts that share no matched collective with the reference host; clocks not aligned")       \
  STAT(kReconstructLogsAlignedRequestId, "reconstruct_logs_aligned_request_id", kInfo,             \
       "log lines placed in a step by their request id")                                           \
  STAT(kReconstructLogsAlignedTimeWindow, "reconstruct_logs_aligned_time_window", kInfo,           \
       "log lines placed in a step by their time")                                                 \
  STAT(kReconstructLogsUnaligned, "reconstruct_logs_unaligned", kInfo, "log lines in no step")

#define TELLER_STAT_FAMILIES(STAT_FAMILY)                                                \
  STAT_FAMILY(kNsysMissingTable, "nsys_missing_table_", "<table>", kInfo,                \
              "an export without this table (the data it holds is absent)")              \
  STAT_FAMILY(kNsysMissingColumn, "nsys_missing_column_", "<table>_<column>", kDataLoss, \
              "a table without this column; the value is the rows lost with it")         \
  STAT_FAMILY(kReconstructStepsBySource, "reconstruct_steps_", "<source>", kInfo,        \
              "steps found of each step source (engine_step, profiler_step, ...)")
