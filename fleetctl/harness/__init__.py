"""FaceFusion's development harness: its real code on the CPU with stand-in models, for tests and benchmarks.

`facefusion.py` finds FaceFusion 3.8.1's source and interpreter and prepares a FaceFusion folder;
`standins/` builds the stand-in ONNX models (run by FaceFusion's own interpreter); `pictures.py` draws
the frames they recognise; `geometry.py` is what both sides agree on. Nothing here is deployed.
"""
