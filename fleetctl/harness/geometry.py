"""What the stand-in models and the pictures drawn for them agree on: face size, colours, the index code.

Imported by the stand-ins (FaceFusion's interpreter: standard library only here) and by the pictures.

A face is a 96×120 patch whose red exceeds its blue by about a hundred levels; everything else in a
picture has red at most its blue. The stand-in detector scores every 96×120 box on an 8-pixel grid
by the mean of clip((R - B) / 128, 0, 1): a face of person "a" drawn on the grid scores 0.75 (its
brightness aside; "b" 0.86) and the boxes beside it less, so the same face gives the same box
whatever a decoder's rounding.
Its frame number is drawn into the face (and into a strip at the picture's foot) as a 2×6 code of
brighter and darker cells, equal in every channel: it changes no colour difference, so detection and
identity do not depend on it, while every model that sees the face carries it into its output.
"""

from __future__ import annotations

FACE_WIDTH, FACE_HEIGHT = 96, 120
GRID = 8  # the detector's candidate boxes start on multiples of this, in detector pixels
CANVAS = 640  # yoloface's input side: pictures up to this size are detected unscaled
FACE_SCORE_DIVISOR = 128.0  # faceness = clip((R - B) / this, 0, 1)
# Where the five points sit in a detected box, as fractions of its width and height.
FIVE_POINTS = ((0.33, 0.40), (0.67, 0.40), (0.50, 0.58), (0.37, 0.78), (0.63, 0.78))

# People, as BGR: faces by their R - B, told apart by G - B (their identity: 50 and 100).
# Levels stay inside [50, 205], so the texture ramp (±15), the code (±35) and the eyes and mouth (-40)
# never clip a channel (which would change a colour difference).
PEOPLE = {
    "a": (60, 110, 156),
    "b": (90, 190, 200),  # R - B 110: a higher detector score than a's, so faces sort alike everywhere
}

# The frame-number code: CODE_ROWS × CODE_COLUMNS cells, bit 1 brighter, bit 0 darker.
CODE_ROWS, CODE_COLUMNS = 2, 6
CODE_CELL = (12, 10)  # width, height in pixels
CODE_ORIGIN = (12, 14)  # the first cell's top left, from the face box's top left
CODE_LEVEL = 35
RAMP = 15  # the face's left-to-right luma ramp, ±

# What a swap adds to each channel (RGB, in 0..1), by the source's identity: + for one person, - for
# the other. A swap from the wrong source face shows as a tint of about ten levels.
SOURCE_TINT = (0.04, -0.025, 0.015)
