"""Look each JVM class and static method up once per process, not once per use.

PySpark reaches the JVM through py4j, and py4j asks the JVM what a name is every time Python
touches it: `F.col("x")` is three round trips (the class `functions`, its member `col`, the
call), and a name PySpark uses without its package (`PythonUtils`, `py4j`) first fails a class
lookup through every jar on the driver's class path. Building the trace parse and the log
pattern chain touches such names tens of thousands of times: the examples' analyze made 77,000
py4j calls, of which 14,000 name lookups (13.8 s) and 12,000 member lookups (4.8 s).

A package, a class, or a static *method* of a class is what it is for the life of the JVM
(fields are not cached: their values may change), so each answer is kept on the Python object
that asked, and the next use is a plain attribute read.
"""

from __future__ import annotations

from py4j import java_gateway
from py4j.java_gateway import JavaClass, JavaMember, JavaPackage, JVMView

_PATCHED = "_pulsar_audit_cached"


def _cached(lookup, kinds):
    def cached_lookup(self, name):
        found = lookup(self, name)
        if isinstance(found, kinds):
            # an instance attribute: Python finds it before calling __getattr__ again
            object.__setattr__(self, name, found)
        return found

    setattr(cached_lookup, _PATCHED, True)
    return cached_lookup


def cache_jvm_lookups() -> None:
    """Cache py4j's name lookups (idempotent; for the life of the process)."""
    for owner, kinds in (
        (JVMView, (JavaClass, JavaPackage)),
        (JavaPackage, (JavaClass, JavaPackage)),
        (JavaClass, (JavaClass, JavaMember)),
    ):
        if not getattr(owner.__getattr__, _PATCHED, False):
            owner.__getattr__ = _cached(owner.__getattr__, kinds)  # type: ignore[method-assign]
    assert java_gateway.JVMView.__getattr__ is JVMView.__getattr__
