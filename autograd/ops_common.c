/* ops_common.c - input checks, type promotion (torch.result_type's rules)
 * and the broadcasting helper shared by ops. */
#include <math.h>
#include <stdlib.h>

#include "nb_autograd_impl.h"

bool nb_check_inputs(const char *op, int n, nb_tensor *const *inputs) {
    bool fresh = nb_op_take_fresh();
    for (int i = 0; i < n; i++)
        if (!inputs[i]) {
            if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "%s: input %d is NULL", op, i);
            return false;
        }
    for (int i = 0; i < n && nb_own_debug; i++) /* NB_DEBUG_OWNERSHIP: a tensor used after it was freed */
        if (nb_tensor_freed(inputs[i], op)) return false;
    /* valid inputs to a call from user code: an earlier, unrelated failure
     * must not linger for a later NULL to report (inside an op, an earlier
     * step's failure is the op's own: nb_op_take_fresh) */
    if (fresh && nb_last_status() != NB_OK) nb_clear_error();
    for (int i = 1; i < n; i++) {
        nb_device a = inputs[0]->storage->device, b = inputs[i]->storage->device;
        if (!nb_same_device(a, b)) {
            nb_set_error(NB_ERR_DEVICE, "%s: inputs on different devices (%d:%d and %d:%d)", op, (int)a.type, a.index,
                         (int)b.type, b.index);
            return false;
        }
    }
    return true;
}

bool nb_check_dtypes(nb_op_id op, int n, nb_tensor *const *inputs) {
    for (int i = 1; i < n; i++)
        if (inputs[i]->dtype != inputs[0]->dtype) {
            nb_set_error(NB_ERR_DTYPE, "%s: dtypes differ (%s and %s); cast with nb_to_dtype", nb_op_name(op),
                         nb_dtype_name(inputs[0]->dtype), nb_dtype_name(inputs[i]->dtype));
            return false;
        }
    return n < 1 || nb_check_supported(op, inputs[0]->dtype, inputs[0]);
}

/* ---- type promotion ----------------------------------------------------- */

/* PyTorch's categories: bool < integer < floating. */
int nb_dtype_category(nb_dtype dt) { return dt == NB_BOOL ? 0 : nb_dtype_is_float(dt) ? 2 : 1; }

/* Width rank inside a category; f16 and bf16 share one (their join is
 * f32), as do uint8 and int8 (their join is int16). */
static int rank(nb_dtype dt) {
    switch (dt) {
    case NB_U8: case NB_I8: case NB_F16: case NB_BF16: return 1;
    case NB_I16: case NB_F32: return 2;
    case NB_I32: case NB_F64: return 3;
    case NB_I64: return 4;
    default: return 0;
    }
}

nb_dtype nb_promote_types(nb_dtype a, nb_dtype b) {
    if ((unsigned)a >= NB_DTYPE_COUNT || (unsigned)b >= NB_DTYPE_COUNT) return NB_DTYPE_COUNT;
    if (a == b) return a;
    if (nb_dtype_category(a) != nb_dtype_category(b)) return nb_dtype_category(a) > nb_dtype_category(b) ? a : b;
    if (rank(a) != rank(b)) return rank(a) > rank(b) ? a : b;
    return nb_dtype_is_float(a) ? NB_F32 : NB_I16; /* f16 with bf16; uint8 with int8 */
}

/* c10's combine_categories: dimensioned operands win over 0-dim ones unless
 * the 0-dim one is of a higher category (then both join, as promote_types). */
nb_dtype nb_result_type(const nb_tensor *a, const nb_tensor *b) {
    if (!a || !b) { /* keep an earlier error (a failed op upstream) */
        if (nb_last_status() == NB_OK) nb_set_error(NB_ERR_INVALID_ARG, "result_type: NULL tensor");
        return NB_DTYPE_COUNT;
    }
    if ((a->ndim == 0) == (b->ndim == 0)) return nb_promote_types(a->dtype, b->dtype);
    const nb_tensor *dim = a->ndim ? a : b, *zero = a->ndim ? b : a;
    if (nb_dtype_category(zero->dtype) > nb_dtype_category(dim->dtype)) return nb_promote_types(dim->dtype, zero->dtype);
    return dim->dtype;
}

/* An integral value that the integer dtype holds acts as a Python int (the
 * tensor keeps its dtype; a bool tensor gives int64); any other value as a
 * Python float (the default float32). */
nb_dtype nb_scalar_result_type(const nb_tensor *t, double value) {
    if (nb_dtype_is_float(t->dtype)) return t->dtype;
    if (value != value || value != trunc(value)) return NB_F32;
    switch (t->dtype) {
    case NB_U8: return value >= 0 && value <= 255 ? NB_U8 : NB_F32;
    case NB_I8: return value >= INT8_MIN && value <= INT8_MAX ? NB_I8 : NB_F32;
    case NB_I16: return value >= INT16_MIN && value <= INT16_MAX ? NB_I16 : NB_F32;
    case NB_I32: return value >= INT32_MIN && value <= INT32_MAX ? NB_I32 : NB_F32;
    case NB_I64: return value >= -0x1p63 && value < 0x1p63 ? NB_I64 : NB_F32;
    default: return value >= -0x1p63 && value < 0x1p63 ? NB_I64 : NB_F32; /* bool */
    }
}

bool nb_promote_inputs(int n, nb_tensor **inputs, nb_dtype dt) {
    for (int i = 0; i < n; i++)
        if (inputs[i]->dtype != dt && !(inputs[i] = nb_to_dtype(inputs[i], dt))) return false;
    return true;
}

bool nb_widen_16bit(int n, nb_tensor **in, nb_dtype *back) {
    *back = NB_DTYPE_COUNT;
    if (!in[0] || (in[0]->dtype != NB_F16 && in[0]->dtype != NB_BF16)) return true;
    *back = in[0]->dtype;
    for (int i = 0; i < n; i++)
        if (in[i] && (in[i]->dtype == NB_F16 || in[i]->dtype == NB_BF16) && !(in[i] = nb_to_dtype(in[i], NB_F32)))
            return false;
    return true;
}

nb_tensor *nb_unwiden_16bit(nb_tensor *r, nb_dtype back) {
    return r && back != NB_DTYPE_COUNT ? nb_to_dtype(r, back) : r;
}

bool nb_norms_16bit_native(int n, nb_tensor *const *in) {
    if (!in[0] || (in[0]->dtype != NB_F16 && in[0]->dtype != NB_BF16) || !NB_BE(in[0])->iface->norms_16bit ||
        nb_needs_grad(n, in))
        return false;
    for (int i = 1; i < n; i++)
        if (in[i] && in[i]->dtype != in[0]->dtype) return false;
    return true;
}

nb_tensor *nb_contiguous_nograd(nb_tensor *t) {
    bool prev = nb_set_grad_enabled(false);
    nb_tensor *c = nb_contiguous(t);
    nb_set_grad_enabled(prev);
    return c;
}

nb_kview nb_kview_rows(const nb_tensor *t, int64_t rows, int64_t m) {
    nb_kview v = nb_kview_of(t);
    v.ndim = rows < 0 ? 1 : 2;
    v.shape[0] = rows < 0 ? m : rows, v.strides[0] = rows < 0 ? 1 : m;
    v.shape[1] = m, v.strides[1] = 1;
    return v;
}

nb_tensor *nb_sum_to_shape(nb_tensor *g, int ndim, const int64_t *shape) {
    return nb_sum_to_shape_as(g, ndim, shape, g ? g->dtype : NB_F32);
}

nb_tensor *nb_sum_to_shape_as(nb_tensor *g, int ndim, const int64_t *shape, nb_dtype dt) {
    if (!g) return NULL;
    int lead = g->ndim - ndim;
    NB_ASSERT(lead >= 0);
    int64_t kshape[NB_MAX_DIMS];
    bool any = lead > 0;
    for (int i = 0; i < g->ndim; i++) {
        kshape[i] = i < lead ? 1 : shape[i - lead];
        if (kshape[i] != g->shape[i]) any = true;
    }
    if (!any && dt != g->dtype) return nb_to_dtype(g, dt);
    if (!any) {
        nb_retain(g);
        return nb_scope_adopt(g);
    }
    if (nb_needs_grad(1, &g)) { /* create_graph: a recorded sum, differentiable again */
        int dims[NB_MAX_DIMS], nd = 0;
        for (int i = 0; i < g->ndim; i++)
            if (kshape[i] != g->shape[i] || i < lead) dims[nd++] = i;
        return nb_reshape(nb_sum(g, dims, nd, true), ndim, shape);
    }
    nb_tensor *r = nb_tensor_new(g->ndim, kshape, dt, g->storage->device);
    if (!r) return NULL;
    nb_kview o = nb_kview_of(r), x = nb_kview_of(g);
    if (nb_kernel_reduce(NB_BE(g), NB_REDUCE_SUM, &o, &x, 1.0) != NB_OK) return NULL;
    /* drop the leading dims: a view with the target shape */
    int64_t strides[NB_MAX_DIMS];
    nb_contiguous_strides(ndim, shape, strides);
    return nb_tensor_view_of(r, ndim, shape, strides, 0);
}

int64_t *nb_host_int64(const char *op, nb_tensor *t) {
    int64_t n = nb_numel(t);
    int64_t *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    if (!v) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", op);
    nb_tensor *c = nb_to_dtype(t, NB_I64);
    if (!c || nb_to_host(c, v, sizeof *v * (size_t)n) != NB_OK) {
        free(v);
        return NULL;
    }
    return v;
}
