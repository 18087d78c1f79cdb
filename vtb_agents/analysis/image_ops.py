"""Image operations in the code of ``python_image_processing`` tool calls (arXiv 2510.12712).

The code is parsed with :mod:`ast` (comments and strings never count); each call is looked
up in tables keyed by qualified name (import aliases resolved) or, on objects such as
``img``, by method name; subscripts and region assignments are checked too. Decisions:

* ``["other"]`` when nothing is recognised (loading, printing ``img.size``, non-image code)
  or the code does not parse (``parse_error=True``). "other" is also found positively:
  filters/blur/sharpen, thresholding, edges, morphology, contours, colour changes
  (``ImageEnhance.Color``, grayscale, invert), histograms, blending, non-rotation warps.
* Format normalisation is no operation: ``.convert()`` to RGB/RGBA, ``cv2.cvtColor``
  between RGB/BGR(A) orders, ``arr[..., ::-1]``/``arr[:, :, ::-1]``, ``exif_transpose``.
* Subscripts with 2+ slices: a bounded slice in the first two positions is cropping, a
  negative step there flipping, another step (``[::2, ::2]``) resizing; a literal
  assigned into such a region is editing, an array assigned (compositing) or ``paste``
  nothing. One-dimensional slices never count.
* Tone arithmetic (``np.clip``/``.clip`` with upper bound 255 or 1, so clipping coordinates
  does not count; ``Image.point``/``eval``; ``region += k``): ``*``, ``/``, ``//``, ``**``
  mean contrast, only ``+``/``-`` brightness; ``x * 255`` and ``x / 255`` are scale
  changes; names are followed into their assignments. A lambda with a comparison or
  ``if`` is thresholding ("other"), another lookup table (also ``cv2.LUT``) contrast;
  ``point`` on an ImageDraw is editing.
* ``cv2.convertScaleAbs``: ``alpha`` (kw or 3rd positional) not literal 1 is contrast,
  ``beta`` (kw or 4th) not literal 0 brightness.
* ``transpose(ROTATE_*)`` is rotation; ``FLIP_*``, ``TRANSPOSE``, ``TRANSVERSE`` and
  ``cv2.transpose`` (reflections) flipping; NumPy axis transposes nothing.
  ``cv2.warpAffine`` is rotation with ``cv2.getRotationMatrix2D``, else other.
* ``ImageOps.fit`` crops and resizes. Drawing on the image or on a matplotlib figure of
  it (patches, ``add_patch``, ``text``, ``annotate``) and ``cv2.inpaint`` are editing.
* Every call counts, even in a function that is never invoked.
* Operations are counted per operation in the code (the paper counts operations, and one call
  can hold several): two crops in one call count two croppings. Code with no recognised
  operation counts one "other".
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

IMAGE_OPS = ("cropping", "resizing", "rotation", "flipping", "brightness", "contrast", "editing", "other")

Ops = tuple[str, ...]
Handler = Callable[[ast.Call, "_Context", "ast.expr | None"], Ops]
Entry = Ops | Handler

_CROP, _RESIZE, _ROTATE, _FLIP = ("cropping",), ("resizing",), ("rotation",), ("flipping",)
_BRIGHT, _CONTRAST, _EDIT, _OTHER = ("brightness",), ("contrast",), ("editing",), ("other",)

# Names that are modules in model code even when the snippet does not import them.
_DEFAULT_ALIASES = {
    "np": "numpy", "cv2": "cv2", "Image": "PIL.Image", "ImageOps": "PIL.ImageOps",
    "ImageEnhance": "PIL.ImageEnhance", "ImageDraw": "PIL.ImageDraw",
    "ImageFilter": "PIL.ImageFilter", "ImageChops": "PIL.ImageChops", "ImageStat": "PIL.ImageStat",
    "plt": "matplotlib.pyplot", "patches": "matplotlib.patches", "ndimage": "scipy.ndimage",
}
_ORDERS = ("RGB", "BGR", "RGBA", "BGRA")
_NEUTRAL_COLOR_CODES = {f"COLOR_{a}2{b}" for a in _ORDERS for b in _ORDERS if a != b}


@dataclass(frozen=True)
class ImageOpsResult:
    """Categories found in one call's code; ``counts`` how many operations of each category it
    holds; ``parse_error`` marks code that did not parse."""

    ops: list[str] = field(default_factory=list)
    parse_error: bool = False
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class _Context:
    """What the handlers need to know about the whole snippet."""

    aliases: dict[str, str]
    assigned: dict[str, list[ast.expr]]
    called: set[str] = field(default_factory=set)

    @classmethod
    def build(cls, tree: ast.AST) -> _Context:
        ctx = cls(dict(_DEFAULT_ALIASES), {})
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    top = a.name.split(".")[0]
                    ctx.aliases[a.asname or top] = a.name if a.asname else top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    ctx.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(t, ast.Name):
                        ctx.assigned.setdefault(t.id, []).append(node.value)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                binop = ast.BinOp(ast.Name(node.target.id, ast.Load()), node.op, node.value)
                ctx.assigned.setdefault(node.target.id, []).append(binop)
        ctx.called = {q for n in ast.walk(tree) if isinstance(n, ast.Call)
                      if (q := ctx.qualname(n.func)) is not None}
        return ctx

    def qualname(self, node: ast.expr) -> str | None:
        """``cv.resize`` -> ``cv2.resize``; ``None`` when the chain does not start at a name."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        return ".".join([self.aliases.get(node.id, node.id), *reversed(parts)])

    def on_module(self, node: ast.Attribute) -> bool:
        """True when ``node`` is ``module.attr`` (a function, not a method of an object)."""
        root: ast.expr = node
        while isinstance(root, ast.Attribute):
            root = root.value
        return isinstance(root, ast.Name) and root.id in self.aliases


_MISSING = object()


def _literal(node: ast.expr | None) -> object:
    """The literal value of ``node``, or ``_MISSING``."""
    if node is None:
        return _MISSING
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _MISSING


def _arg(call: ast.Call, pos: int, *names: str) -> ast.expr | None:
    """Argument at position ``pos`` or given by one of the keyword ``names``."""
    if len(call.args) > pos and not any(isinstance(a, ast.Starred) for a in call.args[: pos + 1]):
        return call.args[pos]
    return next((k.value for k in call.keywords if k.arg in names), None)


def _last_name(node: ast.expr | None) -> str | None:
    """``Image.Transpose.ROTATE_90`` -> ``ROTATE_90``."""
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None


def _tone(expr: ast.expr, ctx: _Context, depth: int = 3) -> Ops:
    """Contrast for scaling arithmetic, brightness for shifts only (see module docstring)."""
    found: set[type] = set()

    def visit(n: ast.expr, d: int) -> None:
        if isinstance(n, ast.BinOp):
            if not (isinstance(n.op, (ast.Mult, ast.Div)) and _literal(n.right) in (255, 255.0)):
                found.add(type(n.op))
            visit(n.left, d)
            visit(n.right, d)
        elif isinstance(n, ast.UnaryOp):
            visit(n.operand, d)
        elif isinstance(n, ast.Attribute):
            visit(n.value, d)
        elif isinstance(n, ast.Call):  # receivers like (arr * 1.2).astype(...), not arguments
            visit(n.func, d)
        elif isinstance(n, ast.Name) and d > 0:
            for value in ctx.assigned.get(n.id, ()):
                visit(value, d - 1)

    visit(expr, depth)
    if found & {ast.Mult, ast.Div, ast.FloorDiv, ast.Pow}:
        return _CONTRAST
    return _BRIGHT if found & {ast.Add, ast.Sub} else ()


def _lut(fn: ast.expr | None, ctx: _Context) -> Ops:
    """Ops of a per-pixel function given to ``Image.point``/``Image.eval``."""
    if isinstance(fn, ast.Lambda):
        if any(isinstance(n, (ast.Compare, ast.IfExp)) for n in ast.walk(fn.body)):
            return _OTHER
        return _tone(fn.body, ctx, depth=1)
    return _CONTRAST if fn is not None else ()


def _is_draw(node: ast.expr | None, ctx: _Context, depth: int = 2) -> bool:
    """Whether ``node`` is (a name bound to) ``ImageDraw.Draw(...)``."""
    if isinstance(node, ast.Call):
        return ctx.qualname(node.func) == "PIL.ImageDraw.Draw"
    if isinstance(node, ast.Name) and depth > 0:
        return any(_is_draw(v, ctx, depth - 1) for v in ctx.assigned.get(node.id, ()))
    return False


def _point(call: ast.Call, ctx: _Context, recv: ast.expr | None) -> Ops:
    """``img.point(fn)``, ``Image.eval(img, fn)``, or ``draw.point(xy)`` on an ImageDraw."""
    if _is_draw(recv, ctx) or any(k.arg == "fill" for k in call.keywords):
        return _EDIT
    return _lut(_arg(call, 0, "lut") if recv is not None else _arg(call, 1, "function"), ctx)


def _clip(call: ast.Call, ctx: _Context, recv: ast.expr | None) -> Ops:
    """``np.clip(a, 0, 255)`` or ``a.clip(0, 255)``: tone arithmetic on ``a``."""
    shift = 0 if recv is not None else 1
    target = recv if recv is not None else _arg(call, 0, "a")
    upper = _literal(_arg(call, 1 + shift, "a_max", "max"))
    return _tone(target, ctx) if target is not None and upper in (255, 1) else ()


def _scale_abs(call: ast.Call, ctx: _Context, recv: ast.expr | None) -> Ops:
    alpha, beta = _arg(call, 2, "alpha"), _arg(call, 3, "beta")
    return ((_CONTRAST if alpha is not None and _literal(alpha) != 1 else ())
            + (_BRIGHT if beta is not None and _literal(beta) != 0 else ()))


def _transpose(call: ast.Call, ctx: _Context, recv: ast.expr | None) -> Ops:
    name = _last_name(_arg(call, 0, "method")) if len(call.args) <= 1 else None
    if name in {"ROTATE_90", "ROTATE_180", "ROTATE_270"}:
        return _ROTATE
    return _FLIP if name in {"FLIP_LEFT_RIGHT", "FLIP_TOP_BOTTOM", "TRANSPOSE", "TRANSVERSE"} else ()


def _convert(call: ast.Call, ctx: _Context, recv: ast.expr | None) -> Ops:
    mode = _literal(_arg(call, 0, "mode"))
    return _OTHER if isinstance(mode, str) and mode not in {"RGB", "RGBA"} else ()


def _cvt_color(call: ast.Call, ctx: _Context, recv: ast.expr | None) -> Ops:
    return () if _last_name(_arg(call, 1, "code")) in _NEUTRAL_COLOR_CODES else _OTHER


def _warp_affine(call: ast.Call, ctx: _Context, recv: ast.expr | None) -> Ops:
    return () if "cv2.getRotationMatrix2D" in ctx.called else _OTHER


def _table(groups: dict[Ops, str]) -> dict[str, Entry]:
    """``{ops: "a.{b,c} d"}`` -> ``{"a.b": ops, "a.c": ops, "d": ops}``."""
    table: dict[str, Entry] = {}
    for ops, names in groups.items():
        for token in names.split():
            head, _, tail = token.partition("{")
            expanded = [head + t for t in tail.rstrip("}").split(",")] if tail else [head]
            table.update(dict.fromkeys(expanded, ops))
    return table


_FUNCTIONS: dict[str, Entry] = _table({
    _CROP: "PIL.ImageOps.crop cv2.getRectSubPix",
    _CROP + _RESIZE: "PIL.ImageOps.fit",
    _RESIZE: "cv2.{resize,pyrDown,pyrUp} numpy.resize PIL.ImageOps.{pad,contain,cover,scale} "
             "scipy.ndimage.zoom skimage.transform.{resize,rescale}",
    _ROTATE: "cv2.{rotate,getRotationMatrix2D} numpy.rot90 scipy.ndimage.rotate skimage.transform.rotate",
    _FLIP: "cv2.{flip,transpose} numpy.{flip,fliplr,flipud} PIL.ImageOps.{mirror,flip}",
    _BRIGHT: "PIL.ImageEnhance.Brightness skimage.exposure.adjust_gamma",
    _CONTRAST: "PIL.ImageEnhance.Contrast PIL.ImageOps.{autocontrast,equalize} "
               "cv2.{equalizeHist,createCLAHE,normalize,LUT} "
               "skimage.exposure.{equalize_hist,equalize_adapthist,rescale_intensity}",
    _EDIT: "cv2.{rectangle,circle,ellipse,line,arrowedLine,putText,polylines,fillPoly,fillConvexPoly,"
           "drawContours,drawMarker,inpaint} matplotlib.pyplot.{Rectangle,Circle,text,annotate,arrow} "
           "matplotlib.patches.{Rectangle,Circle,Ellipse,Polygon,FancyBboxPatch,FancyArrowPatch,Arrow}",
    _OTHER: "PIL.ImageEnhance.{Sharpness,Color} "
            "PIL.ImageOps.{grayscale,invert,posterize,solarize,colorize,expand,deform} "
            "cv2.{threshold,adaptiveThreshold,GaussianBlur,blur,medianBlur,bilateralFilter,filter2D,"
            "Canny,Sobel,Scharr,Laplacian,morphologyEx,dilate,erode,findContours,"
            "connectedComponentsWithStats,calcHist,inRange,HoughLines,HoughLinesP,HoughCircles,"
            "matchTemplate,addWeighted,warpPerspective,bitwise_not,detailEnhance,fastNlMeansDenoising,"
            "fastNlMeansDenoisingColored} numpy.histogram",
}) | {"cv2.convertScaleAbs": _scale_abs, "cv2.cvtColor": _cvt_color, "cv2.warpAffine": _warp_affine,
      "numpy.clip": _clip, "PIL.Image.eval": _point}
_OTHER_PREFIXES = ("PIL.ImageFilter.", "PIL.ImageChops.", "PIL.ImageStat.", "skimage.filters.",
                   "skimage.feature.", "skimage.morphology.", "skimage.color.")
# Methods of objects (PIL images, ImageDraw, matplotlib axes, arrays) whose type is unknown.
_METHODS: dict[str, Entry] = _table({
    _CROP: "crop", _RESIZE: "resize thumbnail reduce", _ROTATE: "rotate",
    _OTHER: "filter histogram quantize",
    _EDIT: "rectangle rounded_rectangle ellipse circle polygon regular_polygon line arc chord pieslice "
           "text multiline_text putpixel add_patch annotate arrow",
}) | {"transpose": _transpose, "point": _point, "clip": _clip, "convert": _convert}


def _call_ops(call: ast.Call, ctx: _Context) -> Ops:
    """Ops of one call: qualified function first, then the method name on an object."""
    name = ctx.qualname(call.func) or ""
    entry = _FUNCTIONS.get(name) or (_OTHER if name.startswith(_OTHER_PREFIXES) else None)
    recv = None
    if entry is None and isinstance(call.func, ast.Attribute) and not ctx.on_module(call.func):
        entry, recv = _METHODS.get(call.func.attr), call.func.value
    if entry is None:
        return ()
    return entry if isinstance(entry, tuple) else entry(call, ctx, recv)


def _region_ops(node: ast.Subscript) -> Ops:
    """Ops of ``arr[a:b, c:d]``-style indexing (see module docstring)."""
    idx = node.slice
    if not isinstance(idx, ast.Tuple) or sum(isinstance(e, ast.Slice) for e in idx.elts) < 2:
        return ()
    if isinstance(node.value, ast.Attribute) and node.value.attr in {"iloc", "loc", "iat", "at"}:
        return ()
    ops: set[str] = set()
    for s in idx.elts[:2]:
        if isinstance(s, ast.Constant) and s.value is Ellipsis:
            break
        if not isinstance(s, ast.Slice):
            continue
        if s.lower is not None or s.upper is not None:
            ops.add("cropping")
        step = _literal(s.step)
        if isinstance(step, (int, float)) and step < 0:
            ops.add("flipping")
        elif s.step is not None and step != 1:
            ops.add("resizing")
    return tuple(ops)


def _store_ops(target: ast.expr, value: ast.expr, op: ast.operator | None, ctx: _Context) -> Ops:
    """Ops of writing into a region: a literal fill is editing, ``+=``/``*=`` is tone."""
    if not isinstance(target, ast.Subscript) or "cropping" not in _region_ops(target):
        return ()
    if op is not None:
        return _tone(ast.BinOp(ast.Name("_", ast.Load()), op, value), ctx, depth=0)
    is_array = isinstance(value, ast.Call) and ctx.qualname(value.func) == "numpy.array"
    first = value.args[0] if is_array and isinstance(value, ast.Call) and value.args else value
    return _EDIT if _literal(first) is not _MISSING else ()


def classify_image_ops_detail(code: str) -> ImageOpsResult:
    """Sorted unique categories of one call's code, flagging code that does not parse.

    Code nested too deeply for :mod:`ast` (``RecursionError``) counts as unparsable too.
    """
    found: Counter[str] = Counter()
    try:
        tree = ast.parse(code)
        ctx = _Context.build(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                found.update(_call_ops(node, ctx))
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                found.update(_region_ops(node))
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    found.update(_store_ops(t, node.value, None, ctx))
            elif isinstance(node, ast.AugAssign):
                found.update(_store_ops(node.target, node.value, node.op, ctx))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ImageOpsResult(["other"], parse_error=True, counts={"other": 1})
    if not found:
        return ImageOpsResult(["other"], counts={"other": 1})
    return ImageOpsResult([op for op in IMAGE_OPS if op in found],
                          counts={op: found[op] for op in IMAGE_OPS if op in found})


def count_image_ops(codes: Iterable[str]) -> dict[str, int]:
    """Number of operations of each category over all calls' code (two crops in one call count
    two; code with none counts one "other"); every category is a key."""
    counts = dict.fromkeys(IMAGE_OPS, 0)
    for code in codes:
        for op, n in classify_image_ops_detail(code).counts.items():
            counts[op] += n
    return counts
