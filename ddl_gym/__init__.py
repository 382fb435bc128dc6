"""ddl-gym: network-aware GPU-cluster scheduling, as a simulator and a Gymnasium env."""

__version__ = "0.1.0"
