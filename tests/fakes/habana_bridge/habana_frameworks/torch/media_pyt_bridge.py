"""Fake of habana_frameworks.torch.media_pyt_bridge (bridge natives) as the media loader's iterator uses it.

RegisterMediaDeleter keeps the pipes' close callbacks (the bridge runs them before it releases the
device). The PYT_FW proxy (CreatePytMediaProxy, GetOutputTensor) serves other iterators than
HPUGenericPytorchIterator, which allocates through its Python proxy, and is not faked.
"""

deleters: list = []


def RegisterMediaDeleter(deleter) -> None:
    if not callable(deleter):
        raise TypeError("RegisterMediaDeleter(): incompatible function arguments")
    deleters.append(deleter)


def CreatePytMediaProxy(device_id: int):
    raise NotImplementedError("media_pyt_bridge.CreatePytMediaProxy (the PYT_FW proxy) is not faked")


def GetOutputTensor(address: int):
    raise NotImplementedError("media_pyt_bridge.GetOutputTensor (the PYT_FW proxy) is not faked")
