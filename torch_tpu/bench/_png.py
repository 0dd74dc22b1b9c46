"""A grouped bar chart written as PNG without matplotlib (zlib + struct only): one group per
shape, one colored bar per series, a light grid line every `grid` units. No text: the
caller prints the legend (series -> color) and the table next to it."""
import struct
import zlib

COLORS = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
          (140, 86, 75), (227, 119, 194), (127, 127, 127)]


def write_png(path, width, height, pixels):
    """pixels: list of rows, each a bytearray of width*3 RGB bytes."""
    raw = b"".join(b"\x00" + bytes(row) for row in pixels)

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 9)))
        f.write(chunk(b"IEND", b""))


def bar_chart(path, groups, grid=50.0, bar_w=10, gap=14, height=360, margin=20):
    """groups: list of lists of values (same series order in each group)."""
    nser = max(len(g) for g in groups)
    width = margin * 2 + len(groups) * (nser * bar_w + gap)
    top = max(max(g) for g in groups) or 1.0
    scale = (height - 2 * margin) / top
    px = [bytearray(b"\xff" * width * 3) for _ in range(height)]

    def put(x, y, c):
        if 0 <= x < width and 0 <= y < height:
            px[y][3 * x:3 * x + 3] = bytes(c)

    v = 0.0
    while v <= top:  # horizontal grid
        y = height - margin - int(v * scale)
        for x in range(margin, width - margin):
            put(x, y, (225, 225, 225))
        v += grid
    for gi, g in enumerate(groups):
        x0 = margin + gi * (nser * bar_w + gap)
        for si, val in enumerate(g):
            h = int(val * scale)
            for x in range(x0 + si * bar_w, x0 + (si + 1) * bar_w - 1):
                for y in range(height - margin - h, height - margin):
                    put(x, y, COLORS[si % len(COLORS)])
    for x in range(margin, width - margin):  # axis
        put(x, height - margin, (0, 0, 0))
    write_png(path, width, height, px)
