/* The log cleaner's map pass in C: compaction.index_keys's loop over the records of one batch.
 *
 * The map pass reads every record of the dirty section and, in Python, spends about two
 * microseconds on each (the cleaner's throughput row of bench/). This module walks the same
 * bytes and files the same dict entries, for records that are well formed. On anything else
 * (a field past the buffer or the record, a varint longer than nine bytes, an offset out of
 * range, bytes left over) it returns None and the caller hands the whole batch to the Python
 * reading, which decides what the error is: entries already filed are the ones that reading
 * files again, with the same values, so the dict ends as it alone would leave it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define POSITION_BITS 32
#define MAX_VARINT_SHIFT 56 /* nine bytes: 63 bits, so no value overflows int64 */
#define OFFSET_DELTA_LIMIT ((int64_t)1 << 31)
#define BASE_OFFSET_LIMIT ((int64_t)1 << 62)

/* A zigzag varint at *p of b[0:n]; 0 when read, -1 when it runs past n or is too long. */
static inline int read_varint(const uint8_t *b, Py_ssize_t n, Py_ssize_t *p, int64_t *out) {
    uint64_t v = 0;
    int shift = 0;
    for (;;) {
        if (*p >= n)
            return -1;
        uint8_t byte = b[(*p)++];
        v |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80)
            break;
        shift += 7;
        if (shift > MAX_VARINT_SHIFT)
            return -1;
    }
    *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
    return 0;
}

/* (offset << POSITION_BITS) | position as a Python int, for any offset >= 0. */
static PyObject *located(int64_t offset, uint64_t position) {
    if (offset < ((int64_t)1 << POSITION_BITS))
        return PyLong_FromUnsignedLongLong(((uint64_t)offset << POSITION_BITS) | position);
    PyObject *off = PyLong_FromLongLong(offset), *bits = NULL, *shifted = NULL, *pos = NULL;
    PyObject *result = NULL;
    if (off && (bits = PyLong_FromLong(POSITION_BITS)) && (shifted = PyNumber_Lshift(off, bits)) &&
        (pos = PyLong_FromUnsignedLongLong(position)))
        result = PyNumber_Or(shifted, pos);
    Py_XDECREF(off);
    Py_XDECREF(bits);
    Py_XDECREF(shifted);
    Py_XDECREF(pos);
    return result;
}

/* index_keys(buf, pos, end, count, base_offset, last_offset, start, into, digest, digest_from)
 * -> (keyless, stray), or None when the Python reading must read this batch. */
static PyObject *index_keys(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end, count, digest_from;
    long long base_offset, last_offset, start;
    PyObject *into, *digest;
    if (!PyArg_ParseTuple(args, "y*nnnLLLO!On", &view, &pos, &end, &count, &base_offset,
                          &last_offset, &start, &PyDict_Type, &into, &digest, &digest_from))
        return NULL;
    const uint8_t *b = (const uint8_t *)view.buf;
    const Py_ssize_t n = view.len;
    const Py_ssize_t first = pos;
    Py_ssize_t keyless = 0;
    int stray = 0;
    int64_t prev = base_offset - 1;
    PyObject *result = NULL;

    if (pos < 0 || end > n || base_offset < 0 || base_offset >= BASE_OFFSET_LIMIT)
        goto fallback;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t p = pos;
        int64_t length, delta, key_len;
        if (read_varint(b, n, &p, &length) < 0 || length < 0 || length > end - p)
            goto fallback;
        Py_ssize_t stop = p + (Py_ssize_t)length;
        p += 1; /* attributes */
        while (p < n && (b[p] & 0x80)) /* the timestamp delta, skipped */
            p++;
        p += 1;
        if (read_varint(b, n, &p, &delta) < 0 || delta >= OFFSET_DELTA_LIMIT ||
            delta < -OFFSET_DELTA_LIMIT)
            goto fallback;
        int64_t offset = base_offset + delta;
        if (offset <= prev || offset > last_offset)
            stray = 1;
        prev = offset;
        if (read_varint(b, n, &p, &key_len) < 0)
            goto fallback;
        if (key_len >= 0) {
            if (key_len >= stop - p)
                goto fallback;
            if (offset >= start) {
                if (offset < 0 || (uint64_t)(pos - first) >> POSITION_BITS)
                    goto fallback;
                PyObject *key = PyBytes_FromStringAndSize((const char *)b + p, key_len);
                if (key == NULL)
                    goto done;
                if (key_len >= digest_from) {
                    Py_SETREF(key, PyObject_CallOneArg(digest, key));
                    if (key == NULL)
                        goto done;
                }
                PyObject *value = located(offset, (uint64_t)(pos - first));
                int failed = value == NULL || PyDict_SetItem(into, key, value) < 0;
                Py_DECREF(key);
                Py_XDECREF(value);
                if (failed)
                    goto done;
            }
        } else if (p >= stop) {
            goto fallback;
        } else {
            keyless++;
        }
        pos = stop;
    }
    if (pos != end)
        goto fallback;
    result = Py_BuildValue("(nO)", keyless, stray ? Py_True : Py_False);
    goto done;
fallback:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"index_keys", index_keys, METH_VARARGS,
     "index_keys(buf, pos, end, count, base_offset, last_offset, start, into, digest, "
     "digest_from) -> (keyless, stray), or None: see odradek.broker.records.compaction."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_keyindex", "The log cleaner's map pass loop in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__keyindex(void) { return PyModule_Create(&module); }
