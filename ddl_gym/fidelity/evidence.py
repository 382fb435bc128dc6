"""The fits the hardware prior is built from, for use without the data.

Each bundled measured table fitted in the transfer form (``shared``,
``calibrate.TRANSFER_ALGORITHM``; ``fidelity.report.fit_clusters``).
Written by ``ddl_gym.fidelity.unseen.write_evidence`` (do not edit by hand):

    python -c 'from ddl_gym.fidelity.unseen import write_evidence; write_evidence()'

tests/test_prior.py checks it against a fresh fit where the data is installed.
"""

from __future__ import annotations

from ddl_gym.fidelity.calibrate import FitResult
from ddl_gym.topology import fabric_from_dict

EVIDENCE: dict[str, dict] = {
    "chronus": {
        "fabric": {
            "algorithm": "shared",
            "bucket_bytes": 25000000.0,
            "comm_scale": {
                "alexnet": 0.9829471723436799,
                "inception_v3": 1.07905164137789,
                "mobilenet_v2": 0.6004700552872475,
                "resnet101": 1.0139682212784729,
                "vgg16": 1.5485024402181684,
            },
            "description": "PCIe 3.0 servers, 25 GbE, 3:1 uplinks",
            "gpu_link": {"bandwidth": 5025747432.158088, "latency": 1.000000000000022e-09},
            "gpu_link_sharing": 1.8095766685732873e-13,
            "name": "chronus",
            "nic": {"bandwidth": 2507887981.0266485, "latency": 0.0007970406452970256},
            "nic_sharing": 9.380244304173294e-13,
            "overlap": 0.9999999999942698,
            "oversubscription": 3.0,
            "uplink": {"bandwidth": 3125000000.0, "latency": 4.9999999999999996e-05},
        },
        "points": 30,
        "rms_log_error": 0.24286138430766044,
    },
    "gavel_k80": {
        "fabric": {
            "algorithm": "shared",
            "bucket_bytes": 25000000.0,
            "comm_scale": {
                "lstm_lm": 1.2700282061812944,
                "resnet18": 0.8602384795436059,
                "resnet50": 0.8978690961286346,
                "transformer": 1.0194237437667404,
            },
            "description": "PCIe 3.0 servers, 25 GbE, 3:1 uplinks",
            "gpu_link": {"bandwidth": 2641920252.095847, "latency": 0.0005224981824785557},
            "gpu_link_sharing": 0.16516867858145914,
            "name": "gavel_k80",
            "nic": {"bandwidth": 1368258130.3023152, "latency": 1.0000000000049106e-09},
            "nic_sharing": 0.0,
            "overlap": 0.05227116063100583,
            "oversubscription": 3.0,
            "uplink": {"bandwidth": 3125000000.0, "latency": 4.9999999999999996e-05},
        },
        "points": 105,
        "rms_log_error": 0.08522639779446138,
    },
    "gavel_p100": {
        "fabric": {
            "algorithm": "shared",
            "bucket_bytes": 25000000.0,
            "comm_scale": {
                "lstm_lm": 1.3247478796518641,
                "resnet18": 0.9308322372188919,
                "resnet50": 0.8837685952108483,
                "transformer": 0.917607144780839,
            },
            "description": "PCIe 3.0 servers, 25 GbE, 3:1 uplinks",
            "gpu_link": {"bandwidth": 8218813403.486721, "latency": 0.0001803577559712795},
            "gpu_link_sharing": 0.5080520369402798,
            "name": "gavel_p100",
            "nic": {"bandwidth": 1609796526.091777, "latency": 0.0005793046146840885},
            "nic_sharing": 0.0,
            "overlap": 0.053919610411590824,
            "oversubscription": 3.0,
            "uplink": {"bandwidth": 3125000000.0, "latency": 4.9999999999999996e-05},
        },
        "points": 114,
        "rms_log_error": 0.1103973369655611,
    },
    "gavel_v100": {
        "fabric": {
            "algorithm": "shared",
            "bucket_bytes": 25000000.0,
            "comm_scale": {
                "lstm_lm": 1.1551561066654648,
                "resnet18": 0.7871538172468345,
                "resnet50": 1.364112620236407,
                "transformer": 0.8062124285426414,
            },
            "description": "PCIe 3.0 servers, 25 GbE, 3:1 uplinks",
            "gpu_link": {"bandwidth": 10220611234.047466, "latency": 1.0000000000000859e-09},
            "gpu_link_sharing": 1.1441085759913184e-14,
            "name": "gavel_v100",
            "nic": {"bandwidth": 1303467561.4782658, "latency": 0.000897001668448071},
            "nic_sharing": 0.0,
            "overlap": 4.897609143117917e-15,
            "oversubscription": 3.0,
            "uplink": {"bandwidth": 3125000000.0, "latency": 4.9999999999999996e-05},
        },
        "points": 114,
        "rms_log_error": 0.29344113033199776,
    },
    "pollux_t4": {
        "fabric": {
            "algorithm": "shared",
            "bucket_bytes": 25000000.0,
            "comm_scale": {
                "bert_base": 1.0179499521871056,
                "deepspeech2": 2.173731786351793,
                "ncf": 0.41945009098319425,
                "resnet18": 0.9275631785772781,
                "resnet50": 0.8228550525118297,
                "yolov3": 1.4116287159537542,
            },
            "description": "PCIe 3.0 servers, 25 GbE, 3:1 uplinks",
            "gpu_link": {"bandwidth": 3251051002.7837763, "latency": 1.0001743275581177e-09},
            "gpu_link_sharing": 0.19439392214934897,
            "name": "pollux_t4",
            "nic": {"bandwidth": 1000186467.0699503, "latency": 1.0000000000000042e-09},
            "nic_sharing": 6.693938229615402e-14,
            "overlap": 0.21009859059052213,
            "oversubscription": 3.0,
            "uplink": {"bandwidth": 3125000000.0, "latency": 4.9999999999999996e-05},
        },
        "points": 5485,
        "rms_log_error": 0.11917898607901234,
    },
}


def evidence_fits() -> dict[str, FitResult]:
    """The bundled fits, by cluster."""
    return {
        c: FitResult(
            fabric_from_dict(e["fabric"]),
            (),
            int(e["points"]),
            float(e["rms_log_error"]),
            True,
            "bundled evidence",
        )
        for c, e in EVIDENCE.items()
    }
