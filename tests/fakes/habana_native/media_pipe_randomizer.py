"""Fake of Habana's `media_pipe_randomizer` (pybind11): imported by the video reader's schema only."""


class DatasetShuffler:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("media_pipe_randomizer.DatasetShuffler is not faked (video readers only)")
