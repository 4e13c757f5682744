"""FusionFleet: a render farm for FaceFusion on AWS (the domain: what the slicer, the workers and the merge share)."""

__version__ = "0.1.0"
