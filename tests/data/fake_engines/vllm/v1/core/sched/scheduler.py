"""Fake vllm.v1.core.sched.scheduler: schedule() returns a SchedulerOutput-like object,
update_from_output(scheduler_output, model_runner_output) takes it back with its result."""


class NewRequestData:
    def __init__(self, req_id):
        self.req_id = req_id


class CachedRequestData:  # vLLM >= 0.9: one object holding the ids
    def __init__(self, req_ids):
        self.req_ids = req_ids


class SchedulerOutput:
    def __init__(self, new_ids, cached_ids):
        self.scheduled_new_reqs = [NewRequestData(i) for i in new_ids]
        self.scheduled_cached_reqs = CachedRequestData(list(cached_ids))
        self.num_scheduled_tokens = {i: 8 for i in list(new_ids) + list(cached_ids)}


class Scheduler:
    def __init__(self, plan):
        self.plan = list(plan)  # [(new_ids, cached_ids), ...]

    def schedule(self):
        new_ids, cached_ids = self.plan.pop(0)
        return SchedulerOutput(new_ids, cached_ids)

    def has_requests(self):
        return bool(self.plan)

    def update_from_output(self, scheduler_output, model_runner_output):
        return model_runner_output
