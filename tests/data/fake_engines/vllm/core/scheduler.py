"""Fake vllm.core.scheduler (v0): schedule() returns (metadata, SchedulerOutputs, async)."""


class SequenceGroup:
    def __init__(self, request_id):
        self.request_id = request_id


class ScheduledSequenceGroup:
    def __init__(self, request_id):
        self.seq_group = SequenceGroup(request_id)


class SchedulerOutputs:
    def __init__(self, ids, num_prefill_groups):
        self.scheduled_seq_groups = [ScheduledSequenceGroup(i) for i in ids]
        self.num_prefill_groups = num_prefill_groups


class Scheduler:
    def __init__(self, plan):
        self.plan = list(plan)  # [(ids, num_prefill_groups), ...]

    def schedule(self):
        ids, prefill = self.plan.pop(0)
        return [], SchedulerOutputs(ids, prefill), False
