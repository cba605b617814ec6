/*
 * ssegate.native._fanout: one system call per socket, one Python call per group.
 *
 * send_all(data, fds) sends the same bytes to every file descriptor in fds with
 * send(MSG_DONTWAIT | MSG_NOSIGNAL), in order, and returns a list with, per descriptor, the
 * bytes the kernel took (possibly fewer than len(data)) or -errno (-EAGAIN when its send queue
 * is full). It never blocks and never retries a short write: what is left over is for the
 * caller to queue (see ssegate/native/fanout.py for the rules around it).
 *
 * The descriptors are read into a C array first, then the GIL is released for the sends, so
 * the process's other threads (the Kafka fetch thread) run meanwhile. The caller must keep
 * every descriptor open until the call returns; nothing here closes one.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <sys/socket.h>
#include <sys/types.h>

static PyObject *
send_all(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer data;
    PyObject *fds_seq;
    PyObject *result = NULL;
    int *fds = NULL;
    Py_ssize_t *written = NULL;
    Py_ssize_t count, i;

    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "send_all(data, fds) takes exactly 2 arguments");
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &data, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    fds_seq = PySequence_Fast(args[1], "fds must be a sequence of file descriptors");
    if (fds_seq == NULL) {
        goto done;
    }
    count = PySequence_Fast_GET_SIZE(fds_seq);
    fds = PyMem_New(int, count > 0 ? count : 1);
    written = PyMem_New(Py_ssize_t, count > 0 ? count : 1);
    if (fds == NULL || written == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (i = 0; i < count; i++) {
        long fd = PyLong_AsLong(PySequence_Fast_GET_ITEM(fds_seq, i));
        if (fd == -1 && PyErr_Occurred()) {
            goto done;
        }
        fds[i] = (fd < 0 || fd > 0x7fffffffL) ? -1 : (int)fd;
    }

    Py_BEGIN_ALLOW_THREADS
    for (i = 0; i < count; i++) {
        ssize_t sent;
        if (fds[i] < 0) {
            written[i] = -EBADF;
            continue;
        }
        do {
            sent = send(fds[i], data.buf, (size_t)data.len, MSG_DONTWAIT | MSG_NOSIGNAL);
        } while (sent < 0 && errno == EINTR);
        written[i] = sent < 0 ? -(Py_ssize_t)errno : (Py_ssize_t)sent;
    }
    Py_END_ALLOW_THREADS

    result = PyList_New(count);
    if (result == NULL) {
        goto done;
    }
    for (i = 0; i < count; i++) {
        PyObject *item = PyLong_FromSsize_t(written[i]);
        if (item == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, item);
    }

done:
    PyMem_Free(fds);
    PyMem_Free(written);
    Py_XDECREF(fds_seq);
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef methods[] = {
    {"send_all", (PyCFunction)(void (*)(void))send_all, METH_FASTCALL,
     "send_all(data, fds) -> list[int]\n\n"
     "Send data to every descriptor in fds without blocking; per descriptor the bytes taken "
     "or -errno."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "ssegate.native._fanout",
    "One send() per socket for many sockets, in one call (see ssegate.native.fanout).",
    -1,
    methods,
};

PyMODINIT_FUNC
PyInit__fanout(void)
{
    return PyModule_Create(&module);
}
