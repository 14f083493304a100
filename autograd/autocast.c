/* autocast.c - mixed precision (torch.autocast): inside nb_autocast_begin /
 * nb_autocast_end for a device type, the ops of the lower-precision list
 * cast their float32 inputs to the autocast dtype (bfloat16 or float16),
 * and the ops of the float32 list cast 16-bit inputs to float32; the other
 * ops run in their inputs' dtypes. Casts are recorded ops, so gradients
 * flow back to the float32 parameters (the optimizer's master weights).
 * A leaf that requires grad (a parameter) is cast once per autocast region:
 * the cast is cached until the outermost nb_autocast_end, as PyTorch's
 * autocast cache, or until an in-place write to the parameter (its
 * storage's version counter moved); nb_autocast_cache_params fills the cache ahead, in
 * multi-tensor launches. A parameter that a fused Adam/AdamW updates
 * (keep_cast, set by nb_fused_adam_) keeps its cast between regions
 * (cast_copy): the optimizer writes it with each update, so the next
 * region reads it with no cast kernel, while its version says it holds the
 * parameter's values (#31: the master weights' 16-bit copies, as llm.c's
 * and Apex's). Backward passes run without autocast (each op's
 * backward in its forward's dtypes). The lists are in autograd/OPS.md. */
#include <stdlib.h>

#include "nb_autograd_impl.h"

#define MAX_DEPTH 16

typedef struct cache_entry {
    nb_tensor *src, *cast; /* both referenced by the cache */
    unsigned version;      /* src's storage version when cast: a later in-place write makes the cast stale */
} cache_entry;

static _Thread_local nb_dtype stack[NB_DEVICE_TYPE_COUNT][MAX_DEPTH];
static _Thread_local int depth[NB_DEVICE_TYPE_COUNT];
static _Thread_local int paused; /* inside a backward pass */
static _Thread_local cache_entry *cache;
static _Thread_local int n_cache, cap_cache;

static void cache_clear(void) {
    for (int i = 0; i < n_cache; i++) nb_release(cache[i].cast), nb_release(cache[i].src);
    free(cache);
    cache = NULL, n_cache = cap_cache = 0;
}

nb_status nb_autocast_begin(nb_device dev, nb_dtype dtype) {
    if ((unsigned)dev.type >= NB_DEVICE_TYPE_COUNT)
        return nb_set_error(NB_ERR_DEVICE, "autocast_begin: bad device type %d", (int)dev.type);
    if (dtype != NB_BF16 && dtype != NB_F16)
        return nb_set_error(NB_ERR_DTYPE, "autocast_begin: the autocast dtype must be bfloat16 or float16, not %s",
                            nb_dtype_name(dtype));
    if (depth[dev.type] == MAX_DEPTH)
        return nb_set_error(NB_ERR_STATE, "autocast_begin: more than %d nested regions", MAX_DEPTH);
    stack[dev.type][depth[dev.type]++] = dtype;
    return NB_OK;
}

nb_status nb_autocast_end(nb_device dev) {
    if ((unsigned)dev.type >= NB_DEVICE_TYPE_COUNT || depth[dev.type] == 0)
        return nb_set_error(NB_ERR_STATE, "autocast_end: no autocast region is open for this device type");
    depth[dev.type]--;
    bool any = false;
    for (int t = 0; t < NB_DEVICE_TYPE_COUNT; t++) any |= depth[t] > 0;
    if (!any) cache_clear(); /* the outermost region ended */
    return NB_OK;
}

bool nb_autocast_is_enabled(nb_device dev) {
    return (unsigned)dev.type < NB_DEVICE_TYPE_COUNT && depth[dev.type] > 0;
}

nb_dtype nb_autocast_get_dtype(nb_device dev) {
    return nb_autocast_is_enabled(dev) ? stack[dev.type][depth[dev.type] - 1] : NB_F32;
}

void nb_autocast_pause(bool pause) { paused += pause ? 1 : -1; }

bool nb_autocast_active(nb_device dev) { return !paused && nb_autocast_is_enabled(dev); }


/* t's cached cast to dt, or NULL; a cast made before an in-place write to t
 * (an optimizer step or a fill inside the region) is dropped, not served. */
static nb_tensor *cache_find(const nb_tensor *t, nb_dtype dt) {
    for (int i = 0; i < n_cache; i++) {
        if (cache[i].src != t || cache[i].cast->dtype != dt) continue;
        if (cache[i].version == nb_version_of(t)) return cache[i].cast;
        nb_release(cache[i].cast), nb_release(cache[i].src);
        cache[i] = cache[--n_cache];
        return NULL;
    }
    return NULL;
}

/* Caches c as t's cast, taking over the caller's reference to c (t is
 * retained); false when the cache cannot grow (nothing taken). */
static bool cache_add(nb_tensor *t, nb_tensor *c) {
    if (n_cache == cap_cache) {
        int cap = cap_cache ? 2 * cap_cache : 64;
        cache_entry *e = realloc(cache, sizeof *e * (size_t)cap);
        if (!e) return false;
        cache = e, cap_cache = cap;
    }
    nb_retain(t);
    cache[n_cache++] = (cache_entry){t, c, nb_version_of(t)};
    return true;
}

/* c, made by an autocast cast: its node marked as such (nb_grad_f32_ok). */
static nb_tensor *mark(nb_tensor *c) {
    if (c && c->grad_fn && c->grad_fn->op == NB_OP_TO_DTYPE) c->grad_fn->autocast_cast = true;
    return c;
}

/* e is output nr of an op node without tensor hooks, of op id `op` when op >= 0. */
static bool plain_node(const nb_node *e, int nr, int op) {
    return e && nr == 0 && e->kind == NB_NODE_OP && (op < 0 || e->op == (nb_op_id)op) && !(e->ext && e->ext->hooks);
}

bool nb_grad_f32_ok(const nb_node *n, int i) {
    if (!n->in[i] || !nb_dtype_is_16bit(n->in[i]->dtype)) return false;
    const nb_node *e = n->edge[i];
    int nr = n->edge_nr[i];
    /* back through reshapes (linear's rows of a 3-d input), whose backward reshapes a gradient of any dtype */
    for (int k = 0; k < 4 && (plain_node(e, nr, NB_OP_RESHAPE) || plain_node(e, nr, NB_OP_VIEW)); k++)
        nr = e->edge_nr[0], e = e->edge[0];
    return plain_node(e, nr, -1) && e->autocast_cast && e->in[0] && e->in[0]->dtype == NB_F32;
}

/* t's kept copy (cast_copy) as its cast to dt: a new view of it recorded
 * as t's cast, with the region's cache holding it; NULL (no error) where
 * there is none of dt holding t's current values. */
static nb_tensor *kept_copy(nb_tensor *t, nb_dtype dt) {
    nb_tensor *k = t->cast_copy;
    if (!k || k->dtype != dt || t->cast_version != nb_version_of(t)) return NULL;
    nb_tensor *v = nb_tensor_view_of(k, k->ndim, k->shape, k->strides, k->offset);
    if (!v || !nb_cast_record(t, v)) return NULL;
    mark(v);
    nb_retain(v); /* the cache's reference, as cast()'s */
    if (!cache_add(t, v)) nb_release(v);
    return v;
}

/* c, a new cast of the parameter t, kept as t's cast_copy where a fused
 * optimizer updates t (the copy it replaces is released). */
static void keep(nb_tensor *t, nb_tensor *c) {
    if (!t->keep_cast || !nb_is_contiguous(c) || !nb_is_contiguous(t)) return;
    nb_tensor *a = nb_tensor_alias_unscoped(c);
    if (!a) return; /* not kept: the next region casts again */
    nb_release(t->cast_copy);
    t->cast_copy = a, t->cast_version = nb_version_of(t);
}

/* The parameter t is a permuted view of (F.linear(x, W.t()), GPT-2's
 * Conv1D), its permutation in dims; NULL for other tensors. */
static nb_tensor *permuted_param(const nb_tensor *t, int *dims) {
    const nb_node *n = t->grad_fn;
    if (!n || n->op != NB_OP_PERMUTE || n->n_in != 1 || !n->in[0]) return NULL;
    nb_tensor *b = n->in[0];
    if (!nb_is_leaf(b) || !nb_requires_grad(b) || b->storage != t->storage || b->ndim != t->ndim ||
        b->offset != t->offset)
        return NULL;
    for (int i = 0; i < t->ndim; i++) { /* t is still exactly that view */
        int d = n->p.permute.dims[i];
        if (t->shape[i] != b->shape[d] || t->strides[i] != b->strides[d]) return NULL;
        dims[i] = d;
    }
    return b;
}

/* The cast of t to dt, cached for parameters. A permuted view of a
 * parameter (in grad mode) reads the parameter's cached (multi-tensor)
 * cast through the same permutation instead of making a strided copy each
 * call; it is recorded as t's cast, so the gradient still passes t's own
 * node (its hooks; nb_grad with t as an input) and, the cast's backward
 * keeping a transposed gradient's layout, reaches the parameter in the
 * parameter's layout. */
static nb_tensor *cast(nb_tensor *t, nb_dtype dt) {
    int dims[NB_MAX_DIMS];
    nb_tensor *param = nb_is_grad_enabled() ? permuted_param(t, dims) : NULL;
    if (param) {
        nb_tensor *c = cast(param, dt);
        if (!c) return NULL;
        int64_t shape[NB_MAX_DIMS], strides[NB_MAX_DIMS];
        for (int i = 0; i < t->ndim; i++) shape[i] = c->shape[dims[i]], strides[i] = c->strides[dims[i]];
        nb_tensor *v = nb_tensor_view_of(c, t->ndim, shape, strides, c->offset);
        return v && nb_cast_record(t, v) ? mark(v) : NULL;
    }
    bool cacheable = nb_is_leaf(t) && nb_requires_grad(t);
    nb_tensor *c = cacheable ? cache_find(t, dt) : NULL;
    if (!c && cacheable) c = kept_copy(t, dt);
    if (c) return c;
    c = mark(nb_to_dtype(t, dt));
    if (!c || !cacheable) return c;
    keep(t, c);
    nb_retain(c); /* the cache's reference; c stays the caller's too */
    if (!cache_add(t, c)) nb_release(c); /* not cached: still right */
    return c;
}

/* The eligible params[i] (float32 leaves that require grad, on a device
 * type with an open region, contiguous, not cached yet) of the first
 * eligible one's device and target dtype, their casts allocated: up to
 * cap of them, from index *next on. *next ends past the tensors taken or
 * skipped, at the first one of another group (or whose cast could not be
 * allocated: then the result may be 0 with an error set). */
static int gather(nb_tensor *const *params, int n, int *next, nb_tensor **src, nb_tensor **dst, int cap) {
    int m = 0;
    nb_device dev = {0};
    nb_dtype want = NB_BF16;
    for (; *next < n && m < cap; ++*next) {
        nb_tensor *t = params[*next];
        if (!nb_is_leaf(t) || !nb_requires_grad(t) || t->dtype != NB_F32 || !nb_is_contiguous(t)) continue;
        nb_device d = t->storage->device;
        if (!depth[d.type]) continue;
        nb_dtype dt = stack[d.type][depth[d.type] - 1];
        if (m && (d.type != dev.type || d.index != dev.index || dt != want)) break; /* the next group's */
        if (cache_find(t, dt) || kept_copy(t, dt)) continue;
        bool dup = false; /* listed twice */
        for (int k = 0; k < m && !dup; k++) dup = src[k] == t;
        if (dup) continue;
        nb_tensor *c = nb_tensor_new_unscoped(t->ndim, t->shape, dt, d);
        if (!c) break;
        dev = d, want = dt, src[m] = t, dst[m++] = c;
    }
    return m;
}

nb_status nb_autocast_cache_params(nb_tensor *const *params, int n) {
    if (n < 0 || (n > 0 && !params))
        return nb_set_error(NB_ERR_INVALID_ARG, "autocast_cache_params: %d tensors, or a NULL list", n);
    for (int i = 0; i < n; i++)
        if (!params[i]) return nb_set_error(NB_ERR_INVALID_ARG, "autocast_cache_params: params[%d] is NULL", i);
    if (paused) return NB_OK;
    enum { GROUP = 64 };
    nb_tensor *src[GROUP], *dst[GROUP];
    nb_kview vs[GROUP], vd[GROUP];
    nb_status st = NB_OK;
    for (int next = 0; next < n && st == NB_OK;) {
        int m = gather(params, n, &next, src, dst, GROUP);
        if (m == 0) {
            if (next < n) st = nb_last_status(); /* an allocation failed */
            continue;
        }
        for (int k = 0; k < m; k++) vs[k] = nb_kview_of(src[k]), vd[k] = nb_kview_of(dst[k]);
        if (nb_kernel_has(NB_BE(src[0]), cast_multi)) st = nb_kernel_cast_multi(NB_BE(src[0]), m, vd, vs);
        else
            for (int k = 0; k < m && st == NB_OK; k++) st = nb_kernel_copy(NB_BE(src[k]), &vd[k], &vs[k]);
        int k = 0;
        for (; k < m && st == NB_OK; k++) {
            if (!nb_cast_record(src[k], dst[k])) {
                st = nb_last_status();
                break;
            }
            mark(dst[k]);
            keep(src[k], dst[k]);
            if (!cache_add(src[k], dst[k])) { /* on success the cache owns dst[k] */
                st = nb_set_error(NB_ERR_OOM, "autocast_cache_params: out of host memory for the cast cache");
                break;
            }
        }
        for (; k < m; k++) nb_release(dst[k]);
    }
    return st;
}

bool nb_autocast_inputs(nb_op_id op, int n, nb_tensor **in) {
    const nb_op_info *r = nb_op_get(op);
    NB_ASSERT(r);
    if (paused || r->autocast == NB_AUTOCAST_NONE) return true;
    for (int i = 0; i < n; i++) {
        nb_tensor *t = in[i];
        if (!t) continue;
        nb_device_type dt = t->storage->device.type;
        if (!depth[dt]) continue;
        nb_dtype lp = stack[dt][depth[dt] - 1], want;
        nb_autocast_policy p = r->autocast;
        if (p == NB_AUTOCAST_LOWER_EXCEPT_CPU) p = dt == NB_DEVICE_CPU ? NB_AUTOCAST_FP32 : NB_AUTOCAST_LOWER;
        if (p == NB_AUTOCAST_LOWER) {
            if (t->dtype != NB_F32) continue; /* float64 stays, as PyTorch's eligible inputs */
            want = lp;
        } else {
            if (t->dtype != NB_BF16 && t->dtype != NB_F16) continue;
            want = NB_F32;
        }
        nb_tensor *c = cast(t, want);
        if (!c) return false;
        in[i] = c;
    }
    return true;
}
