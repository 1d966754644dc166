"""Real text to and from the sentences a model translates: segmentation (more to come: HTML,
documents, language detection). Used by `aiayn.translation`, so the command line, the Python API
and the server share it."""
