"""Exception and warning classes of ffpa_attn.

Every error class derives from the Python-idiomatic builtin *and* from the class
``torch.nn.functional.scaled_dot_product_attention`` raises for the same misuse, so
that both ``except ValueError`` / ``except TypeError`` and the SDPA-style
``except RuntimeError`` keep working when ``ffpa_attn.forward`` replaces SDPA.
"""

from __future__ import annotations

__all__ = [
    "FFPAError",
    "FFPAValueError",
    "FFPATypeError",
    "FFPAIndexError",
    "FFPAUnsupportedError",
    "FFPAFallbackWarning",
]


class FFPAError(Exception):
    """Base class of every exception raised by ffpa_attn itself."""


class FFPAValueError(FFPAError, ValueError, RuntimeError):
    """An argument has the right type but an invalid value or shape.

    SDPA raises ``RuntimeError`` for these, hence the second base.
    """


class FFPATypeError(FFPAError, TypeError, RuntimeError):
    """An argument has the wrong Python type or the wrong tensor dtype.

    SDPA raises ``TypeError`` for wrong Python types and ``RuntimeError`` for wrong
    dtypes, hence both bases.
    """


class FFPAIndexError(FFPAValueError, IndexError):
    """A shape problem for which SDPA raises ``IndexError`` (a missing dimension)."""


class FFPAUnsupportedError(FFPAError, NotImplementedError):
    """Raised with ``strict=True`` when the FFPA kernel cannot handle a call.

    Constructed as ``FFPAUnsupportedError(message, reason)``; ``reason`` holds the same
    text a fallback warning would carry.  (``NotImplementedError`` is a ``RuntimeError``.)
    No custom ``__init__``: torch.compile (dynamo) must be able to raise it.
    """

    @property
    def reason(self) -> str:
        return str(self.args[1] if len(self.args) > 1 else (self.args[0] if self.args else ""))

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class FFPAFallbackWarning(UserWarning):
    """Issued (once per distinct reason) when a call falls back to torch SDPA."""
