"""Stand-in ONNX models for FaceFusion 3.8.1, built with the `onnx` package by FaceFusion's own interpreter.

    PYTHONPATH=<repository> <FaceFusion's python> -m fleetctl.harness.standins MODELS_DIR

writes every model FaceFusion's 11 processors load (its own default model of each) with the `.hash`
file it checks, and prints their paths, relative to MODELS_DIR, as JSON. Inputs and outputs have the
real models' shapes, so FaceFusion feeding a model anything else fails here as on the real one. What
each computes is small and visible, and depends on what it was given (the frame, the face, the source,
the audio window): a step that saw the wrong one changes pixels. Only numpy and onnx here, and the
harness's geometry: these modules run outside the project's environment.
"""
