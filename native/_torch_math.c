/* PyTorch's float32 CPU arithmetic for the two resampling operations lmms-video-utils runs
 * (torch.nn.functional.interpolate bilinear and grid_sample bilinear with border padding, both
 * align_corners=False), reproduced bit for bit so that its canvases, and the block scores
 * computed from them, can be matched exactly without torch. Built by setup.py as
 * native._torch_math; native/torch_math.py wraps it and has a numpy fallback that gives the
 * same results (tests compare the two, and the parity test compares both with torch itself).
 *
 * What PyTorch's AVX2 kernels compute (measured against torch 2.13 on x86-64, see
 * native/torch_math.py): every a*b+c in them is a fused multiply-add, so each step below is an
 * explicit fmaf() and every other operation is a plain float32 operation. Built with
 * -ffp-contract=off (setup.py) so that the compiler adds no fusions of its own.
 *
 *   bilinear     (h, w, C) float32 from (H, W, C) uint8 or float32 and per-axis indices/weights, or
 *                uint8 clamped to [0, 255] and truncated (torch's clamp(0, 255).to(uint8))
 *   grid_sample  (h, w, C) float32 from (H, W, C) float32 and per-pixel source coordinates
 *   warp         grid_sample of an image at pixel + motion field, the grid built as torch builds it
 *   motion_field (H, W, 2) float32 motion field painted from exported vectors, later ones on top
 *   luma         (H, W) float32 (0.299 R + 0.587 G) + 0.114 B of (H, W, 3) uint8, unfused
 *   block_sums   (H/b, W/b) float32: each b×b block's values added in row-major order, then
 *                divided and multiplied by b² (avg_pool2d × area)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

static int get(PyObject *obj, Py_buffer *view, int writable)
{
    return PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0));
}

static int is_f32(const Py_buffer *v) { return v->itemsize == 4 && v->format && v->format[0] == 'f'; }
static int is_i64(const Py_buffer *v) { return v->itemsize == 8 && v->format && (v->format[0] == 'l' || v->format[0] == 'q'); }
static int is_u8(const Py_buffer *v) { return v->itemsize == 1 && v->format && v->format[0] == 'B'; }

static inline float value_at(const void *src, int u8, Py_ssize_t i)
{
    return u8 ? (float)((const uint8_t *)src)[i] : ((const float *)src)[i];
}

static inline void store(void *dst, int u8, Py_ssize_t i, float v)
{
    if (u8) {
        float c = v < 0.0f ? 0.0f : (v > 255.0f ? 255.0f : v);
        ((uint8_t *)dst)[i] = (uint8_t)c; /* conversion truncates toward zero */
    } else {
        ((float *)dst)[i] = v;
    }
}

/* The loops, compiled twice: with FMA instructions (fmaf inlined) and without (a libm call);
 * the loader picks the first the CPU runs. Both give the same, exactly rounded, results. */
__attribute__((target_clones("fma", "default"))) static void
bilinear_loop(const void *src_buf, int u8, Py_ssize_t W, Py_ssize_t C, Py_ssize_t h, Py_ssize_t w,
              const int64_t *y0, const int64_t *y1, const float *ly0, const float *ly1, const int64_t *x0,
              const int64_t *x1, const float *lx0, const float *lx1, void *dst, int out_u8, int four)
{
    for (Py_ssize_t i = 0; i < h; i++) {
        const Py_ssize_t r0 = y0[i] * W * C, r1 = y1[i] * W * C;
        for (Py_ssize_t j = 0; j < w; j++) {
            const Py_ssize_t c0 = x0[j] * C, c1 = x1[j] * C;
            const Py_ssize_t px = (i * w + j) * C;
            if (four) {
                const float w00 = ly0[i] * lx0[j], w01 = ly0[i] * lx1[j];
                const float w10 = ly1[i] * lx0[j], w11 = ly1[i] * lx1[j];
                for (Py_ssize_t c = 0; c < C; c++) {
                    float v = value_at(src_buf, u8, r0 + c1 + c) * w01;
                    v = fmaf(value_at(src_buf, u8, r0 + c0 + c), w00, v);
                    v = fmaf(value_at(src_buf, u8, r1 + c0 + c), w10, v);
                    store(dst, out_u8, px + c, fmaf(value_at(src_buf, u8, r1 + c1 + c), w11, v));
                }
            } else {
                for (Py_ssize_t c = 0; c < C; c++) {
                    const float t0 = fmaf(value_at(src_buf, u8, r0 + c0 + c), lx0[j],
                                          value_at(src_buf, u8, r0 + c1 + c) * lx1[j]);
                    const float t1 = fmaf(value_at(src_buf, u8, r1 + c0 + c), lx0[j],
                                          value_at(src_buf, u8, r1 + c1 + c) * lx1[j]);
                    store(dst, out_u8, px + c, fmaf(t0, ly0[i], t1 * ly1[i]));
                }
            }
        }
    }
}

/* bilinear(src, y0, y1, ly0, ly1, x0, x1, lx0, lx1, out, four)
 *
 * four == 0 (torch's separable kernel): t_r = fma(s[r,x0], lx0, s[r,x1]*lx1) for r in (y0, y1),
 *   out = fma(t_y0, ly0, t_y1*ly1).
 * four == 1 (its kernel for 3-channel images on one thread): w_ab = ly_a*lx_b, then
 *   out = fma(s11, w11, fma(s10, w10, fma(s00, w00, s01*w01))).
 */
static PyObject *bilinear(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o[10];
    int four;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOp", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8],
                          &o[9], &four))
        return NULL;
    Py_buffer b[10];
    int got = 0;
    PyObject *result = NULL;
    for (; got < 10; got++) {
        if (get(o[got], &b[got], got == 9) < 0)
            goto done;
    }
    Py_buffer *src = &b[0], *out = &b[9];
    if (src->ndim != 3 || out->ndim != 3 || src->shape[2] != out->shape[2] || !(is_f32(out) || is_u8(out)) ||
        !(is_u8(src) || is_f32(src)) || !is_i64(&b[1]) || !is_i64(&b[2]) || !is_f32(&b[3]) || !is_f32(&b[4]) ||
        !is_i64(&b[5]) || !is_i64(&b[6]) || !is_f32(&b[7]) || !is_f32(&b[8]) ||
        b[1].shape[0] != out->shape[0] || b[2].shape[0] != out->shape[0] || b[3].shape[0] != out->shape[0] ||
        b[4].shape[0] != out->shape[0] || b[5].shape[0] != out->shape[1] || b[6].shape[0] != out->shape[1] ||
        b[7].shape[0] != out->shape[1] || b[8].shape[0] != out->shape[1]) {
        PyErr_SetString(PyExc_ValueError,
                        "Invalid arrays. Supported values are src (H, W, C) uint8/float32, int64 indices and "
                        "float32 weights per output row and column, out (h, w, C) float32 or uint8.");
        goto done;
    }
    const int u8 = is_u8(src);
    const Py_ssize_t H = src->shape[0], W = src->shape[1], C = src->shape[2];
    const Py_ssize_t h = out->shape[0], w = out->shape[1];
    const int64_t *y0 = b[1].buf, *y1 = b[2].buf, *x0 = b[5].buf, *x1 = b[6].buf;
    const float *ly0 = b[3].buf, *ly1 = b[4].buf, *lx0 = b[7].buf, *lx1 = b[8].buf;
    void *dst = out->buf;
    const int out_u8 = is_u8(out);
    for (Py_ssize_t k = 0; k < h; k++)
        if (y0[k] < 0 || y0[k] >= H || y1[k] < 0 || y1[k] >= H) {
            PyErr_SetString(PyExc_ValueError, "Invalid row index. Supported values are 0 to H - 1.");
            goto done;
        }
    for (Py_ssize_t k = 0; k < w; k++)
        if (x0[k] < 0 || x0[k] >= W || x1[k] < 0 || x1[k] >= W) {
            PyErr_SetString(PyExc_ValueError, "Invalid column index. Supported values are 0 to W - 1.");
            goto done;
        }
    Py_BEGIN_ALLOW_THREADS
    bilinear_loop(src->buf, u8, W, C, h, w, y0, y1, ly0, ly1, x0, x1, lx0, lx1, dst, out_u8, four);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    for (int k = 0; k < got; k++)
        PyBuffer_Release(&b[k]);
    return result;
}

__attribute__((target_clones("fma", "default"))) static void
grid_sample_loop(const float *s, Py_ssize_t W, Py_ssize_t H, Py_ssize_t C, Py_ssize_t n, const float *xs,
                 const float *ys, float *dst)
{
    for (Py_ssize_t k = 0; k < n; k++) {
        const float x = xs[k], y = ys[k];
        const float xw = floorf(x), yn = floorf(y);
        const float we = x - xw, e = 1.0f - we, nn = y - yn, so = 1.0f - nn;
        const float nw = so * e, ne = so * we, sw = nn * e, se = nn * we;
        const Py_ssize_t ix = (Py_ssize_t)xw, iy = (Py_ssize_t)yn;
        const int right = ix + 1 < W, down = iy + 1 < H;
        const float *p00 = s + (iy * W + ix) * C;
        float *px = dst + k * C;
        for (Py_ssize_t c = 0; c < C; c++) {
            const float v00 = p00[c];
            const float v01 = right ? p00[C + c] : 0.0f;
            const float v10 = down ? p00[W * C + c] : 0.0f;
            const float v11 = (right && down) ? p00[W * C + C + c] : 0.0f;
            float v = v00 * nw;
            v = fmaf(v01, ne, v);
            v = fmaf(v10, sw, v);
            px[c] = fmaf(v11, se, v);
        }
    }
}

/* grid_sample(src, x, y, out): src (H, W, C) float32, x and y (h, w) float32 source pixel
 * coordinates already unnormalised and clipped to [0, W-1] / [0, H-1] (border padding), out
 * (h, w, C). Weights and sum as torch's vectorised bilinear kernel: nw = s*e, ne = s*w,
 * sw = n*e, se = n*w; out = fma(se_v, se, fma(sw_v, sw, fma(ne_v, ne, nw_v*nw))); neighbours
 * past the last row or column read 0 (their weight is 0 there). */
static PyObject *grid_sample(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o[4];
    if (!PyArg_ParseTuple(args, "OOOO", &o[0], &o[1], &o[2], &o[3]))
        return NULL;
    Py_buffer b[4];
    int got = 0;
    PyObject *result = NULL;
    for (; got < 4; got++) {
        if (get(o[got], &b[got], got == 3) < 0)
            goto done;
    }
    Py_buffer *src = &b[0], *bx = &b[1], *by = &b[2], *out = &b[3];
    if (src->ndim != 3 || out->ndim != 3 || bx->ndim != 2 || by->ndim != 2 || !is_f32(src) || !is_f32(out) ||
        !is_f32(bx) || !is_f32(by) || src->shape[2] != out->shape[2] || bx->shape[0] != out->shape[0] ||
        bx->shape[1] != out->shape[1] || by->shape[0] != out->shape[0] || by->shape[1] != out->shape[1]) {
        PyErr_SetString(PyExc_ValueError,
                        "Invalid arrays. Supported values are src (H, W, C) float32, x and y (h, w) float32, "
                        "out (h, w, C) float32.");
        goto done;
    }
    const Py_ssize_t H = src->shape[0], W = src->shape[1], C = src->shape[2];
    const Py_ssize_t n = out->shape[0] * out->shape[1];
    const float *xs = bx->buf, *ys = by->buf, *s = src->buf;
    float *dst = out->buf;
    for (Py_ssize_t k = 0; k < n; k++)
        if (!(xs[k] >= 0.0f && xs[k] <= (float)(W - 1) && ys[k] >= 0.0f && ys[k] <= (float)(H - 1))) {
            PyErr_SetString(PyExc_ValueError, "Invalid coordinate. Supported values are inside the frame.");
            goto done;
        }
    Py_BEGIN_ALLOW_THREADS
    grid_sample_loop(s, W, H, C, n, xs, ys, dst);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    for (int k = 0; k < got; k++)
        PyBuffer_Release(&b[k]);
    return result;
}

/* luma(rgb, out): out = (R * 0.299f + G * 0.587f) + B * 0.114f, each operation rounded to float32
 * (torch evaluates the expression as separate element-wise kernels, so nothing is fused). */
static PyObject *luma(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o[2];
    if (!PyArg_ParseTuple(args, "OO", &o[0], &o[1]))
        return NULL;
    Py_buffer b[2];
    int got = 0;
    PyObject *result = NULL;
    for (; got < 2; got++) {
        if (get(o[got], &b[got], got == 1) < 0)
            goto done;
    }
    if (b[0].ndim != 3 || b[0].shape[2] != 3 || !is_u8(&b[0]) || b[1].ndim != 2 || !is_f32(&b[1]) ||
        b[1].shape[0] != b[0].shape[0] || b[1].shape[1] != b[0].shape[1]) {
        PyErr_SetString(PyExc_ValueError, "Invalid arrays. Supported values are rgb (H, W, 3) uint8, out (H, W) float32.");
        goto done;
    }
    const uint8_t *p = b[0].buf;
    float *y = b[1].buf;
    const Py_ssize_t n = b[1].shape[0] * b[1].shape[1];
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < n; k++) {
        const float r = (float)p[3 * k] * 0.299f, g = (float)p[3 * k + 1] * 0.587f, bb = (float)p[3 * k + 2] * 0.114f;
        const float rg = r + g;
        y[k] = rg + bb;
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    for (int k = 0; k < got; k++)
        PyBuffer_Release(&b[k]);
    return result;
}

/* block_sums(values, block, out): out[i, j] = ((sum, row-major, of the block) / b²) * b². */
static PyObject *block_sums(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o[2];
    Py_ssize_t bs;
    if (!PyArg_ParseTuple(args, "OnO", &o[0], &bs, &o[1]))
        return NULL;
    Py_buffer b[2];
    int got = 0;
    PyObject *result = NULL;
    for (; got < 2; got++) {
        if (get(o[got], &b[got], got == 1) < 0)
            goto done;
    }
    if (bs < 1 || b[0].ndim != 2 || !is_f32(&b[0]) || b[1].ndim != 2 || !is_f32(&b[1]) ||
        b[1].shape[0] != b[0].shape[0] / bs || b[1].shape[1] != b[0].shape[1] / bs) {
        PyErr_SetString(PyExc_ValueError,
                        "Invalid arrays. Supported values are values (H, W) float32, out (H // b, W // b) float32.");
        goto done;
    }
    const float *v = b[0].buf;
    float *out = b[1].buf;
    const Py_ssize_t W = b[0].shape[1], hb = b[1].shape[0], wb = b[1].shape[1];
    const float area = (float)(bs * bs);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < hb; i++)
        for (Py_ssize_t j = 0; j < wb; j++) {
            float acc = 0.0f;
            for (Py_ssize_t y = i * bs; y < (i + 1) * bs; y++)
                for (Py_ssize_t x = j * bs; x < (j + 1) * bs; x++)
                    acc += v[y * W + x];
            const float mean = acc / area;
            out[i * wb + j] = mean * area;
        }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    for (int k = 0; k < got; k++)
        PyBuffer_Release(&b[k]);
    return result;
}

/* warp(src, field, out): out = grid_sample(src, grid) where, per pixel (x, y),
 * nx = ((2 * (x + dx) + 1) / W) - 1 (each operation rounded, as separate torch kernels), the same
 * for y, then unnormalised with fma and clipped (border padding), and sampled as grid_sample. */
__attribute__((target_clones("fma", "default"))) static void
warp_loop(const float *s, const float *field, Py_ssize_t H, Py_ssize_t W, Py_ssize_t C, float *dst)
{
    const float half_w = (float)W / 2.0f, half_h = (float)H / 2.0f;
    for (Py_ssize_t yy = 0; yy < H; yy++)
        for (Py_ssize_t xx = 0; xx < W; xx++) {
            const Py_ssize_t k = yy * W + xx;
            float gx = (float)xx + field[2 * k], gy = (float)yy + field[2 * k + 1];
            float nx = 2.0f * gx;
            nx = nx + 1.0f;
            nx = nx / (float)W;
            nx = nx - 1.0f;
            float ny = 2.0f * gy;
            ny = ny + 1.0f;
            ny = ny / (float)H;
            ny = ny - 1.0f;
            float x = fmaf(nx + 1.0f, half_w, -0.5f), y = fmaf(ny + 1.0f, half_h, -0.5f);
            x = fminf((float)(W - 1), fmaxf(x, 0.0f));
            y = fminf((float)(H - 1), fmaxf(y, 0.0f));
            if (!(x == x)) /* NaN (a NaN vector): torch's clip sends it to 0 */
                x = 0.0f;
            if (!(y == y))
                y = 0.0f;
            const float xw = floorf(x), yn = floorf(y);
            const float we = x - xw, e = 1.0f - we, nn = y - yn, so = 1.0f - nn;
            const float nw = so * e, ne = so * we, sw = nn * e, se = nn * we;
            const Py_ssize_t ix = (Py_ssize_t)xw, iy = (Py_ssize_t)yn;
            const int right = ix + 1 < W, down = iy + 1 < H;
            const float *p00 = s + (iy * W + ix) * C;
            float *px = dst + k * C;
            for (Py_ssize_t c = 0; c < C; c++) {
                const float v00 = p00[c];
                const float v01 = right ? p00[C + c] : 0.0f;
                const float v10 = down ? p00[W * C + c] : 0.0f;
                const float v11 = (right && down) ? p00[W * C + C + c] : 0.0f;
                float v = v00 * nw;
                v = fmaf(v01, ne, v);
                v = fmaf(v10, sw, v);
                px[c] = fmaf(v11, se, v);
            }
        }
}

static PyObject *warp(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o[3];
    if (!PyArg_ParseTuple(args, "OOO", &o[0], &o[1], &o[2]))
        return NULL;
    Py_buffer b[3];
    int got = 0;
    PyObject *result = NULL;
    for (; got < 3; got++) {
        if (get(o[got], &b[got], got == 2) < 0)
            goto done;
    }
    if (b[0].ndim != 3 || !is_f32(&b[0]) || b[1].ndim != 3 || !is_f32(&b[1]) || b[1].shape[2] != 2 ||
        b[2].ndim != 3 || !is_f32(&b[2]) || b[1].shape[0] != b[0].shape[0] || b[1].shape[1] != b[0].shape[1] ||
        b[2].shape[0] != b[0].shape[0] || b[2].shape[1] != b[0].shape[1] || b[2].shape[2] != b[0].shape[2]) {
        PyErr_SetString(PyExc_ValueError,
                        "Invalid arrays. Supported values are src (H, W, C) float32, field (H, W, 2) float32, "
                        "out (H, W, C) float32.");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    warp_loop(b[0].buf, b[1].buf, b[0].shape[0], b[0].shape[1], b[0].shape[2], b[2].buf);
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    for (int k = 0; k < got; k++)
        PyBuffer_Release(&b[k]);
    return result;
}

/* motion_field(mvs, out): out (H, W, 2) float32 zeroed, then for each vector in order its block
 * [max(0, dst_x - w/2), + w) x [max(0, dst_y - h/2), + h), clipped to the frame, set to
 * (motion_x / scale, motion_y / scale) with scale 0 read as 1 (a double quotient stored as float). */
static PyObject *motion_field(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o[2];
    if (!PyArg_ParseTuple(args, "OO", &o[0], &o[1]))
        return NULL;
    Py_buffer b[2];
    int got = 0;
    PyObject *result = NULL;
    for (; got < 2; got++) {
        if (get(o[got], &b[got], got == 1) < 0)
            goto done;
    }
    if (b[0].ndim != 2 || b[0].shape[1] != 8 || b[0].itemsize != 4 || !b[0].format || b[0].format[0] != 'i' ||
        b[1].ndim != 3 || !is_f32(&b[1]) || b[1].shape[2] != 2) {
        PyErr_SetString(PyExc_ValueError,
                        "Invalid arrays. Supported values are mvs (N, 8) int32, out (H, W, 2) float32.");
        goto done;
    }
    const int32_t *mv = b[0].buf;
    float *f = b[1].buf;
    const Py_ssize_t n = b[0].shape[0], H = b[1].shape[0], W = b[1].shape[1];
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < H * W * 2; k++)
        f[k] = 0.0f;
    for (Py_ssize_t k = 0; k < n; k++) {
        const int32_t *m = mv + 8 * k; /* dst_x, dst_y, w, h, motion_x, motion_y, motion_scale, source */
        const double scale = m[6] ? (double)m[6] : 1.0;
        const float dx = (float)((double)m[4] / scale), dy = (float)((double)m[5] / scale);
        Py_ssize_t x0 = m[0] - m[2] / 2, y0 = m[1] - m[3] / 2;
        x0 = x0 < 0 ? 0 : x0;
        y0 = y0 < 0 ? 0 : y0;
        const Py_ssize_t x1 = x0 + m[2] < W ? x0 + m[2] : W, y1 = y0 + m[3] < H ? y0 + m[3] : H;
        for (Py_ssize_t y = y0; y < y1; y++)
            for (Py_ssize_t x = x0; x < x1; x++) {
                f[2 * (y * W + x)] = dx;
                f[2 * (y * W + x) + 1] = dy;
            }
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    for (int k = 0; k < got; k++)
        PyBuffer_Release(&b[k]);
    return result;
}

static PyMethodDef methods[] = {
    {"bilinear", bilinear, METH_VARARGS,
     "bilinear(src, y0, y1, ly0, ly1, x0, x1, lx0, lx1, out, four) -> None\n\n"
     "PyTorch's bilinear resize arithmetic (see the module comment); writes out (h, w, C) float32."},
    {"grid_sample", grid_sample, METH_VARARGS,
     "grid_sample(src, x, y, out) -> None\n\n"
     "PyTorch's bilinear grid_sample arithmetic at clipped pixel coordinates; writes out (h, w, C)."},
    {"warp", warp, METH_VARARGS,
     "warp(src, field, out) -> None\n\ngrid_sample of src at pixel + field, with torch's grid arithmetic."},
    {"motion_field", motion_field, METH_VARARGS,
     "motion_field(mvs, out) -> None\n\nPaint (N, 8) int32 exported vectors into out (H, W, 2) float32."},
    {"luma", luma, METH_VARARGS,
     "luma(rgb, out) -> None\n\nWrite (0.299 R + 0.587 G) + 0.114 B of (H, W, 3) uint8 into out (H, W) float32."},
    {"block_sums", block_sums, METH_VARARGS,
     "block_sums(values, block, out) -> None\n\nWrite each block's row-major float32 sum (/ b² × b²) into out."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_torch_math",
                                    "PyTorch's float32 resampling arithmetic, bit for bit.", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__torch_math(void) { return PyModule_Create(&module); }
