// The C functions libteller_capture.so exports for the Python hooks (ctypes) and for
// any program that wants to emit teller ranges without NVTX. Every function is a
// no-op when the process is not recorded. Times are CLOCK_MONOTONIC ns
// (Python's time.monotonic_ns()).
#pragma once

#include <stdint.h>

#define TELLER_EXPORT __attribute__((visibility("default")))

extern "C" {

// 1 when this process is recorded, even while a capture range is off.
TELLER_EXPORT int teller_capture_active(void);
// Push/pop on the calling thread (domain "teller"); layer is wire::RangeLayer.
TELLER_EXPORT void teller_range_push(const char* name, int layer);
TELLER_EXPORT void teller_range_pop(void);
// A complete range on the calling thread. With step >= 0 it carries the STEP args:
// "step", "phase" (when not NULL/empty) and "requests" (ids separated by '\n').
TELLER_EXPORT void teller_host_range(int layer, const char* name, int64_t start_ns, int64_t end_ns,
                                     int64_t step, const char* phase, const char* requests);
// An engine step starts on the calling thread; its STEP teller_host_range ends it. Under
// `teller record --watch` a step open far longer than the steps before it is a hang.
TELLER_EXPORT void teller_step_begin(void);
// The process group's rank and size (torch.distributed.get_rank()/get_world_size()),
// reported once the group is initialized: the bundle records it for the process (over
// a rank from the launcher's variables, docs/capture.md "Ranks"). rank < 0: ignored.
TELLER_EXPORT void teller_process_group(int rank, int world_size);
TELLER_EXPORT void teller_mark(const char* name);
// One line for the bundle's notes (the process folder's `notes` side file, which
// `teller record` folds into meta.json as "process <folder>: <line>"); newlines become spaces.
TELLER_EXPORT void teller_note(const char* line);
TELLER_EXPORT void teller_name_thread(const char* name);
TELLER_EXPORT int64_t teller_monotonic_ns(void);
TELLER_EXPORT void teller_flush(void);
// Final flush and exit record with this code (os._exit path); later events dropped.
TELLER_EXPORT void teller_shutdown(int exit_code);

}  // extern "C"
