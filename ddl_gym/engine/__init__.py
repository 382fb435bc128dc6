"""Event-driven simulator: state, events, actions, metrics."""

from ddl_gym.engine.actions import WAIT, Action, InvalidAction, Place, Preempt, Wait
from ddl_gym.engine.engine import Engine, StalledError
from ddl_gym.engine.hints import LeaseHints
from ddl_gym.engine.job import Job, Status
from ddl_gym.engine.metrics import JOB_COLUMNS, Result, summarize
from ddl_gym.engine.policy import Policy
from ddl_gym.engine.simulate import PolicyEngineWarning, run_policy, simulate
from ddl_gym.engine.view import EngineView
from ddl_gym.perf import Level  # Place(job, level)'s level, beside the actions

__all__ = [
    "JOB_COLUMNS",
    "WAIT",
    "Action",
    "Engine",
    "EngineView",
    "InvalidAction",
    "Job",
    "LeaseHints",
    "Level",
    "Place",
    "Policy",
    "PolicyEngineWarning",
    "Preempt",
    "Result",
    "StalledError",
    "Status",
    "Wait",
    "run_policy",
    "simulate",
    "summarize",
]
