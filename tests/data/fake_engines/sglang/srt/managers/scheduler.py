"""Fake sglang.srt.managers.scheduler."""
import enum


class ForwardMode(enum.IntEnum):
    EXTEND = 1
    DECODE = 2
    MIXED = 3


class Req:
    def __init__(self, rid):
        self.rid = rid


class ScheduleBatch:
    def __init__(self, rids, mode):
        self.reqs = [Req(r) for r in rids]
        self.forward_mode = mode


class Scheduler:
    work = None  # tests: a callable run inside each batch (spin, hang, crash)

    def run_batch(self, batch):
        if self.work is not None:
            self.work(batch)
        return len(batch.reqs)
