/* The compiled kernels of Codec Lens (native/): per-pixel passes that numpy would make in
 * several sweeps over memory, done in one. Built by setup.py as native._kernels; every caller
 * has a numpy/OpenCV fallback giving the same results, and tests compare the two.
 *
 *   measure_yuv420     the luma-bias analyzer's frame-pair measurement (native/luma_frames.py)
 *   bgr_to_rgb_stats   the selection decode workers' copy + bad-frame figures (native/frame_stats.py)
 *   motion_residual    a frame's motion-compensated residual and motion magnitude (native/motion.py)
 *   key_histogram      counts of residual keys, for the mvres percentile (native/motion.py)
 *   cell_sums          per-cell sums of the mv, residual and mvres maps in numpy's order (native/motion.py)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
/* The motion kernels' widest loops are compiled for AVX2 as well and chosen at import, when the
 * CPU has it (the build itself targets baseline x86-64). */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define MC_AVX2 1
#define AVX2_FN __attribute__((target("avx2")))
static int mc_avx2 = 0;
#else
#define MC_AVX2 0
#endif

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

/* Compiled kernels of the motion signals (backend/stages/signals.py): the inter prediction of a
 * frame rebuilt from its exported motion vectors, and the per-cell means of the motion, residual
 * and fused maps, without any full-size float map.
 *
 * Why compiled: the numpy/OpenCV path (signals.motion_compensate, cell_means, fuse_mvres) makes
 * a full-frame remap, absdiff and integral image per candidate reference, then about twenty more
 * full-frame passes and two 921600-value partitions per 720p frame: about 100 ms a frame. Here
 * each block is predicted once per candidate reference, in integers, and the cell sums are taken
 * from one row buffer: a few milliseconds (bench/signals.py).
 *
 * Exactness (tests/native/test_motion_kernel.py compares both paths on real clips bit for bit):
 * - cv2.remap with INTER_LINEAR rounds coordinates to 1/32 pixel and weights the four taps with
 *   products of multiples of 1/32; with vectors in 1/mscale pixels (mscale dividing 32·motion)
 *   every coordinate is exact, every prediction is an integer / 1024 and every sum the numpy path
 *   makes of them (float32 prediction, float64 integral image) is exact. Here they are integers
 *   scaled by 1024 (one direction) or 2048 (the two-direction average), so the block SADs, the
 *   chosen references and the residuals are the same numbers.
 * - Border pixels replicate, as BORDER_REPLICATE does: each tap's coordinate is clamped.
 * - Magnitudes and the fused map repeat numpy's float32 operations in its order (no FMA: setup.py
 *   builds with -ffp-contract=off), and the cell sums repeat numpy's float64 reduction order
 *   (per pixel row of a cell, the pairwise sum of its values, added to the cell's total).
 */

#define MC_SCALE 2048 /* residual keys are |Y - prediction| * 2048 */

typedef struct {
    int32_t x0, y0, w, h, dx32, dy32, dir;
    float hyp;
} McBlock;

static inline Py_ssize_t clampz(Py_ssize_t v, Py_ssize_t lo, Py_ssize_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

static inline int32_t floor_div32(int32_t v) { return v >= 0 ? v / 32 : -((-v + 31) / 32); }

typedef struct {
    const uint8_t *buf;
    Py_ssize_t stride;
} Plane8;

/* A block's displacement: whole pixels (ox, oy), the 1/32 fractions and the four tap weights,
 * in three exact scales: whole-pixel positions (one tap, prediction = pixel), quarter-pel
 * positions (every weight a multiple of 64: taps out of 16, in 16-bit lanes) and any 1/32
 * position (taps out of 1024). */
typedef struct {
    int32_t ox, oy, fx, fy, w[4];
    int16_t q[4];
    int whole, quarter;
} Shift;

static inline Shift shift_of(int32_t dx32, int32_t dy32)
{
    Shift t;
    t.ox = floor_div32(dx32);
    t.fx = dx32 & 31;
    t.oy = floor_div32(dy32);
    t.fy = dy32 & 31;
    t.w[0] = (32 - t.fx) * (32 - t.fy);
    t.w[1] = t.fx * (32 - t.fy);
    t.w[2] = (32 - t.fx) * t.fy;
    t.w[3] = t.fx * t.fy;
    for (int k = 0; k < 4; k++)
        t.q[k] = (int16_t)(t.w[k] >> 6);
    t.whole = t.fx == 0 && t.fy == 0;
    t.quarter = (t.fx & 7) == 0 && (t.fy & 7) == 0;
    return t;
}

/* Sum of |c - a| over n bytes. */
static inline int32_t sad_whole(const uint8_t *c, const uint8_t *a, Py_ssize_t n)
{
    int32_t s = 0;
    Py_ssize_t i = 0;
#if defined(__SSE2__)
    for (; i + 16 <= n; i += 16) {
        __m128i d = _mm_sad_epu8(_mm_loadu_si128((const __m128i *)(c + i)), _mm_loadu_si128((const __m128i *)(a + i)));
        s += _mm_cvtsi128_si32(d) + _mm_cvtsi128_si32(_mm_srli_si128(d, 8));
    }
    for (; i + 8 <= n; i += 8)
        s += _mm_cvtsi128_si32(_mm_sad_epu8(_mm_loadl_epi64((const __m128i *)(c + i)),
                                            _mm_loadl_epi64((const __m128i *)(a + i))));
#endif
    for (; i < n; i++) {
        int32_t d = (int32_t)c[i] - (int32_t)a[i];
        s += d < 0 ? -d : d;
    }
    return s;
}

#if defined(__SSE2__)
/* Eight quarter-pel predictions (out of 16) as 16-bit lanes; at most 16 * 255 = 4080. */
static inline __m128i taps8_quarter(const uint8_t *a0, const uint8_t *a1, const __m128i q[4])
{
    const __m128i z = _mm_setzero_si128();
    __m128i p = _mm_mullo_epi16(_mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)a0), z), q[0]);
    p = _mm_add_epi16(p, _mm_mullo_epi16(_mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(a0 + 1)), z), q[1]));
    p = _mm_add_epi16(p, _mm_mullo_epi16(_mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)a1), z), q[2]));
    return _mm_add_epi16(p, _mm_mullo_epi16(_mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(a1 + 1)), z), q[3]));
}
#endif

/* Sum of |16 c - quarter-pel prediction (out of 16)| over n pixels; the taps read a0[n], a1[n]. */
static inline int32_t sad_quarter(const uint8_t *c, const uint8_t *a0, const uint8_t *a1, Py_ssize_t n,
                                  const int16_t q[4])
{
    int32_t s = 0;
    Py_ssize_t i = 0;
#if defined(__SSE2__)
    const __m128i qv[4] = {_mm_set1_epi16(q[0]), _mm_set1_epi16(q[1]), _mm_set1_epi16(q[2]), _mm_set1_epi16(q[3])};
    const __m128i z = _mm_setzero_si128(), ones = _mm_set1_epi16(1);
    __m128i acc = z;
    for (; i + 8 <= n; i += 8) {
        __m128i cur16 = _mm_slli_epi16(_mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(c + i)), z), 4);
        __m128i d = _mm_sub_epi16(cur16, taps8_quarter(a0 + i, a1 + i, qv));
        d = _mm_max_epi16(d, _mm_sub_epi16(z, d));
        acc = _mm_add_epi32(acc, _mm_madd_epi16(d, ones));
    }
    acc = _mm_add_epi32(acc, _mm_srli_si128(acc, 8));
    acc = _mm_add_epi32(acc, _mm_srli_si128(acc, 4));
    s = _mm_cvtsi128_si32(acc);
#endif
    for (; i < n; i++) {
        int32_t d = c[i] * 16 - (a0[i] * q[0] + a0[i + 1] * q[1] + a1[i] * q[2] + a1[i + 1] * q[3]);
        s += d < 0 ? -d : d;
    }
    return s;
}

/* Whether the taps of a block's columns [xa, xb) lie inside the frame: a whole-pixel shift reads
 * one column per pixel, a fractional one also the next column. */
static inline int taps_inside_x(const Shift *t, Py_ssize_t xa, Py_ssize_t xb, Py_ssize_t width)
{
    return xa + t->ox >= 0 && xb + t->ox + (t->whole ? 0 : 1) <= width;
}

/* The same for rows [ya, yb) (a fractional shift also reads the next row). */
static inline int taps_inside_y(const Shift *t, Py_ssize_t ya, Py_ssize_t yb, Py_ssize_t height)
{
    return ya + t->oy >= 0 && yb + t->oy + (t->whole ? 0 : 1) <= height;
}

/* The reference rows the taps of block row y read, n + 1 columns from column xa + ox. Rows are
 * clamped into the frame; columns come straight from the frame when they lie inside (direct),
 * else they are gathered with clamped coordinates into tmp (two rows of tstride bytes). Either
 * way every tap is the pixel BORDER_REPLICATE reads, so one arithmetic serves the border too. */
typedef struct {
    const uint8_t *a0, *a1;
} TapRows;

static inline TapRows tap_rows(const Plane8 *ref, const Shift *t, Py_ssize_t xa, Py_ssize_t n, Py_ssize_t y,
                               Py_ssize_t height, Py_ssize_t width, int direct, uint8_t *tmp, Py_ssize_t tstride)
{
    const uint8_t *r0 = ref->buf + clampz(y + t->oy, 0, height - 1) * ref->stride;
    const uint8_t *r1 = ref->buf + clampz(y + t->oy + 1, 0, height - 1) * ref->stride;
    TapRows rows;
    if (direct) {
        rows.a0 = r0 + xa + t->ox;
        rows.a1 = r1 + xa + t->ox;
        return rows;
    }
    for (Py_ssize_t i = 0; i <= n; i++) {
        Py_ssize_t x = clampz(xa + t->ox + i, 0, width - 1);
        tmp[i] = r0[x];
        tmp[tstride + i] = r1[x];
    }
    rows.a0 = tmp;
    rows.a1 = tmp + tstride;
    return rows;
}

/* Prediction times 1024 of pixel i of a row from its taps (a0[i + 1], a1 unread when whole). */
static inline int32_t pred_taps(const Shift *t, TapRows a, Py_ssize_t i)
{
    if (t->whole)
        return a.a0[i] * 1024;
    return a.a0[i] * t->w[0] + a.a0[i + 1] * t->w[1] + a.a1[i] * t->w[2] + a.a1[i + 1] * t->w[3];
}

/* SAD of one row of n pixels against its taps, times 1024. */
static inline int64_t row_sad(const uint8_t *c, TapRows a, Py_ssize_t n, const Shift *t)
{
    if (t->whole)
        return (int64_t)sad_whole(c, a.a0, n) * 1024;
    if (t->quarter)
        return (int64_t)sad_quarter(c, a.a0, a.a1, n, t->q) * 64;
    int64_t s = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t d = c[i] * 1024 - pred_taps(t, a, i);
        s += d < 0 ? -d : d;
    }
    return s;
}

#if MC_AVX2
AVX2_FN static inline int64_t hsum_epi64(__m256i v)
{
    __m128i s = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    return _mm_cvtsi128_si64(_mm_add_epi64(s, _mm_unpackhi_epi64(s, s)));
}

AVX2_FN static inline __m256i load2x16(const uint8_t *p, Py_ssize_t stride)
{
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p)),
                                   _mm_loadu_si128((const __m128i *)(p + stride)), 1);
}

/* The SAD (times 1024) of a 16-pixel-wide block whose taps all lie inside the frame, two rows per
 * step, stopping once it reaches bound (checked every four rows: the caller only asks whether it
 * stays below). */
AVX2_FN static int64_t sad16_whole(const uint8_t *c, Py_ssize_t cs, const uint8_t *a, Py_ssize_t as, Py_ssize_t rows,
                                   int64_t bound)
{
    __m256i acc = _mm256_setzero_si256();
    Py_ssize_t y = 0;
    for (; y + 2 <= rows; y += 2, c += 2 * cs, a += 2 * as) {
        acc = _mm256_add_epi64(acc, _mm256_sad_epu8(load2x16(c, cs), load2x16(a, as)));
        if ((y & 2) && hsum_epi64(acc) * 1024 >= bound)
            return hsum_epi64(acc) * 1024;
    }
    int64_t s = hsum_epi64(acc);
    if (y < rows)
        s += sad_whole(c, a, 16);
    return s * 1024;
}

/* Sixteen quarter-pel predictions (out of 16) as 16-bit lanes. */
AVX2_FN static inline __m256i taps16_quarter(const uint8_t *a0, const uint8_t *a1, const __m256i q[4])
{
#define U16(p) _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(p)))
    __m256i p = _mm256_mullo_epi16(U16(a0), q[0]);
    p = _mm256_add_epi16(p, _mm256_mullo_epi16(U16(a0 + 1), q[1]));
    p = _mm256_add_epi16(p, _mm256_mullo_epi16(U16(a1), q[2]));
    return _mm256_add_epi16(p, _mm256_mullo_epi16(U16(a1 + 1), q[3]));
#undef U16
}

AVX2_FN static int64_t sad16_quarter(const uint8_t *c, Py_ssize_t cs, const uint8_t *a0, Py_ssize_t as, Py_ssize_t rows,
                                     const int16_t q[4], int64_t bound)
{
    const __m256i qv[4] = {_mm256_set1_epi16(q[0]), _mm256_set1_epi16(q[1]), _mm256_set1_epi16(q[2]),
                           _mm256_set1_epi16(q[3])};
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc = _mm256_setzero_si256();
    for (Py_ssize_t y = 0; y < rows; y++, c += cs, a0 += as) {
        __m256i cur16 = _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)c)), 4);
        __m256i d = _mm256_abs_epi16(_mm256_sub_epi16(cur16, taps16_quarter(a0, a0 + as, qv)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(d, ones));
        if ((y & 3) == 3 && y + 1 < rows) {
            __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
            s = _mm_add_epi32(s, _mm_srli_si128(s, 8));
            s = _mm_add_epi32(s, _mm_srli_si128(s, 4));
            if ((int64_t)_mm_cvtsi128_si32(s) * 64 >= bound)
                return (int64_t)_mm_cvtsi128_si32(s) * 64;
        }
    }
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    s = _mm_add_epi32(s, _mm_srli_si128(s, 8));
    s = _mm_add_epi32(s, _mm_srli_si128(s, 4));
    return (int64_t)_mm_cvtsi128_si32(s) * 64;
}
#endif

/* SAD of the block [xa, xb) x [ya, yb) against ref displaced by t, times 1024; rows stop once it
 * reaches bound (the caller only wants to know whether it stays below). */
static int64_t block_sad(const Plane8 *cur, const Plane8 *ref, const Shift *t, Py_ssize_t xa, Py_ssize_t xb,
                         Py_ssize_t ya, Py_ssize_t yb, Py_ssize_t height, Py_ssize_t width, int64_t bound, uint8_t *tmp,
                         Py_ssize_t tstride)
{
    Py_ssize_t n = xb - xa;
    int direct = taps_inside_x(t, xa, xb, width);
#if MC_AVX2
    if (mc_avx2 && n == 16 && direct && (t->whole || t->quarter) && taps_inside_y(t, ya, yb, height)) {
        const uint8_t *c = cur->buf + ya * cur->stride + xa;
        const uint8_t *a = ref->buf + (ya + t->oy) * ref->stride + xa + t->ox;
        if (t->whole)
            return sad16_whole(c, cur->stride, a, ref->stride, yb - ya, bound);
        return sad16_quarter(c, cur->stride, a, ref->stride, yb - ya, t->q, bound);
    }
#endif
    int64_t sad = 0;
    if (direct && taps_inside_y(t, ya, yb, height)) { /* no clamping: rows one stride apart */
        const uint8_t *c = cur->buf + ya * cur->stride + xa;
        TapRows a = {ref->buf + (ya + t->oy) * ref->stride + xa + t->ox, NULL};
        for (Py_ssize_t y = ya; y < yb && sad < bound; y++, c += cur->stride, a.a0 += ref->stride) {
            a.a1 = t->whole ? a.a0 : a.a0 + ref->stride; /* a whole shift reads one row */
            sad += row_sad(c, a, n, t);
        }
        return sad;
    }
    for (Py_ssize_t y = ya; y < yb && sad < bound; y++)
        sad += row_sad(cur->buf + y * cur->stride + xa, tap_rows(ref, t, xa, n, y, height, width, direct, tmp, tstride),
                       n, t);
    return sad;
}

#define MC_HIST_SHIFT 6
#define MC_HIST_BINS 8192 /* (255 * MC_SCALE) >> MC_HIST_SHIFT = 8160 < 8192 */
#define MC_STAGE 512      /* keys staged before they are counted */

/* The histogram of final residual keys >> 6 (for the mvres percentile), taken as each pixel's key
 * is written, while it is in cache. Only keys at or above a floor are binned: the caller needs
 * the rest only as a count (mvres clamps the residual's percentile at 1.0 = 2048 keys, and on
 * most video 80-95 % of the keys lie below it), so they are counted eight at a time and never
 * touch the bins. The binned keys are first packed into a stage (branch-free), then counted in
 * one loop into four copies of the bins (neighbours often share a bin); the OR of every key
 * says whether all are multiples of 64. */
typedef struct {
    int32_t *bins;
    int32_t *stage;
    Py_ssize_t staged;
    int32_t floor; /* at least 1: keys below are counted in below, not binned */
    int64_t below;
    int32_t bits;
    /* When given, the integer sums of the final keys per cell of side cell ((H/cell) x cols). */
    int64_t *cells;
    Py_ssize_t cell, cols;
    /* When given (the keys themselves are not wanted), final keys go to this row buffer, not
     * the frame's: only the first of two directions' predictions is stored there. */
    int32_t *row;
} KeyHist;

/* Add a row segment's final keys (pixels [x, x + n) of row y) to the histogram and cell sums. */
static void hist_keys(KeyHist *h, const int32_t *r, Py_ssize_t n);

static inline void final_keys(KeyHist *h, const int32_t *r, Py_ssize_t x, Py_ssize_t y, Py_ssize_t n)
{
    if (h->bins)
        hist_keys(h, r, n);
    if (h->cells) {
        int64_t *row = h->cells + (y / h->cell) * h->cols;
        for (Py_ssize_t i = 0; i < n;) {
            Py_ssize_t c = (x + i) / h->cell, end = (c + 1) * h->cell - x;
            end = end < n ? end : n;
            int32_t t = 0; /* at most cell * 255 * 2048 < 2^31 for cells up to 4096 wide */
            for (; i < end; i++)
                t += r[i];
            row[c] += t;
        }
    }
}

/* Count the staged keys into the bins. */
static void hist_flush(KeyHist *h)
{
    int32_t *bins = h->bins;
    const int32_t *k = h->stage;
    Py_ssize_t i = 0, n = h->staged;
    for (; i + 4 <= n; i += 4) {
        bins[k[i] >> MC_HIST_SHIFT] += 1;
        bins[MC_HIST_BINS + (k[i + 1] >> MC_HIST_SHIFT)] += 1;
        bins[2 * MC_HIST_BINS + (k[i + 2] >> MC_HIST_SHIFT)] += 1;
        bins[3 * MC_HIST_BINS + (k[i + 3] >> MC_HIST_SHIFT)] += 1;
    }
    for (; i < n; i++)
        bins[k[i] >> MC_HIST_SHIFT] += 1;
    h->staged = 0;
}

#if MC_AVX2
/* For each 8-bit mask, the lanes of its set bits in order (then zeros): _mm256_permutevar8x32_epi32
 * with it packs the lanes a mask selects to the front. Filled at import. */
static int32_t stage_lanes[256][8];

static void fill_stage_lanes(void)
{
    for (int m = 0; m < 256; m++) {
        int j = 0;
        for (int lane = 0; lane < 8; lane++)
            if (m >> lane & 1)
                stage_lanes[m][j++] = lane;
        for (; j < 8; j++)
            stage_lanes[m][j] = 0;
    }
}

/* Stage the keys at or above the floor, eight a step; returns the pixels done. */
AVX2_FN static Py_ssize_t stage_keys8(KeyHist *h, const int32_t *r, Py_ssize_t n)
{
    const __m256i below_floor = _mm256_set1_epi32(h->floor - 1);
    __m256i bits = _mm256_setzero_si256();
    int32_t *stage = h->stage;
    Py_ssize_t x = 0, ns = h->staged;
    int64_t kept = 0;
    for (; x + 8 <= n; x += 8) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(r + x));
        bits = _mm256_or_si256(bits, v);
        int m = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(v, below_floor)));
        __m256i lanes = _mm256_loadu_si256((const __m256i *)stage_lanes[m]);
        _mm256_storeu_si256((__m256i *)(stage + ns), _mm256_permutevar8x32_epi32(v, lanes));
        int c = __builtin_popcount((unsigned)m);
        ns += c;
        kept += c;
    }
    __m128i b = _mm_or_si128(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
    b = _mm_or_si128(b, _mm_srli_si128(b, 8));
    b = _mm_or_si128(b, _mm_srli_si128(b, 4));
    h->bits |= _mm_cvtsi128_si32(b);
    h->below += x - kept;
    h->staged = ns;
    return x;
}
#endif

static void hist_keys(KeyHist *h, const int32_t *r, Py_ssize_t n)
{
    Py_ssize_t x = 0;
#if MC_AVX2
    if (mc_avx2)
        x = stage_keys8(h, r, n);
#endif
    int32_t *stage = h->stage, floor = h->floor, bits = 0;
    Py_ssize_t ns = h->staged;
    int64_t below = 0;
    for (; x < n; x++) { /* branch-free: the key is written, and kept when at or above the floor */
        int32_t k = r[x];
        stage[ns] = k;
        ns += k >= floor;
        below += k < floor;
        bits |= k;
    }
    h->bits |= bits;
    h->below += below;
    h->staged = ns;
    if (ns >= MC_STAGE)
        hist_flush(h);
}

/* How a block's predictions land in the residual buffer (times 1024, p):
 *   MC_STORE: res = p, the first of the two directions covering the pixel;
 *   MC_ONE:   res = |2048 c - 2 p|, the only direction covering it;
 *   MC_SUM:   res = |2048 c - (res + p)|, the second direction, over the stored first. */
enum { MC_STORE = 0, MC_ONE = 1, MC_SUM = 2 };

static inline int32_t finish(int mode, int32_t c, int32_t p, int32_t stored)
{
    int32_t key = mode == MC_ONE ? c * MC_SCALE - 2 * p : c * MC_SCALE - (stored + p);
    return mode == MC_STORE ? p : (key < 0 ? -key : key);
}

#if defined(__SSE2__)
/* The same for four predictions (int32 lanes). */
static inline __m128i finish4(int mode, __m128i c, __m128i p, __m128i stored)
{
    if (mode == MC_STORE)
        return p;
    __m128i c2048 = _mm_slli_epi32(c, 11);
    __m128i key = mode == MC_ONE ? _mm_sub_epi32(c2048, _mm_slli_epi32(p, 1)) : _mm_sub_epi32(c2048, _mm_add_epi32(stored, p));
    __m128i sign = _mm_srai_epi32(key, 31);
    return _mm_sub_epi32(_mm_xor_si128(key, sign), sign);
}
#endif

#if MC_AVX2
/* The same for eight predictions. */
AVX2_FN static inline __m256i finish8(int mode, __m256i c, __m256i p, const int32_t *stored)
{
    if (mode == MC_STORE)
        return p;
    __m256i c2048 = _mm256_slli_epi32(c, 11);
    __m256i key = mode == MC_ONE ? _mm256_sub_epi32(c2048, _mm256_slli_epi32(p, 1))
                                 : _mm256_sub_epi32(c2048, _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)stored), p));
    return _mm256_abs_epi32(key);
}

/* One row's whole- or quarter-pel predictions, 16 pixels a step; returns the pixels done. */
AVX2_FN static inline Py_ssize_t row_write16(const uint8_t *c, TapRows a, Py_ssize_t n, const Shift *t, int mode,
                                             const int32_t *r, int32_t *o)
{
    const __m256i qv[4] = {_mm256_set1_epi16(t->q[0]), _mm256_set1_epi16(t->q[1]), _mm256_set1_epi16(t->q[2]),
                           _mm256_set1_epi16(t->q[3])};
    Py_ssize_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i lo, hi;
        if (t->whole) {
            lo = _mm256_slli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(a.a0 + i))), 10);
            hi = _mm256_slli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(a.a0 + i + 8))), 10);
        } else {
            __m256i p16 = taps16_quarter(a.a0 + i, a.a1 + i, qv);
            lo = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(p16)), 6);
            hi = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(p16, 1)), 6);
        }
        __m256i clo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(c + i)));
        __m256i chi = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(c + i + 8)));
        __m256i klo = finish8(mode, clo, lo, r + i), khi = finish8(mode, chi, hi, r + i + 8);
        _mm256_storeu_si256((__m256i *)(o + i), klo);
        _mm256_storeu_si256((__m256i *)(o + i + 8), khi);
    }
    return i;
}
#endif

#if MC_AVX2
/* A 16-pixel-wide block whose taps all lie inside the frame, every row in one call. */
AVX2_FN static void block_write16(const uint8_t *c, Py_ssize_t cs, const uint8_t *a0, Py_ssize_t as, Py_ssize_t rows,
                                  const Shift *t, int mode, int32_t *r, Py_ssize_t rs, KeyHist *h, Py_ssize_t x,
                                  Py_ssize_t y0)
{
    if (h && h->bins && !h->cells && mode != MC_STORE) {
        /* Only the histogram wants the final keys (mvres): stage_keys8 inlined for the block's
         * rows, the OR of the keys kept in a register until the block is done. */
        const __m256i below_floor = _mm256_set1_epi32(h->floor - 1);
        __m256i bits = _mm256_setzero_si256();
        int kept = 0;
        for (Py_ssize_t y = 0; y < rows; y++, c += cs, a0 += as, r += rs) {
            TapRows a = {a0, a0 + as};
            int32_t *o = h->row ? h->row : r;
            row_write16(c, a, 16, t, mode, r, o);
            for (int half = 0; half < 16; half += 8) {
                __m256i v = _mm256_loadu_si256((const __m256i *)(o + half));
                bits = _mm256_or_si256(bits, v);
                int m = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(v, below_floor)));
                __m256i lanes = _mm256_loadu_si256((const __m256i *)stage_lanes[m]);
                _mm256_storeu_si256((__m256i *)(h->stage + h->staged), _mm256_permutevar8x32_epi32(v, lanes));
                int n = __builtin_popcount((unsigned)m);
                h->staged += n;
                kept += n;
            }
            if (h->staged >= MC_STAGE)
                hist_flush(h);
        }
        __m128i b = _mm_or_si128(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
        b = _mm_or_si128(b, _mm_srli_si128(b, 8));
        b = _mm_or_si128(b, _mm_srli_si128(b, 4));
        h->bits |= _mm_cvtsi128_si32(b);
        h->below += 16 * rows - kept;
        return;
    }
    for (Py_ssize_t y = 0; y < rows; y++, c += cs, a0 += as, r += rs) {
        TapRows a = {a0, a0 + as};
        int32_t *o = h && h->row && mode != MC_STORE ? h->row : r;
        row_write16(c, a, 16, t, mode, r, o);
        if (h && mode != MC_STORE)
            final_keys(h, o, x, y0 + y, 16);
    }
}
#endif

/* Write one block's predictions into res (rows of width) in the given mode. */
static void block_write(const Plane8 *cur, const Plane8 *ref, const Shift *t, Py_ssize_t xa, Py_ssize_t xb,
                        Py_ssize_t ya, Py_ssize_t yb, Py_ssize_t height, Py_ssize_t width, int mode, int32_t *res,
                        uint8_t *tmp, Py_ssize_t tstride, KeyHist *h)
{
    Py_ssize_t n = xb - xa;
    int direct = taps_inside_x(t, xa, xb, width);
#if MC_AVX2
    if (mc_avx2 && n == 16 && direct && (t->whole || t->quarter) && taps_inside_y(t, ya, yb, height)) {
        block_write16(cur->buf + ya * cur->stride + xa, cur->stride, ref->buf + (ya + t->oy) * ref->stride + xa + t->ox,
                      ref->stride, yb - ya, t, mode, res + ya * width + xa, width, h, xa, ya);
        return;
    }
#endif
    for (Py_ssize_t y = ya; y < yb; y++) {
        const uint8_t *c = cur->buf + y * cur->stride + xa;
        int32_t *r = res + y * width + xa, *o = h && h->row && mode != MC_STORE ? h->row : r;
        TapRows a = tap_rows(ref, t, xa, n, y, height, width, direct, tmp, tstride);
        Py_ssize_t i = 0;
        if (t->whole || t->quarter) {
#if MC_AVX2
            if (mc_avx2)
                i = row_write16(c, a, n, t, mode, r, o);
#endif
#if defined(__SSE2__)
            const __m128i z = _mm_setzero_si128();
            const __m128i qv[4] = {_mm_set1_epi16(t->q[0]), _mm_set1_epi16(t->q[1]), _mm_set1_epi16(t->q[2]),
                                   _mm_set1_epi16(t->q[3])};
            for (; i + 8 <= n; i += 8) {
                __m128i p16, plo, phi;
                if (t->whole) {
                    p16 = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(a.a0 + i)), z);
                    plo = _mm_slli_epi32(_mm_unpacklo_epi16(p16, z), 10);
                    phi = _mm_slli_epi32(_mm_unpackhi_epi16(p16, z), 10);
                } else {
                    p16 = taps8_quarter(a.a0 + i, a.a1 + i, qv);
                    plo = _mm_slli_epi32(_mm_unpacklo_epi16(p16, z), 6);
                    phi = _mm_slli_epi32(_mm_unpackhi_epi16(p16, z), 6);
                }
                __m128i c16 = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(c + i)), z);
                __m128i slo = mode == MC_SUM ? _mm_loadu_si128((const __m128i *)(r + i)) : z;
                __m128i shi = mode == MC_SUM ? _mm_loadu_si128((const __m128i *)(r + i + 4)) : z;
                _mm_storeu_si128((__m128i *)(o + i), finish4(mode, _mm_unpacklo_epi16(c16, z), plo, slo));
                _mm_storeu_si128((__m128i *)(o + i + 4), finish4(mode, _mm_unpackhi_epi16(c16, z), phi, shi));
            }
#endif
        }
        for (; i < n; i++)
            o[i] = finish(mode, c[i], pred_taps(t, a, i), r[i]);
        if (h && mode != MC_STORE)
            final_keys(h, o, xa, y, n);
    }
}

/* The final pass: pixels no vector covers are predicted by the co-located fallback pixel (and
 * counted in h, when given). */
static void mc_finish(const Plane8 *cur, const Plane8 *fallback, const uint8_t *total, Py_ssize_t uw, Py_ssize_t unit,
                      Py_ssize_t height, Py_ssize_t width, int32_t *res, KeyHist *h)
{
    for (Py_ssize_t y = 0; y < height; y++) {
        const uint8_t *c = cur->buf + y * cur->stride, *f = fallback->buf + y * fallback->stride;
        const uint8_t *tr = total + (y / unit) * uw;
        int32_t *r = res + y * width;
        for (Py_ssize_t x0 = 0, u = 0; x0 < width; x0 += unit, u++)
            if (tr[u] == 0) {
                Py_ssize_t x1 = x0 + unit < width ? x0 + unit : width;
                int32_t *o = h && h->row ? h->row : r + x0;
                for (Py_ssize_t x = x0; x < x1; x++) {
                    int32_t key = (c[x] - f[x]) * MC_SCALE;
                    o[x - x0] = key < 0 ? -key : key;
                }
                if (h)
                    final_keys(h, o, x0, y, x1 - x0);
            }
    }
}

/* The units [x0, x1) x [y0, y1) of a block on the unit grid, clipped to it. */
typedef struct {
    Py_ssize_t x0, x1, y0, y1;
} Units;

static inline Units units_of(const McBlock *b, Py_ssize_t unit, Py_ssize_t uh, Py_ssize_t uw)
{
    Units u = {clampz(b->x0 / unit, 0, uw), clampz(b->x0 / unit + b->w / unit, 0, uw), clampz(b->y0 / unit, 0, uh),
               clampz(b->y0 / unit + b->h / unit, 0, uh)};
    return u;
}

/* The body of motion_residual, on buffers the caller holds (no Python calls: runs without the GIL).
 * Blocks are handled in the order the decoder listed them (macroblock by macroblock, both
 * directions together), so a pixel's second prediction finds its first still in cache. */
static int mc_frame(const Plane8 *cur, const Plane8 *refs, Py_ssize_t nref, Py_ssize_t height, Py_ssize_t width,
                    const McBlock *blocks, Py_ssize_t nblocks, Py_ssize_t unit, int32_t *res_out, float *mag_out,
                    int32_t *dist_out, int64_t *hist, int32_t hist_floor, int *aligned, int64_t *below_out,
                    int64_t *cells, Py_ssize_t cell, int keep, int64_t *covered_out)
{
    Py_ssize_t depth = (nref - 1) / 2, uh = (height + unit - 1) / unit, uw = (width + unit - 1) / unit;
    Py_ssize_t units = uh * uw;
    int status = 0;
    int32_t *owner = malloc(sizeof(int32_t) * (size_t)units);
    uint8_t *total = calloc((size_t)units, 1), *written = calloc((size_t)units, 1);
    float *mag[2] = {calloc((size_t)units, sizeof(float)), calloc((size_t)units, sizeof(float))};
    int *cands[2] = {malloc(sizeof(int) * (size_t)(depth + 1)), malloc(sizeof(int) * (size_t)(depth + 1))};
    Py_ssize_t tstride = width + 64; /* two gathered border rows of taps (block_sad, block_write) */
    uint8_t *tmp = malloc((size_t)(2 * tstride));
    KeyHist kh = {NULL, NULL, 0, 1, 0, 0, NULL, 1, 0, NULL}, *h = NULL;
    if (hist && res_out) {
        kh.bins = calloc(4 * MC_HIST_BINS, sizeof(int32_t));
        /* A block row or a unit row is staged before the stage is flushed (plus 8 for the
         * packed stores' spare lanes). */
        kh.stage = malloc(sizeof(int32_t) * (size_t)(MC_STAGE + width + 8));
        kh.floor = hist_floor > 1 ? hist_floor : 1; /* zeros are counted apart either way */
        h = &kh;
    }
    if (cells && res_out) {
        kh.cells = cells;
        kh.cell = cell;
        kh.cols = (width + cell - 1) / cell;
        memset(cells, 0, sizeof(int64_t) * (size_t)(kh.cols * ((height + cell - 1) / cell)));
        h = &kh;
    }
    if (h && !keep)
        kh.row = malloc(sizeof(int32_t) * (size_t)(width + 64));
    if (!owner || !total || !written || !mag[0] || !mag[1] || !cands[0] || !cands[1] || !tmp ||
        (hist && res_out && (!kh.bins || !kh.stage)) || (h && !keep && !kh.row)) {
        status = -1;
        goto done;
    }
    /* A direction takes part when it has vectors and reference frames to try. */
    int ncand[2] = {0, 0}, active[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        int dir = k ? 1 : -1;
        for (Py_ssize_t d = 1; d <= depth; d++)
            if (refs[depth + dir * d].buf)
                cands[k][ncand[k]++] = (int)d;
        for (Py_ssize_t i = 0; i < nblocks && !active[k]; i++)
            active[k] = blocks[i].dir == dir && ncand[k] > 0;
    }
    /* Later blocks overwrite earlier ones in the numpy path's painted grids; with no overlap
     * within a direction (checked here, else the caller takes that path) every pixel has at most
     * one block per direction, and total counts the directions covering each unit. */
    for (int k = 0; k < 2; k++) {
        int dir = k ? 1 : -1;
        if (!active[k])
            continue;
        for (Py_ssize_t u = 0; u < units; u++)
            owner[u] = -1;
        for (int pass = 0; pass < 2; pass++)
            for (Py_ssize_t i = 0; i < nblocks; i++) {
                if (blocks[i].dir != dir)
                    continue;
                Units r = units_of(&blocks[i], unit, uh, uw);
                for (Py_ssize_t uy = r.y0; uy < r.y1; uy++)
                    for (Py_ssize_t ux = r.x0; ux < r.x1; ux++) {
                        int32_t *o = &owner[uy * uw + ux];
                        if (pass == 0)
                            *o = (int32_t)i;
                        else if (*o != (int32_t)i) {
                            status = 2;
                            goto done;
                        } else
                            total[uy * uw + ux] += 1;
                    }
            }
    }
    for (Py_ssize_t i = 0; i < nblocks; i++) {
        const McBlock *b = &blocks[i];
        int k = b->dir > 0;
        if (b->dir == 0 || !active[k])
            continue;
        Py_ssize_t xa = clampz(b->x0, 0, width), xb = clampz((Py_ssize_t)b->x0 + b->w, 0, width);
        Py_ssize_t ya = clampz(b->y0, 0, height), yb = clampz((Py_ssize_t)b->y0 + b->h, 0, height);
        Shift t = shift_of(b->dx32, b->dy32);
        int best = 0;
        int64_t best_sad = INT64_MAX;
        /* Ties keep the nearest reference (numpy's argmin); a lone candidate needs no SAD. */
        for (int j = 0; j < ncand[k] && ncand[k] > 1; j++) {
            int64_t sad = block_sad(cur, &refs[depth + b->dir * cands[k][j]], &t, xa, xb, ya, yb, height, width,
                                    best_sad, tmp, tstride);
            if (sad < best_sad) {
                best_sad = sad;
                best = j;
            }
        }
        int d = cands[k][best];
        dist_out[i] = d;
        float per_frame = (float)((double)b->hyp / (double)d);
        Units r = units_of(b, unit, uh, uw);
        /* Each unit's mode: the only direction, or the first / second of two. */
        int mode0 = -1, uniform = 1;
        for (Py_ssize_t uy = r.y0; uy < r.y1; uy++)
            for (Py_ssize_t ux = r.x0; ux < r.x1; ux++) {
                Py_ssize_t u = uy * uw + ux;
                int mode = total[u] == 1 ? MC_ONE : (written[u] ? MC_SUM : MC_STORE);
                uniform &= mode0 < 0 || mode == mode0;
                mode0 = mode;
                mag[k][u] = per_frame;
            }
        if (res_out && xb > xa && yb > ya) {
            const Plane8 *ref = &refs[depth + b->dir * d];
            if (uniform) {
                block_write(cur, ref, &t, xa, xb, ya, yb, height, width, mode0, res_out, tmp, tstride, h);
            } else {
                for (Py_ssize_t uy = r.y0; uy < r.y1; uy++)
                    for (Py_ssize_t ux = r.x0; ux < r.x1; ux++) {
                        Py_ssize_t u = uy * uw + ux;
                        int mode = total[u] == 1 ? MC_ONE : (written[u] ? MC_SUM : MC_STORE);
                        Py_ssize_t x0 = ux * unit, x1 = x0 + unit < width ? x0 + unit : width;
                        Py_ssize_t y0 = uy * unit, y1 = y0 + unit < height ? y0 + unit : height;
                        block_write(cur, ref, &t, x0, x1, y0, y1, height, width, mode, res_out, tmp, tstride, h);
                    }
            }
        }
        for (Py_ssize_t uy = r.y0; uy < r.y1; uy++)
            for (Py_ssize_t ux = r.x0; ux < r.x1; ux++)
                written[uy * uw + ux] += 1;
    }
    /* numpy: mag_sum = 0 + past + future (0 where a direction does not cover), / max(n, 1). */
    for (Py_ssize_t u = 0; u < units; u++) {
        float sum = 0.0f;
        sum += mag[0][u];
        sum += mag[1][u];
        mag_out[u] = sum / (float)(total[u] > 1 ? total[u] : 1);
    }
    int64_t covered = 0;
    for (Py_ssize_t uy = 0; uy < uh; uy++) {
        Py_ssize_t rows = (uy + 1) * unit < height ? unit : height - uy * unit;
        for (Py_ssize_t ux = 0; ux < uw; ux++)
            if (total[uy * uw + ux])
                covered += rows * ((ux + 1) * unit < width ? unit : width - ux * unit);
    }
    *covered_out = covered;
    if (res_out) {
        /* Pixels no vector covers are predicted by the co-located pixel of the nearest past
         * frame, else the nearest future frame, else themselves. */
        const Plane8 *fallback =
            refs[depth - 1].buf ? &refs[depth - 1] : (refs[depth + 1].buf ? &refs[depth + 1] : cur);
        mc_finish(cur, fallback, total, uw, unit, height, width, res_out, h);
        if (kh.bins) {
            hist_flush(&kh);
            const int32_t *bins = kh.bins;
            for (int b = 0; b < MC_HIST_BINS; b++)
                hist[b] = (int64_t)bins[b] + bins[MC_HIST_BINS + b] + bins[2 * MC_HIST_BINS + b] + bins[3 * MC_HIST_BINS + b];
            /* Below a floor of 1 every key is 0: bin 0. */
            if (kh.floor == 1)
                hist[0] += kh.below;
            else
                *below_out = kh.below;
            *aligned = (kh.bits & ((1 << MC_HIST_SHIFT) - 1)) == 0;
        }
    }
done:
    free(owner);
    free(total);
    free(written);
    free(mag[0]);
    free(mag[1]);
    free(cands[0]);
    free(cands[1]);
    free(tmp);
    free(kh.bins);
    free(kh.stage);
    free(kh.row);
    return status;
}

static int get_u8_plane(PyObject *obj, Py_buffer *view, Py_ssize_t h, Py_ssize_t w, const char *name)
{
    if (get_plane(obj, view, name) < 0)
        return -1;
    if (view->shape[0] != h || view->shape[1] != w) {
        PyErr_Format(PyExc_ValueError, "Invalid %s plane. Supported values are %zdx%zd.", name, w, h);
        PyBuffer_Release(view);
        view->obj = NULL;
        return -1;
    }
    return 0;
}

static int get_out(PyObject *obj, Py_buffer *view, Py_ssize_t bytes, const char *name)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        return -1;
    if (view->len != bytes) {
        PyErr_Format(PyExc_ValueError, "Invalid %s array (%zd bytes). Supported values are %zd bytes.", name,
                     view->len, bytes);
        PyBuffer_Release(view);
        view->obj = NULL;
        return -1;
    }
    return 0;
}

static PyObject *motion_residual(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *cur_obj, *refs_obj, *mvs_obj, *hyp_obj, *res_obj, *mag_obj, *dist_obj, *hist_obj, *counts_obj, *cells_obj;
    Py_ssize_t cell = 0;
    int keep = 1, hist_floor = 0;
    PyObject *result = NULL;
    Py_ssize_t unit;
    if (!PyArg_ParseTuple(args, "OOOOnOOOOiOOnp", &cur_obj, &refs_obj, &mvs_obj, &hyp_obj, &unit, &res_obj, &mag_obj,
                          &dist_obj, &hist_obj, &hist_floor, &counts_obj, &cells_obj, &cell, &keep))
        return NULL;
    if (hist_floor < 0 || hist_floor % (1 << MC_HIST_SHIFT)) {
        PyErr_SetString(PyExc_ValueError, "Invalid histogram floor. Supported values are multiples of 64 from 0.");
        return NULL;
    }
    if (!PyTuple_Check(refs_obj) || PyTuple_GET_SIZE(refs_obj) < 3 || PyTuple_GET_SIZE(refs_obj) % 2 == 0 ||
        unit < 1) {
        PyErr_SetString(PyExc_ValueError, "Invalid references. Supported values are a tuple of 2*depth+1 planes "
                                          "or None (centre: the frame itself) and a unit of at least 1.");
        return NULL;
    }
    Py_ssize_t nref = PyTuple_GET_SIZE(refs_obj);
    Py_buffer cur = {0}, mvs = {0}, hyp = {0}, res = {0}, mag = {0}, dist = {0}, hist = {0}, counts = {0}, cells = {0};
    Py_buffer *refv = calloc((size_t)nref, sizeof(Py_buffer));
    Plane8 *planes = calloc((size_t)nref, sizeof(Plane8));
    McBlock *blocks = NULL;
    if (!refv || !planes) {
        PyErr_NoMemory();
        goto done;
    }
    if (get_plane(cur_obj, &cur, "current") < 0)
        goto done;
    Py_ssize_t h = cur.shape[0], w = cur.shape[1];
    for (Py_ssize_t i = 0; i < nref; i++) {
        PyObject *o = PyTuple_GET_ITEM(refs_obj, i);
        if (o == Py_None || i == (nref - 1) / 2)
            continue;
        if (get_u8_plane(o, &refv[i], h, w, "reference") < 0)
            goto done;
        planes[i].buf = refv[i].buf;
        planes[i].stride = refv[i].strides[0];
    }
    planes[(nref - 1) / 2].buf = NULL; /* a frame is not its own reference */
    if (PyObject_GetBuffer(mvs_obj, &mvs, PyBUF_C_CONTIGUOUS) < 0 ||
        PyObject_GetBuffer(hyp_obj, &hyp, PyBUF_C_CONTIGUOUS) < 0)
        goto done;
    Py_ssize_t n = mvs.len / (8 * 4);
    if (mvs.len != n * 32 || hyp.len != n * 4) {
        PyErr_SetString(PyExc_ValueError, "Invalid vectors. Supported values are (N, 8) int32 and (N,) float32.");
        goto done;
    }
    Py_ssize_t uh = (h + unit - 1) / unit, uw = (w + unit - 1) / unit;
    if (res_obj != Py_None && get_out(res_obj, &res, h * w * 4, "residual") < 0)
        goto done;
    if (get_out(mag_obj, &mag, uh * uw * 4, "magnitude") < 0 || get_out(dist_obj, &dist, n * 4, "distance") < 0 ||
        get_out(counts_obj, &counts, 2 * ((nref - 1) / 2 + 1) * 8, "distance counts") < 0)
        goto done;
    if (res.obj && hist_obj != Py_None && get_out(hist_obj, &hist, MC_HIST_BINS * 8, "key histogram") < 0)
        goto done;
    if (res.obj && cells_obj != Py_None) {
        if (cell < 1 || cell > 4096) {
            PyErr_SetString(PyExc_ValueError, "Invalid cell size. Supported values are 1 to 4096.");
            goto done;
        }
        if (get_out(cells_obj, &cells, ((h + cell - 1) / cell) * ((w + cell - 1) / cell) * 8, "cell sums") < 0)
            goto done;
    }
    blocks = malloc(sizeof(McBlock) * (size_t)(n ? n : 1));
    if (!blocks) {
        PyErr_NoMemory();
        goto done;
    }
    const int32_t *m = mvs.buf;
    const float *hv = hyp.buf;
    int status = 0;
    for (Py_ssize_t i = 0; i < n && !status; i++) {
        const int32_t *r = m + 8 * i;
        int32_t bw = r[2], bh = r[3], scale = r[6] > 1 ? r[6] : 1;
        McBlock *b = &blocks[i];
        b->w = bw;
        b->h = bh;
        b->x0 = r[0] - bw / 2;
        b->y0 = r[1] - bh / 2;
        b->dir = r[7] > 0 ? 1 : (r[7] < 0 ? -1 : 0);
        b->hyp = hv[i];
        int64_t mx = (int64_t)r[4] * 32, my = (int64_t)r[5] * 32;
        /* Exact only for coordinates on OpenCV's 1/32 grid, blocks on the unit grid, and
         * displacements well inside the int16 range OpenCV saturates to. */
        if (bw < 1 || bh < 1 || mx % scale || my % scale || bw % unit || bh % unit || b->x0 % unit ||
            b->y0 % unit || llabs(mx / scale) > 32 * 16384 || llabs(my / scale) > 32 * 16384)
            status = 1;
        b->dx32 = (int32_t)(mx / scale);
        b->dy32 = (int32_t)(my / scale);
    }
    int64_t covered = 0, below = 0;
    int aligned = 0;
    if (!status) {
        memset(dist.buf, 0, (size_t)dist.len);
        Plane8 c = {cur.buf, cur.strides[0]};
        Py_BEGIN_ALLOW_THREADS
        status = mc_frame(&c, planes, nref, h, w, blocks, n, unit, res.obj ? res.buf : NULL, mag.buf, dist.buf,
                          hist.obj ? hist.buf : NULL, (int32_t)hist_floor, &aligned, &below, cells.obj ? cells.buf : NULL,
                          cell, keep || !cells.obj, &covered);
        Py_END_ALLOW_THREADS
        /* Per direction (past, future), how many vectors chose each distance (0: none used). */
        int64_t *cnt = counts.buf;
        const int32_t *dv = dist.buf;
        Py_ssize_t span = (nref - 1) / 2 + 1;
        memset(cnt, 0, (size_t)counts.len);
        for (Py_ssize_t i = 0; i < n && status == 0; i++)
            if (blocks[i].dir != 0 && dv[i] > 0)
                cnt[(blocks[i].dir > 0) * span + dv[i]] += 1;
        if (status < 0) {
            PyErr_NoMemory();
            goto done;
        }
    }
    result = Py_BuildValue("iLiL", status, (long long)covered, aligned, (long long)below);
done:
    free(blocks);
    if (refv) {
        for (Py_ssize_t i = 0; i < nref; i++)
            if (refv[i].obj)
                PyBuffer_Release(&refv[i]);
        free(refv);
    }
    free(planes);
    Py_buffer *views[] = {&cur, &mvs, &hyp, &res, &mag, &dist, &hist, &counts, &cells};
    for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++)
        if (views[i]->obj)
            PyBuffer_Release(views[i]);
    return result;
}

/* The side of the coarsest grid every block of (N, 8) vectors aligns with: the gcd of the block
 * sizes and of the |corners| (dst - size / 2), 1 when all are 0 (numpy: np.gcd.reduce ... or 1). */
static PyObject *block_unit(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *mvs_obj;
    if (!PyArg_ParseTuple(args, "O", &mvs_obj))
        return NULL;
    Py_buffer mvs = {0};
    if (PyObject_GetBuffer(mvs_obj, &mvs, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (mvs.len % 32) {
        PyBuffer_Release(&mvs);
        PyErr_SetString(PyExc_ValueError, "Invalid vectors. Supported values are (N, 8) int32.");
        return NULL;
    }
    const int32_t *m = mvs.buf;
    Py_ssize_t n = mvs.len / 32;
    int64_t g = 0;
    for (Py_ssize_t i = 0; i < n && g != 1; i++) {
        const int32_t *r = m + 8 * i;
        /* numpy's floor division of the (positive) sizes by 2 */
        int64_t bw = r[2], bh = r[3], x0 = (int64_t)r[0] - (bw >= 0 ? bw / 2 : -((-bw + 1) / 2));
        int64_t y0 = (int64_t)r[1] - (bh >= 0 ? bh / 2 : -((-bh + 1) / 2));
        int64_t v[4] = {bw, bh, x0, y0};
        for (int j = 0; j < 4; j++) {
            int64_t a = v[j] < 0 ? -v[j] : v[j], b = g;
            while (b) {
                int64_t t = a % b;
                a = b;
                b = t;
            }
            g = a;
        }
    }
    PyBuffer_Release(&mvs);
    return PyLong_FromLongLong(g ? g : 1);
}

/* Counts of (key >> shift) - lo over the residual keys, for the bins [0, len(out)): a coarse
 * histogram finds the bin holding a rank, a fine one over that bin the key itself, both small
 * enough to stay in cache (one histogram of every key would not). */
static PyObject *key_histogram(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *keys_obj, *out_obj;
    int shift;
    long long lo;
    if (!PyArg_ParseTuple(args, "OiLO", &keys_obj, &shift, &lo, &out_obj))
        return NULL;
    Py_buffer keys = {0}, out = {0};
    if (PyObject_GetBuffer(keys_obj, &keys, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (keys.len % 4 || shift < 0 || shift > 30 || PyObject_GetBuffer(out_obj, &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "Invalid keys. Supported values are int32 keys and a shift of 0 to 30.");
        PyBuffer_Release(&keys);
        return NULL;
    }
    const int32_t *k = keys.buf;
    int64_t *o = out.buf;
    Py_ssize_t n = keys.len / 4, bins = out.len / 8;
    memset(o, 0, (size_t)out.len);
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t i = 0;
#if defined(__SSE2__)
    /* Most keys fall outside the bins asked for (a high percentile's bin holds few pixels):
     * skip four at a time when none is inside. */
    if (shift == 0 && lo >= 0 && lo + bins <= INT32_MAX) {
        const __m128i lo_v = _mm_set1_epi32((int32_t)lo - 1), hi_v = _mm_set1_epi32((int32_t)(lo + bins));
        for (; i + 4 <= n; i += 4) {
            __m128i v = _mm_loadu_si128((const __m128i *)(k + i));
            __m128i in = _mm_and_si128(_mm_cmpgt_epi32(v, lo_v), _mm_cmplt_epi32(v, hi_v));
            if (_mm_movemask_epi8(in))
                for (int j = 0; j < 4; j++) {
                    long long b = (long long)k[i + j] - lo;
                    if (b >= 0 && b < bins)
                        o[b] += 1;
                }
        }
    }
#endif
    for (; i < n; i++) {
        long long b = (long long)(k[i] >> shift) - lo;
        if (b >= 0 && b < bins)
            o[b] += 1;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&keys);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

/* numpy's float64 pairwise summation (DOUBLE_pairwise_sum) of a contiguous run. */
static double np_pairwise(const double *a, Py_ssize_t n)
{
    if (n < 8) {
        double res = 0.;
        for (Py_ssize_t i = 0; i < n; i++)
            res += a[i];
        return res;
    }
    if (n <= 128) {
        double r[8];
        Py_ssize_t i;
        for (int j = 0; j < 8; j++)
            r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++)
                r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res += a[i];
        return res;
    }
    Py_ssize_t n2 = n / 2;
    n2 -= n2 % 8;
    return np_pairwise(a, n2) + np_pairwise(a + n2, n - n2);
}

/* np_pairwise of 16 values, unrolled: eight running sums of two values, added in pairs. */
static inline double pairwise16(const double *a)
{
    double r0 = a[0] + a[8], r1 = a[1] + a[9], r2 = a[2] + a[10], r3 = a[3] + a[11];
    double r4 = a[4] + a[12], r5 = a[5] + a[13], r6 = a[6] + a[14], r7 = a[7] + a[15];
    return ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7));
}

enum { CELL_MV = 0, CELL_RESIDUAL = 1, CELL_MVRES = 2 };

typedef struct {
    int mode;
    const int32_t *keys;
    const float *mag;
    Py_ssize_t unit, uw;
    float mv_scale, res_scale, mv_weight, res_weight;
} CellSource;

#if MC_AVX2
/* fuse_mvres of eight pixels in float32: the same operations as the loops in cell_rows
 * (division, not a reciprocal; min/max). */
AVX2_FN static inline __m256 fuse8(const int32_t *k, const float *motion, __m256 inv, __m256 rsv, __m256 rwv)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 r = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)k)), inv);
    r = _mm256_min_ps(_mm256_div_ps(r, rsv), one);
    __m256 f = _mm256_add_ps(_mm256_loadu_ps(motion), _mm256_mul_ps(r, rwv));
    return _mm256_max_ps(_mm256_min_ps(f, one), _mm256_setzero_ps());
}

/* fuse_mvres of one row, eight pixels a step, into buf as doubles; returns the pixels done. */
AVX2_FN static Py_ssize_t fuse_row8(const int32_t *k, const float *motion, double *buf, Py_ssize_t width, float inv_scale,
                                    float rs, float rw)
{
    const __m256 inv = _mm256_set1_ps(inv_scale), rsv = _mm256_set1_ps(rs), rwv = _mm256_set1_ps(rw);
    Py_ssize_t x = 0;
    for (; x + 8 <= width; x += 8) {
        __m256 f = fuse8(k + x, motion + x, inv, rsv, rwv);
        _mm256_storeu_pd(buf + x, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
        _mm256_storeu_pd(buf + x + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
    }
    return x;
}

/* pairwise16 of one cell's 16 fused values, as the two halves ((r0 + r1) + (r2 + r3), (r4 + r5) +
 * (r6 + r7)) with r_j = a[j] + a[j + 8]: the same additions in the same order, in registers. */
AVX2_FN static inline __m128d fused_halves16(const int32_t *k, const float *motion, __m256 inv, __m256 rsv, __m256 rwv)
{
    __m256 f0 = fuse8(k, motion, inv, rsv, rwv), f1 = fuse8(k + 8, motion + 8, inv, rsv, rwv);
    __m256d r03 = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(f0)), _mm256_cvtps_pd(_mm256_castps256_ps128(f1)));
    __m256d r47 = _mm256_add_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(f0, 1)), _mm256_cvtps_pd(_mm256_extractf128_ps(f1, 1)));
    __m256d p = _mm256_hadd_pd(r03, r47); /* r0 + r1, r4 + r5, r2 + r3, r6 + r7 */
    return _mm_add_pd(_mm256_castpd256_pd128(p), _mm256_extractf128_pd(p, 1));
}

/* One row of 16-pixel cells (width a multiple of 16) of the fused map: each cell's pairwise16
 * added to its total in out, without writing the row's values to memory. */
AVX2_FN static void fused_row_cells16(const int32_t *k, const float *motion, double *out, Py_ssize_t cols,
                                      float inv_scale, float rs, float rw)
{
    const __m256 inv = _mm256_set1_ps(inv_scale), rsv = _mm256_set1_ps(rs), rwv = _mm256_set1_ps(rw);
    Py_ssize_t c = 0;
    for (; c + 2 <= cols; c += 2, k += 32, motion += 32) {
        __m128d a = fused_halves16(k, motion, inv, rsv, rwv), b = fused_halves16(k + 16, motion + 16, inv, rsv, rwv);
        _mm_storeu_pd(out + c, _mm_add_pd(_mm_loadu_pd(out + c), _mm_hadd_pd(a, b)));
    }
    if (c < cols) {
        __m128d a = fused_halves16(k, motion, inv, rsv, rwv);
        out[c] += _mm_cvtsd_f64(_mm_hadd_pd(a, a));
    }
}
#endif

/* Per-cell sums of one map row by row. rowsum (cols doubles) and isum (cols int64) are work space.
 *   mv: the rows of one unit row are equal, so their cell sums are taken once and added per row.
 *   residual: every value is key / 2048 with key < 2^20, so numpy's float64 sums of a cell are
 *     exact (below 2^53 units of 1/2048 whatever the order) and equal the integer sum / 2048.
 *   mvres: the fused value per pixel, summed in numpy's order. */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static void cell_rows(const CellSource *s, Py_ssize_t height, Py_ssize_t width, Py_ssize_t cell, double *sums,
                      double *buf, float *motion, double *rowsum, int64_t *isum)
{
    Py_ssize_t cols = (width + cell - 1) / cell, unit = s->unit;
    const float inv_scale = 1.0f / (float)MC_SCALE; /* a power of two: multiplying is dividing exactly */
    const float rs = s->res_scale, rw = s->res_weight;
    for (Py_ssize_t x = width; x < cols * cell; x++)
        buf[x] = 0.0; /* cell_means pads the map with zeros */
    if (s->mode == CELL_RESIDUAL) {
        for (Py_ssize_t y0 = 0; y0 < height; y0 += cell) {
            memset(isum, 0, sizeof(int64_t) * (size_t)cols);
            for (Py_ssize_t y = y0; y < y0 + cell && y < height; y++) {
                const int32_t *k = s->keys + y * width;
                for (Py_ssize_t c = 0; c < cols; c++) {
                    Py_ssize_t x1 = (c + 1) * cell < width ? (c + 1) * cell : width;
                    int64_t t = 0;
                    for (Py_ssize_t x = c * cell; x < x1; x++)
                        t += k[x];
                    isum[c] += t;
                }
            }
            double *out = sums + (y0 / cell) * cols;
            for (Py_ssize_t c = 0; c < cols; c++)
                out[c] = (double)isum[c] / (double)MC_SCALE;
        }
        return;
    }
    for (Py_ssize_t y = 0; y < height; y++) {
        int new_unit_row = y % unit == 0;
        if (new_unit_row) {
            /* The motion term of each pixel: its unit cell's (fuse_mvres, in float32). */
            const float *mrow = s->mag + (y / unit) * s->uw;
            for (Py_ssize_t x0 = 0, u = 0; x0 < width; x0 += unit, u++) {
                float m = mrow[u];
                if (s->mode == CELL_MVRES) {
                    m = m / s->mv_scale;
                    m = m < 1.0f ? m : 1.0f;
                    m = m > 0.0f ? m : 0.0f;
                    m = m * s->mv_weight;
                }
                for (Py_ssize_t x = x0; x < x0 + unit && x < width; x++)
                    motion[x] = m;
            }
        }
        double *out = sums + (y / cell) * cols;
        if (s->mode == CELL_MV && !new_unit_row) {
            for (Py_ssize_t c = 0; c < cols; c++)
                out[c] += rowsum[c];
            continue;
        }
#if MC_AVX2
        if (s->mode == CELL_MVRES && mc_avx2 && cell == 16 && width % 16 == 0) {
            fused_row_cells16(s->keys + y * width, motion, out, cols, inv_scale, rs, rw);
            continue;
        }
#endif
        if (s->mode == CELL_MV)
            for (Py_ssize_t x = 0; x < width; x++)
                buf[x] = (double)motion[x];
        else {
            const int32_t *k = s->keys + y * width;
            Py_ssize_t x = 0;
#if MC_AVX2
            if (mc_avx2)
                x = fuse_row8(k, motion, buf, width, inv_scale, rs, rw);
#endif
#if defined(__SSE2__)
            /* minps/maxps are exactly the comparisons below (and numpy's minimum/maximum
             * without NaN); the rest is the same float32 operations in the same order. */
            const __m128 inv = _mm_set1_ps(inv_scale), rsv = _mm_set1_ps(rs), rwv = _mm_set1_ps(rw);
            const __m128 one = _mm_set1_ps(1.0f), zero = _mm_setzero_ps();
            for (; x + 4 <= width; x += 4) {
                __m128 r = _mm_mul_ps(_mm_cvtepi32_ps(_mm_loadu_si128((const __m128i *)(k + x))), inv);
                r = _mm_min_ps(_mm_div_ps(r, rsv), one);
                __m128 f = _mm_add_ps(_mm_loadu_ps(motion + x), _mm_mul_ps(r, rwv));
                f = _mm_max_ps(_mm_min_ps(f, one), zero);
                _mm_storeu_pd(buf + x, _mm_cvtps_pd(f));
                _mm_storeu_pd(buf + x + 2, _mm_cvtps_pd(_mm_movehl_ps(f, f)));
            }
#endif
            for (; x < width; x++) {
                float r = ((float)k[x] * inv_scale) / rs;
                r = r < 1.0f ? r : 1.0f;
                float f = motion[x] + r * rw;
                f = f < 1.0f ? f : 1.0f;
                buf[x] = (double)(f > 0.0f ? f : 0.0f);
            }
        }
        for (Py_ssize_t c = 0; c < cols; c++)
            rowsum[c] = cell == 16 ? pairwise16(buf + c * 16) : np_pairwise(buf + c * cell, cell);
        for (Py_ssize_t c = 0; c < cols; c++)
            out[c] += rowsum[c];
    }
}

static PyObject *cell_sums(PyObject *self, PyObject *args)
{
    (void)self;
    int mode;
    PyObject *keys_obj, *mag_obj, *out_obj, *result = NULL;
    Py_ssize_t height, width, unit, cell;
    float mv_scale, res_scale, mv_weight, res_weight;
    if (!PyArg_ParseTuple(args, "iOOnnnnffffO", &mode, &keys_obj, &mag_obj, &height, &width, &unit, &cell, &mv_scale,
                          &res_scale, &mv_weight, &res_weight, &out_obj))
        return NULL;
    if (mode < CELL_MV || mode > CELL_MVRES || height < 1 || width < 1 || unit < 1 || cell < 1) {
        PyErr_SetString(PyExc_ValueError, "Invalid cell request. Supported modes are 0 (mv), 1 (residual), 2 (mvres).");
        return NULL;
    }
    Py_buffer keys = {0}, mag = {0}, out = {0};
    Py_ssize_t uw = (width + unit - 1) / unit, uh = (height + unit - 1) / unit;
    Py_ssize_t rows = (height + cell - 1) / cell, cols = (width + cell - 1) / cell;
    if (mode != CELL_MV && get_out(keys_obj, &keys, height * width * 4, "residual") < 0)
        goto done;
    if (mode != CELL_RESIDUAL && get_out(mag_obj, &mag, uh * uw * 4, "magnitude") < 0)
        goto done;
    if (get_out(out_obj, &out, rows * cols * 8, "cell sum") < 0)
        goto done;
    double *buf = malloc(sizeof(double) * (size_t)(cols * cell + cols));
    float *motion = malloc(sizeof(float) * (size_t)width);
    int64_t *isum = malloc(sizeof(int64_t) * (size_t)cols);
    if (!buf || !motion || !isum) {
        free(buf);
        free(motion);
        free(isum);
        PyErr_NoMemory();
        goto done;
    }
    CellSource s = {mode, keys.obj ? keys.buf : NULL, mag.obj ? mag.buf : NULL, unit, uw,
                    mv_scale, res_scale, mv_weight, res_weight};
    memset(out.buf, 0, (size_t)out.len);
    Py_BEGIN_ALLOW_THREADS
    cell_rows(&s, height, width, cell, out.buf, buf, motion, buf + cols * cell, isum);
    Py_END_ALLOW_THREADS
    free(buf);
    free(motion);
    free(isum);
    Py_INCREF(Py_None);
    result = Py_None;
done:
    if (keys.obj)
        PyBuffer_Release(&keys);
    if (mag.obj)
        PyBuffer_Release(&mag);
    if (out.obj)
        PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"motion_residual", motion_residual, METH_VARARGS,
     "motion_residual(cur, refs, mvs, hyp, unit, residual_out, magnitude_out, distance_out, histogram_out,\n"
     "histogram_floor, counts_out, cells_out, cell, keep_keys)\n"
     "-> (status, covered_pixels, keys_aligned, keys_below_floor)\n\n"
     "Rebuild a frame's inter prediction from its (N, 8) vectors (native.side_data.MV_COLUMNS) and\n"
     "the uint8 luma of refs (a tuple of 2*depth+1 planes by display offset -depth..depth, None where\n"
     "absent). Writes |Y * 2048 - prediction * 2048| (int32 (H, W), or skipped when None), the\n"
     "per-frame motion magnitude on the unit grid (float32), the inferred reference distance per\n"
     "vector (int32 (N,)) and, unless histogram_out is None, the int64 histogram of residual key >> 6\n"
     "(8192 bins; keys_aligned: every key is a multiple of 64) of the keys at or above histogram_floor\n"
     "(a multiple of 64; the keys below are only counted: keys_below_floor), and the int64 (2, depth + 1) counts of\n"
     "the distances chosen by past and future vectors; unless cells_out is None, the int64 sums of the\n"
     "residual keys per cell of side cell (then, unless keep_keys, residual_out is only work space).\n"
     "status 0: done; 1: vectors off OpenCV's 1/32 grid or the unit grid; 2: overlapping blocks\n"
     "(the numpy path serves those frames)."},
    {"block_unit", block_unit, METH_VARARGS,
     "block_unit(mvs) -> int\n\nThe gcd of the block sizes and |corners| of (N, 8) int32 vectors (1 when all are 0)."},
    {"key_histogram", key_histogram, METH_VARARGS,
     "key_histogram(keys, shift, lo, out)\n\nout[b] = count of keys with (key >> shift) - lo == b (int64 out)."},
    {"cell_sums", cell_sums, METH_VARARGS,
     "cell_sums(mode, residual, magnitude, height, width, unit, cell, mv_scale, res_scale, mv_weight,\n"
     "res_weight, out)\n\n"
     "Per-cell float64 sums, in numpy's order, of the motion (mode 0), residual (1) or fused (2)\n"
     "map built from motion_residual's outputs, into out (ceil(H/cell), ceil(W/cell))."},

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

PyMODINIT_FUNC PyInit__kernels(void)
{
#if MC_AVX2
    __builtin_cpu_init();
    mc_avx2 = __builtin_cpu_supports("avx2");
    fill_stage_lanes();
#endif
    return PyModule_Create(&module);
}
