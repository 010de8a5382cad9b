#include "record/kernel_log.h"

#include <gtest/gtest.h>

namespace teller::record {
namespace {

// Lines as Linux 5.x/6.x print them (mm/oom_kill.c), and an older kernel's.
constexpr std::string_view kLog =
    "python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0\n"
    "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
    "oom_memcg=/drill,task_memcg=/drill,task=python3,pid=31666,uid=0\n"
    "Memory cgroup out of memory: Killed process 31666 (python3) total-vm:111632kB, "
    "anon-rss:97152kB, file-rss:2264kB, shmem-rss:0kB, UID:0 pgtables:252kB oom_score_adj:0\n"
    "Out of memory: Killed process 30255 (python3) total-vm:23935784kB, anon-rss:23924608kB\n"
    "Out of memory: Kill process 812 (java) score 906 or sacrifice child\n"
    "Killed process 3166 (bash) total-vm:1000kB\n";

TEST(KernelLogTest, FindsTheOomKillersLineOfAPid) {
  EXPECT_EQ(FindOomKill(kLog, 31666).substr(0, 48),
            "Memory cgroup out of memory: Killed process 3166");
  EXPECT_EQ(FindOomKill(kLog, 30255).substr(0, 41), "Out of memory: Killed process 30255 (pyth");
  EXPECT_EQ(FindOomKill(kLog, 812),
            "Out of memory: Kill process 812 (java) score 906 or sacrifice child");
}

TEST(KernelLogTest, OtherPidsAndOtherKillsAreNotOomKills) {
  EXPECT_EQ(FindOomKill(kLog, 3166), "");  // a prefix of 31666, and no OOM in its own line
  EXPECT_EQ(FindOomKill(kLog, 316), "");
  EXPECT_EQ(FindOomKill("", 31666), "");
}

}  // namespace
}  // namespace teller::record
