"""Model catalogue: per-model compute times and gradient sizes."""

from ddl_gym.profiles.catalogue import (
    MODEL_NAMES,
    SEED_MODELS,
    ModelProfile,
    UnknownModelError,
    bucket_sizes,
    get_profile,
)

__all__ = [
    "MODEL_NAMES",
    "SEED_MODELS",
    "ModelProfile",
    "UnknownModelError",
    "bucket_sizes",
    "get_profile",
]
