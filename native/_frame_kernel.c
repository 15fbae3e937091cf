/* Compiled kernel of the selection pipeline's decode workers: a reader frame (BGR) copied
 * into its RGB slot, with the figures of the bad-frame test gathered in the same pass.
 *
 * Why compiled: the workers otherwise make three passes per frame (OpenCV's BGR->RGB swap,
 * meanStdDev, inRange + countNonZero), about 1.2 ms at 448x336 of a 2.5 ms frame budget;
 * this is one pass of about 0.3 ms. All figures are integers, so they are exact.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

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
    {"bgr_to_rgb_stats", bgr_to_rgb_stats, METH_VARARGS,
     "bgr_to_rgb_stats(bgr, rgb_out) -> ((sum_r, sum_g, sum_b), (sq_r, sq_g, sq_b), green)\n\n"
     "Copy a (H, W, 3) BGR frame into rgb_out as RGB; return the per-channel sums and sums of\n"
     "squares and the count of pixels with R <= 90, G >= 180, B <= 90."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_frame_kernel",
                                    "Compiled per-frame kernel of the selection pipeline's decode workers.", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__frame_kernel(void) { return PyModule_Create(&module); }
