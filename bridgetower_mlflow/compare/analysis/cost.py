"""Pure cost arithmetic: user-given USD per device-hour -> USD per million training samples."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...contract import ACCELERATOR_KINDS
from ...errors import ConfigError
from .grouping import GroupStats

SECONDS_PER_HOUR = 3600.0
SAMPLES_PER_UNIT = 1_000_000
PRICES_ALLOWED = ("allowed: a comma list of accelerator=USD per device-hour, e.g. gaudi2=1.20,h100=2.50; "
                  "accelerator one of " + ", ".join(ACCELERATOR_KINDS) + ", each once; price a number > 0")
NO_SOURCE = "not stated"


@dataclass(frozen=True)
class PriceList:
    """Prices the user gave (never built in) and where they said they come from."""

    usd_per_device_hour: dict[str, float] = field(default_factory=dict)
    source: str = ""

    def __bool__(self) -> bool:
        return bool(self.usd_per_device_hour)

    def describe(self) -> str:
        """`gaudi2=1.2, h100=2.5 USD per device-hour (source: ...)`, or '' without prices."""
        if not self:
            return ""
        listed = ", ".join(f"{name}={price:g}" for name, price in self.usd_per_device_hour.items())
        return f"{listed} USD per device-hour (source: {self.source or NO_SOURCE})"

    def spec(self) -> str:
        """The normalized option value, as recorded on the compare run."""
        return ",".join(f"{name}={price:g}" for name, price in self.usd_per_device_hour.items())


def parse_prices(text: str | None, source: str | None = "") -> PriceList:
    """`gaudi2=1.2,h100=2.5` -> PriceList; ConfigError naming the bad item otherwise."""
    prices = {}
    for item in (part.strip() for part in (text or "").split(",")):
        if not item:
            continue
        name, equals, value = (piece.strip() for piece in item.partition("="))
        name = name.lower()
        if not equals or name not in ACCELERATOR_KINDS or name in prices:
            raise ConfigError("prices", item, PRICES_ALLOWED)
        try:
            price = float(value)
        except ValueError:
            raise ConfigError("prices", item, PRICES_ALLOWED) from None
        if not math.isfinite(price) or price <= 0:
            raise ConfigError("prices", item, PRICES_ALLOWED)
        prices[name] = price
    source = (source or "").strip()
    if source and not prices:
        raise ConfigError("price_source", source, "allowed only together with --prices")
    return PriceList(prices, source)


def device_count(group: GroupStats) -> int | None:
    """Devices the cell's throughput was measured on; None where the runs did not say."""
    try:
        count = int(str(group.config.get("devices", "")))
    except ValueError:
        return None
    return count if count > 0 else None


def usd_per_million_samples(group: GroupStats | None, prices: PriceList) -> float | None:
    """Price x devices / samples per hour x 1e6 at the cell's median; None without a price or count."""
    if group is None or group.accelerator not in prices.usd_per_device_hour or not group.median:
        return None
    devices = device_count(group)
    if devices is None:
        return None
    hourly = prices.usd_per_device_hour[group.accelerator] * devices
    return float(hourly / (group.median * SECONDS_PER_HOUR) * SAMPLES_PER_UNIT)
