"""The project's PEP 517 build backend: setuptools, without one notice.

setuptools tells every editable install of a flat layout (``ddl_gym/`` beside
``agents/`` and ``baselines/``) to "be careful with folders in your working
directory with the same name as your package" (``InformationOnly``); pip 26
prints a backend's warnings, so a clean ``pip install -e .`` showed ten
lines that ask nothing of the user. Everything else is
``setuptools.build_meta`` unchanged (its real warnings still show).
"""

import warnings

from setuptools.build_meta import *  # noqa: F403 - the backend's hooks, unchanged
from setuptools.warnings import InformationOnly

warnings.filterwarnings("ignore", message="Editable installation", category=InformationOnly)
