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
                "alexnet": 0.9829472538671129,
                "inception_v3": 1.0790517140355356,
                "mobilenet_v2": 0.6004700834306129,
                "resnet101": 1.0139682830483177,
                "vgg16": 1.5485020406112477,
            },
            "description": "PCIe 3.0 servers, 25 GbE, 3:1 uplinks",
            "gpu_link": {"bandwidth": 5025747405.651868, "latency": 1.000000000000022e-09},
            "gpu_link_sharing": 1.7631609634711982e-13,
            "name": "chronus",
            "nic": {"bandwidth": 2507888154.14531, "latency": 0.0007970405146023314},
            "nic_sharing": 9.36347230181442e-13,
            "overlap": 0.9999999999943522,
            "oversubscription": 3.0,
            "uplink": {"bandwidth": 3125000000.0, "latency": 4.9999999999999996e-05},
        },
        "points": 30,
        "rms_log_error": 0.2428614073514498,
    },
    "gavel_k80": {
        "fabric": {
            "algorithm": "shared",
            "bucket_bytes": 25000000.0,
            "comm_scale": {
                "lstm_lm": 1.270021747212101,
                "resnet18": 0.8602420425595473,
                "resnet50": 0.8978708535521603,
                "transformer": 1.0194227105737945,
            },
            "description": "PCIe 3.0 servers, 25 GbE, 3:1 uplinks",
            "gpu_link": {"bandwidth": 2641940718.3608685, "latency": 0.0005224153460421964},
            "gpu_link_sharing": 0.16519775561690767,
            "name": "gavel_k80",
            "nic": {"bandwidth": 1368249083.343683, "latency": 1.0000000000000077e-09},
            "nic_sharing": 0.0,
            "overlap": 0.05227518653470763,
            "oversubscription": 3.0,
            "uplink": {"bandwidth": 3125000000.0, "latency": 4.9999999999999996e-05},
        },
        "points": 105,
        "rms_log_error": 0.08522662464555124,
    },
    "gavel_p100": {
        "fabric": {
            "algorithm": "shared",
            "bucket_bytes": 25000000.0,
            "comm_scale": {
                "lstm_lm": 1.3247478796582541,
                "resnet18": 0.9308322372228517,
                "resnet50": 0.8837685952010291,
                "transformer": 0.9176071447827043,
            },
            "description": "PCIe 3.0 servers, 25 GbE, 3:1 uplinks",
            "gpu_link": {"bandwidth": 8218813403.641477, "latency": 0.00018035775594640266},
            "gpu_link_sharing": 0.5080520369549367,
            "name": "gavel_p100",
            "nic": {"bandwidth": 1609796526.1056917, "latency": 0.0005793046146867913},
            "nic_sharing": 0.0,
            "overlap": 0.0539196104026603,
            "oversubscription": 3.0,
            "uplink": {"bandwidth": 3125000000.0, "latency": 4.9999999999999996e-05},
        },
        "points": 114,
        "rms_log_error": 0.1103973369653827,
    },
    "gavel_v100": {
        "fabric": {
            "algorithm": "shared",
            "bucket_bytes": 25000000.0,
            "comm_scale": {
                "lstm_lm": 1.1551562511895395,
                "resnet18": 0.7871539526526828,
                "resnet50": 1.364112209068618,
                "transformer": 0.8062124319981718,
            },
            "description": "PCIe 3.0 servers, 25 GbE, 3:1 uplinks",
            "gpu_link": {"bandwidth": 10220616362.50745, "latency": 1.0000000000000576e-09},
            "gpu_link_sharing": 7.124267693568214e-15,
            "name": "gavel_v100",
            "nic": {"bandwidth": 1303467391.3229105, "latency": 0.000897001009175798},
            "nic_sharing": 0.0,
            "overlap": 4.898117784773385e-15,
            "oversubscription": 3.0,
            "uplink": {"bandwidth": 3125000000.0, "latency": 4.9999999999999996e-05},
        },
        "points": 114,
        "rms_log_error": 0.2934411358287181,
    },
    "pollux_t4": {
        "fabric": {
            "algorithm": "shared",
            "bucket_bytes": 25000000.0,
            "comm_scale": {
                "bert_base": 1.0179499521907627,
                "deepspeech2": 2.17373178634767,
                "ncf": 0.419450090983052,
                "resnet18": 0.9275631785782427,
                "resnet50": 0.8228550525109491,
                "yolov3": 1.411628715951881,
            },
            "description": "PCIe 3.0 servers, 25 GbE, 3:1 uplinks",
            "gpu_link": {"bandwidth": 3251051002.772619, "latency": 1.0001743211513162e-09},
            "gpu_link_sharing": 0.19439392214681767,
            "name": "pollux_t4",
            "nic": {"bandwidth": 1000186467.070295, "latency": 1.0000000000000042e-09},
            "nic_sharing": 6.65293378539458e-14,
            "overlap": 0.21009859059041414,
            "oversubscription": 3.0,
            "uplink": {"bandwidth": 3125000000.0, "latency": 4.9999999999999996e-05},
        },
        "points": 5485,
        "rms_log_error": 0.11917898607901245,
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
