"""Tests for vtb_agents.analysis.image_ops on code in the styles models write."""

from __future__ import annotations

import textwrap

import pytest

from vtb_agents.analysis.image_ops import (
    IMAGE_OPS,
    ImageOpsResult,
    classify_image_ops_detail,
    count_image_ops,
)

CASES: dict[str, tuple[str, list[str]]] = {
    "pil_crop": ("""
        from PIL import Image
        img = Image.open('image_0.png')
        w, h = img.size
        crop = img.crop((int(w * 0.5), 0, w, int(h * 0.3)))
        crop.save('crop.png')
        print(crop.size)
    """, ["cropping"]),
    "chained_crop_resize": ("""
        from PIL import Image
        Image.open('image_0.png').crop((0, 0, 10, 10)).resize((100, 100)).save('zoom.png')
    """, ["cropping", "resizing"]),
    "crop_loop": ("""
        from PIL import Image
        img = Image.open('/mnt/data/image_0.png')
        regions = {'top': (0, 0, 800, 200), 'mid': (0, 200, 800, 400), 'low': (0, 400, 800, 600)}
        for name, box in regions.items():
            region = img.crop(box)
            region = region.resize((region.width * 3, region.height * 3), Image.LANCZOS)
            region.save(f'{name}.png')
    """, ["cropping", "resizing"]),
    "only_size_with_crop_comment": ("""
        # First, crop the image to the region of interest -- but check the size before cropping
        from PIL import Image
        img = Image.open('image_0.png')
        print("I will crop and rotate next", img.size, img.mode)
        note = '''img.crop((0, 0, 5, 5)) and img.rotate(90)'''
    """, ["other"]),
    "syntax_error": ("""
        from PIL import Image
        img = Image.open('image_0.png'
        img.crop((0, 0, 10, 10))
    """, ["other"]),
    "thumbnail_and_reduce": ("""
        from PIL import Image
        im = Image.open('image_1.jpg')
        small = im.reduce(2)
        im.thumbnail((512, 512))
    """, ["resizing"]),
    "rotate_and_transpose_enum": ("""
        from PIL import Image
        img = Image.open('image_0.png').convert('RGB')
        upright = img.transpose(Image.Transpose.ROTATE_90)
        tilted = upright.rotate(-12, expand=True, fillcolor='white')
    """, ["rotation"]),
    "transpose_flips": ("""
        from PIL import Image
        img = Image.open('image_0.png')
        a = img.transpose(Image.FLIP_LEFT_RIGHT)
        b = img.transpose(method=Image.Transpose.FLIP_TOP_BOTTOM)
        c = img.transpose(Image.TRANSPOSE)
    """, ["flipping"]),
    "alias_pil_image": ("""
        from PIL import Image as I
        im = I.open('image_0.png')
        im2 = im.transpose(I.ROTATE_270).resize((400, 300))
    """, ["resizing", "rotation"]),
    "imageops_mix": ("""
        from PIL import Image, ImageOps
        img = Image.open('image_0.png')
        img = ImageOps.exif_transpose(img)
        m = ImageOps.mirror(img)
        ac = ImageOps.autocontrast(m, cutoff=2)
        eq = ImageOps.equalize(ImageOps.flip(ac))
    """, ["flipping", "contrast"]),
    "imageops_fit_pad": ("""
        from PIL import Image, ImageOps
        img = Image.open('image_0.png')
        square = ImageOps.fit(img, (256, 256))
        padded = ImageOps.pad(img, (512, 512), color='black')
    """, ["cropping", "resizing"]),
    "imageenhance_brightness_contrast": ("""
        from PIL import Image, ImageEnhance
        img = Image.open('image_0.png')
        img = ImageEnhance.Brightness(img).enhance(1.4)
        enhancer = ImageEnhance.Contrast(img)
        img = enhancer.enhance(2.0)
        img.save('enhanced.png')
    """, ["brightness", "contrast"]),
    "imageenhance_from_import_alias": ("""
        from PIL import Image
        from PIL.ImageEnhance import Contrast, Sharpness as Sharp
        im = Image.open('image_0.png')
        im = Contrast(im).enhance(1.8)
        im = Sharp(im).enhance(2.5)
    """, ["contrast", "other"]),
    "imageenhance_color_only": ("""
        from PIL import Image, ImageEnhance
        img = Image.open('image_0.png')
        ImageEnhance.Color(img).enhance(0.0).save('gray.png')
    """, ["other"]),
    "imagedraw_annotations": ("""
        from PIL import Image, ImageDraw
        img = Image.open('image_0.png').convert('RGB')
        draw = ImageDraw.Draw(img)
        draw.rectangle([100, 50, 300, 200], outline='red', width=3)
        draw.text((105, 55), 'target', fill='red')
        draw.line([(0, 0), (50, 50)], fill='blue', width=2)
        img.save('annotated.png')
    """, ["editing"]),
    "imagedraw_chained_ellipse": ("""
        from PIL import Image, ImageDraw
        img = Image.open('image_0.png')
        crop = img.crop((10, 10, 200, 200))
        ImageDraw.Draw(crop).ellipse((20, 20, 60, 60), outline=(255, 0, 0))
    """, ["cropping", "editing"]),
    "point_lambda_contrast": ("""
        from PIL import Image
        img = Image.open('image_0.png').convert('L')
        stretched = img.point(lambda p: (p - 100) * 2.5)
    """, ["contrast", "other"]),
    "point_lambda_threshold": ("""
        from PIL import Image
        gray = Image.open('image_0.png').convert('L')
        bw = gray.point(lambda x: 255 if x > 128 else 0, mode='1')
    """, ["other"]),
    "point_lambda_brighten": ("""
        from PIL import Image
        img = Image.open('image_0.png')
        brighter = img.point(lambda v: v + 40)
    """, ["brightness"]),
    "imagefilter_sharpen_and_crop": ("""
        from PIL import Image, ImageFilter
        img = Image.open('image_0.png')
        detail = img.crop((400, 300, 700, 500)).filter(ImageFilter.SHARPEN)
        blurred = img.filter(ImageFilter.GaussianBlur(radius=2))
    """, ["cropping", "other"]),
    "cv2_resize_rotate_flip": ("""
        import cv2
        img = cv2.imread('image_0.png')
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        big = cv2.resize(img, None, fx=2, fy=2, interpolation=cv2.INTER_CUBIC)
        rot = cv2.rotate(big, cv2.ROTATE_90_CLOCKWISE)
        mirrored = cv2.flip(rot, 1)
    """, ["resizing", "rotation", "flipping"]),
    "cv2_alias_warp_affine_rotation": ("""
        import cv2 as cv
        import numpy as np
        img = cv.imread('image_0.png')
        h, w = img.shape[:2]
        M = cv.getRotationMatrix2D((w / 2, h / 2), 15, 1.0)
        rotated = cv.warpAffine(img, M, (w, h), borderValue=(255, 255, 255))
    """, ["rotation"]),
    "cv2_warp_affine_translation": ("""
        import cv2
        import numpy as np
        img = cv2.imread('image_0.png')
        M = np.float32([[1, 0, 25], [0, 1, 50]])
        shifted = cv2.warpAffine(img, M, (img.shape[1], img.shape[0]))
    """, ["other"]),
    "cv2_convert_scale_abs_keywords": ("""
        import cv2
        img = cv2.imread('image_0.png')
        adjusted = cv2.convertScaleAbs(img, alpha=1.5, beta=30)
        only_contrast = cv2.convertScaleAbs(img, alpha=1.8, beta=0)
    """, ["brightness", "contrast"]),
    "cv2_convert_scale_abs_positional_beta": ("""
        import cv2
        img = cv2.imread('image_0.png')
        brighter = cv2.convertScaleAbs(img, None, 1, 60)
    """, ["brightness"]),
    "cv2_clahe_equalize_normalize": ("""
        import cv2
        gray = cv2.cvtColor(cv2.imread('image_0.png'), cv2.COLOR_BGR2GRAY)
        clahe = cv2.createCLAHE(clipLimit=2.0, tileGridSize=(8, 8))
        enhanced = clahe.apply(gray)
        eq = cv2.equalizeHist(gray)
        norm = cv2.normalize(gray, None, 0, 255, cv2.NORM_MINMAX)
    """, ["contrast", "other"]),
    "cv2_drawing_and_inpaint": ("""
        import cv2
        img = cv2.imread('image_0.png')
        cv2.rectangle(img, (10, 10), (120, 80), (0, 255, 0), 2)
        cv2.putText(img, 'A', (12, 30), cv2.FONT_HERSHEY_SIMPLEX, 0.8, (0, 0, 255), 2)
        cv2.circle(img, (60, 60), 5, (255, 0, 0), -1)
        mask = cv2.imread('mask.png', 0)
        restored = cv2.inpaint(img, mask, 3, cv2.INPAINT_TELEA)
        cv2.imwrite('out.png', restored)
    """, ["editing"]),
    "cv2_threshold_edges": ("""
        import cv2
        img = cv2.imread('image_0.png')
        gray = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
        blur = cv2.GaussianBlur(gray, (5, 5), 0)
        _, th = cv2.threshold(blur, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
        edges = cv2.Canny(th, 50, 150)
        contours, _ = cv2.findContours(edges, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        print(len(contours))
    """, ["other"]),
    "cv2_contours_drawn_and_cropped": ("""
        import cv2
        img = cv2.imread('image_0.png')
        gray = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
        contours, _ = cv2.findContours(gray, cv2.RETR_TREE, cv2.CHAIN_APPROX_SIMPLE)
        cv2.drawContours(img, contours, -1, (0, 255, 0), 2)
        x, y, w, h = cv2.boundingRect(contours[0])
        roi = img[y:y + h, x:x + w]
    """, ["cropping", "editing", "other"]),
    "numpy_slice_crop": ("""
        import numpy as np
        from PIL import Image
        arr = np.array(Image.open('image_0.png'))
        region = arr[100:200, 50:300]
        Image.fromarray(region).save('region.png')
    """, ["cropping"]),
    "numpy_slice_crop_three_dims": ("""
        import numpy as np
        from PIL import Image
        img_np = np.asarray(Image.open('image_0.png'))
        y0, y1, x0, x1 = 40, 120, 10, 90
        patch = img_np[y0:y1, x0:x1, :]
        print(patch.mean(axis=(0, 1)))
    """, ["cropping"]),
    "numpy_channel_ops_are_not_crops": ("""
        import numpy as np
        import cv2
        img = cv2.imread('image_0.png')
        rgb = img[:, :, ::-1]
        red = img[:, :, 2]
        also_rgb = img[..., ::-1]
        print(red.shape, rgb.shape, also_rgb.shape)
    """, ["other"]),
    "numpy_rot90_flips": ("""
        import numpy as np
        from PIL import Image
        a = np.array(Image.open('image_0.png'))
        r = np.rot90(a, k=3)
        f = np.fliplr(r)
        g = a[:, ::-1]
        h = np.flip(a, axis=0)
    """, ["rotation", "flipping"]),
    "numpy_downsample_by_step": ("""
        import numpy as np
        from PIL import Image
        a = np.array(Image.open('image_0.png'))
        small = a[::4, ::4]
    """, ["resizing"]),
    "numpy_clip_contrast": ("""
        import numpy as np
        from PIL import Image
        arr = np.array(Image.open('image_0.png')).astype(np.float32)
        out = np.clip((arr - 128) * 1.6 + 128, 0, 255).astype(np.uint8)
        Image.fromarray(out).save('contrast.png')
    """, ["contrast"]),
    "numpy_clip_brightness_via_name": ("""
        import numpy as np
        from PIL import Image
        arr = np.array(Image.open('image_0.png'), dtype=np.int16)
        arr = arr + 50
        out = np.clip(arr, 0, 255).astype(np.uint8)
    """, ["brightness"]),
    "numpy_clip_method_and_float_scale": ("""
        import numpy as np
        from PIL import Image
        f = np.asarray(Image.open('image_0.png')) / 255.0
        brighter = (f + 0.2).clip(0, 1)
    """, ["brightness"]),
    "numpy_clip_coordinates_not_tone": ("""
        import numpy as np
        from PIL import Image
        img = Image.open('image_0.png')
        w, h = img.size
        x0 = int(np.clip(620 - 40, 0, w))
        x1 = int(np.clip(620 + 40, 0, w))
        img.crop((x0, 0, x1, h)).save('col.png')
    """, ["cropping"]),
    "numpy_region_fill_is_editing": ("""
        import numpy as np
        from PIL import Image
        arr = np.array(Image.open('image_0.png'))
        arr[50:60, 100:300] = (255, 0, 0)
        arr[200:220, 10:40] = 0
        Image.fromarray(arr).save('marked.png')
    """, ["editing"]),
    "matplotlib_patch_annotation": ("""
        import matplotlib.pyplot as plt
        import matplotlib.patches as mpatches
        from PIL import Image
        img = Image.open('image_0.png')
        fig, ax = plt.subplots(figsize=(10, 8))
        ax.imshow(img)
        ax.add_patch(mpatches.Rectangle((40, 60), 120, 80, fill=False, edgecolor='red'))
        ax.text(40, 55, 'sign', color='red')
        plt.axis('off')
        plt.savefig('annotated.png')
    """, ["editing"]),
    "pandas_iloc_and_list_slicing_not_crops": ("""
        import pandas as pd
        from functools import reduce
        df = pd.DataFrame({'a': [1, 2, 3], 'b': [4, 5, 6]})
        sub = df.iloc[0:2, 0:1]
        items = sorted([3, 1, 2])[::-1][:2]
        total = reduce(lambda a, b: a + b, items)
        print(sub, total)
    """, ["other"]),
    "everything_mixed": ("""
        from PIL import Image, ImageEnhance, ImageDraw, ImageOps
        import numpy as np

        def load(path):
            return Image.open(path).convert('RGB')

        img = load('image_0.png')
        img = img.rotate(3, expand=True)
        img = ImageOps.mirror(img)
        box = (120, 80, 520, 380)
        roi = img.crop(box).resize((800, 600), Image.Resampling.LANCZOS)
        roi = ImageEnhance.Contrast(roi).enhance(1.7)
        roi = ImageEnhance.Brightness(roi).enhance(1.2)
        ImageDraw.Draw(roi).rectangle((10, 10, 90, 90), outline='yellow')
        gray = np.array(roi.convert('L'))
        print(gray.mean())
    """, ["cropping", "resizing", "rotation", "flipping", "brightness", "contrast", "editing", "other"]),
    "empty_code": ("", ["other"]),
}


@pytest.mark.parametrize(("code", "expected"), CASES.values(), ids=CASES.keys())
def test_classify_corpus(code: str, expected: list[str]) -> None:
    assert classify_image_ops_detail(textwrap.dedent(code)).ops == expected


def test_corpus_is_large_enough_and_ordered() -> None:
    assert len(CASES) >= 30
    for _, expected in CASES.values():
        assert expected == [op for op in IMAGE_OPS if op in expected]


def test_detail_flags_parse_error_only_for_unparsable_code() -> None:
    bad = classify_image_ops_detail("img.crop((0, 0, 1, 1)\n")
    assert bad == ImageOpsResult(["other"], parse_error=True, counts={"other": 1})
    good = classify_image_ops_detail("img.crop((0, 0, 1, 1))\n")
    assert good == ImageOpsResult(["cropping"], parse_error=False, counts={"cropping": 1})
    assert classify_image_ops_detail("print('hi')").parse_error is False


def test_draw_point_is_editing_but_image_point_is_tone() -> None:
    code = textwrap.dedent("""
        from PIL import Image, ImageDraw
        img = Image.open('image_0.png')
        d = ImageDraw.Draw(img)
        d.point([(5, 5), (6, 6)])
    """)
    assert classify_image_ops_detail(code).ops == ["editing"]
    assert classify_image_ops_detail("img.point(table)").ops == ["contrast"]


@pytest.mark.parametrize(("code", "expected"), [
    ("import cv2\ncv2.convertScaleAbs(img)", ["other"]),  # defaults: no tone change
    ("import cv2\ncv2.convertScaleAbs(img, alpha=1.0, beta=0)", ["other"]),
    ("import cv2\ncv2.convertScaleAbs(img, None, a)", ["contrast"]),  # unknown alpha counts
    ("import cv2\ncv2.convertScaleAbs(img, beta=-40)", ["brightness"]),
])
def test_convert_scale_abs_arguments(code: str, expected: list[str]) -> None:
    assert classify_image_ops_detail(code).ops == expected


def test_unimported_common_aliases_resolve() -> None:
    assert classify_image_ops_detail("b = np.rot90(a)\nc = ImageOps.flip(b)").ops == ["rotation", "flipping"]


def test_cvtcolor_to_gray_is_other_but_bgr_rgb_is_not() -> None:
    code = "import cv2\nx = cv2.cvtColor(i, cv2.COLOR_BGR2RGB)\ny = x[0:9, 0:9]"
    assert classify_image_ops_detail(code).ops == ["cropping"]
    assert classify_image_ops_detail(code.replace("BGR2RGB", "BGR2HSV")).ops == ["cropping", "other"]


def test_count_image_ops_counts_each_operation() -> None:
    """The paper counts operations: two crops in one call count two (docs/concepts/metrics.md)."""
    codes = [
        "img.crop((0, 0, 1, 1))\nimg.crop((1, 1, 2, 2))",
        "img.crop((0, 0, 1, 1)).resize((5, 5))",
        "import cv2\ncv2.flip(img, 0)",
        "print(img.size)",
        "this is ( not python",
    ]
    assert count_image_ops(codes) == {
        "cropping": 3, "resizing": 1, "rotation": 0, "flipping": 1,
        "brightness": 0, "contrast": 0, "editing": 0, "other": 2,
    }


def test_count_image_ops_empty_has_every_key() -> None:
    counts = count_image_ops([])
    assert list(counts) == list(IMAGE_OPS)
    assert set(counts.values()) == {0}


def test_count_image_ops_accepts_generators() -> None:
    counts = count_image_ops(c for c in ["np.fliplr(a)", "np.fliplr(a)"])
    assert counts["flipping"] == 2
