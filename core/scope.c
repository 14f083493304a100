/* scope.c - per-thread scopes (arenas of tensor references): a training
 * step's temporaries and, through them, its tape die at nb_scope_end. */
#include "nb_impl.h"

struct nb_scope {
    nb_tensor **items;
    size_t len, cap;
    nb_scope *parent;
};

static _Thread_local nb_scope *current;
/* Ended scopes are kept for reuse, so a training step allocates nothing here. */
static _Thread_local nb_scope *spare;

nb_scope *nb_scope_begin(void) {
    nb_scope *s = spare;
    if (s) spare = s->parent;
    else if (!(s = calloc(1, sizeof *s))) return NB_FAIL(NB_ERR_OOM, "scope_begin: out of host memory");
    s->len = 0;
    s->parent = current;
    current = s;
    return s;
}

void nb_scope_end(nb_scope *s) {
    if (!s) return;
    NB_ASSERT(s == current); /* scopes end in LIFO order */
    current = s->parent;
    /* newest first: outputs go before the inputs they reference */
    for (size_t i = s->len; i-- > 0;) nb_release(s->items[i]);
    s->len = 0;
    if (s->cap > 65536) { /* don't keep a huge array from one big step forever */
        free(s->items);
        s->items = NULL;
        s->cap = 0;
    }
    s->parent = spare;
    spare = s;
}

nb_tensor *nb_scope_adopt(nb_tensor *t) {
    nb_scope *s = current;
    if (!t || !s) return t;
    if (s->len == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        nb_tensor **n = realloc(s->items, sizeof *n * cap);
        if (!n) {
            nb_release(t);
            return NB_FAIL(NB_ERR_OOM, "scope: out of host memory");
        }
        s->items = n, s->cap = cap;
    }
    s->items[s->len++] = t;
    return t;
}

nb_tensor *nb_scope_return(nb_scope *s, nb_tensor *r) {
    if (!s) return r; /* nb_scope_begin failed: r already belongs where it should */
    nb_retain(r);
    nb_scope_end(s);
    return nb_scope_adopt(r);
}

int nb_scope_refs(const nb_tensor *t) {
    int n = 0;
    for (const nb_scope *s = current; s; s = s->parent)
        for (size_t i = 0; i < s->len; i++) n += s->items[i] == t;
    return n;
}
