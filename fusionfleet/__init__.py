"""FusionFleet: a render farm for FaceFusion on AWS (domain and client)."""

__version__ = "0.1.0"
