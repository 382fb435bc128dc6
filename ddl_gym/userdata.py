"""The user's data dir: where ``ddl-gym calibrate --table`` saves fitted
fabric presets, so that ``fabric="<name>"`` finds them in any later run.

Never the installed package (it may be read-only, and a reinstall would drop
the user's presets): ``platformdirs.user_data_dir("ddl-gym")`` (on Linux
``~/.local/share/ddl-gym``), or ``$DDL_GYM_DATA_HOME`` when set (tests and CI
point it at a temporary folder). Presets go in its ``fabrics/`` subfolder.
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_HOME_ENV_VAR = "DDL_GYM_DATA_HOME"
APP_NAME = "ddl-gym"


def data_home() -> Path:
    """The user data dir (not created here)."""
    override = os.environ.get(DATA_HOME_ENV_VAR)
    if override:
        return Path(override).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir(APP_NAME, appauthor=False))


def fabrics_dir() -> Path:
    """Where user fabric presets live (``<data home>/fabrics``; not created here)."""
    return data_home() / "fabrics"


def user_fabric_path(name: str) -> Path:
    """The file of user preset ``name`` (it may not exist)."""
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"not a valid preset name: {name!r} (letters, digits, _ and -)")
    return fabrics_dir() / f"{name}.json"


def user_fabric_names() -> list[str]:
    """Names of the user's saved presets."""
    folder = fabrics_dir()
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []
