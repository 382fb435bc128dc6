"""A **synthetic** LLM-development job mix matched to the Acme trace's
published summary (Hu et al., "Characterization of Large Language Model
Development in the Datacenter", NSDI'24; numbers from the trace's release,
InternLM/AcmeTrace ``data/cluster_summary.csv`` @6d6ac9c).

What is matched (Seren, the larger of Acme's two clusters, 663,813 GPU jobs):
the median GPU count (1), the mean GPU count (5.68), the largest job (1,024
GPUs, capped at half the simulated cluster), the median and mean run time
of GPU jobs (122 s and 1,414 s: a log-normal with those two moments), the
longest (1,209,604 s). What is **not** in the summary and is our choice,
stated: job sizes are powers of two, 55% of jobs take one GPU and the rest
follow a geometric law over the sizes fitted to the mean; size and duration
are independent; which model a size trains (below); arrivals are Poisson at
the rate that offers ``load`` of the cluster's GPUs.

Jobs by size (our labels): 1-4 GPUs fine-tune or evaluate Llama-2 7B with
TP across their GPUs and 8 sequences per iteration; 8-32 GPUs Llama-2 13B
at its default layout (TP 8); 64 GPUs and more pretrain Llama-2 70B at its
default layout (TP 8 x PP 8). A job's ``iterations`` are its drawn run time over
its iteration time at the tightest placement on the cluster given (may be
fractional: a 64-GPU Llama-2 70B step at its 1,024-sequence batch takes
minutes, longer than many drawn run times).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ddl_gym.llm.catalogue import layout_for
from ddl_gym.llm.engine_model import LLMPerf
from ddl_gym.llm.iteration import canonical_shape
from ddl_gym.llm.layout import Layout
from ddl_gym.topology import Cluster
from ddl_gym.traces import Trace
from ddl_gym.traces.schema import make_trace


@dataclass(frozen=True)
class AcmeSummary:
    """One Acme cluster's GPU-job summary (``cluster_summary.csv``)."""

    name: str
    gpu_jobs: int
    median_gpus: float
    mean_gpus: float
    max_gpus: int
    median_run_s: float
    mean_run_s: float
    max_run_s: float


# InternLM/AcmeTrace data/cluster_summary.csv (columns gpu_job_num,
# med_gpu_num, avg_gpu_num, max_gpu, med_run_time_gpu, avg_run_time_gpu,
# max_run_time_gpu)
ACME_SEREN = AcmeSummary("Seren", 663_813, 1.0, 5.68, 1024, 122.0, 1414.335, 1_209_604.0)
ACME_KALOS = AcmeSummary("Kalos", 19_907, 1.0, 26.77, 1024, 124.0, 1259.689, 625_740.0)

ONE_GPU_SHARE = 0.55  # assumption: the summary says only that the median is 1


def size_distribution(stats: AcmeSummary, max_gpus: int) -> tuple[np.ndarray, np.ndarray]:
    """(sizes, probabilities): powers of two up to ``max_gpus``, P(1) =
    ``ONE_GPU_SHARE``, the rest geometric in log2(size) with the ratio that
    gives ``stats.mean_gpus`` (bisection; the largest mean the support allows
    if it cannot)."""
    top = int(math.log2(max(1, min(stats.max_gpus, max_gpus))))
    sizes = np.array([2**k for k in range(top + 1)], dtype=np.int64)
    if top == 0:
        return sizes, np.array([1.0])

    def probs(q: float) -> np.ndarray:
        tail = np.array([q**k for k in range(1, top + 1)])
        tail = tail / tail.sum() * (1.0 - ONE_GPU_SHARE)
        return np.concatenate([[ONE_GPU_SHARE], tail])

    lo, hi = 1e-6, 10.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if float(probs(mid) @ sizes) < stats.mean_gpus:
            lo = mid
        else:
            hi = mid
    return sizes, probs(0.5 * (lo + hi))


def job_layout(gpus: int) -> tuple[str, Layout]:
    """(model, layout) of a job of ``gpus`` GPUs (see the module docstring)."""
    if gpus < 8:
        return "llama2_7b", Layout(tp=gpus, pp=1, dp=1, micro_batches=8)
    if gpus < 64:
        return "llama2_13b", layout_for("llama2_13b", gpus)
    return "llama2_70b", layout_for("llama2_70b", gpus)


def llm_cluster_trace(
    cluster: Cluster,
    n_jobs: int = 1000,
    seed: int = 0,
    load: float = 0.8,
    stats: AcmeSummary = ACME_SEREN,
    name: str = "llm-acme-synthetic",
) -> Trace:
    """A synthetic LLM-cluster trace for ``cluster`` (module docstring):
    columns of the schema plus ``layout`` and ``duration_s`` (the drawn run
    time at the tightest placement, alone)."""
    if n_jobs < 1:
        raise ValueError(f"n_jobs must be >= 1, got {n_jobs}")
    if not 0 < load:
        raise ValueError(f"load must be positive, got {load}")
    if cluster.typed:
        raise ValueError("llm_cluster_trace: an untyped cluster (LLM jobs run on llm_gpu)")
    rng = np.random.default_rng(seed)
    sizes, p = size_distribution(stats, cluster.num_gpus // 2)
    gpus = sizes[rng.choice(len(sizes), size=n_jobs, p=p)]
    sigma = math.sqrt(2.0 * math.log(stats.mean_run_s / stats.median_run_s))
    duration = stats.median_run_s * np.exp(sigma * rng.standard_normal(n_jobs))
    duration = np.minimum(duration, stats.max_run_s)
    gaps = rng.exponential(1.0, size=n_jobs)
    gaps[0] = 0.0
    # Poisson arrivals offering ``load`` of the cluster: mean gap = mean
    # GPU-seconds of a job / (load x GPUs)
    mean_gap = float(np.mean(gpus * duration)) / (load * cluster.num_gpus)
    arrival = np.cumsum(gaps) * mean_gap

    perf = LLMPerf(cluster)
    G, S = cluster.gpus_per_server, cluster.servers_per_rack
    models, layouts, iterations, step = [], [], [], []
    for g, d in zip(gpus.tolist(), duration.tolist(), strict=True):
        model, lay = job_layout(int(g))
        t = perf.compute(model, lay) + perf.exposed(model, lay, canonical_shape(g, G, S))
        models.append(model)
        layouts.append(lay.spec())
        iterations.append(d / t)  # fractional: the drawn run time exactly
        step.append(t)
    df = pd.DataFrame(
        {
            "job_id": [f"{name}-{i:05d}" for i in range(n_jobs)],
            "arrival_s": arrival,
            "gpus": gpus,
            "model": models,
            "iterations": np.array(iterations, dtype="float64"),
            "iter_time_s": np.array(step),
            "duration_s": np.array(iterations) * np.array(step),
            "layout": layouts,
        }
    )
    return make_trace(name, df, None)
