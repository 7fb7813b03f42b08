"""Nested containers of values ("pytrees", torch.utils._pytree's idea) for the function
transforms (pyrite/func.py, pyrite/_vmap.py): tuples, lists, dicts and namedtuples are nodes,
anything else (a Tensor, a number, None) is a leaf. Flattening gives the leaves in order and a
spec; unflattening puts new leaves into the same structure."""

from __future__ import annotations

_LEAF = "*"


class TreeSpec:
    """The structure of a pytree: `kind` (a container type, or None for a leaf), `keys` (a
    dict's keys, in order) and the children's specs."""

    __slots__ = ("children", "keys", "kind")

    def __init__(self, kind=None, keys=None, children=()):
        self.kind, self.keys, self.children = kind, keys, tuple(children)

    @property
    def is_leaf(self) -> bool:
        return self.kind is None

    @property
    def num_leaves(self) -> int:
        return 1 if self.is_leaf else sum(c.num_leaves for c in self.children)

    def __eq__(self, other):
        return isinstance(other, TreeSpec) and (self.kind, self.keys, self.children) == (
            other.kind,
            other.keys,
            other.children,
        )

    def __hash__(self):
        return hash((self.kind, self.keys, self.children))

    def __repr__(self):
        if self.is_leaf:
            return _LEAF
        inner = ", ".join(repr(c) for c in self.children)
        if self.kind is dict:
            inner = ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.keys, self.children))
            return "{" + inner + "}"
        if self.kind is list:
            return f"[{inner}]"
        if self.kind is tuple:
            return f"({inner}{',' if len(self.children) == 1 else ''})"
        return f"{self.kind.__name__}({inner})"


def _node(x):
    """(kind, keys, children) of a container, or None for a leaf."""
    if isinstance(x, dict):
        keys = tuple(x)
        return dict, keys, [x[k] for k in keys]
    if isinstance(x, tuple):
        return type(x), None, list(x)  # (a namedtuple keeps its class)
    if isinstance(x, list):
        return list, None, list(x)
    return None


def tree_flatten(tree):
    """(leaves in order, spec)."""
    leaves: list = []

    def walk(x):
        node = _node(x)
        if node is None:
            leaves.append(x)
            return TreeSpec()
        kind, keys, children = node
        return TreeSpec(kind, keys, [walk(c) for c in children])

    return leaves, walk(tree)


def tree_leaves(tree) -> list:
    return tree_flatten(tree)[0]


def tree_unflatten(leaves, spec: TreeSpec):
    """The pytree of `spec`'s structure holding `leaves` in order."""
    it = iter(leaves)

    def build(s):
        if s.is_leaf:
            return next(it)
        children = [build(c) for c in s.children]
        if s.kind is dict:
            return dict(zip(s.keys, children))
        if s.kind is list:
            return children
        if s.kind is tuple:
            return tuple(children)
        return s.kind(*children)  # a namedtuple

    return build(spec)


def tree_map(fn, tree):
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(x) for x in leaves], spec)


def broadcast_prefix(prefix, spec: TreeSpec):
    """`prefix` (a pytree whose leaves may stand for whole subtrees of `spec`) spread over
    spec's leaves, as a flat list; None when the structures do not match. A dict of the prefix
    matches a dict of the spec with the same keys in any order, key by key (torch 2.13 pairs
    them by position: vmap's in_dims {"b": 0, "a": None} for an input {"a": .., "b": ..}
    maps "a" there)."""
    out: list = []

    def walk(p, s):
        node = _node(p)
        if node is None:
            out.extend([p] * s.num_leaves)
            return True
        kind, keys, children = node
        if kind is dict and s.kind is dict and keys != s.keys and set(keys) == set(s.keys):
            keys, children = s.keys, [p[k] for k in s.keys]  # (a dict matches by key)
        if s.is_leaf or kind is not s.kind or keys != s.keys:
            return False
        if len(children) != len(s.children):
            return False
        return all(walk(pc, sc) for pc, sc in zip(children, s.children))

    return out if walk(prefix, spec) else None
