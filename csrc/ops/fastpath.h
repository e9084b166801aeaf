// forward()'s eager fast path (fastpath.cpp): adds fast_call, fast_remember, fast_clear and fast_size to
// the extension module.
#pragma once
#include <Python.h>

namespace ffpa::ops {

// False with a Python error set when the functions could not be added.
bool add_fastpath(PyObject* module);

}  // namespace ffpa::ops
