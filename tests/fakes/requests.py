"""The value objects adapters receive, built the way train builds them."""

from __future__ import annotations

from bridgetower_mlflow.accelerators.base import DecodeRequest, DeviceInfo, RecipeSettings
from bridgetower_mlflow.data.cpu_images import ImageSpec

MEAN, STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)


def device(kind: str = "h100", count: int = 1, training_path: str = "transformers") -> DeviceInfo:
    return DeviceInfo(kind=kind, device_name=kind.upper(), count=count, training_path=training_path)


def decode_request(dataset, batch_size=2, image_size=16, num_workers=0, kind="h100", **extra) -> DecodeRequest:
    return DecodeRequest(dataset=dataset, batch_size=batch_size, seed=0, image=ImageSpec(image_size, MEAN, STD),
                         num_workers=num_workers, device=device(kind), **extra)


def settings(kwargs: dict, precision="auto", strategy="ddp", world_size=1, warmup=3, hf_args=()) -> RecipeSettings:
    return RecipeSettings(training_kwargs=kwargs, hf_args=tuple(hf_args), precision=precision,
                          distribution_strategy=strategy, world_size=world_size, throughput_warmup_steps=warmup)
