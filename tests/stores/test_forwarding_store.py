from __future__ import annotations

import inspect

from backend.stores.forwarding_store import ForwardingVectorStore
from backend.stores.vector_port import VectorStore


def port_methods() -> set[str]:
    return {
        name
        for name, member in inspect.getmembers(VectorStore, inspect.isfunction)
        if not name.startswith("_")
    }


def test_every_port_method_is_forwarded_explicitly() -> None:
    # A port method left to ``__getattr__`` would reach the inner store unseen: a new
    # write call would then skip the lexical mirror and the change log of the wrappers.
    assert port_methods() >= {"upsert", "delete", "drop_namespace", "get", "query"}
    assert port_methods() <= set(vars(ForwardingVectorStore))


def test_signatures_match_the_port() -> None:
    for name in port_methods():
        ours = inspect.signature(getattr(ForwardingVectorStore, name))
        port = inspect.signature(getattr(VectorStore, name))
        assert list(ours.parameters) == list(port.parameters), name
