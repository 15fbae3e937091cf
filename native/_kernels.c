/* The compiled kernels of Codec Lens (native/): per-pixel passes that numpy would make in
 * several sweeps over memory, done in one. Built by setup.py as native._kernels; every caller
 * has a numpy/OpenCV fallback giving the same results, and tests compare the two.
 *
 *   measure_yuv420     the luma-bias analyzer's frame-pair measurement (native/luma_frames.py)
 *   bgr_to_rgb_stats   the selection decode workers' copy + bad-frame figures (native/frame_stats.py)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

/* Compiled kernel of the luma-bias analyzer: one pass over a yuv420p test frame and its
 * reference that converts both to RGB exactly as OpenCV's COLOR_YUV2RGB_I420 does and keeps
 * only what the analysis needs (per-cell RGB sums of the test, per-cell sums of the difference,
 * and the luma squared error), so neither RGB frame is ever written to memory.
 *
 * Why compiled: in numpy the same work takes six passes over every pixel (conversion, widening,
 * subtraction, two reductions, the float luma); here it is one, and the analysis spends most
 * of its CPU time in the decoders rather than in the arithmetic (bench/luma_speed.py).
 *
 * Exactness: OpenCV's BT.601 limited-range conversion is integer fixed point (20-bit
 * coefficients, rounding by adding 2^19, clamping to 0..255) and is reproduced bit for bit; every
 * sum is an integer; the luma error is accumulated as the second moments of the channel
 * differences (integers) and combined with the integer weights 299, 587, 114, so the squared
 * error of 1000*Y is exact in a double (tests/backend/test_luma_frames.py compares it with the
 * numpy path).
 */
/* OpenCV's ITU-R BT.601 fixed-point coefficients (modules/imgproc, color_yuv). */
#define CY 1220542
#define CVR 1673527
#define CVG (-852492)
#define CUG (-409993)
#define CUB 2116026
#define HALF (1 << 19)
#define SHIFT 20

static inline int32_t clip255(int32_t v) { return v < 0 ? 0 : (v > 255 ? 255 : v); }

typedef struct {
    const uint8_t *y, *u, *v;
    Py_ssize_t y_stride, c_stride;
} Planes;

/* The chroma terms of one chroma row, repeated for both pixels of each 2x2 block so that the
 * per-pixel loop reads contiguous arrays (and vectorises). */
static void chroma_terms(const Planes *p, Py_ssize_t chroma_row, Py_ssize_t width, int32_t *r, int32_t *g,
                         int32_t *b)
{
    const uint8_t *u = p->u + chroma_row * p->c_stride, *v = p->v + chroma_row * p->c_stride;
    for (Py_ssize_t j = 0; j < width / 2; j++) {
        int32_t uu = (int32_t)u[j] - 128, vv = (int32_t)v[j] - 128;
        int32_t rr = HALF + CVR * vv, gg = HALF + CVG * vv + CUG * uu, bb = HALF + CUB * uu;
        r[2 * j] = r[2 * j + 1] = rr;
        g[2 * j] = g[2 * j + 1] = gg;
        b[2 * j] = b[2 * j + 1] = bb;
    }
}

/* One pixel pair into the sums of the current cell of a row pair. The 32-bit sums cannot
 * overflow: a row pair of a cell holds at most 2*cell pixels, and cell <= 4096 (MeasureConfig)
 * keeps 2*4096*255^2 below 2^31. */
#define PIXEL(YT, YR)                                                                          \
    do {                                                                                       \
        int32_t yt = (int32_t)(YT) - 16, yr = (int32_t)(YR) - 16;                              \
        yt = (yt < 0 ? 0 : yt) * CY;                                                           \
        yr = (yr < 0 ? 0 : yr) * CY;                                                           \
        int32_t a0 = clip255((yt + k0) >> SHIFT), a1 = clip255((yt + k1) >> SHIFT);            \
        int32_t a2 = clip255((yt + k2) >> SHIFT);                                              \
        int32_t d0 = a0 - clip255((yr + k3) >> SHIFT), d1 = a1 - clip255((yr + k4) >> SHIFT); \
        int32_t d2 = a2 - clip255((yr + k5) >> SHIFT);                                         \
        s0 += a0; s1 += a1; s2 += a2;                                                          \
        e0 += d0; e1 += d1; e2 += d2;                                                          \
        m00 += d0 * d0; m11 += d1 * d1; m22 += d2 * d2;                                        \
        m01 += d0 * d1; m02 += d0 * d2; m12 += d1 * d2;                                        \
    } while (0)

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
/* AVX2 doubles the vector width of the per-pixel loop; other CPUs take the baseline clone. */
__attribute__((target_clones("avx2", "default")))
#endif
static double measure(const Planes *t, const Planes *r, Py_ssize_t height, Py_ssize_t width, Py_ssize_t cell,
                      int64_t *test_cells, int64_t *diff_cells, int32_t *buf)
{
    Py_ssize_t ncols = (width + cell - 1) / cell;
    int32_t *c0 = buf, *c1 = buf + width, *c2 = buf + 2 * width;
    int32_t *c3 = buf + 3 * width, *c4 = buf + 4 * width, *c5 = buf + 5 * width;
    double sse = 0.0;
    for (Py_ssize_t y = 0; y + 1 < height; y += 2) {
        chroma_terms(t, y / 2, width, c0, c1, c2);
        chroma_terms(r, y / 2, width, c3, c4, c5);
        const uint8_t *t0 = t->y + y * t->y_stride, *t1 = t0 + t->y_stride;
        const uint8_t *r0 = r->y + y * r->y_stride, *r1 = r0 + r->y_stride;
        Py_ssize_t cy = y / cell;
        for (Py_ssize_t cx = 0; cx < ncols; cx++) {
            Py_ssize_t x0 = cx * cell, x1 = x0 + cell < width ? x0 + cell : width;
            int32_t s0 = 0, s1 = 0, s2 = 0, e0 = 0, e1 = 0, e2 = 0;
            int32_t m00 = 0, m11 = 0, m22 = 0, m01 = 0, m02 = 0, m12 = 0;
            for (Py_ssize_t x = x0; x < x1; x++) {
                int32_t k0 = c0[x], k1 = c1[x], k2 = c2[x], k3 = c3[x], k4 = c4[x], k5 = c5[x];
                PIXEL(t0[x], r0[x]);
                PIXEL(t1[x], r1[x]);
            }
            int64_t *tc = test_cells + (cy * ncols + cx) * 3, *dc = diff_cells + (cy * ncols + cx) * 3;
            tc[0] += s0; tc[1] += s1; tc[2] += s2;
            dc[0] += e0; dc[1] += e1; dc[2] += e2;
            /* (299 d0 + 587 d1 + 114 d2)^2 summed, from the second moments: exact integers. */
            sse += 89401.0 * m00 + 344569.0 * m11 + 12996.0 * m22 + 351026.0 * m01 + 68172.0 * m02 +
                   133836.0 * m12;
        }
    }
    return sse;
}

static int get_plane(PyObject *obj, Py_buffer *view, const char *name)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_STRIDED_RO) < 0)
        return -1;
    if (view->ndim != 2 || view->itemsize != 1 || view->strides[1] != 1 || view->strides[0] < view->shape[1]) {
        PyErr_Format(PyExc_ValueError, "Invalid %s plane. Supported values are 2-D uint8 rows.", name);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *measure_yuv420(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *obj[6], *tc_obj, *dc_obj, *result = NULL;
    Py_ssize_t cell;
    if (!PyArg_ParseTuple(args, "OOOOOOnOO", &obj[0], &obj[1], &obj[2], &obj[3], &obj[4], &obj[5], &cell, &tc_obj,
                          &dc_obj))
        return NULL;
    static const char *names[6] = {"test Y", "test U", "test V", "reference Y", "reference U", "reference V"};
    Py_buffer v[6], tc = {0}, dc = {0};
    int got = 0;
    for (; got < 6; got++)
        if (get_plane(obj[got], &v[got], names[got]) < 0)
            goto done;
    Py_ssize_t h = v[0].shape[0], w = v[0].shape[1];
    if (h % 2 || w % 2 || cell < 2 || cell % 2 || v[3].shape[0] != h || v[3].shape[1] != w) {
        PyErr_SetString(PyExc_ValueError,
                        "Invalid frames. Supported values are two yuv420p frames of the same even size and an even cell.");
        goto done;
    }
    for (int i = 1; i < 6; i++) {
        if (i == 3)
            continue;
        if (v[i].shape[0] != h / 2 || v[i].shape[1] != w / 2 || v[i].strides[0] != v[i < 3 ? 1 : 4].strides[0]) {
            PyErr_Format(PyExc_ValueError, "Invalid %s plane. Supported values are %zdx%zd.", names[i], w / 2, h / 2);
            goto done;
        }
    }
    Py_ssize_t cells = ((h + cell - 1) / cell) * ((w + cell - 1) / cell) * 3;
    if (PyObject_GetBuffer(tc_obj, &tc, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        goto done;
    if (PyObject_GetBuffer(dc_obj, &dc, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        goto done;
    if (tc.len != cells * 8 || dc.len != cells * 8) {
        PyErr_Format(PyExc_ValueError, "Invalid cell arrays. Supported values are %zd int64 each.", cells);
        goto done;
    }
    int32_t *buf = malloc(sizeof(int32_t) * 6 * (size_t)w);
    if (!buf) {
        PyErr_NoMemory();
        goto done;
    }
    Planes t = {v[0].buf, v[1].buf, v[2].buf, v[0].strides[0], v[1].strides[0]};
    Planes r = {v[3].buf, v[4].buf, v[5].buf, v[3].strides[0], v[4].strides[0]};
    double sse;
    /* Pure arithmetic on buffers held above: other Python threads (the decoders) may run. */
    Py_BEGIN_ALLOW_THREADS
    sse = measure(&t, &r, h, w, cell, tc.buf, dc.buf, buf);
    Py_END_ALLOW_THREADS
    free(buf);
    result = PyFloat_FromDouble(sse);
done:
    if (tc.obj)
        PyBuffer_Release(&tc);
    if (dc.obj)
        PyBuffer_Release(&dc);
    for (int i = 0; i < got; i++)
        PyBuffer_Release(&v[i]);
    return result;
}

/* Compiled kernel of the selection pipeline's decode workers: a reader frame (BGR) copied
 * into its RGB slot, with the figures of the bad-frame test gathered in the same pass.
 *
 * Why compiled: the workers otherwise make three passes per frame (OpenCV's BGR->RGB swap,
 * meanStdDev, inRange + countNonZero), about 1.2 ms at 448x336 of a 2.5 ms frame budget;
 * this is one pass of about 0.3 ms. All figures are integers, so they are exact.
 */

typedef struct {
    int64_t sum[3], sq[3], green;
} Stats;

#define CHUNK 16384

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static void swap_and_measure(const uint8_t *src, Py_ssize_t src_stride, uint8_t *dst, Py_ssize_t dst_stride,
                             Py_ssize_t height, Py_ssize_t width, Stats *st)
{
    for (Py_ssize_t y = 0; y < height; y++) {
        const uint8_t *s = src + y * src_stride;
        uint8_t *d = dst + y * dst_stride;
        /* 32-bit lanes vectorise twice as wide as 64-bit ones; chunks of CHUNK pixels keep the
         * sums of squares (at most 255^2 * CHUNK) below 2^31. */
        for (Py_ssize_t x0 = 0; x0 < width; x0 += CHUNK) {
            Py_ssize_t x1 = x0 + CHUNK < width ? x0 + CHUNK : width;
            int32_t r = 0, g = 0, b = 0, rr = 0, gg = 0, bb = 0, green = 0;
            for (Py_ssize_t x = x0; x < x1; x++) {
                int32_t bv = s[3 * x], gv = s[3 * x + 1], rv = s[3 * x + 2];
                d[3 * x] = (uint8_t)rv;
                d[3 * x + 1] = (uint8_t)gv;
                d[3 * x + 2] = (uint8_t)bv;
                r += rv; g += gv; b += bv;
                rr += rv * rv; gg += gv * gv; bb += bv * bv;
                /* cv2.inRange(rgb, (0, 180, 0), (90, 255, 90)): the "green corruption" colour box. */
                green += (rv <= 90) & (gv >= 180) & (bv <= 90);
            }
            st->sum[0] += r; st->sum[1] += g; st->sum[2] += b;
            st->sq[0] += rr; st->sq[1] += gg; st->sq[2] += bb;
            st->green += green;
        }
    }
}

static PyObject *bgr_to_rgb_stats(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *src_obj, *dst_obj, *result = NULL;
    if (!PyArg_ParseTuple(args, "OO", &src_obj, &dst_obj))
        return NULL;
    Py_buffer src = {0}, dst = {0};
    if (PyObject_GetBuffer(src_obj, &src, PyBUF_STRIDED_RO) < 0)
        return NULL;
    if (PyObject_GetBuffer(dst_obj, &dst, PyBUF_STRIDED | PyBUF_WRITABLE) < 0)
        goto done;
    if (src.ndim != 3 || dst.ndim != 3 || src.itemsize != 1 || dst.itemsize != 1 || src.shape[2] != 3 ||
        src.shape[0] != dst.shape[0] || src.shape[1] != dst.shape[1] || dst.shape[2] != 3 || src.strides[2] != 1 ||
        src.strides[1] != 3 || dst.strides[2] != 1 || dst.strides[1] != 3) {
        PyErr_SetString(PyExc_ValueError,
                        "Invalid frames. Supported values are (H, W, 3) uint8 arrays of the same size with "
                        "contiguous pixels.");
        goto done;
    }
    Stats st = {{0}, {0}, 0};
    Py_BEGIN_ALLOW_THREADS
    swap_and_measure(src.buf, src.strides[0], dst.buf, dst.strides[0], src.shape[0], src.shape[1], &st);
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(LLL)(LLL)L", (long long)st.sum[0], (long long)st.sum[1], (long long)st.sum[2],
                           (long long)st.sq[0], (long long)st.sq[1], (long long)st.sq[2], (long long)st.green);
done:
    if (src.obj)
        PyBuffer_Release(&src);
    if (dst.obj)
        PyBuffer_Release(&dst);
    return result;
}

static PyMethodDef methods[] = {
    {"measure_yuv420", measure_yuv420, METH_VARARGS,
     "measure_yuv420(ty, tu, tv, ry, ru, rv, cell, test_cells, diff_cells) -> float\n\n"
     "Add per-cell RGB sums of the test frame and of test - reference to the int64 arrays\n"
     "(ceil(H/cell), ceil(W/cell), 3) and return the sum of (1000*delta Y)^2 (exact)."},
    {"bgr_to_rgb_stats", bgr_to_rgb_stats, METH_VARARGS,
     "bgr_to_rgb_stats(bgr, rgb_out) -> ((sum_r, sum_g, sum_b), (sq_r, sq_g, sq_b), green)\n\n"
     "Copy a (H, W, 3) BGR frame into rgb_out as RGB; return the per-channel sums and sums of\n"
     "squares and the count of pixels with R <= 90, G >= 180, B <= 90."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernels", "Compiled per-pixel kernels of Codec Lens.", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
