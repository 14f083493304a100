/* pickle.c - the restricted unpickler of PyTorch checkpoints
 * (pickle_impl.h). The opcodes are exactly those that
 * torch.load(weights_only=True) runs (PyTorch's
 * torch/_weights_only_unpickler.py; Python's Lib/pickle.py gives their
 * encodings), the globals exactly its default allowlist; anything else is
 * refused by name before it is used. Nothing here calls out: REDUCE and
 * NEWOBJ build the few values nabla needs (dicts, tensors, sizes) and
 * refuse the allowed globals nabla cannot build. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb_extension.h"
#include "pickle_impl.h"

/* ---- the allowlist ------------------------------------------------------------------------------ */


static const struct {
    const char *name;
    pk_global g;
} fixed_globals[] = {
    {"collections.OrderedDict", G_ORDERED_DICT},
    {"collections.Counter", G_COUNTER},
    {"torch.nn.parameter.Parameter", G_PARAMETER},
    {"torch.serialization._get_layout", G_GET_LAYOUT},
    {"torch.Size", G_SIZE},
    {"torch.Tensor", G_TENSOR},
    {"torch.device", G_DEVICE},
    {"_codecs.encode", G_ENCODE},
    {"builtins.bytearray", G_BYTEARRAY},
    {"builtins.set", G_SET},
    {"builtins.complex", G_COMPLEX},
    {"torch.per_tensor_affine", G_QSCHEME},
    {"torch.per_tensor_symmetric", G_QSCHEME},
    {"torch.per_channel_affine", G_QSCHEME},
    {"torch.per_channel_symmetric", G_QSCHEME},
    {"torch.per_channel_affine_float_qparams", G_QSCHEME},
    {"torch._utils._rebuild_tensor", G_REBUILD_TENSOR},
    {"torch._utils._rebuild_tensor_v2", G_REBUILD_TENSOR_V2},
    {"torch._utils._rebuild_tensor_v3", G_REBUILD_TENSOR_V3},
    {"torch._utils._rebuild_parameter", G_REBUILD_PARAMETER},
    {"torch._utils._rebuild_parameter_with_state", G_REBUILD_PARAMETER_WITH_STATE},
    {"torch._tensor._rebuild_from_type_v2", G_REBUILD_FROM_TYPE_V2},
    {"torch._utils._rebuild_qtensor", G_REBUILD_OTHER},
    {"torch._utils._rebuild_sparse_tensor", G_REBUILD_OTHER},
    {"torch._utils._rebuild_meta_tensor_no_storage", G_REBUILD_OTHER},
    {"torch._utils._rebuild_wrapper_subclass", G_REBUILD_OTHER},
    {"torch._utils._rebuild_device_tensor_from_numpy", G_REBUILD_OTHER},
    {"torch._utils._rebuild_device_tensor_from_cpu_tensor", G_REBUILD_OTHER},
};

/* torch's dtypes (str(dtype) = "torch.<name>"), with nabla's where it has one. */
static const struct {
    const char *name;
    int dtype;
} dtypes[] = {
    {"float32", NB_F32}, {"float64", NB_F64}, {"float16", NB_F16}, {"bfloat16", NB_BF16}, {"int64", NB_I64},
    {"int32", NB_I32}, {"uint8", NB_U8}, {"bool", NB_BOOL}, {"int8", NB_I8}, {"int16", NB_I16}, {"complex32", -1},
    {"complex64", -1}, {"complex128", -1}, {"qint8", -1}, {"quint8", -1}, {"qint32", -1}, {"quint4x2", -1},
    {"quint2x4", -1}, {"float8_e4m3fn", -1}, {"float8_e5m2", -1}, {"float8_e4m3fnuz", -1}, {"float8_e5m2fnuz", -1},
    {"float8_e8m0fnu", -1}, {"float4_e2m1fn_x2", -1}, {"uint16", -1}, {"uint32", -1}, {"uint64", -1},
    {"bits1x8", -1}, {"bits2x4", -1}, {"bits4x2", -1}, {"bits8", -1}, {"bits16", -1}, {"uint1", -1}, {"uint2", -1},
    {"uint3", -1}, {"uint4", -1}, {"uint5", -1}, {"uint6", -1}, {"uint7", -1}, {"int1", -1}, {"int2", -1},
    {"int3", -1}, {"int4", -1}, {"int5", -1}, {"int6", -1}, {"int7", -1},
};

/* The legacy storage and tensor classes' stems ("torch.FloatStorage", "torch.cuda.LongTensor"). */
static const struct {
    const char *stem;
    int dtype;
    bool storage_only;
} legacy[] = {
    {"Float", NB_F32, false}, {"Double", NB_F64, false}, {"Half", NB_F16, false}, {"BFloat16", NB_BF16, false},
    {"Long", NB_I64, false}, {"Int", NB_I32, false}, {"Byte", NB_U8, false}, {"Bool", NB_BOOL, false},
    {"Short", NB_I16, false}, {"Char", NB_I8, false}, {"ComplexFloat", -1, false}, {"ComplexDouble", -1, false},
    {"QInt8", -1, true}, {"QUInt8", -1, true}, {"QInt32", -1, true}, {"QUInt4x2", -1, true}, {"QUInt2x4", -1, true},
};

/* Looks full ("module.name") up in the allowlist: its pk_global and dtype, or false. */
static bool allowed_global(const char *full, pk_global *g, int *dtype) {
    *dtype = -1;
    for (size_t i = 0; i < sizeof fixed_globals / sizeof *fixed_globals; i++)
        if (!strcmp(full, fixed_globals[i].name)) return *g = fixed_globals[i].g, true;
    if (!strncmp(full, "torch.", 6)) {
        const char *n = full + 6;
        for (size_t i = 0; i < sizeof dtypes / sizeof *dtypes; i++)
            if (!strcmp(n, dtypes[i].name)) return *g = G_DTYPE, *dtype = dtypes[i].dtype, true;
        if (!strcmp(n, "UntypedStorage") || !strcmp(n, "storage.UntypedStorage") || !strcmp(n, "TypedStorage") ||
            !strcmp(n, "storage.TypedStorage"))
            return *g = G_STORAGE_TYPE, *dtype = -2, true;
        if (!strncmp(n, "cuda.", 5)) n += 5;
        for (size_t i = 0; i < sizeof legacy / sizeof *legacy; i++) {
            size_t k = strlen(legacy[i].stem);
            if (strncmp(n, legacy[i].stem, k)) continue;
            if (!strcmp(n + k, "Storage")) return *g = G_STORAGE_TYPE, *dtype = legacy[i].dtype, true;
            if (!legacy[i].storage_only && !strcmp(n + k, "Tensor")) return *g = G_TENSOR_CLASS, true;
        }
    }
    return false;
}

/* ---- values ------------------------------------------------------------------------------------- */

struct pk_unpickler {
    const uint8_t *p, *start, *end;
    const char *label;
    const pk_callbacks *cb;
    pk_value **all; /* every value made, freed by pk_free */
    size_t n_all, cap_all;
    pk_value **stack;
    size_t sp, cap_stack;
    size_t *marks;
    size_t n_marks, cap_marks;
    pk_value **memo;
    size_t cap_memo;
};

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *np = realloc(*p, c * elem);
    if (!np) return false;
    *p = np, *cap = c;
    return true;
}

#define FAIL(u, st, ...) pk_fail(u, st, __VA_ARGS__)
__attribute__((format(printf, 3, 4))) static void *pk_fail(pk_unpickler *u, nb_status st, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    nb_set_error(st, "%s: %s (at byte %zu)", u->label, msg, (size_t)(u->p - u->start));
    return NULL;
}

static pk_value *new_value(pk_unpickler *u, pk_kind k) {
    pk_value *v = calloc(1, sizeof *v);
    if (!v || !grow((void **)&u->all, &u->cap_all, u->n_all + 1, sizeof *u->all)) {
        free(v);
        return FAIL(u, NB_ERR_OOM, "out of host memory");
    }
    u->all[u->n_all++] = v;
    v->kind = k;
    return v;
}

static bool add_item(pk_unpickler *u, pk_value *c, pk_value *item) {
    if (!grow((void **)&c->items, &c->cap, c->n + 1, sizeof *c->items)) return FAIL(u, NB_ERR_OOM, "out of host memory");
    c->items[c->n++] = item;
    return true;
}

static const char *kind_name(pk_kind k) {
    static const char *names[] = {"None", "bool", "int", "float", "complex", "str", "bytes", "tuple", "list", "dict",
                                  "set", "global", "storage", "tensor"};
    return names[k];
}

void pk_free(pk_unpickler *u) {
    if (!u) return;
    for (size_t i = 0; i < u->n_all; i++) {
        pk_value *v = u->all[i];
        if (v->tensor) nb_release(v->tensor);
        free(v->items), free(v->s), free(v);
    }
    free(u->all), free(u->stack), free(u->marks), free(u->memo), free(u);
}

bool pk_is_str(const pk_value *v, const char *s) {
    return v && (v->kind == PK_STR || v->kind == PK_BYTES) && v->len == strlen(s) && !memcmp(v->s, s, v->len);
}

/* ---- the machine -------------------------------------------------------------------------------- */

static bool push(pk_unpickler *u, pk_value *v) {
    if (!v) return false;
    if (!grow((void **)&u->stack, &u->cap_stack, u->sp + 1, sizeof *u->stack)) return FAIL(u, NB_ERR_OOM, "out of host memory");
    u->stack[u->sp++] = v;
    return true;
}

/* The base of the current frame: values below the last MARK are not the current frame's. */
static size_t frame(const pk_unpickler *u) { return u->n_marks ? u->marks[u->n_marks - 1] : 0; }

static pk_value *pop(pk_unpickler *u) {
    if (u->sp <= frame(u)) return FAIL(u, NB_ERR_FORMAT, "the stack is empty (corrupt pickle)");
    return u->stack[--u->sp];
}

static pk_value *top(pk_unpickler *u) {
    if (u->sp <= frame(u)) return FAIL(u, NB_ERR_FORMAT, "the stack is empty (corrupt pickle)");
    return u->stack[u->sp - 1];
}

static const uint8_t *take(pk_unpickler *u, size_t n) {
    if ((size_t)(u->end - u->p) < n) return FAIL(u, NB_ERR_FORMAT, "the pickle ends inside an opcode (truncated)");
    const uint8_t *r = u->p;
    u->p += n;
    return r;
}

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static pk_value *new_int(pk_unpickler *u, int64_t i) {
    pk_value *v = new_value(u, PK_INT);
    if (v) v->i = i;
    return v;
}

static pk_value *new_str(pk_unpickler *u, pk_kind k, const void *s, size_t len) {
    pk_value *v = new_value(u, k);
    if (!v) return NULL;
    if (!(v->s = malloc(len + 1))) return FAIL(u, NB_ERR_OOM, "out of host memory");
    memcpy(v->s, s, len), v->s[len] = 0, v->len = len;
    return v;
}

/* The items from the last MARK up, as a new container of kind k; the mark is dropped. */
static pk_value *pop_mark(pk_unpickler *u, pk_kind k) {
    if (!u->n_marks) return FAIL(u, NB_ERR_FORMAT, "no MARK to pop to (corrupt pickle)");
    size_t base = u->marks[--u->n_marks];
    pk_value *c = new_value(u, k);
    if (!c) return NULL;
    for (size_t i = base; i < u->sp; i++)
        if (!add_item(u, c, u->stack[i])) return NULL;
    u->sp = base;
    return c;
}

/* A GLOBAL's "module\nname\n" as "module.name" in buf, Python 2's __builtin__ read as builtins (PyTorch's IMPORT_MAPPING). */
static bool read_global(pk_unpickler *u, char *buf, size_t cap) {
    size_t at = 0;
    for (int part = 0; part < 2; part++) {
        const uint8_t *nl = memchr(u->p, '\n', (size_t)(u->end - u->p));
        if (!nl) return FAIL(u, NB_ERR_FORMAT, "GLOBAL without its newline (truncated)");
        size_t n = (size_t)(nl - u->p);
        const char *s = (const char *)u->p;
        if (part == 0 && n == 11 && !memcmp(s, "__builtin__", 11)) s = "builtins", n = 8;
        if (memchr(s, 0, n) || at + n + 2 > cap) return FAIL(u, NB_ERR_FORMAT, "GLOBAL with a bad or overlong name");
        if (part) buf[at++] = '.';
        memcpy(buf + at, s, n), at += n;
        u->p = nl + 1;
    }
    buf[at] = 0;
    return true;
}

static bool as_int(const pk_value *v, int64_t *out) {
    if (!v || (v->kind != PK_INT && v->kind != PK_BOOL)) return false;
    *out = v->i;
    return true;
}

static bool as_number(const pk_value *v, double *out) {
    if (v && v->kind == PK_FLOAT) return *out = v->f, true;
    int64_t i;
    if (!as_int(v, &i)) return false;
    *out = (double)i;
    return true;
}

/* A size or stride: a tuple or list of ints, at most NB_MAX_DIMS. */
static int as_dims(const pk_value *v, int64_t *out) {
    if (!v || (v->kind != PK_TUPLE && v->kind != PK_LIST) || v->n > NB_MAX_DIMS) return -1;
    for (size_t i = 0; i < v->n; i++)
        if (!as_int(v->items[i], &out[i])) return -1;
    return (int)v->n;
}

/* _rebuild_tensor{,_v2,_v3}'s (storage, storage_offset, size, stride) as a tensor; dtype -3: the storage's. */
static pk_value *rebuild_tensor(pk_unpickler *u, pk_value **a, int dtype, const char *fn) {
    int64_t offset, size[NB_MAX_DIMS], stride[NB_MAX_DIMS];
    if (a[0]->kind != PK_STORAGE) return FAIL(u, NB_ERR_FORMAT, "%s over a %s, not a storage", fn, kind_name(a[0]->kind));
    int nd = as_dims(a[2], size), ns = as_dims(a[3], stride);
    if ((a[2]->kind == PK_TUPLE || a[2]->kind == PK_LIST) && a[2]->n > NB_MAX_DIMS)
        return FAIL(u, NB_ERR_UNSUPPORTED, "%s: a tensor of %zu dimensions (nabla's tensors have at most %d)", fn,
                    a[2]->n, NB_MAX_DIMS);
    if (!as_int(a[1], &offset) || nd < 0 || ns != nd)
        return FAIL(u, NB_ERR_FORMAT, "%s: a bad offset, size or stride (ints, of equal lengths)", fn);
    /* v3 names the dtype and reads the storage's bytes as it (any storage); the others read the storage's own
       dtype, an untyped storage as uint8 (as torch.load does) */
    if (dtype == -3) dtype = a[0]->dtype == -2 ? NB_U8 : a[0]->dtype;
    if (dtype < 0) return FAIL(u, NB_ERR_DTYPE, "%s: the tensor's dtype is one nabla lacks", fn);
    pk_value *v = new_value(u, PK_TENSOR);
    if (!v) return NULL;
    nb_scope *s = nb_op_scope_begin();
    v->tensor = u->cb->tensor(u->cb->ctx, a[0], (nb_dtype)dtype, offset, nd, size, stride);
    if (v->tensor) nb_retain(v->tensor); /* the value's reference, past the scope */
    nb_scope_end(s);
    return v->tensor ? v : NULL;
}

/* REDUCE: f(*args) for the globals nabla builds. */
static pk_value *reduce(pk_unpickler *u, pk_value *f, pk_value *args, int depth) {
    if (f->kind != PK_GLOBAL) return FAIL(u, NB_ERR_FORMAT, "REDUCE calls a %s (only allowed globals)", kind_name(f->kind));
    if (args->kind != PK_TUPLE) return FAIL(u, NB_ERR_FORMAT, "REDUCE with %s arguments, not a tuple", kind_name(args->kind));
    pk_value **a = args->items;
    size_t n = args->n;
    pk_value *v;
    switch ((pk_global)f->i) {
    case G_ORDERED_DICT:
    case G_COUNTER: /* OrderedDict() then SETITEMS; Counter({...}) */
        if (n == 0 || (n == 1 && a[0]->kind == PK_DICT)) {
            if (!(v = new_value(u, PK_DICT))) return NULL;
            v->parameter = true; /* a class instance: BUILD may set its attributes */
            for (size_t i = 0; n && i < a[0]->n; i++)
                if (!add_item(u, v, a[0]->items[i])) return NULL;
            return v;
        }
        break;
    case G_SIZE:
        if (n == 1 && (a[0]->kind == PK_TUPLE || a[0]->kind == PK_LIST)) {
            if (!(v = new_value(u, PK_TUPLE))) return NULL;
            for (size_t i = 0; i < a[0]->n; i++) {
                if (a[0]->items[i]->kind != PK_INT) return FAIL(u, NB_ERR_FORMAT, "torch.Size of something other than ints");
                if (!add_item(u, v, a[0]->items[i])) return NULL;
            }
            return v;
        }
        break;
    case G_DEVICE: { /* torch.device('cuda') or torch.device('cuda', 0): its string */
        int64_t idx = 0;
        if ((n == 1 || (n == 2 && as_int(a[1], &idx))) && a[0]->kind == PK_STR && a[0]->len < 64) {
            char s[96];
            int k = n == 2 ? snprintf(s, sizeof s, "%s:%lld", a[0]->s, (long long)idx) : snprintf(s, sizeof s, "%s", a[0]->s);
            return new_str(u, PK_STR, s, (size_t)k);
        }
        break;
    }
    case G_GET_LAYOUT:
        if (n == 1 && a[0]->kind == PK_STR) return a[0];
        break;
    case G_ENCODE: /* _codecs.encode(str, 'latin1'): protocol 2's bytes, each code point < 256 a byte */
        if (n == 2 && a[0]->kind == PK_STR && (pk_is_str(a[1], "latin1") || pk_is_str(a[1], "latin-1"))) {
            if (!(v = new_str(u, PK_BYTES, "", 0))) return NULL;
            char *grown = realloc(v->s, a[0]->len + 1);
            if (!grown) return FAIL(u, NB_ERR_OOM, "out of host memory");
            v->s = grown;
            const uint8_t *s = (const uint8_t *)a[0]->s, *e = s + a[0]->len;
            while (s < e) {
                unsigned c = *s++;
                if (c >= 0x80) { /* UTF-8 of U+0080..U+00FF: two bytes, 0xC2 or 0xC3 first */
                    if ((c != 0xc2 && c != 0xc3) || s == e || (*s & 0xc0) != 0x80)
                        return FAIL(u, NB_ERR_FORMAT, "_codecs.encode of a character outside latin-1");
                    c = ((c & 0x1f) << 6) | (*s++ & 0x3f);
                }
                v->s[v->len++] = (char)c;
            }
            v->s[v->len] = 0;
            return v;
        }
        break;
    case G_BYTEARRAY:
        if (n == 0) return new_str(u, PK_BYTES, "", 0);
        if (n == 1 && a[0]->kind == PK_BYTES) return new_str(u, PK_BYTES, a[0]->s, a[0]->len);
        break;
    case G_SET:
        if (n == 0) return new_value(u, PK_SET);
        if (n == 1 && (a[0]->kind == PK_LIST || a[0]->kind == PK_TUPLE || a[0]->kind == PK_SET)) {
            if (!(v = new_value(u, PK_SET))) return NULL;
            for (size_t i = 0; i < a[0]->n; i++)
                if (!add_item(u, v, a[0]->items[i])) return NULL;
            return v;
        }
        break;
    case G_COMPLEX: {
        double re = 0, im = 0;
        if (n <= 2 && (n < 1 || as_number(a[0], &re)) && (n < 2 || as_number(a[1], &im))) {
            if ((v = new_value(u, PK_COMPLEX))) v->f = re, v->imag = im;
            return v;
        }
        break;
    }
    case G_REBUILD_TENSOR: /* (storage, storage_offset, size, stride) */
        if (n == 4) return rebuild_tensor(u, a, -3, "_rebuild_tensor");
        break;
    case G_REBUILD_TENSOR_V2: /* (..., requires_grad, backward_hooks[, metadata]) */
        if (n == 6 || n == 7) return rebuild_tensor(u, a, -3, "_rebuild_tensor_v2");
        break;
    case G_REBUILD_TENSOR_V3: /* (..., requires_grad, backward_hooks, dtype[, metadata]) */
        if ((n == 7 || n == 8) && a[6]->kind == PK_GLOBAL && a[6]->i == G_DTYPE) {
            if (a[6]->dtype < 0)
                return FAIL(u, NB_ERR_DTYPE, "a tensor of %s, a dtype nabla lacks", a[6]->s);
            return rebuild_tensor(u, a, a[6]->dtype, "_rebuild_tensor_v3");
        }
        break;
    case G_REBUILD_PARAMETER:            /* (data, requires_grad, backward_hooks) */
    case G_REBUILD_PARAMETER_WITH_STATE: /* (data, requires_grad, backward_hooks, state) */
        if ((n == 3 || n == 4) && a[0]->kind == PK_TENSOR) {
            if (!(v = new_value(u, PK_TENSOR))) return NULL;
            v->tensor = a[0]->tensor, v->parameter = true;
            nb_retain(v->tensor);
            return v;
        }
        break;
    case G_REBUILD_FROM_TYPE_V2: /* (func, new_type, args, state): a plain Tensor or Parameter with no attributes */
        if (n == 4 && depth == 0 && a[1]->kind == PK_GLOBAL && (a[1]->i == G_TENSOR || a[1]->i == G_PARAMETER) &&
            a[2]->kind == PK_TUPLE && (a[3]->kind == PK_NONE || (a[3]->kind == PK_DICT && !a[3]->n))) {
            if (a[0]->kind != PK_GLOBAL || a[0]->i == G_REBUILD_FROM_TYPE_V2)
                return FAIL(u, NB_ERR_FORMAT, "_rebuild_from_type_v2 of something other than a rebuild function");
            v = reduce(u, a[0], a[2], depth + 1);
            if (v && v->kind == PK_TENSOR && a[1]->i == G_PARAMETER) v->parameter = true;
            return v;
        }
        if (n == 4 && a[1]->kind == PK_GLOBAL && (a[1]->i == G_TENSOR || a[1]->i == G_PARAMETER))
            return FAIL(u, NB_ERR_UNSUPPORTED, "a tensor with Python attributes (_rebuild_from_type_v2 with a state)");
        return FAIL(u, NB_ERR_UNSUPPORTED, "a tensor subclass (_rebuild_from_type_v2 of another type)");
    default:
        return FAIL(u, NB_ERR_UNSUPPORTED, "%s: an allowed global that nabla cannot build (sparse, quantized or meta "
                    "tensors, subclasses and legacy classes are not nabla's)", f->s);
    }
    return FAIL(u, NB_ERR_FORMAT, "%s called with arguments nabla does not take (%zu of them)", f->s, n);
}

static bool memo_put(pk_unpickler *u, uint64_t i) {
    pk_value *v = top(u);
    if (!v) return false;
    /* the pickler numbers memo entries from 0, one per put: an index past the data's length is corrupt */
    if (i >= (uint64_t)(u->end - u->start)) return FAIL(u, NB_ERR_FORMAT, "memo index %llu out of range", (unsigned long long)i);
    size_t old = u->cap_memo;
    if (!grow((void **)&u->memo, &u->cap_memo, (size_t)i + 1, sizeof *u->memo)) return FAIL(u, NB_ERR_OOM, "out of host memory");
    if (u->cap_memo > old) memset(u->memo + old, 0, (u->cap_memo - old) * sizeof *u->memo);
    u->memo[i] = v;
    return true;
}

static bool memo_get(pk_unpickler *u, uint64_t i) {
    if (i >= u->cap_memo || !u->memo[i]) return FAIL(u, NB_ERR_FORMAT, "memo entry %llu was never put", (unsigned long long)i);
    return push(u, u->memo[i]);
}

/* One opcode; *done at STOP. */
static bool step(pk_unpickler *u, pk_value **result) {
    const uint8_t *b = take(u, 1);
    if (!b) return false;
    const uint8_t *x;
    pk_value *v, *w, *c;
    switch (*b) {
    case 0x80: /* PROTO: any protocol (PyTorch warns for one other than 2) */
        return take(u, 1) != NULL;
    case '.': /* STOP */
        if (!(v = pop(u))) return false;
        if (u->n_marks) return FAIL(u, NB_ERR_FORMAT, "STOP inside a MARK");
        *result = v;
        return true;
    case '(': /* MARK */
        if (!grow((void **)&u->marks, &u->cap_marks, u->n_marks + 1, sizeof *u->marks)) return FAIL(u, NB_ERR_OOM, "out of host memory");
        u->marks[u->n_marks++] = u->sp;
        return true;
    case 'N': return push(u, new_value(u, PK_NONE));
    case 0x88: /* NEWTRUE */
    case 0x89: /* NEWFALSE */
        if (!(v = new_value(u, PK_BOOL))) return false;
        v->i = *b == 0x88;
        return push(u, v);
    case 'J': /* BININT */
        return (x = take(u, 4)) && push(u, new_int(u, (int32_t)(uint32_t)le(x, 4)));
    case 'K': /* BININT1 */
        return (x = take(u, 1)) && push(u, new_int(u, x[0]));
    case 'M': /* BININT2 */
        return (x = take(u, 2)) && push(u, new_int(u, (int64_t)le(x, 2)));
    case 0x8a: { /* LONG1: n bytes, little-endian two's complement */
        if (!(x = take(u, 1))) return false;
        size_t n = x[0];
        if (!(x = take(u, n))) return false;
        if (n > 8) return FAIL(u, NB_ERR_UNSUPPORTED, "an integer of %zu bytes (nabla reads 64-bit integers)", n);
        uint64_t r = n ? le(x, (int)n) : 0;
        if (n && n < 8 && (x[n - 1] & 0x80)) r |= ~(uint64_t)0 << (8 * n);
        return push(u, new_int(u, (int64_t)r));
    }
    case 'G': { /* BINFLOAT: big-endian IEEE double */
        if (!(x = take(u, 8))) return false;
        uint64_t r = 0;
        for (int i = 0; i < 8; i++) r = r << 8 | x[i];
        if (!(v = new_value(u, PK_FLOAT))) return false;
        memcpy(&v->f, &r, sizeof r);
        return push(u, v);
    }
    case 'X': { /* BINUNICODE: u32 length, UTF-8 */
        if (!(x = take(u, 4))) return false;
        size_t n = (size_t)le(x, 4);
        return (x = take(u, n)) && push(u, new_str(u, PK_STR, x, n));
    }
    case 'U': { /* SHORT_BINSTRING: Python 2's str, read as torch.load's encoding (UTF-8) */
        if (!(x = take(u, 1))) return false;
        size_t n = x[0];
        return (x = take(u, n)) && push(u, new_str(u, PK_STR, x, n));
    }
    case ')': return push(u, new_value(u, PK_TUPLE));
    case ']': return push(u, new_value(u, PK_LIST));
    case '}': return push(u, new_value(u, PK_DICT));
    case 0x8f: return push(u, new_value(u, PK_SET)); /* EMPTY_SET */
    case 't': return push(u, pop_mark(u, PK_TUPLE));
    case 0x85: /* TUPLE1 */
    case 0x86: /* TUPLE2 */
    case 0x87: { /* TUPLE3 */
        size_t n = (size_t)(*b - 0x84);
        if (u->sp - frame(u) < n) return FAIL(u, NB_ERR_FORMAT, "TUPLE%zu over a shorter stack", n);
        if (!(c = new_value(u, PK_TUPLE))) return false;
        for (size_t i = u->sp - n; i < u->sp; i++)
            if (!add_item(u, c, u->stack[i])) return false;
        u->sp -= n;
        return push(u, c);
    }
    case 'a': /* APPEND */
        if (!(v = pop(u)) || !(c = top(u))) return false;
        if (c->kind != PK_LIST) return FAIL(u, NB_ERR_FORMAT, "can only append to lists, not to a %s", kind_name(c->kind));
        return add_item(u, c, v);
    case 'e': /* APPENDS */
        if (!(v = pop_mark(u, PK_TUPLE)) || !(c = top(u))) return false;
        if (c->kind != PK_LIST) return FAIL(u, NB_ERR_FORMAT, "can only append to lists, not to a %s", kind_name(c->kind));
        for (size_t i = 0; i < v->n; i++)
            if (!add_item(u, c, v->items[i])) return false;
        return true;
    case 's': /* SETITEM */
        if (!(v = pop(u)) || !(w = pop(u)) || !(c = top(u))) return false;
        if (c->kind != PK_DICT) return FAIL(u, NB_ERR_FORMAT, "can only SETITEM for dicts, not a %s", kind_name(c->kind));
        return add_item(u, c, w) && add_item(u, c, v);
    case 'u': /* SETITEMS */
        if (!(v = pop_mark(u, PK_TUPLE)) || !(c = top(u))) return false;
        if (c->kind != PK_DICT) return FAIL(u, NB_ERR_FORMAT, "can only SETITEMS for dicts, not a %s", kind_name(c->kind));
        if (v->n % 2) return FAIL(u, NB_ERR_FORMAT, "SETITEMS with an odd number of items");
        for (size_t i = 0; i < v->n; i++)
            if (!add_item(u, c, v->items[i])) return false;
        return true;
    case 'c': { /* GLOBAL */
        char name[512];
        if (!read_global(u, name, sizeof name)) return false;
        pk_global g;
        int dt;
        if (!allowed_global(name, &g, &dt))
            return FAIL(u, NB_ERR_FORMAT, "the global %s is not allowed (torch.load(weights_only=True) refuses it too)", name);
        if (!(v = new_str(u, PK_GLOBAL, name, strlen(name)))) return false;
        v->i = g, v->dtype = dt;
        return push(u, v);
    }
    case 'R': /* REDUCE */
        if (!(w = pop(u)) || !(v = top(u))) return false;
        if (!(c = reduce(u, v, w, 0))) return false;
        u->stack[u->sp - 1] = c;
        return true;
    case 0x81: /* NEWOBJ: cls.__new__(cls, *args): nn.Parameter(data[, requires_grad]) */
        if (!(w = pop(u)) || !(v = pop(u))) return false;
        if (v->kind != PK_GLOBAL) return FAIL(u, NB_ERR_FORMAT, "NEWOBJ of a %s", kind_name(v->kind));
        if (v->i != G_PARAMETER) return FAIL(u, NB_ERR_UNSUPPORTED, "NEWOBJ of %s: an allowed class nabla cannot build", v->s);
        if (w->kind != PK_TUPLE || w->n < 1 || w->n > 2 || w->items[0]->kind != PK_TENSOR)
            return FAIL(u, NB_ERR_FORMAT, "nn.Parameter of something other than (tensor[, requires_grad])");
        if (!(c = new_value(u, PK_TENSOR))) return false;
        c->tensor = w->items[0]->tensor, c->parameter = true;
        nb_retain(c->tensor);
        return push(u, c);
    case 'b': /* BUILD: the state of an OrderedDict (its _metadata) or a Parameter is not kept */
        if (!(w = pop(u)) || !(v = top(u))) return false;
        if ((v->kind == PK_DICT || v->kind == PK_TENSOR) && v->parameter) return true;
        if (v->kind == PK_TENSOR) return FAIL(u, NB_ERR_UNSUPPORTED, "BUILD on a tensor (the legacy set_ form)");
        return FAIL(u, NB_ERR_FORMAT, "can only BUILD a Tensor, Parameter or OrderedDict, not a %s", kind_name(v->kind));
    case 'Q': { /* BINPERSID: a storage */
        if (!(w = pop(u))) return false;
        if (w->kind != PK_TUPLE || !w->n || !pk_is_str(w->items[0], "storage"))
            return FAIL(u, NB_ERR_FORMAT, "a persistent id other than ('storage', ...)");
        if (!(v = new_value(u, PK_STORAGE))) return false;
        if (u->cb->persistent_load(u->cb->ctx, w, v)) return false;
        return push(u, v);
    }
    case 'h': /* BINGET */
        return (x = take(u, 1)) && memo_get(u, x[0]);
    case 'j': /* LONG_BINGET */
        return (x = take(u, 4)) && memo_get(u, le(x, 4));
    case 'q': /* BINPUT */
        return (x = take(u, 1)) && memo_put(u, x[0]);
    case 'r': /* LONG_BINPUT */
        return (x = take(u, 4)) && memo_put(u, le(x, 4));
    default:
        u->p--;
        return FAIL(u, NB_ERR_FORMAT, "opcode 0x%02x is not one torch.load(weights_only=True) runs", *b);
    }
}

pk_value *pk_load(const uint8_t *data, size_t len, const char *label, const pk_callbacks *cb, pk_unpickler **out) {
    pk_unpickler *u = calloc(1, sizeof *u);
    *out = u;
    if (!u) return NB_FAIL(NB_ERR_OOM, "%s: out of host memory", label);
    u->p = u->start = data, u->end = data + len, u->label = label, u->cb = cb;
    pk_value *result = NULL;
    while (!result)
        if (!step(u, &result)) return NULL;
    return result;
}
