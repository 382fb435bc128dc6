"""Model catalogue: per-model compute times and gradient sizes; add your own
with ``register_model`` (docs/model.md)."""

from ddl_gym.profiles.catalogue import (
    ASSIGNABLE_MODELS,
    LLM_MODELS,
    MODEL_NAMES,
    SEED_MODELS,
    TRANSFORMER_MODELS,
    ModelProfile,
    UnknownModelError,
    bucket_sizes,
    get_profile,
    model_names,
    register_model,
)

__all__ = [
    "ASSIGNABLE_MODELS",
    "LLM_MODELS",
    "MODEL_NAMES",
    "SEED_MODELS",
    "TRANSFORMER_MODELS",
    "ModelProfile",
    "UnknownModelError",
    "bucket_sizes",
    "get_profile",
    "model_names",
    "register_model",
]
