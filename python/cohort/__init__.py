"""cohort: process groups and collectives that never hang silently.

    import numpy as np, cohort
    with cohort.init() as g:                  # RANK, WORLD_SIZE, ... (cohortrun, torchrun)
        x = np.full(1024, g.rank, np.float32)
        g.all_reduce(x, op=cohort.AVG)         # in place; same error on every rank if not

See docs/python.md. Everything here is the C extension cohort._cohort.
"""
import os as _os

from ._cohort import *  # noqa: F401,F403
from ._cohort import (  # noqa: F401
    Error, ContractError, PeerLostError, CohortTimeoutError, AbortedError, AuthError,
    StoreError, InvalidArgumentError, SysCallError, OutOfMemoryError, ProtocolError,
    NotFoundError, TooLargeError, UnsupportedError, Group, Work, Store, StoreServer, init,
    Checker, CheckGroup,
    dtype_size, dtype_name, _set_package_dir, _callsite,
)

__version__ = "0.1.0"

# Frames in this package (wrappers such as cohort.torch) are not call sites:
# the contract names the program's own line.
_set_package_dir(_os.path.dirname(_os.path.abspath(__file__)) + _os.sep)
