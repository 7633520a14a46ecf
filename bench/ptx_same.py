#!/usr/bin/env python3
"""Compares two PTX files entry point by entry point (and device function by function),
ignoring the order in which they appear and the numbering of labels that follows from it: a
refactoring that moves code between files, or removes an entry point, can change both
without changing any instruction. Prints what differs; exit 0 if nothing.
Usage: bench/ptx_same.py OLD.ptx NEW.ptx"""
import re
import sys


def bodies(path):
    text = open(path).read()
    parts = re.split(r"\n(?=(?:\.visible |\.weak |\.extern )?(?:\.entry|\.func) )", text)
    found = {}
    for part in parts[1:]:
        name = re.search(r"(?:\.entry|\.func)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)", part).group(1)
        # Comments go; labels are numbered by the function's position in the file: renumbered.
        body = re.sub(r"//.*", "", part)
        found[name] = re.sub(r"\$L__BB\d+_", "$L__BB_", body).strip()
    return found


old, new = bodies(sys.argv[1]), bodies(sys.argv[2])
differ = sorted(n for n in old.keys() & new.keys() if old[n] != new[n])
only_old, only_new = sorted(old.keys() - new.keys()), sorted(new.keys() - old.keys())
for label, names in [("differ", differ), ("only in old", only_old), ("only in new", only_new)]:
    if names:
        print(f"{label}: {' '.join(names)}")
print(f"{len(old.keys() & new.keys()) - len(differ)} of {len(old)} old / {len(new)} new identical")
sys.exit(1 if differ or only_old or only_new else 0)
