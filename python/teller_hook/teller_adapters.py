"""Engine adapters: where each engine keeps the batch of a step.

A batch is (request_ids, phase) with phase "prefill", "decode", "mixed" or None.
from_call reads the wrapped function's arguments, from_result its return value; the
safe_* forms never raise (an engine version we do not know gives None).
"""


class Adapter:
    wraps_call = False

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

def v1_batch(scheduler_output):
    """vllm.v1.core.sched.output.SchedulerOutput -> (ids, phase)."""
    if scheduler_output is None:
        return None
    new = [r.req_id for r in getattr(scheduler_output, "scheduled_new_reqs", ())]
    cached = getattr(scheduler_output, "scheduled_cached_reqs", ())
    if hasattr(cached, "req_ids"):  # CachedRequestData (vLLM >= 0.9)
        cached_ids = list(cached.req_ids)
    else:  # list of CachedRequestData
        cached_ids = [r.req_id for r in cached]
    tokens = getattr(scheduler_output, "num_scheduled_tokens", None)
    ids = list(tokens.keys()) if isinstance(tokens, dict) and tokens else new + cached_ids
    return ids, _phase(len(new), len(new) + len(cached_ids))


class VllmV1Schedule(Adapter):
    def from_result(self, result, args, kwargs):
        return v1_batch(result)


class VllmV1ExecuteModel(Adapter):
    def from_call(self, args, kwargs):  # execute_model(self, scheduler_output, ...)
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


class VllmV0Schedule(Adapter):
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
    def from_result(self, result, args, kwargs):
        # step() -> list of RequestOutput; used when schedule() was not seen.
        if not isinstance(result, list):
            return None
        ids = [o.request_id for o in result if hasattr(o, "request_id")]
        return ids, None


# ---- SGLang ----

class SglangRunBatch(Adapter):
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
    "vllm_v1_execute_model": lambda args: VllmV1ExecuteModel(),
    "vllm_v0_step": lambda args: VllmV0Step(),
    "vllm_v0_schedule": lambda args: VllmV0Schedule(),
    "sglang_run_batch": lambda args: SglangRunBatch(),
    "torch_module": lambda args: TorchModule(args),
}


def get(name, args=()):
    factory = _ADAPTERS.get(name)
    return factory(args) if factory else None
