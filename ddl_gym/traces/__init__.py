"""Job traces: a normalised schema, adapters for real trace families,
transformations and a calibrated synthetic generator.

Quick use::

    from ddl_gym.traces import default_trace, load_trace, find_data_dir
    trace = default_trace(seed=0)              # bundled synthetic workload
    philly = load_trace(find_data_dir() / "traces/philly/philly_2017-11-13_to_2017-11-19.csv")
"""

from .alibaba import load_alibaba
from .dally import DALLY_MODELS, load_dally
from .loader import (
    FAMILIES,
    detect_family,
    discover_traces,
    find_data_dir,
    load_normalised,
    load_trace,
    save_trace,
)
from .philly import load_philly
from .pollux import POLLUX_MODELS, load_pollux
from .schema import (
    OPTIONAL_COLUMNS,
    SCHEMA_COLUMNS,
    Trace,
    TraceError,
    TraceWarning,
    canonical_model_names,
    validate,
)
from .synthetic import default_trace, synthetic_trace
from .tiresias import TIRESIAS_MODELS, load_tiresias
from .transform import assign_models, check_fits, head, scale_load, shift_to_zero, window

__all__ = [
    "DALLY_MODELS",
    "FAMILIES",
    "OPTIONAL_COLUMNS",
    "POLLUX_MODELS",
    "SCHEMA_COLUMNS",
    "TIRESIAS_MODELS",
    "Trace",
    "TraceError",
    "TraceWarning",
    "assign_models",
    "canonical_model_names",
    "check_fits",
    "default_trace",
    "detect_family",
    "discover_traces",
    "find_data_dir",
    "head",
    "load_alibaba",
    "load_dally",
    "load_normalised",
    "load_philly",
    "load_pollux",
    "load_tiresias",
    "load_trace",
    "save_trace",
    "scale_load",
    "shift_to_zero",
    "synthetic_trace",
    "validate",
    "window",
]
