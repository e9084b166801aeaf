"""Errors that keep their class under ``torch.compile(fullgraph=True)``.

Dynamo traces ``forward`` (and ``decode``, ``merge_states``); an exception our validation raises
while tracing has no handler inside the compiled region, and dynamo turns it into
``torch._dynamo.exc.Unsupported`` ("Observed exception") under ``fullgraph=True``: ``except
ValueError`` / ``except NotImplementedError`` would no longer catch what eager raises. So while
compiling, the entry points (through :func:`keep_error_classes`) catch their own errors and put the
``ffpa_attn::raise_error`` op into the graph instead: an opaque op that raises the same class with
the same message when the compiled code runs (an op that raises at run time is what dynamo keeps),
before any kernel of the call could run.
"""

from __future__ import annotations

from typing import Any, Callable, Tuple, Union

import torch
from torch import Tensor

from .errors import (
    FFPAError,
    FFPAIndexError,
    FFPATypeError,
    FFPAUnsupportedError,
    FFPAValueError,
)

_CLASSES = {c.__name__: c for c in (FFPAValueError, FFPATypeError, FFPAIndexError, FFPAUnsupportedError)}


def _raise_error_impl(anchor: Tensor, kind: str, message: str, reason: str) -> Tensor:
    cls = _CLASSES.get(kind, FFPAValueError)
    raise cls(message, reason) if reason else cls(message)


_raise_error = torch.library.custom_op(
    "ffpa_attn::raise_error", _raise_error_impl, mutates_args=(),
    schema="(Tensor anchor, str kind, str message, str reason) -> Tensor",
)


@_raise_error.register_fake
def _raise_error_fake(anchor: Tensor, kind: str, message: str, reason: str) -> Tensor:
    # Never returns at run time; while tracing, a stand-in shaped like the query.
    return torch.empty_like(anchor)


def raise_in_graph(err: FFPAError, query: object, return_lse: bool) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """What an entry point returns, while tracing, instead of raising ``err``: the graph raises it."""
    anchor = query if isinstance(query, Tensor) else torch.empty(0)
    args = err.args  # str(err) is C code for these classes, which dynamo cannot trace
    out = _raise_error(anchor, type(err).__name__, str(args[0]) if args else "",
                       str(args[1]) if len(args) > 1 else "")
    if not return_lse:
        return out
    return out, (out[..., 0] if out.dim() else out).float()


def keep_error_classes(fn: Callable[..., Any], args: tuple, anchor: object, pair: bool) -> Any:
    """``fn(*args)``; while tracing, an FFPA error it raises becomes :func:`raise_in_graph` (the
    entry points forward, decode and merge_states share this)."""
    if not torch.compiler.is_compiling():
        return fn(*args)
    try:
        return fn(*args)
    except FFPAError as err:
        return raise_in_graph(err, anchor, pair)
