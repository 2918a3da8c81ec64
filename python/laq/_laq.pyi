"""Types of the extension module; the documented API is in ``laq/__init__.py``."""

import os
import pathlib
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

__version__: str

def load(
    path: Union[str, "os.PathLike[str]"],
    obs_keys: Optional[List[str]] = None,
    reward: Optional[str] = None,
) -> Tuple[Dict[str, np.ndarray], List[str]]: ...
def train(
    out: Union[str, "os.PathLike[str]"],
    settings: Dict[str, Any],
    path: Optional[Union[str, "os.PathLike[str]"]] = None,
    arrays: Optional[Dict[str, Tuple[str, List[int], bytes]]] = None,
    obs_keys: Optional[List[str]] = None,
    reward: Optional[str] = None,
) -> pathlib.Path: ...
def frame_layout(shape: List[int]) -> Optional[Tuple[int, int, int, int, bool]]: ...

class Model:
    def __init__(self, path: Union[str, "os.PathLike[str]"]) -> None: ...
    @property
    def path(self) -> pathlib.Path: ...
    @property
    def obs_shape(self) -> List[int]: ...
    @property
    def gamma(self) -> float: ...
    @property
    def cost_per_step(self) -> Optional[float]: ...
    def values(self, obs: np.ndarray, in_data_units: bool = False) -> np.ndarray: ...
    def select(
        self,
        candidates: np.ndarray,
        rewards: Optional[List[float]] = None,
        terminals: Optional[List[bool]] = None,
    ) -> int: ...
