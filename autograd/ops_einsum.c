/* ops_einsum.c - torch.einsum and the contractions written with it or
 * beside it (tensordot, outer, kron, trace, linalg.cross), from views,
 * sums and bmm, so their gradients (first and second order) follow from
 * those ops on every backend. einsum: repeated labels of one operand
 * become diagonals, labels no later operand or the output needs are summed
 * early, and the operands are contracted pairwise in opt_einsum's greedy
 * order (the pair whose result is smallest first), each pair one bmm over
 * its batch, kept and contracted labels. Tests: tests/test_ops_einsum.c,
 * the op harness, tests/torch_diff. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "nb_autograd_impl.h"

enum { EIN_LETTERS = 52, EIN_LABELS = EIN_LETTERS + NB_MAX_DIMS, EIN_MAX_OPS = 16 };

/* An operand during the contraction: a tensor and the label of each dim. */
typedef struct ein_term {
    nb_tensor *t;
    int n;
    int labels[NB_MAX_DIMS];
} ein_term;

static int letter(char c) { return isupper((unsigned char)c) ? c - 'A' : c - 'a' + 26; } /* PyTorch's label order */

/* Parses one side's subscripts (up to ',' or '-' or the end) of an operand
 * with ndim dims (-1 for the output): labels into out (ellipsis dims as
 * EIN_LETTERS + k, right-aligned to e_total), returns the count or -1. */
static int parse_term(const char **p, int ndim, int e_total, int *out, bool *has_ellipsis) {
    int n = 0, before = -1;
    *has_ellipsis = false;
    int raw[NB_MAX_DIMS + 3];
    int k = 0;
    for (; **p && **p != ',' && **p != '-'; (*p)++) {
        char c = **p;
        if (c == ' ') continue;
        if (c == '.') {
            if (strncmp(*p, "...", 3) || *has_ellipsis) return -1;
            *has_ellipsis = true;
            before = k;
            *p += 2;
            continue;
        }
        if (!isalpha((unsigned char)c) || k >= NB_MAX_DIMS) return -1;
        raw[k++] = letter(c);
    }
    int e = 0;
    if (*has_ellipsis) e = ndim < 0 ? e_total : ndim - k;
    if (e < 0 || (ndim >= 0 && k + e != ndim) || k + e > NB_MAX_DIMS) return -1;
    for (int i = 0; i < k; i++) {
        if (i == before)
            for (int j = 0; j < e; j++) out[n++] = EIN_LETTERS + (e_total - e) + j;
        out[n++] = raw[i];
    }
    if (*has_ellipsis && before == k)
        for (int j = 0; j < e; j++) out[n++] = EIN_LETTERS + (e_total - e) + j;
    return n;
}

/* The position of label l in the term, or -1. */
static int find(const ein_term *t, int l) {
    for (int i = 0; i < t->n; i++)
        if (t->labels[i] == l) return i;
    return -1;
}

/* Merges repeated labels into their diagonal (nb_diagonal appends it last). */
static bool take_diagonals(ein_term *t) {
    for (int i = 0; i < t->n; i++)
        for (int j = i + 1; j < t->n; j++) {
            if (t->labels[i] != t->labels[j]) continue;
            if (t->t->shape[i] != t->t->shape[j]) {
                nb_set_error(NB_ERR_SHAPE, "einsum: a repeated subscript covers dims of sizes %lld and %lld",
                             (long long)t->t->shape[i], (long long)t->t->shape[j]);
                return false;
            }
            int l = t->labels[i];
            if (!(t->t = nb_diagonal(t->t, 0, i, j))) return false;
            int m = 0;
            for (int k = 0; k < t->n; k++)
                if (k != i && k != j) t->labels[m++] = t->labels[k];
            t->labels[m++] = l;
            t->n = m;
            i = -1; /* start over: positions moved */
            break;
        }
    return true;
}

/* Sums out the labels of t that need[] does not mark. */
static bool sum_unneeded(ein_term *t, const bool *need) {
    int dims[NB_MAX_DIMS], nd = 0, m = 0;
    for (int i = 0; i < t->n; i++) {
        if (need[t->labels[i]]) t->labels[m++] = t->labels[i];
        else dims[nd++] = i;
    }
    if (!nd) return true;
    t->n = m;
    return (t->t = nb_sum(t->t, dims, nd, false)) != NULL;
}

/* The size of label l in a or b (the larger: size-1 dims broadcast). */
static int64_t label_size(const ein_term *a, const ein_term *b, int l) {
    int i = find(a, l), j = b ? find(b, l) : -1;
    int64_t s = i >= 0 ? a->t->shape[i] : 1, u = j >= 0 ? b->t->shape[j] : 1;
    return s > u ? s : u;
}

/* t permuted to the labels order[0..n) (each present), then expanded to sizes. */
static nb_tensor *arrange(const ein_term *t, const int *order, int n, const int64_t *sizes) {
    if (n == 0) return t->t;
    int perm[NB_MAX_DIMS];
    for (int i = 0; i < n; i++) perm[i] = find(t, order[i]);
    nb_tensor *v = n > 1 ? nb_permute(t->t, perm) : t->t;
    return v ? nb_expand(v, n, sizes) : NULL;
}

/* a and b into one term: batch labels (in both, needed later), contracted
 * (in both, not needed), kept (in one); one bmm. */
static bool contract(ein_term *a, ein_term *b, const bool *need, ein_term *out) {
    int batch[NB_MAX_DIMS], con[NB_MAX_DIMS], ka[NB_MAX_DIMS], kb[NB_MAX_DIMS], nb = 0, nc = 0, na = 0, nk = 0;
    for (int i = 0; i < a->n; i++) {
        int l = a->labels[i];
        if (find(b, l) < 0) ka[na++] = l;
        else if (need[l]) batch[nb++] = l;
        else con[nc++] = l;
    }
    for (int i = 0; i < b->n; i++)
        if (find(a, b->labels[i]) < 0) kb[nk++] = b->labels[i];
    if (nb + na + nk > NB_MAX_DIMS) return nb_set_error(NB_ERR_SHAPE, "einsum: an intermediate has more than %d dims", NB_MAX_DIMS), false;
    int64_t sb = 1, sc = 1, sa = 1, sk = 1, sizes[NB_MAX_DIMS];
    int order[NB_MAX_DIMS], n = 0;
    /* a as [batch, kept_a, contracted], b as [batch, contracted, kept_b] */
    for (int i = 0; i < nb; i++) order[n] = batch[i], sizes[n] = label_size(a, b, batch[i]), sb *= sizes[n++];
    for (int i = 0; i < na; i++) order[n] = ka[i], sizes[n] = label_size(a, NULL, ka[i]), sa *= sizes[n++];
    for (int i = 0; i < nc; i++) order[n] = con[i], sizes[n] = label_size(a, b, con[i]), sc *= sizes[n++];
    nb_tensor *A = arrange(a, order, n, sizes);
    int border[NB_MAX_DIMS], m = 0;
    int64_t bsizes[NB_MAX_DIMS];
    for (int i = 0; i < nb; i++) border[m] = batch[i], bsizes[m++] = sizes[i];
    for (int i = 0; i < nc; i++) border[m] = con[i], bsizes[m++] = sizes[nb + na + i];
    for (int i = 0; i < nk; i++) border[m] = kb[i], bsizes[m] = label_size(b, NULL, kb[i]), sk *= bsizes[m++];
    nb_tensor *B = arrange(b, border, m, bsizes);
    if (!A || !B) return false;
    nb_tensor *r = nb_bmm(nb_reshape(nb_contiguous(A), NB_SHAPE(sb, sa, sc)), nb_reshape(nb_contiguous(B), NB_SHAPE(sb, sc, sk)));
    int64_t rs[NB_MAX_DIMS];
    out->n = 0;
    for (int i = 0; i < nb; i++) out->labels[out->n] = batch[i], rs[out->n++] = sizes[i];
    for (int i = 0; i < na; i++) out->labels[out->n] = ka[i], rs[out->n++] = sizes[nb + i];
    for (int i = 0; i < nk; i++) out->labels[out->n] = kb[i], rs[out->n++] = bsizes[nb + nc + i];
    out->t = r ? nb_reshape(r, out->n, rs) : NULL;
    return out->t != NULL;
}

/* Marks the labels the output or the live terms other than skip_a, skip_b need. */
static void needed(const int *out, int n_out, const ein_term *terms, const bool *live, int n, int skip_a, int skip_b,
                   bool *need) {
    memset(need, 0, sizeof(bool) * EIN_LABELS);
    for (int i = 0; i < n_out; i++) need[out[i]] = true;
    for (int k = 0; k < n; k++)
        if (live[k] && k != skip_a && k != skip_b)
            for (int i = 0; i < terms[k].n; i++) need[terms[k].labels[i]] = true;
}

/* The number of elements of the pair's result (for the greedy order). */
static double result_size(const ein_term *a, const ein_term *b, const bool *need) {
    double s = 1;
    for (int i = 0; i < a->n; i++)
        if (need[a->labels[i]] || find(b, a->labels[i]) < 0) s *= (double)label_size(a, b, a->labels[i]);
    for (int i = 0; i < b->n; i++)
        if (find(a, b->labels[i]) < 0) s *= (double)b->t->shape[i];
    return s;
}

static nb_tensor *einsum_impl(const char *eq, nb_tensor *const *ops, int n) {
    ein_term terms[EIN_MAX_OPS];
    int e_total = 0;
    /* the ellipsis dims of the operands (right-aligned): their count is the largest */
    const char *p = eq;
    int counts[EIN_MAX_OPS];
    for (int k = 0; k < n; k++) {
        int letters = 0;
        bool ell = false;
        for (; *p && *p != ',' && *p != '-'; p++) {
            if (*p == '.') ell = true;
            else if (isalpha((unsigned char)*p)) letters++;
        }
        counts[k] = ell ? ops[k]->ndim - letters : 0;
        if (*p == ',') p++;
    }
    e_total = 0;
    for (int k = 0; k < n; k++) e_total = counts[k] > e_total ? counts[k] : e_total;
    p = eq;
    for (int k = 0; k < n; k++) {
        bool ell;
        terms[k].t = ops[k];
        terms[k].n = parse_term(&p, ops[k]->ndim, e_total, terms[k].labels, &ell);
        if (terms[k].n < 0)
            return NB_FAIL(NB_ERR_INVALID_ARG, "einsum: the subscripts of operand %d do not fit its %d dims (or use a "
                           "character other than letters, spaces and one ...): \"%s\"", k, ops[k]->ndim, eq);
        if (k < n - 1 && *p != ',')
            return NB_FAIL(NB_ERR_INVALID_ARG, "einsum: \"%s\" has fewer operands than the %d given", eq, n);
        if (k < n - 1) p++;
    }
    if (*p == ',') return NB_FAIL(NB_ERR_INVALID_ARG, "einsum: \"%s\" has more operands than the %d given", eq, n);
    /* the output's labels: after ->, or the labels seen once in PyTorch's order, ellipsis dims first */
    int out[NB_MAX_DIMS + EIN_LETTERS], n_out = 0, seen[EIN_LABELS] = {0};
    for (int k = 0; k < n; k++)
        for (int i = 0; i < terms[k].n; i++) seen[terms[k].labels[i]]++;
    if (*p == '-') {
        if (p[1] != '>') return NB_FAIL(NB_ERR_INVALID_ARG, "einsum: \"%s\": '-' must start \"->\"", eq);
        p += 2;
        bool ell;
        n_out = parse_term(&p, -1, e_total, out, &ell);
        if (n_out < 0 || *p) return NB_FAIL(NB_ERR_INVALID_ARG, "einsum: bad output subscripts in \"%s\"", eq);
        (void)ell; /* without ... in the output, the ellipsis dims are summed out */
        for (int i = 0; i < n_out; i++) {
            for (int j = 0; j < i; j++)
                if (out[j] == out[i]) return NB_FAIL(NB_ERR_INVALID_ARG, "einsum: an output subscript repeats in \"%s\"", eq);
            if (!seen[out[i]] && out[i] < EIN_LETTERS)
                return NB_FAIL(NB_ERR_INVALID_ARG, "einsum: output subscript of \"%s\" is in no operand", eq);
        }
    } else {
        for (int j = 0; j < e_total; j++) out[n_out++] = EIN_LETTERS + j;
        for (int l = 0; l < EIN_LETTERS; l++)
            if (seen[l] == 1) out[n_out++] = l;
        if (n_out > NB_MAX_DIMS) return NB_FAIL(NB_ERR_SHAPE, "einsum: the output would have %d dims", n_out);
    }
    /* label sizes agree (or broadcast from 1) */
    int64_t size[EIN_LABELS];
    for (int l = 0; l < EIN_LABELS; l++) size[l] = -1;
    for (int k = 0; k < n; k++)
        for (int i = 0; i < terms[k].n; i++) {
            int l = terms[k].labels[i];
            int64_t s = ops[k]->shape[i];
            if (size[l] < 0 || size[l] == 1) size[l] = s;
            else if (s != size[l] && s != 1)
                return NB_FAIL(NB_ERR_SHAPE, "einsum: subscript %c of \"%s\" has sizes %lld and %lld",
                               l < EIN_LETTERS ? (l < 26 ? 'A' + l : 'a' + l - 26) : '.', eq, (long long)size[l],
                               (long long)s);
        }
    for (int k = 0; k < n; k++)
        if (!take_diagonals(&terms[k])) return NULL;
    bool live[EIN_MAX_OPS], need[EIN_LABELS];
    for (int k = 0; k < n; k++) live[k] = true;
    for (int k = 0; k < n; k++) {
        needed(out, n_out, terms, live, n, k, -1, need);
        if (!sum_unneeded(&terms[k], need)) return NULL;
    }
    /* opt_einsum's greedy path: contract the pair with the smallest result until one term is left */
    for (int left = n; left > 1; left--) {
        int bi = -1, bj = -1;
        double best = 0;
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++) {
                if (!live[i] || !live[j]) continue;
                needed(out, n_out, terms, live, n, i, j, need);
                double s = result_size(&terms[i], &terms[j], need);
                if (bi < 0 || s < best) bi = i, bj = j, best = s;
            }
        needed(out, n_out, terms, live, n, bi, bj, need);
        ein_term r;
        if (!contract(&terms[bi], &terms[bj], need, &r)) return NULL;
        terms[bi] = r;
        live[bj] = false;
        needed(out, n_out, terms, live, n, bi, -1, need);
        if (!sum_unneeded(&terms[bi], need)) return NULL;
    }
    ein_term *t = NULL;
    for (int k = 0; k < n; k++)
        if (live[k]) t = &terms[k];
    /* the output order */
    if (n_out == 0) return t->t;
    int64_t sizes[NB_MAX_DIMS];
    for (int i = 0; i < n_out; i++) {
        int pos = find(t, out[i]);
        sizes[i] = pos >= 0 ? t->t->shape[pos] : 1;
    }
    if (t->n != n_out) return NB_FAIL(NB_ERR_INVALID_ARG, "einsum: internal label mismatch in \"%s\"", eq);
    return arrange(t, out, n_out, sizes);
}

nb_tensor *nb_einsum(const char *equation, nb_tensor *const *operands, int n) {
    if (!equation) return NB_FAIL(NB_ERR_INVALID_ARG, "einsum: equation is NULL");
    if (n < 1 || n > EIN_MAX_OPS || !operands)
        return NB_FAIL(NB_ERR_INVALID_ARG, "einsum: 1 to %d operands (got %d)", EIN_MAX_OPS, n);
    if (!nb_check_inputs("einsum", n, operands) || !nb_check_dtypes(NB_OP_EINSUM, n, operands)) return NULL;
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, einsum_impl(equation, operands, n));
}

/* ---- tensordot, outer, kron, trace, cross --------------------------------------- */

nb_tensor *nb_tensordot(nb_tensor *a, nb_tensor *b, int n, const int *dims_a, const int *dims_b) {
    nb_tensor *in[2] = {a, b};
    if (!nb_check_inputs("tensordot", 2, in) || !nb_check_dtypes(NB_OP_TENSORDOT, 2, in)) return NULL;
    if (n < 0 || n > a->ndim || n > b->ndim || (dims_a == NULL) != (dims_b == NULL))
        return NB_FAIL(NB_ERR_INVALID_ARG, "tensordot: %d dims to contract for %d-d and %d-d tensors (dims_a and "
                       "dims_b both given or both NULL)", n, a->ndim, b->ndim);
    /* subscripts: a's dims 'a'.., b's dims 'A'..; a contracted pair shares a's letter */
    char eq[64];
    int k = 0, da[NB_MAX_DIMS], db[NB_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        da[i] = dims_a ? dims_a[i] : a->ndim - n + i;
        db[i] = dims_b ? dims_b[i] : i;
        if (da[i] < 0) da[i] += a->ndim;
        if (db[i] < 0) db[i] += b->ndim;
        if (da[i] < 0 || da[i] >= a->ndim || db[i] < 0 || db[i] >= b->ndim)
            return NB_FAIL(NB_ERR_INVALID_ARG, "tensordot: dim pair %d out of range", i);
    }
    char la[NB_MAX_DIMS], lb[NB_MAX_DIMS];
    for (int i = 0; i < a->ndim; i++) la[i] = (char)('a' + i);
    for (int i = 0; i < b->ndim; i++) lb[i] = (char)('A' + i);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++)
            if (da[j] == da[i] || db[j] == db[i]) return NB_FAIL(NB_ERR_INVALID_ARG, "tensordot: a dim repeats");
        if (a->shape[da[i]] != b->shape[db[i]])
            return NB_FAIL(NB_ERR_SHAPE, "tensordot: contracted dims of sizes %lld and %lld",
                           (long long)a->shape[da[i]], (long long)b->shape[db[i]]);
        lb[db[i]] = la[da[i]];
    }
    for (int i = 0; i < a->ndim; i++) eq[k++] = la[i];
    eq[k++] = ',';
    for (int i = 0; i < b->ndim; i++) eq[k++] = lb[i];
    eq[k++] = '-', eq[k++] = '>';
    for (int i = 0; i < a->ndim; i++) {
        bool c = false;
        for (int j = 0; j < n; j++) c |= da[j] == i;
        if (!c) eq[k++] = la[i];
    }
    for (int i = 0; i < b->ndim; i++) {
        bool c = false;
        for (int j = 0; j < n; j++) c |= db[j] == i;
        if (!c) eq[k++] = lb[i];
    }
    eq[k] = 0;
    if (a->ndim + b->ndim - 2 * n > NB_MAX_DIMS) return NB_FAIL(NB_ERR_SHAPE, "tensordot: the result has more than %d dims", NB_MAX_DIMS);
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, einsum_impl(eq, in, 2));
}

nb_tensor *nb_outer(nb_tensor *a, nb_tensor *b) {
    nb_tensor *in[2] = {a, b};
    if (!nb_check_inputs("outer", 2, in) || !nb_check_dtypes(NB_OP_OUTER, 2, in)) return NULL;
    if (a->ndim != 1 || b->ndim != 1) return NB_FAIL(NB_ERR_SHAPE, "outer: both inputs must be 1-d");
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, nb_mul(nb_unsqueeze(a, 1), nb_unsqueeze(b, 0)));
}

nb_tensor *nb_kron(nb_tensor *a, nb_tensor *b) {
    nb_tensor *in[2] = {a, b};
    if (!nb_check_inputs("kron", 2, in) || !nb_check_dtypes(NB_OP_KRON, 2, in)) return NULL;
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    if (2 * nd > NB_MAX_DIMS) return NB_FAIL(NB_ERR_SHAPE, "kron: at most %d dims", NB_MAX_DIMS / 2);
    /* a as [a0, 1, a1, 1, ...] times b as [1, b0, 1, b1, ...] (left-padded with 1s), then merged pairs */
    int64_t sa[NB_MAX_DIMS], sb[NB_MAX_DIMS], so[NB_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        int64_t x = i - (nd - a->ndim) >= 0 ? a->shape[i - (nd - a->ndim)] : 1;
        int64_t y = i - (nd - b->ndim) >= 0 ? b->shape[i - (nd - b->ndim)] : 1;
        sa[2 * i] = x, sa[2 * i + 1] = 1, sb[2 * i] = 1, sb[2 * i + 1] = y, so[i] = x * y;
    }
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *p = nb_mul(nb_reshape(a, 2 * nd, sa), nb_reshape(b, 2 * nd, sb));
    return nb_scope_return(s, p ? nb_reshape(p, nd, so) : NULL);
}

nb_tensor *nb_trace(nb_tensor *a) {
    if (!nb_check_inputs("trace", 1, &a) || !nb_check_dtypes(NB_OP_TRACE, 1, &a)) return NULL;
    if (a->ndim != 2) return NB_FAIL(NB_ERR_SHAPE, "trace: expected a 2-d input, got %d-d", a->ndim);
    nb_scope *s = nb_op_scope_begin();
    return nb_scope_return(s, nb_sum(nb_diagonal(a, 0, 0, 1), NULL, 0, false));
}

nb_tensor *nb_cross(nb_tensor *a, nb_tensor *b, int dim) {
    nb_tensor *in[2] = {a, b};
    if (!nb_check_inputs("cross", 2, in) || !nb_check_dtypes(NB_OP_CROSS, 2, in)) return NULL;
    int nd;
    int64_t shape[NB_MAX_DIMS];
    if (!nb_broadcast_shapes(a->ndim, a->shape, b->ndim, b->shape, &nd, shape))
        return NB_FAIL(NB_ERR_SHAPE, "cross: the inputs do not broadcast");
    int d = dim < 0 ? dim + nd : dim;
    if (d < 0 || d >= nd) return NB_FAIL(NB_ERR_INVALID_ARG, "cross: dim %d out of range for %d dims", dim, nd);
    if (shape[d] != 3) return NB_FAIL(NB_ERR_SHAPE, "cross: dim %d has size %lld, not 3", dim, (long long)shape[d]);
    nb_scope *s = nb_op_scope_begin();
    nb_tensor *x = nb_broadcast_to(a, nd, shape), *y = nb_broadcast_to(b, nd, shape);
    nb_tensor *c[3];
    for (int i = 0; i < 3; i++) { /* c_i = a_{i+1} b_{i+2} - a_{i+2} b_{i+1} */
        int j = (i + 1) % 3, k = (i + 2) % 3;
        c[i] = nb_sub(nb_mul(nb_narrow(x, d, j, 1), nb_narrow(y, d, k, 1)),
                      nb_mul(nb_narrow(x, d, k, 1), nb_narrow(y, d, j, 1)));
    }
    return nb_scope_return(s, nb_cat(c, 3, d));
}
