"""The image type every vision role takes."""

from __future__ import annotations

import numpy as np

#: An RGB ``uint8`` array of shape (height, width, 3).
Image = np.ndarray
