"""kgym_pch.py -- load_inline's precompiled prologue as the harness prepares
it: where it is kept (--pch-dir), its build into the "cuda" compiler
profile, and what the hello and a job's metadata say of it.

The building itself is kgym_inline.build_pch's; this module only decides
when and for which profile.  Always in a trusted process, before any
candidate has its job: the zygote at start-up (kgym_zygote.zygote_main),
or a job's supervisor whose zygote found no profile (the --once harness,
a worker without a GPU), through Zygote.compiler_profile.  The profile
then carries it to the candidate, whose kgym_inline.install() uses it.
"""

import os

from kgym_inline import build_pch


def resolve_dir(arg):
    """--pch-dir's directory: 'auto' is <state_dir>/pch where we run in a
    worker's directory (else none); '' or 'off' is none ('')."""
    if arg == "auto":
        # A worker's directory is <state_dir>/work/<name> (kgymd-worker).
        here = os.getcwd()
        arg = os.path.join(os.path.dirname(os.path.dirname(here)), "pch") \
            if os.path.basename(os.path.dirname(here)) == "work" else ""
    if arg == "off":
        arg = ""
    return arg


def add_pch(profile, root, cuda=True):
    """Build (or find valid) the prologue under root into the "cuda"
    profile; its CUDA variants too where cuda and nvcc is in the profile.
    Returns it (kgym_inline.build_pch's description)."""
    profile["pch"] = pch = build_pch(root, cuda=cuda and "nvcc" in profile["programs"])
    return pch


def hello_facts(pch, build_ms):
    """The zygote's hello: which variants it has, how long they took."""
    return {"inline_pch": sorted(pch["variants"]), "inline_pch_ms": build_ms,
            "inline_pch_errors": pch["errors"][:4]}


def job_metadata(pch):
    """metadata.inline_pch of a "cuda" job."""
    return {"variants": sorted(pch["variants"]), "build_s": round(pch["build_s"], 2),
            "errors": [e[:200] for e in pch["errors"]][:4]}
