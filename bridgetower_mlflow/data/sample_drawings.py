"""Line-drawn objects for the generated sample set: each draws itself inside a box."""

from __future__ import annotations

import math

from PIL import ImageDraw


def _sun(draw: ImageDraw.ImageDraw, box, width):
    x0, y0, x1, y1 = box
    cx, cy, r = (x0 + x1) / 2, (y0 + y1) / 2, min(x1 - x0, y1 - y0) / 4
    draw.ellipse((cx - r, cy - r, cx + r, cy + r), outline="black", width=width)
    for k in range(12):
        a = k * math.pi / 6
        draw.line((cx + 1.3 * r * math.cos(a), cy + 1.3 * r * math.sin(a),
                   cx + 1.9 * r * math.cos(a), cy + 1.9 * r * math.sin(a)), fill="black", width=width)


def _house(draw, box, width):
    x0, y0, x1, y1 = box
    mid_y = y0 + (y1 - y0) * 0.45
    draw.rectangle((x0 + 10, mid_y, x1 - 10, y1 - 5), outline="black", width=width)
    draw.polygon(((x0, mid_y), ((x0 + x1) / 2, y0 + 5), (x1, mid_y)), outline="black", width=width)
    dx = (x1 - x0) / 6
    draw.rectangle(((x0 + x1) / 2 - dx / 2, y1 - (y1 - mid_y) * 0.6, (x0 + x1) / 2 + dx / 2, y1 - 5),
                   outline="black", width=width)


def _man(draw, box, width):
    x0, y0, x1, y1 = box
    cx, h = (x0 + x1) / 2, y1 - y0
    r = h * 0.1
    draw.ellipse((cx - r, y0 + 5, cx + r, y0 + 5 + 2 * r), outline="black", width=width)
    neck, hip = y0 + 5 + 2 * r, y0 + h * 0.62
    draw.line((cx, neck, cx, hip), fill="black", width=width)
    draw.line((cx - h * 0.2, neck + h * 0.12, cx + h * 0.2, neck + h * 0.12), fill="black", width=width)
    draw.line((cx, hip, cx - h * 0.15, y1 - 5), fill="black", width=width)
    draw.line((cx, hip, cx + h * 0.15, y1 - 5), fill="black", width=width)


def _tree(draw, box, width):
    x0, y0, x1, y1 = box
    cx, w = (x0 + x1) / 2, (x1 - x0)
    draw.rectangle((cx - w * 0.06, y0 + (y1 - y0) * 0.55, cx + w * 0.06, y1 - 5), outline="black", width=width)
    draw.ellipse((x0 + w * 0.15, y0 + 5, x1 - w * 0.15, y0 + (y1 - y0) * 0.6), outline="black", width=width)


def _car(draw, box, width):
    x0, y0, x1, y1 = box
    h = y1 - y0
    body = (x0 + 5, y0 + h * 0.45, x1 - 5, y0 + h * 0.75)
    draw.rectangle(body, outline="black", width=width)
    draw.polygon(((x0 + (x1 - x0) * 0.25, body[1]), (x0 + (x1 - x0) * 0.35, y0 + h * 0.25),
                  (x0 + (x1 - x0) * 0.65, y0 + h * 0.25), (x0 + (x1 - x0) * 0.75, body[1])),
                 outline="black", width=width)
    r = h * 0.1
    for fx in (0.25, 0.75):
        cx = x0 + (x1 - x0) * fx
        draw.ellipse((cx - r, body[3] - r, cx + r, body[3] + r), outline="black", width=width)


def _fish(draw, box, width):
    x0, y0, x1, y1 = box
    cy, w = (y0 + y1) / 2, x1 - x0
    draw.ellipse((x0 + w * 0.1, cy - w * 0.15, x0 + w * 0.7, cy + w * 0.15), outline="black", width=width)
    draw.polygon(((x0 + w * 0.7, cy), (x1 - 5, cy - w * 0.15), (x1 - 5, cy + w * 0.15)),
                 outline="black", width=width)
    draw.ellipse((x0 + w * 0.2, cy - 6, x0 + w * 0.2 + 12, cy + 6), fill="black")


def _mountain(draw, box, width):
    x0, y0, x1, y1 = box
    w = x1 - x0
    draw.polygon(((x0, y1 - 5), (x0 + w * 0.35, y0 + 10), (x0 + w * 0.6, y1 - 5)), outline="black", width=width)
    draw.polygon(((x0 + w * 0.4, y1 - 5), (x0 + w * 0.7, y0 + (y1 - y0) * 0.3), (x1, y1 - 5)),
                 outline="black", width=width)


def _clock(draw, box, width):
    x0, y0, x1, y1 = box
    cx, cy, r = (x0 + x1) / 2, (y0 + y1) / 2, min(x1 - x0, y1 - y0) * 0.4
    draw.ellipse((cx - r, cy - r, cx + r, cy + r), outline="black", width=width)
    draw.line((cx, cy, cx, cy - r * 0.8), fill="black", width=width)
    draw.line((cx, cy, cx + r * 0.5, cy), fill="black", width=width)
    for k in range(12):
        a = k * math.pi / 6
        draw.line((cx + 0.85 * r * math.cos(a), cy + 0.85 * r * math.sin(a),
                   cx + r * math.cos(a), cy + r * math.sin(a)), fill="black", width=max(1, width // 2))


def _ladder(draw, box, width):
    x0, y0, x1, y1 = box
    w = x1 - x0
    draw.line((x0 + w * 0.3, y0 + 5, x0 + w * 0.3, y1 - 5), fill="black", width=width)
    draw.line((x0 + w * 0.7, y0 + 5, x0 + w * 0.7, y1 - 5), fill="black", width=width)
    for k in range(1, 8):
        y = y0 + (y1 - y0) * k / 8
        draw.line((x0 + w * 0.3, y, x0 + w * 0.7, y), fill="black", width=width)


def _boat(draw, box, width):
    x0, y0, x1, y1 = box
    h, w = y1 - y0, x1 - x0
    draw.polygon(((x0 + 5, y0 + h * 0.65), (x1 - 5, y0 + h * 0.65), (x1 - w * 0.2, y1 - 5),
                  (x0 + w * 0.2, y1 - 5)), outline="black", width=width)
    draw.line(((x0 + x1) / 2, y0 + 5, (x0 + x1) / 2, y0 + h * 0.65), fill="black", width=width)
    draw.polygon((((x0 + x1) / 2, y0 + 10), (x1 - w * 0.15, y0 + h * 0.55), ((x0 + x1) / 2, y0 + h * 0.55)),
                 outline="black", width=width)


def _lamp(draw, box, width):
    x0, y0, x1, y1 = box
    cx, w, h = (x0 + x1) / 2, x1 - x0, y1 - y0
    draw.polygon(((cx - w * 0.25, y0 + h * 0.35), (cx - w * 0.1, y0 + 5), (cx + w * 0.1, y0 + 5),
                  (cx + w * 0.25, y0 + h * 0.35)), outline="black", width=width)
    draw.line((cx, y0 + h * 0.35, cx, y1 - 15), fill="black", width=width)
    draw.line((cx - w * 0.2, y1 - 10, cx + w * 0.2, y1 - 10), fill="black", width=width)


def _snake(draw, box, width):
    x0, y0, x1, y1 = box
    cy, w = (y0 + y1) / 2, x1 - x0
    points = [(x0 + w * t / 40, cy + (y1 - y0) * 0.2 * math.sin(t / 40 * 4 * math.pi)) for t in range(41)]
    draw.line(points, fill="black", width=width * 2)


DRAWINGS = {
    "sun": _sun, "house": _house, "man": _man, "tree": _tree, "car": _car, "fish": _fish,
    "mountain": _mountain, "clock": _clock, "ladder": _ladder, "boat": _boat, "lamp": _lamp,
    "snake": _snake,
}
