"""Engine adapters: where each engine keeps the batch of a step.

A batch is (request_ids, phase) with phase "prefill", "decode", "mixed" or None.
from_call reads the wrapped function's arguments, from_result its return value (and the
arguments, after the call); the safe_* forms never raise (an engine version we do not
know gives None). from_call may return NOT_A_STEP: this call of a STEP function runs no
batch of the service (a warm-up run), and becomes an FE range.

What an adapter reads is declared beside it, and scripts/engine_symbols.py checks it
against each engine release's sources (tests/python_hooks/engine_symbols_test.py):
`reads_args` the (index, name) of each positional parameter it reads, `reads` the fields
it follows from there, "Class.field" ("Class.a|b": either); `tells_apart` fields whose
presence changes what it does (kept in the tables, never required).
"""


class _NotAStep:
    __slots__ = ()

    def __bool__(self):
        return False

    def __repr__(self):
        return "NOT_A_STEP"


NOT_A_STEP = _NotAStep()


class Adapter:
    wraps_call = False
    reads_args = ()
    reads = ()
    tells_apart = ()

    def from_call(self, args, kwargs):
        return None

    def from_result(self, result, args, kwargs):
        return None

    def safe_from_call(self, args, kwargs):
        try:
            return self.from_call(args, kwargs)
        except Exception:
            return None

    def safe_from_result(self, result, args, kwargs):
        try:
            return self.from_result(result, args, kwargs)
        except Exception:
            return None


NO_BATCH = Adapter()


def _phase(prefill_count, total):
    if total == 0:
        return None
    if prefill_count == total:
        return "prefill"
    if prefill_count == 0:
        return "decode"
    return "mixed"


def _arg(args, kwargs, index, name):
    if name in kwargs:
        return kwargs[name]
    return args[index] if len(args) > index else None


# ---- vLLM v1 ----

# SchedulerOutput (vllm.v1.core.sched.output; vllm.v1.core.scheduler before 0.8.0 moved
# it): every scheduled request is a key of num_scheduled_tokens; the new ones (first
# chunk of their prompt) are scheduled_new_reqs.
V1_READS = ("SchedulerOutput.num_scheduled_tokens", "SchedulerOutput.scheduled_new_reqs",
            "NewRequestData.req_id")


def v1_batch(scheduler_output):
    """vllm.v1.core.sched.output.SchedulerOutput -> (ids, phase)."""
    if scheduler_output is None:
        return None
    new = [r.req_id for r in getattr(scheduler_output, "scheduled_new_reqs", ())]
    tokens = getattr(scheduler_output, "num_scheduled_tokens", None)
    if isinstance(tokens, dict):
        ids = list(tokens.keys())
    else:  # not seen in a release: the cached requests' own list
        cached = getattr(scheduler_output, "scheduled_cached_reqs", ())
        if hasattr(cached, "req_ids"):  # CachedRequestData (vLLM >= 0.9)
            ids = new + list(cached.req_ids)
        else:  # list of CachedRequestData
            ids = new + [r.req_id for r in cached]
    return ids, _phase(len(new), len(ids))


class VllmV1Schedule(Adapter):
    reads = V1_READS

    def from_result(self, result, args, kwargs):  # schedule(self) -> SchedulerOutput
        return v1_batch(result)


class VllmV1UpdateFromOutput(Adapter):
    """Scheduler.update_from_output(scheduler_output, model_runner_output): the batch a
    step finished. With a batch queue (async scheduling, pipeline parallel) the step
    schedules one batch and waits for an earlier one; this call names the earlier one,
    whose work the step waited on, and comes after schedule(), so its batch wins."""

    reads_args = ((1, "scheduler_output"),)
    reads = V1_READS

    def from_result(self, result, args, kwargs):
        return v1_batch(_arg(args, kwargs, 1, "scheduler_output"))


class VllmV1ExecuteModel(Adapter):
    reads_args = ((1, "scheduler_output"),)
    reads = V1_READS

    def from_call(self, args, kwargs):  # execute_model(self, scheduler_output, ...)
        return v1_batch(_arg(args, kwargs, 1, "scheduler_output"))


class VllmV2ExecuteModel(VllmV1ExecuteModel):
    """Model Runner V2 (vllm.v1.worker.gpu.model_runner): its warm-up, profiling and
    CUDA-graph capture runs call execute_model(dummy_scheduler_output, dummy_run=True)
    with made-up request ids: not steps."""

    reads_args = ((1, "scheduler_output"), (3, "dummy_run"))
    reads = V1_READS

    def from_call(self, args, kwargs):
        if kwargs.get("dummy_run") or (len(args) > 3 and args[3] is True):
            return NOT_A_STEP
        return v1_batch(_arg(args, kwargs, 1, "scheduler_output"))


# ---- vLLM v0 ----

def v0_batch(scheduler_outputs):
    """vllm.core.scheduler.SchedulerOutputs -> (ids, phase)."""
    groups = getattr(scheduler_outputs, "scheduled_seq_groups", None)
    if groups is None:
        return None
    ids = [g.seq_group.request_id for g in groups]
    prefill = getattr(scheduler_outputs, "num_prefill_groups", None)
    return ids, _phase(prefill, len(ids)) if prefill is not None else None


V0_READS = ("SchedulerOutputs.scheduled_seq_groups", "SchedulerOutputs.num_prefill_groups",
            "ScheduledSequenceGroup.seq_group", "SequenceGroup.request_id")


class VllmV0Schedule(Adapter):
    reads = V0_READS

    def from_result(self, result, args, kwargs):
        # schedule() -> (seq_group_metadata_list, scheduler_outputs, allow_async...)
        if isinstance(result, tuple):
            for item in result:
                batch = v0_batch(item)
                if batch is not None:
                    return batch
            return None
        return v0_batch(result)


class VllmV0Step(Adapter):
    """LLMEngine.step (and _AsyncLLMEngine.step_async) of the V0 engine. From 0.11
    vllm.engine.llm_engine:LLMEngine is the V1 LLMEngine, whose step (the offline LLM's
    loop) only collects what the engine core's steps made, in another process: not a
    step (an FE range) when the engine has an engine_core."""

    reads = ("RequestOutput.request_id",)
    tells_apart = ("LLMEngine.engine_core",)

    def from_call(self, args, kwargs):
        if args and hasattr(args[0], "engine_core"):
            return NOT_A_STEP
        return None

    def from_result(self, result, args, kwargs):
        # step() -> list of RequestOutput; used when schedule() was not seen.
        if not isinstance(result, list):
            return None
        ids = [o.request_id for o in result if hasattr(o, "request_id")]
        return ids, None


# ---- SGLang ----

class SglangRunBatch(Adapter):
    """Scheduler.run_batch(batch) (SGLang 0.3.3 and later)."""

    reads_args = ((1, "batch"),)
    reads = ("ScheduleBatch.reqs", "ScheduleBatch.forward_mode", "Req.rid", "ForwardMode.EXTEND",
             "ForwardMode.DECODE", "ForwardMode.MIXED")

    def from_call(self, args, kwargs):  # run_batch(self, batch)
        batch = _arg(args, kwargs, 1, "batch")
        if batch is None:
            return None
        ids = [r.rid for r in getattr(batch, "reqs", ())]
        mode = getattr(batch, "forward_mode", None)
        name = getattr(mode, "name", str(mode) if mode is not None else "").lower()
        phase = {"extend": "prefill", "prefill": "prefill", "decode": "decode",
                 "mixed": "mixed"}.get(name)
        return ids, phase


class SglangTpServer(Adapter):
    """ModelTpServer.forward_prefill_batch(batch) / forward_decode_batch(batch) (SGLang
    before 0.3.3, whose batch has no forward mode when the call starts): the phase is the
    method's (the argument: prefill or decode). A prefill batch with mixed chunking takes
    in the running decode batch (is_mixed_chunk): then its requests too, phase mixed.
    Read when the call starts: a decode batch drops its finished requests before it
    returns."""

    reads_args = ((1, "batch"),)
    reads = ("ScheduleBatch.reqs", "Req.rid", "ModelTpServer.running_batch",
             "ModelTpServer.is_mixed_chunk")

    def __init__(self, phase):
        self.phase = phase

    def from_call(self, args, kwargs):
        batch = _arg(args, kwargs, 1, "batch")
        if batch is None:
            return None
        reqs = list(getattr(batch, "reqs", ()))
        phase = self.phase
        if phase == "prefill" and args and getattr(args[0], "is_mixed_chunk", False):
            running = getattr(args[0], "running_batch", None)
            if running is not None and getattr(running, "reqs", None):
                reqs += running.reqs
                phase = "mixed"
        return [r.rid for r in reqs], phase


# ---- plain PyTorch: Module.__call__ for chosen module classes ----

class TorchModule(Adapter):
    """torch.nn.modules.module:Module.__call__:BE:torch_module=Linear,Attention wraps
    calls of modules whose class name is listed (all modules when none is)."""

    wraps_call = True

    def __init__(self, class_names):
        self.class_names = frozenset(class_names)

    def wrap_call(self, fn, spec, host_range, now):
        chosen = self.class_names
        layer = spec.layer
        names = {}

        def wrapper(module, *args, **kwargs):
            cls = type(module).__name__
            if chosen and cls not in chosen:
                return fn(module, *args, **kwargs)
            name = names.get(cls)
            if name is None:
                name = names[cls] = cls.encode("utf-8", "replace")
            start = now()
            try:
                return fn(module, *args, **kwargs)
            finally:
                host_range(layer, name, start, now(), -1, None, None)

        return wrapper


class GenericBatch(Adapter):
    """For your own engines: the first argument after self (or the keyword `batch`)
    has `request_ids` and, optionally, `phase`."""

    def from_call(self, args, kwargs):
        batch = _arg(args, kwargs, 1, "batch")
        ids = getattr(batch, "request_ids", None)
        if ids is None:
            return None
        return list(ids), getattr(batch, "phase", None)


_ADAPTERS = {
    "generic_batch": lambda args: GenericBatch(),
    "vllm_v1_step": lambda args: NO_BATCH,  # the batch comes from Scheduler.schedule
    "vllm_v1_schedule": lambda args: VllmV1Schedule(),
    "vllm_v1_update": lambda args: VllmV1UpdateFromOutput(),
    "vllm_v1_execute_model": lambda args: VllmV1ExecuteModel(),
    "vllm_v2_execute_model": lambda args: VllmV2ExecuteModel(),
    "vllm_v0_step": lambda args: VllmV0Step(),
    "vllm_v0_schedule": lambda args: VllmV0Schedule(),
    "sglang_run_batch": lambda args: SglangRunBatch(),
    "sglang_tp_server": lambda args: SglangTpServer(args[0] if args else None),
    "torch_module": lambda args: TorchModule(args),
}


def get(name, args=()):
    factory = _ADAPTERS.get(name)
    return factory(args) if factory else None
