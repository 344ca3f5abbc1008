"""Flame graphs (SVG) and self-time tables from collapsed stacks, as py-spy's ``--format raw``.

Role: ``bench.broker_cpu --py-spy`` records each sampled process in py-spy's raw format (one
line per distinct stack: ``frame;frame;...;leaf count``, root first) so that the same samples
give both the self-time shares of the Markdown and the committed SVG. py-spy writes either
format, not both, and a second sampler would cost the shared 2-core machine as much again; so
the SVG is drawn here, in the layout of Brendan Gregg's ``flamegraph.pl`` (root at the bottom,
x = share of samples, alphabetical siblings, one ``<title>`` tooltip per frame), with nothing but
the standard library.

Invariants:
- The input is bounded: at most ``LINES_MAX`` stack lines and ``DEPTH_MAX`` frames per stack
  are read (the rest is counted as dropped, never grown into memory).
- A frame narrower than ``MIN_WIDTH_PX`` is not drawn (its samples still count in its parents).
- Pure: text in, text out; callers do the file I/O.
"""

from __future__ import annotations

import collections
import dataclasses
import html
import zlib
from collections.abc import Iterable

LINES_MAX = 200_000
"""Most collapsed-stack lines read from one profile."""
DEPTH_MAX = 256
"""Most frames kept per stack (deeper frames are cut off at the leaf end)."""
WIDTH_PX = 1200
"""SVG width, pixels."""
FRAME_HEIGHT_PX = 16
"""Height of one frame row, pixels."""
MIN_WIDTH_PX = 0.3
"""Frames narrower than this are not drawn."""
FONT_SIZE_PX = 11
"""Label font size; a label is cut to what fits in its box (about 0.6 em per character)."""
IDLE_LEAVES = (
    "_PollLikeSelector.select selectors.py:",
    "EpollSelector.select ",
    "Condition.wait threading.py:",
)
"""Leaf frames (as ``short_frame`` writes them) of a thread that waits: the asyncio loop in its
selector, a store service thread on its condition. py-spy's idle detection lets some of these
through (a short wait, or one that is taking the GIL back); they are counted apart as waiting,
not drawn and not in the shares."""


@dataclasses.dataclass(slots=True)
class _Node:
    name: str
    count: int = 0
    children: dict[str, _Node] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class Profile:
    """Collapsed stacks read into counts.

    Attributes:
        stacks: (frames root first, samples) per distinct stack, busy samples only.
        busy: samples whose leaf is not an idle wait.
        idle: samples whose leaf is a wait (``IDLE_LEAVES``).
        dropped: stack lines beyond ``LINES_MAX`` (not counted anywhere).
    """

    stacks: tuple[tuple[tuple[str, ...], int], ...]
    busy: int
    idle: int
    dropped: int


def short_frame(frame: str) -> str:
    """``func (/path/to/module.py:12)`` -> ``func module.py:12`` (py-spy's frame text)."""
    name, sep, where = frame.partition(" (")
    if not sep:
        return frame
    return f"{name} {where.rsplit('/', 1)[-1].rstrip(')')}"


def parse(raw: str) -> Profile:
    """Read py-spy's ``--format raw`` text (``frame;frame;... count`` per line).

    Lines without a trailing integer count are skipped; frames are shortened with
    ``short_frame``. Samples whose leaf is an idle selector wait are counted apart.
    """
    stacks: list[tuple[tuple[str, ...], int]] = []
    busy = idle = dropped = 0
    for index, line in enumerate(raw.splitlines()):
        if index >= LINES_MAX:
            dropped += 1
            continue
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = tuple(short_frame(f) for f in stack.split(";")[:DEPTH_MAX])
        if frames[-1].startswith(IDLE_LEAVES):
            idle += count
            continue
        busy += count
        stacks.append((frames, count))
    return Profile(tuple(stacks), busy, idle, dropped)


def self_shares(profile: Profile, top: int) -> list[tuple[str, int, float]]:
    """The ``top`` frames with the most self samples (the leaf of a stack): (frame, samples,
    share of busy samples), largest first, ties by name."""
    own: collections.Counter[str] = collections.Counter()
    for frames, count in profile.stacks:
        own[frames[-1]] += count
    ranked = sorted(own.items(), key=lambda item: (-item[1], item[0]))[:top]
    return [(frame, n, n / max(profile.busy, 1)) for frame, n in ranked]


def inclusive_shares(profile: Profile, top: int) -> list[tuple[str, int, float]]:
    """The ``top`` frames by inclusive samples (on the stack at all, once per sample)."""
    seen: collections.Counter[str] = collections.Counter()
    for frames, count in profile.stacks:
        for frame in set(frames):
            seen[frame] += count
    ranked = sorted(seen.items(), key=lambda item: (-item[1], item[0]))[:top]
    return [(frame, n, n / max(profile.busy, 1)) for frame, n in ranked]


def _tree(stacks: Iterable[tuple[tuple[str, ...], int]]) -> _Node:
    root = _Node("all")
    for frames, count in stacks:
        root.count += count
        node = root
        for frame in frames:
            node = node.children.setdefault(frame, _Node(frame))
            node.count += count
    return root


def _colour(name: str) -> str:
    """A warm colour that depends on the frame's name only (stable across renders)."""
    h = zlib.crc32(name.encode())
    return f"rgb({205 + h % 50},{(h >> 8) % 180},{(h >> 16) % 55})"


def _rects(root: _Node, scale: float, height: int) -> list[str]:
    out: list[str] = []
    pending: list[tuple[_Node, float, int]] = [(root, 0.0, 0)]
    while pending:
        node, x, depth = pending.pop()
        width = node.count * scale
        if width < MIN_WIDTH_PX:
            continue
        y = height - (depth + 1) * FRAME_HEIGHT_PX
        share = 100.0 * node.count / max(root.count, 1)
        label = html.escape(node.name)
        tip = f"{label} ({node.count} samples, {share:.2f}%)"
        chars = int(width / (FONT_SIZE_PX * 0.6))
        text = label if len(node.name) <= chars else html.escape(node.name[: max(chars - 2, 0)])
        text = text + ".." if text != label and chars > 2 else text
        out.append(
            f'<g><title>{tip}</title><rect x="{x:.2f}" y="{y}" width="{width:.2f}" '
            f'height="{FRAME_HEIGHT_PX - 1}" fill="{_colour(node.name)}" rx="2"/>'
            + (
                f'<text x="{x + 3:.2f}" y="{y + FRAME_HEIGHT_PX - 4}">{text}</text>'
                if chars > 2
                else ""
            )
            + "</g>"
        )
        child_x = x
        for name in sorted(node.children):
            child = node.children[name]
            pending.append((child, child_x, depth + 1))
            child_x += child.count * scale
    return out


def svg(profile: Profile, title: str) -> str:
    """The flame graph of ``profile``'s busy samples as a standalone SVG document."""
    root = _tree(profile.stacks)
    depth = max((len(frames) for frames, _ in profile.stacks), default=0) + 1
    height = (depth + 3) * FRAME_HEIGHT_PX
    scale = WIDTH_PX / max(root.count, 1)
    subtitle = f"{profile.busy} busy samples ({profile.idle} waiting, not drawn)"
    head = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH_PX}" height="{height}" '
        f'font-family="monospace" font-size="{FONT_SIZE_PX}">',
        f'<rect width="{WIDTH_PX}" height="{height}" fill="#f8f8f0"/>',
        f'<text x="{WIDTH_PX / 2}" y="16" text-anchor="middle" font-size="14">'
        f"{html.escape(title)}</text>",
        f'<text x="{WIDTH_PX / 2}" y="30" text-anchor="middle">{subtitle}</text>',
    ]
    return "\n".join([*head, *_rects(root, scale, height), "</svg>", ""])
