"""The vendor-free parts of on-device decode: batch plans, raw image sources, image ops on any torch device."""
