"""The built-in `classic` engine: a CPU face swap (dlib landmarks, piecewise-affine warp, colour
matching, Poisson blending, optical-flow tracking). See `engine.ClassicEngine`."""
