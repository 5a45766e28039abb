"""The baselines posenc is measured against, as ASGI apps.

- ``hello``: FastAPI at its fastest — a constant JSON, and pre-built bytes of any size
  (``/bytes/{n}``): the transfer ceiling of the same stack.
- ``tutorial``: the positional-encoding service the usual tutorial leads to — compute the
  table with NumPy on every request and return it through FastAPI's default JSON encoder.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from fastapi import FastAPI, Response

hello = FastAPI()
tutorial = FastAPI()


@hello.get("/hello")
def say_hello() -> dict[str, str]:
    return {"hello": "world"}


@lru_cache(maxsize=16)
def _prebuilt(size: int) -> bytes:
    return b"x" * size


@hello.get("/bytes/{size}")
def prebuilt(size: int) -> Response:
    return Response(_prebuilt(size), media_type="application/octet-stream")


@tutorial.get("/table")
def tutorial_table(seq_len: int, d_model: int) -> dict[str, list[list[float]]]:
    position = np.arange(seq_len, dtype=np.float64)[:, None]
    div_term = np.exp(np.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    pe = np.zeros((seq_len, d_model))
    pe[:, 0::2] = np.sin(position * div_term)
    pe[:, 1::2] = np.cos(position * div_term)
    return {"data": pe.astype(np.float32).tolist()}
