"""functional_call (torch.func.functional_call; torch.nn.utils.stateless's older spelling
warns and calls it): call a module with some of its parameters and buffers replaced by given
tensors — MAML's fast weights (params - lr * grads, still in the graph), model soups,
per-sample functional forms. The module's own tensors are swapped back afterwards, also on an error."""

from __future__ import annotations

__all__ = ["functional_call"]

_MISSING = object()


def _merge(parameter_and_buffer_dicts) -> dict:
    if isinstance(parameter_and_buffer_dicts, dict):
        return dict(parameter_and_buffer_dicts)
    merged: dict = {}
    for d in parameter_and_buffer_dicts:
        for k in d:
            if k in merged:
                raise ValueError(
                    f"{k} appeared in multiple dictionaries; behavior of functional call is "
                    "ambiguous"
                )
        merged.update(d)
    return merged


def _tied_names(module, given: dict) -> dict:
    """The given values spread to the other names of the same (tied) tensors."""
    out = dict(given)
    by_id: dict = {}
    everything = list(module.named_parameters(remove_duplicate=False)) + list(
        module.named_buffers(remove_duplicate=False)
    )
    for name, t in everything:
        by_id.setdefault(id(t), []).append(name)
    for names in by_id.values():
        chosen = [n for n in names if n in given]
        if not chosen:
            continue
        value = given[chosen[0]]
        for n in chosen[1:]:
            if given[n] is not value:
                raise ValueError(
                    f"functional_call got multiple values for keys {chosen}, which are tied. "
                    "Consider using tie_weights=False"
                )
        for n in names:
            out.setdefault(n, value)
    return out


def _slot(module, name: str):
    """(the dict holding `name`'s tensor, its key) — _parameters, _buffers or the module's
    __dict__ for a name that is neither."""
    *path, leaf = name.split(".")
    mod = module
    for part in path:
        mod = getattr(mod, part)
    if leaf in mod._parameters:
        return mod._parameters, leaf
    if leaf in mod._buffers:
        return mod._buffers, leaf
    return mod.__dict__, leaf


def functional_call(
    module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False
):
    """module(*args, **kwargs) with the named parameters and buffers replaced by the given
    tensors for the call (torch.func.functional_call).

    Args:
        module (Module): the module to call.
        parameter_and_buffer_dicts (dict or sequence of dicts): {"layer.weight": tensor, ...}.
        args: a tuple of positional arguments, or one argument.
        kwargs (dict): keyword arguments.
        tie_weights (bool): a value given for one name of tied tensors is used for all of
            them. Default True.
        strict (bool): every parameter and buffer must be given, and no other name. Default
            False.
    """
    given = _merge(parameter_and_buffer_dicts)
    if tie_weights:  # (before the strict check, as torch: a tied name's twin gives it too)
        given = _tied_names(module, given)
    if strict:
        names = {n for n, _ in module.named_parameters(remove_duplicate=False)}
        names |= {n for n, _ in module.named_buffers(remove_duplicate=False)}
        missing = sorted(names - set(given))
        unexpected = sorted(set(given) - names)
        if missing or unexpected:
            msgs = []
            if unexpected:
                msgs.append("Unexpected key(s): " + ", ".join(repr(k) for k in unexpected) + ".")
            if missing:
                msgs.append("Missing key(s): " + ", ".join(repr(k) for k in missing) + ".")
            raise RuntimeError(
                f"Error(s) in reparametrizing for {type(module).__name__}:\n\t" + "\n\t".join(msgs)
            )
    if kwargs is None:
        kwargs = {}
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    saved = []
    try:
        for name, value in given.items():
            slot, key = _slot(module, name)
            saved.append((slot, key, slot.get(key, _MISSING)))
            slot[key] = value
        return module(*args, **kwargs)
    finally:
        for slot, key, old in reversed(saved):
            if old is _MISSING:
                slot.pop(key, None)
            else:
                slot[key] = old
