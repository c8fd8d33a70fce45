"""Files of bayescal: model files and score files (one import for both).

The code lives in two modules, re-exported here:

* :mod:`bayescal.model_files`: :func:`save_model`, :func:`load_model` (JSON
  model files that are pure data, versioned, checked against a declared
  schema), :func:`hash_training_data`, :func:`posterior_path`;
* :mod:`bayescal.score_files`: :func:`read_scores`, :func:`read_labels`,
  :func:`write_scores`, :class:`ScoreData` (the command line's ``.npz``,
  ``.npy`` and ``.csv`` files, never dropping or shifting a row);

and :func:`atomic_write` (:mod:`bayescal._files`), through which every file is
written.
"""

from __future__ import annotations

from bayescal._files import atomic_write
from bayescal.model_files import (
    MODEL_FORMAT,
    MODEL_FORMAT_VERSION,
    hash_training_data,
    load_model,
    posterior_path,
    save_model,
)
from bayescal.score_files import ScoreData, read_labels, read_scores, write_scores

__all__ = [
    "MODEL_FORMAT",
    "MODEL_FORMAT_VERSION",
    "ScoreData",
    "atomic_write",
    "hash_training_data",
    "load_model",
    "posterior_path",
    "read_labels",
    "read_scores",
    "save_model",
    "write_scores",
]
