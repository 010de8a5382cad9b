// The windowed build: a Kineto trace too big to hold whole is imported,
// reconstructed and written to the store one time window at a time, so memory stays
// near what one window needs whatever the size of the input (issue 8). The windows
// are cut at quiet points (import/kineto_windows.h); each window is imported and
// reconstructed like a whole trace, its ids are mapped onto the store's (strings,
// processes, threads, requests) and its rows appended (StoreWriter). What is kept
// across windows grows with distinct names, threads, requests and steps, not events.
//
// Differences from building the whole trace, all stated in the store's notes:
// step numbers that come from the order of steps continue across windows; a range
// that crosses a cut is kept whole in the window it starts in, and what starts after
// the cut under it hangs from the next window's own roots; clock offsets between
// hosts are estimated per window.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "import/importer.h"
#include "reconstruct/call_chain_builder.h"

namespace teller::store {

struct WindowedBuildOptions {
  // Events per window: the knob of the memory bound (about 150 bytes per event of
  // the window while it is reconstructed).
  int64_t window_events = 1'000'000;
  // False writes the imported events only (`teller import`).
  bool reconstruct = true;
  // Where the window files go (as large as the input JSON in all, removed as they are
  // used); empty: a folder beside the output.
  std::string spill_directory;
  import::ImportOptions import;
  reconstruct::BuildOptions build;
};

struct WindowedBuildSummary {
  int64_t windows = 0;
  int64_t events = 0;
  int64_t steps = 0;
  int64_t nodes = 0;
  int64_t requests = 0;
  int64_t largest_window_events = 0;
  int64_t windows_over_budget = 0;
};

// Kineto JSON bytes from which `teller build` and `teller import` go windowed by
// default (a .gz file counts 15 times its size).
inline constexpr uint64_t kWindowedBuildBytes = uint64_t{1} << 30;

// How to build inputs, given --window-events (-1 automatic, 0 never, N events).
// Returns the window size to use, or 0 for a whole build. A windowed build takes one
// Kineto JSON file and nothing else; asking for one with other inputs is an error.
base::StatusOr<int64_t> ChooseWindowEvents(const std::vector<std::string>& inputs,
                                           int64_t requested);

// Builds the store at store_path from one Kineto JSON file (plain or .gz).
base::StatusOr<WindowedBuildSummary> BuildStoreWindowed(const std::string& kineto_path,
                                                        const std::string& store_path,
                                                        const WindowedBuildOptions& options);

}  // namespace teller::store
