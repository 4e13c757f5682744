"""Media handling: sniffing, probing and decoding user files (PyAV), and ffmpeg command lines."""
