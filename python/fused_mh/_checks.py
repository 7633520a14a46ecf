"""The checks of the scalar arguments, shared by every function: an integer or a number that is
not one (a float where a count goes, a string, None, a value out of range) is a `TypeError` or
a `ValueError` naming the argument and its value, before anything reaches the Rust side (whose
own conversion errors, "'float' object cannot be interpreted as an integer", name nothing)."""

import math
import operator


def unsigned(name, value, bits=64):
    """`value` as an int in [0, 2^bits), or a `TypeError`/`ValueError` naming `name`. Counts
    and seeds are 64-bit unsigned on the Rust side (the kernels' counter scheme), the model
    runs' steps and warm-up and a launch's steps 32-bit."""
    if isinstance(value, bool):
        raise TypeError(f"{name} = {value!r}: expected an integer, not a bool")
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} = {value!r}: expected an integer") from None
    if not 0 <= n < 1 << bits:
        raise ValueError(f"{name} = {n}: must be in [0, 2^{bits})")
    return n


def real(name, value):
    """`value` as a float (any number; the Rust side checks its range and names it), or a
    `TypeError` naming `name`. A string is not a number here, though `float` would read one."""
    if isinstance(value, bool):
        raise TypeError(f"{name} = {value!r}: expected a number, not a bool")
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name} = {value!r}: expected a number, not a string")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} = {value!r}: expected a number") from None


def step_size(value, name="step_size"):
    """`value` as a float, finite and > 0 (the library's rule), or an error naming it."""
    v = real(name, value)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} = {v}: must be a finite number > 0")
    return v
