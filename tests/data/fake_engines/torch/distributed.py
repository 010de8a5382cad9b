"""Fake torch.distributed for teller hook tests: the calls the hooks make after
init_process_group (is_available, is_initialized, get_rank, get_world_size)."""

_group = None


def is_available():
    return True


def is_initialized():
    return _group is not None


def init_process_group(backend="gloo", rank=-1, world_size=-1):
    global _group
    _group = (rank, world_size)


def get_rank():
    if _group is None:
        raise RuntimeError("Default process group has not been initialized")
    return _group[0]


def get_world_size():
    if _group is None:
        raise RuntimeError("Default process group has not been initialized")
    return _group[1]
