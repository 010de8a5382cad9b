// Every tuned value of the diagnosis, declared once (in the style of model/stat_list.h):
//
//   TUNED(group, type, field, default, "what it means", "where and how it was chosen")
//
// Each list holds the fields of one options struct, declared there with
// TELLER_TUNED_FIELD (base/tuning.h), so code reads them as plain fields:
// diagnose -> diagnose::DiagnoseOptions, deviation -> cause::DeviationOptions,
// cause -> cause::CauseOptions, hang -> cause::HangOptions, oom -> cause::OomOptions. `teller diagnose --tune group.field=value` overrides one,
// the diagnosis JSON records them all (`tuning`), and docs/tuning.md is generated from
// the lists (`teller tuning --markdown > docs/tuning.md`; base_test checks the page).
// "paper x4 seed 7" is the development set (`teller synth dataset --preset paper
// --scale 4 --seed 7`); scripts/diagnose_eval.sh scores every set (docs/results.md).
#pragma once

#include <cstddef>
#include <cstdint>

#define TELLER_TUNED_DIAGNOSE(TUNED)                                                               \
  TUNED(diagnose, double, finding_threshold, 10.0,                                                 \
        "robust z from which a (step, operator family) counts as abnormal",                        \
        "paper x4 seed 7: the largest flagged-faulty minus false-alarm share over 6-15 (49/83 "    \
        "hits, 57/92 flagged, 9/28 false alarms; docs/diagnose.md), commit 0d06017")       \
  TUNED(diagnose, int64_t, min_baseline_samples, 5,                                                \
        "steps a baseline key needs before its steps are scored: a MAD of 2-4 steps says little",  \
        "not tuned: a MAD of 2-4 steps says little (efa5246)")                                     \
  TUNED(diagnose, size_t, sustained_steps, 5,                                                      \
        "a finding's score is the mean of its top this many step scores (1: the max): a fault "    \
        "has a window, a benign spike one step",                                                   \
        "paper seed 7 (before the x4 scale), f68bfe0; 3 and 4 tried on x4 seed 7, not kept")       \
  TUNED(diagnose, double, step_z_cap, 3.0,                                                         \
        "each step's z counts at most this many thresholds in a finding's mean, so one huge "      \
        "spike (a GC pause) weighs at most cap / sustained_steps thresholds; 0: no cap",           \
        "paper x4 seed 7: flagged 84 -> 78/92, false alarms 24 -> 23/28 (0d06017); no other cap "  \
        "recorded")                                                                                \
  TUNED(diagnose, size_t, flag_trim_steps, 2,                                                      \
        "a finding flags the run when its window mean without its this many largest z's reaches "  \
        "the threshold: two spikes a few steps apart make no window",                              \
        "paper x4 seed 7: false alarms 9/28 -> 2/28, held out 15/31 -> 5/31, hits unchanged "     \
        "(94ddbd4)")            \
  TUNED(diagnose, size_t, voting_findings, 3,                                                      \
        "the top findings that vote for the fault category when no cause stands",                  \
        "origin not recorded (efa5246): the top 3 vote, weighted 1, 1/2, 1/3")                     \
  TUNED(diagnose, double, vote_cap, 4.0,                                                           \
        "a finding's category vote weighs at most this many thresholds, so one huge z does not "   \
        "drown the logs' votes",                                                                   \
        "not tuned: the log rules weigh 4-10 (efa5246)")                                           \
  TUNED(diagnose, double, vote_symptom_share, 0.5,                                                 \
        "a finding reads as the symptom of another finding (peers waiting for slow kernels, "      \
        "host work around slow calls) that scores at least this share of it",                      \
        "paper x4 seed 7 for host work around slow calls (with the threshold as a bound): "        \
        "category 58/92 -> 61/92 (3b9c034); for peers' waits origin not recorded (efa5246)")       \
  TUNED(diagnose, double, persistent_share, 0.8,                                                   \
        "a (rank, family) abnormal in at least this share of the rank's steps is its role, not "   \
        "an incident: its score is discounted",                                                    \
        "origin not recorded (efa5246)")                                                           \
  TUNED(diagnose, int64_t, persistent_min_steps, 8,                                                \
        "steps a rank needs before a finding can be called persistent",                            \
        "not tuned: a share of fewer steps says little")                                           \
  TUNED(diagnose, double, persistent_discount, 0.1,                                                \
        "what a persistent finding's score is multiplied by",                                      \
        "origin not recorded (efa5246)")

#define TELLER_TUNED_DEVIATION(TUNED)                                                              \
  TUNED(deviation, int64_t, min_samples, 5,                                                        \
        "comparable steps a cell's baseline needs; fewer falls back to the rank's role and phase", \
        "origin not recorded (746791f); the same as diagnose.min_baseline_samples")                \
  TUNED(deviation, double, relative_floor, teller::base::kRelativeSigmaFloor,                      \
        "every robust sigma of the diagnosis is at least this share of its expected value: the "   \
        "deviation map's cells, localize's findings and slow-regime search (base/robust.h)",       \
        "one floor for findings (was 1%) and map (2%), on paper x4 seeds 7, 11 and the "           \
        "real-trace dev draw: 2% kept top 1 (56/71, 53/73, 27/48) and all else but that draw's "   \
        "findings (33 -> 32/48); 1% lost top 1 (54/71, 26/48) and category (65 -> 63/91)")         \
  TUNED(deviation, double, transfer_relative_floor, 0.1,                                           \
        "the same for a collective's transfer, measured across the ranks' clocks on collectives "  \
        "of tens of microseconds: the run's own step-to-step jitter, when larger, is its sigma",   \
        "0.2 -> 0.1 on the development draws (paper x2, fleet, real at seed 7): a cross-node "     \
        "send/recv 1.5x slower read 2.5 sigma at 0.2 (its steps' jitter 6%); 3 link runs named, "  \
        "top 1 82.9 -> 85.7%, no false alarm there or on the modern draw; 0.05 the same")           \
  TUNED(deviation, double, time_floor_ns, 1000.0,                                                  \
        "a time cell's sigma is at least this many nanoseconds",                                   \
        "not tuned: the traces' timing resolution (1 us)")                                         \
  TUNED(deviation, double, step_floor, 0.005,                                                      \
        "a channel usually absent (baseline 0) has a sigma of at least this share of the step's "  \
        "expected time: a few microseconds in a millisecond step is not a cause",                  \
        "not tuned: a few microseconds in a millisecond step is not a cause (746791f)")            \
  TUNED(deviation, double, max_slow_span, 2.0 / 3.0,                                               \
        "a slower regime over more than this share of a rank's steps is its normal (a workload "   \
        "phase), so it stays in the baseline",                                                     \
        "not swept: its commit moved the real-trace development draw's top 1 13 -> 16/48 "        \
        "(5e4686d)")                                                                               \
  TUNED(deviation, double, sustained_regime_z, 1.5,                                                \
        "a slower regime of a rank's own series (host work, launches, copies) held over many "     \
        "steps is left out of its baseline when its median is this many robust deviations up ..." ,\
        "not tuned: a shift under 1.5 deviations biases the baseline little")                       \
  TUNED(deviation, double, sustained_regime_t, 6.0,                                                \
        "... and this many standard errors of the two sides' medians (short regimes need 3 "       \
        "deviations a step)",                                                                      \
        "not tuned: the best window of a fault-free series is chosen among many, so its t runs "   \
        "well above a single test's; 6 leaves it room")

#define TELLER_TUNED_CAUSE(TUNED)                                                                  \
  TUNED(cause, double, gpu_least_family_share, 0.25,                                               \
        "a slow GPU's evidence in a step is its least moved family's when that family moved "     \
        "clearly less than this share of the others' slowdown",                                    \
        "not tuned: a clock throttle slows memory-bound kernels less than compute-bound ones, "   \
        "but slows them")                                                                          \
  TUNED(cause, size_t, gpu_family_min_normal_steps, 8,                                             \
        "... read against the family's baseline when the rank has at least this many scored "     \
        "steps outside the window, else against those steps' own level (at least 2)",              \
        "not tuned: the slow-regime search's least number of normal steps "                       \
        "(localize::ShiftOptions::min_normal); a short capture's noisy family may take its slow "  \
        "steps' level as its baseline")                                                            \
  TUNED(cause, double, joined_family_ratio_tolerance, 0.1,                                         \
        "two kernel families slowed over the same window by ratios this close (relative) are "     \
        "one slowdown, named by the family that added the more time",                              \
        "not tuned: one kernel class our families split (softmax beside attention, indexing "      \
        "beside elementwise) slows alike; measurement noise of a 1.4x ratio is a few percent")     \
  TUNED(cause, double, joined_family_window_overlap, 0.75,                                         \
        "... and windows whose common steps are at least this share of their union",               \
        "not tuned: a window's ends move a step with noise")                                       \
  TUNED(cause, double, drift, 3.0,                                                                 \
        "per step, a cause's evidence above this extends its window; below it ends one",           \
        "paper x4 seed 7: 3, 2 and 1.5 tried with the threshold at twice the best fault-free "    \
        "score, top 1 79%, 77%, 80%; 3 kept (c3d01d9, docs/diagnose.md)")                                \
  TUNED(cause, double, step_cap, 40.0,                                                             \
        "a step's evidence counts at most this much: one huge spike is not a fault",               \
        "not tuned: one huge spike is not a fault (746791f)")                                      \
  TUNED(cause, double, min_score, 15.0,                                                            \
        "the run is degraded when the best cause's score (its window's evidence without its "      \
        "largest steps) reaches this",                                                             \
        "paper x4 seed 7: twice the best score a fault-free run there reaches (7.2; "               \
        "docs/diagnose.md, Causes), 5abd357")                                                               \
  TUNED(cause, double, cell_z_cap, 50.0,                                                           \
        "a cell's z counts at most this much: one absurd value is not more evidence",              \
        "not tuned: a bound on one cell's weight")                                                 \
  TUNED(cause, double, step_evidence_floor, -10.0,                                                 \
        "below this a step's evidence is not counted against a window: a window may hold steps "   \
        "where the cause paused",                                                                  \
        "not tuned (746791f)")                                                                     \
  TUNED(cause, size_t, trimmed_steps, 2,                                                           \
        "a window's score leaves out its this many largest steps: one or two steps that stand "    \
        "out (a long prompt, a GC pause) are not a fault's window; one in a short capture whose "  \
        "window holds one level",                                                                  \
        "not tuned (746791f); more than one step must remain (5abd357); one in a short capture: "   \
        "development draws (paper x2, fleet, real; seeds 7 and 21) top 1 88.4 -> 91.2%, "           \
        "category 89.7 -> 92.3%, false alarms 2 -> 3 of 90 (the pause's length with it, decider "  \
        "refitted: 91.7%, 92.7%, 2 of 90)")                                                         \
  TUNED(cause, double, regime_share, 0.6,                                                          \
        "a window over more than this share of the run is a regime (a rank's role, a workload "    \
        "phase), not an incident with an onset",                                                   \
        "origin not recorded (746791f)")                                                           \
  TUNED(cause, double, regime_discount, 0.1, "what a regime's score is multiplied by",             \
        "origin not recorded (746791f)")                                                                         \
  TUNED(cause, double, strong_drift_factor, 2.0,                                                   \
        "a regime's window is fitted again with this many times the drift: only a fault's strong " \
        "steps stay, not the weaker ones chained to them before its onset",                        \
        "origin not recorded (5abd357)")                                                           \
  TUNED(cause, double, interleaved_moved_share, 2.0 / 3.0,                                         \
        "a window where fewer than this share of the steps moved beyond the drift is "             \
        "interleaved: strong steps alternating with quiet ones (two step bodies), not a fault "    \
        "that set in and lasted",                                                                  \
        "real-trace development draw (seed 7): top 3 65 -> 67%, step F1 0.749 -> 0.758; paper "   \
        "seeds 7, 11 and fleet unchanged (a5157fc)")                           \
  TUNED(cause, double, interleaved_discount, 0.1,                                                  \
        "what an interleaved window's score is multiplied by",                                     \
        "real-trace development draw (seed 7), as interleaved_moved_share")                        \
  TUNED(cause, double, warm_up_share, 0.5,                                                         \
        "a window that opens the run and ends before this share of it is the engine warming up "   \
        "(first requests, lazy set-up, pools growing), not an incident",                           \
        "paper x4 seed 7: top 1 46/71 -> 47/71, false alarms 1/29 -> 0/29 (517a0b7)")              \
  TUNED(cause, double, warm_up_discount, 0.1, "what a warm-up window's score is multiplied by",    \
        "paper x4 seed 7, as warm_up_share (517a0b7)")                                                                         \
  TUNED(cause, double, gpu_slow_min_effect, 0.10,                                                  \
        "the least effect (ratio - 1) of a slow GPU: healthy GPUs of one SKU differ by a few "     \
        "percent in their sustained clocks",                                                       \
        "not tuned: the simulator draws each rank's speed within +-7%, sigma 2.5% (fc2e776)")      \
  TUNED(cause, double, contradiction_z, 3.0,                                                       \
        "a part (a rank, a launch channel) whose own effect lies this many of its sigmas below "   \
        "the common one contradicts a cause of every part",                                        \
        "origin not recorded (5abd357)")                                                           \
  TUNED(cause, size_t, min_common_ranks, 3,                                                        \
        "ranks of a step needed before what moved on most of them is taken out of a rank's own "   \
        "cause",                                                                                   \
        "origin not recorded (746791f); as localize's least peers")                                   \
  TUNED(cause, double, negligible_impact, 0.01,                                                    \
        "a replayed cost below this share of the steps' time is none (off the critical path)",     \
        "not tuned (0389e23)")                                                \
  TUNED(cause, int64_t, min_collectives_to_tell, 3,                                                \
        "a rank's arrivals at fewer collectives than this say nothing of who waits for whom",      \
        "not tuned (0389e23)")                                                                     \
  TUNED(cause, double, replay_inherent_gap_ns, 2000.0,                                             \
        "in a cost replay, the gap kept between a kernel and the dependency that did not hold it " \
        "back (its launch call, or its stream's previous kernel): a launch or a stream switch",    \
        "not tuned: a launch or a stream switch takes at most 2 us (0389e23)")                     \
  TUNED(cause, double, replay_wait_gap_ns, 20000.0,                                                \
        "in a cost replay, work that started this long after what it is known to follow, soon "    \
        "after other work ended, waited for that work through a dependency the trace does not "    \
        "show (another stream's event, another thread or rank)",                                   \
        "origin not recorded (0389e23); the replay's commit: dev cost within 30% in 36/47 runs "   \
        "(26/47 summed over cells)")                                                               \
  TUNED(cause, double, replay_host_wait_step_share, 0.05,                                          \
        "... and for a host thread, idle at least this share of its step too",                     \
        "origin not recorded (0389e23)")                                                           \
  TUNED(cause, double, replay_max_cut, 0.95,                                                       \
        "a replay never shortens a node by more than this share of its time",                      \
        "not tuned: a cut never removes all of a node's time (0389e23)")

#define TELLER_TUNED_HANG(TUNED)                                                                   \
  TUNED(hang, int64_t, min_wait_ns, 10'000'000'000,                                                \
        "a collective counts as hung past both this wait and min_ratio times the median of its "   \
        "communicator's collectives",                                                              \
        "not tuned: far past NCCL's normal waits, far below its watchdog's 10 min (80bf0f1)")      \
  TUNED(hang, double, min_ratio, 100.0, "... and this many times that median",                     \
        "not tuned (80bf0f1)")                                                                     \
  TUNED(hang, int64_t, min_stalled_ns, 1'000'000'000,                                              \
        "a step still open at the end of the trace is stalled past both this and "                 \
        "min_stalled_ratio times the longest completed step of its thread",                        \
        "not tuned: record --watch writes an open step after it (b44d8be)")                        \
  TUNED(hang, double, min_stalled_ratio, 10.0, "... and this many times that longest step",        \
        "not tuned (b44d8be)")                                                                     \
  TUNED(hang, uint32_t, min_steps_before, 3,                                                       \
        "completed steps a thread needs before its open step can be stalled",                      \
        "not tuned (b44d8be)")                                                                     \
  TUNED(hang, int64_t, min_pending_launch_ns, 1'000'000'000,                                       \
        "a kernel launch with no kernel record this long before the trace ends never completed",   \
        "not tuned (80bf0f1)")

#define TELLER_TUNED_OOM(TUNED)                                                                    \
  TUNED(oom, double, outside_share, 0.2,                                                           \
        "an OOM is memory outside PyTorch when that memory holds at least this share of the GPU",  \
        "not tuned: a CUDA context takes under 1 GiB of 80 (87ea4da)")                             \
  TUNED(oom, double, fragmented_share, 0.1,                                                        \
        "an OOM is fragmentation when PyTorch's reserved but unallocated memory is at least this " \
        "share of what it holds (and more than the request)",                                     \
        "not tuned: a few hundred MiB of a full 24 GiB card is the cache's normal slack "          \
        "(87ea4da)")

#define TELLER_TUNED(TUNED)                                                                        \
  TELLER_TUNED_DIAGNOSE(TUNED) TELLER_TUNED_DEVIATION(TUNED) TELLER_TUNED_CAUSE(TUNED)             \
  TELLER_TUNED_HANG(TUNED) TELLER_TUNED_OOM(TUNED)
