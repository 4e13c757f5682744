"""FaceFusion's own knowledge as data and pure rules: options, models, reference, content analysis."""
