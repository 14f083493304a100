/* scope.c - per-thread scopes (arenas of tensor references): a training
 * step's temporaries and, through them, its tape die at nb_scope_end. The
 * ownership rule (nb_core.h): every returned tensor belongs to the innermost
 * open scope, or to the thread's root scope when none is open; the root
 * scope is emptied by nb_scope_release_root and at thread exit. */
#include <pthread.h>

#include "nb_impl.h"

struct nb_scope {
    nb_tensor **items;
    size_t len, cap;
    nb_scope *parent;
    bool open;
    bool op; /* opened by library code (nb_op_scope_begin) */
    unsigned long id; /* the thread's count of scopes begun, at its beginning */
    int depth;        /* open scopes around it */
};

static _Thread_local nb_scope *current;
static _Thread_local int op_depth; /* open library scopes */
static _Thread_local bool fresh_call; /* the outermost library scope has not asked nb_op_take_fresh yet */
/* Ended scopes are kept for reuse, so a training step allocates nothing here. */
static _Thread_local nb_scope *spare;
/* The root scope: owns what is returned while no scope is open. */
static _Thread_local nb_scope root;
static _Thread_local unsigned long n_begun;

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* Releases what s holds; NB_ERR_STATE when one was freed already (seen
 * under NB_DEBUG_OWNERSHIP: released more often than retained). */
static nb_status release_items(nb_scope *s, const char *what) {
    unsigned bad = nb_own_bad_releases();
    char note[128];
    if (nb_own_debug) { /* the record a freed tensor keeps */
        if (what) snprintf(note, sizeof note, "%s", what);
        else snprintf(note, sizeof note, "the end of %s scope #%lu of its thread (nesting depth %d)",
                      s->op ? "a library call's" : "the nb_scope_begin", s->id, s->depth);
        nb_own_set_releaser(note);
    }
    /* newest first: outputs go before the inputs they reference */
    while (s->len) nb_release(s->items[--s->len]);
    if (nb_own_debug) nb_own_set_releaser(NULL);
    if (nb_own_bad_releases() == bad) return NB_OK;
    return nb_set_error(NB_ERR_STATE, "scope_end: %u tensor%s of this scope had been freed already (released "
                        "more often than retained; NB_DEBUG_OWNERSHIP printed each)", nb_own_bad_releases() - bad,
                        nb_own_bad_releases() - bad == 1 ? "" : "s");
}

static void thread_exit(void *arg) {
    (void)arg;
    release_items(&root, "the thread's exit (its root scope)");
    free(root.items);
    root.items = NULL;
    root.cap = 0;
    while (spare) {
        nb_scope *s = spare;
        spare = s->parent;
        free(s->items);
        free(s);
    }
}

static void main_exit(void) { thread_exit(NULL); }

static void make_key(void) {
    pthread_key_create(&exit_key, thread_exit);
    atexit(main_exit); /* the main thread runs no key destructor */
}

/* Makes thread_exit run when this thread ends: the first time the thread
 * keeps anything here (a root reference, or a scope kept for reuse). */
static _Thread_local bool exit_registered;
static void register_exit(void) {
    if (exit_registered) return;
    pthread_once(&exit_once, make_key);
    pthread_setspecific(exit_key, &root); /* non-NULL: the destructor runs at exit */
    exit_registered = true;
}

static nb_scope *scope_begin(bool op) {
    register_exit(); /* a thread that only opens scopes frees its spares at exit too */
    nb_scope *s = spare;
    if (s) spare = s->parent;
    else if (!(s = calloc(1, sizeof *s))) return NB_FAIL(NB_ERR_OOM, "scope_begin: out of host memory");
    s->len = 0;
    s->open = true;
    s->op = op;
    s->id = ++n_begun;
    s->depth = current ? current->depth + 1 : 0;
    s->parent = current;
    current = s;
    op_depth += op;
    return s;
}

nb_scope *nb_scope_begin(void) { return scope_begin(false); }

nb_scope *nb_op_scope_begin(void) {
    if (!op_depth) fresh_call = true; /* entered from user code */
    return scope_begin(true);
}

int nb_op_depth(void) { return op_depth; }

bool nb_op_take_fresh(void) {
    if (!op_depth) return true;
    bool f = fresh_call;
    fresh_call = false;
    return f;
}

nb_status nb_scope_end(nb_scope *s) {
    if (!s) return NB_OK; /* nb_scope_begin failed: nothing to end */
    if (!s->open) return nb_set_error(NB_ERR_STATE, "scope_end: this scope has already ended");
    if (s != current) {
        int inner = 0;
        for (nb_scope *c = current; c && c != s; c = c->parent) inner++;
        return nb_set_error(NB_ERR_STATE,
                            "scope_end: %d inner scope%s still open; scopes end in reverse order of "
                            "nb_scope_begin (the scope is left open)", inner, inner == 1 ? " is" : "s are");
    }
    current = s->parent;
    op_depth -= s->op;
    nb_status st = release_items(s, NULL);
    s->open = false;
    if (s->cap > 65536) { /* don't keep a huge array from one big step forever */
        free(s->items);
        s->items = NULL;
        s->cap = 0;
    }
    s->parent = spare;
    spare = s;
    return st;
}

void nb_scope_release_root(void) { release_items(&root, "nb_scope_release_root"); }

size_t nb_scope_root_size(void) { return root.len; }

nb_tensor *nb_scope_adopt(nb_tensor *t) {
    nb_scope *s = current;
    if (!t) return t;
    if (!s) {
        s = &root;
        register_exit();
    }
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
    if (nb_take_pending_failure()) r = NULL; /* a step that could not report it failed (nb_save) */
    if (!s) return r; /* nb_scope_begin failed: r already belongs where it should */
    nb_retain(r);
    nb_scope_end(s);
    return nb_scope_adopt(r);
}
