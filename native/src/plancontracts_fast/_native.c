/*
 * plancontracts_fast._native: the native fast path of plancontracts' decode.
 *
 * Three tools, each of which may only ever be more cautious than the Python
 * code it stands in for:
 *
 *   scan(data, max_depth)  one pass over a JSON text: True when the text is
 *                          strict JSON that the Python parser accepts as is
 *                          (no duplicate keys, no number past a double, no
 *                          lone surrogate, not too deep); False means "not
 *                          sure", and the caller runs the slow parser, which
 *                          explains.
 *   Dfa                    a deterministic automaton over code points, for
 *                          the patterns of the generated types.
 *   check(value, node)     walks a typed value along a tree of nodes and
 *                          says whether every string it points at matches.
 *
 * Only the CPython C API is used. The module keeps no mutable global state:
 * the Dfa type and an interned method name live in the module's state.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PROTOCOL 1

/* ------------------------------------------------------------------------ */
/* Module state                                                             */
/* ------------------------------------------------------------------------ */

typedef struct {
    PyTypeObject *dfa_type;
    PyObject *search_name; /* "search", interned: the method of a non-Dfa matcher */
} module_state;

static inline module_state *
get_state(PyObject *module)
{
    return (module_state *)PyModule_GetState(module);
}

/* ------------------------------------------------------------------------ */
/* scan                                                                     */
/* ------------------------------------------------------------------------ */

/* Inputs over this size are scanned without the GIL: bytes are immutable,
 * and the scanner touches no Python object. */
#define SCAN_NOGIL_FROM (64 * 1024)
/* Objects with up to this many keys are searched linearly; larger ones get
 * a hash table, so that a million keys cost linear time, not quadratic. */
#define SMALL_OBJECT 8
/* Integers longer than this may not fit in 64 bits: left to the slow path. */
#define MAX_INT_DIGITS 18
/* Longer non-integer numbers are left to the slow path. */
#define MAX_FLOAT_TOKEN 64
#define MAX_DEPTH_LIMIT 10000

enum { SCAN_NO = 0, SCAN_YES = 1, SCAN_NOMEM = -1 };

/* A key of an open object: where its raw bytes are in the text. Keys holding
 * a backslash are refused before they get here, so that raw bytes compare
 * equal exactly when the decoded keys do (the text is valid UTF-8). */
typedef struct {
    size_t off;
    size_t len;
    Py_hash_t hash;
} scan_key;

typedef struct {
    int is_object;
    size_t first_key; /* index in the shared key stack of this object's first key */
    size_t *table;    /* open addressing: key index + 1, 0 for empty; NULL while small */
    size_t mask;      /* table size - 1 */
} scan_frame;

/* Room for the frames and keys of a small document without allocating: a
 * tool event or a plan scans with no call to the allocator. */
#define INLINE_FRAMES 32
#define INLINE_KEYS 64

typedef struct {
    const unsigned char *p;
    size_t n;
    size_t pos;
    size_t max_depth;
    scan_frame *frames;
    size_t depth;
    size_t frames_cap;
    /* The keys of all open objects, innermost last: an object's keys are
     * dropped when it closes, so memory holds only the open objects' keys. */
    scan_key *keys;
    size_t nkeys;
    size_t keys_cap;
    scan_frame inline_frames[INLINE_FRAMES];
    scan_key inline_keys[INLINE_KEYS];
} scanner;

static Py_hash_t
hash_bytes(const unsigned char *p, size_t len)
{
    /* Python's keyed string hash (SipHash with the process's random key):
     * hostile input cannot choose keys that collide. It reads no Python
     * object, so it is safe without the GIL. */
#if PY_VERSION_HEX >= 0x030E0000
    return Py_HashBuffer(p, (Py_ssize_t)len);
#else
    return _Py_HashBytes(p, (Py_ssize_t)len);
#endif
}

static inline void
skip_ws(scanner *s)
{
    while (s->pos < s->n) {
        unsigned char c = s->p[s->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            return;
        }
        s->pos++;
    }
}

static inline int
hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c |= 0x20;
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

/* Reads the 4 hex digits of a \u escape at p[at..at+4); -1 when they are not. */
static long
read_u_escape(const scanner *s, size_t at)
{
    long value = 0;
    if (at > s->n || s->n - at < 4) {
        return -1;
    }
    for (size_t i = 0; i < 4; i++) {
        int h = hex_value(s->p[at + i]);
        if (h < 0) {
            return -1;
        }
        value = value * 16 + h;
    }
    return value;
}

/* Checks one UTF-8 sequence of 2 to 4 bytes starting at s->pos (a byte
 * >= 0x80), per Unicode's table of well-formed sequences: no overlong
 * form, no surrogate, nothing above U+10FFFF, nothing truncated. */
static int
scan_utf8(scanner *s)
{
    const unsigned char *p = s->p + s->pos;
    size_t left = s->n - s->pos;
    unsigned char c = p[0];
    unsigned char lo = 0x80, hi = 0xBF;
    size_t len;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    }
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) {
            lo = 0xA0; /* below: overlong */
        }
        else if (c == 0xED) {
            hi = 0x9F; /* above: surrogates */
        }
    }
    else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) {
            lo = 0x90; /* below: overlong */
        }
        else if (c == 0xF4) {
            hi = 0x8F; /* above: past U+10FFFF */
        }
    }
    else {
        return 0; /* a continuation byte, C0, C1, F5..FF */
    }
    if (left < len || p[1] < lo || p[1] > hi) {
        return 0;
    }
    for (size_t i = 2; i < len; i++) {
        if (p[i] < 0x80 || p[i] > 0xBF) {
            return 0;
        }
    }
    s->pos += len;
    return 1;
}

/* Scans a string whose opening quote is at s->pos; on success s->pos is past
 * the closing quote and *escaped tells whether it held a backslash. */
static int
scan_string(scanner *s, int *escaped)
{
    *escaped = 0;
    s->pos++;
    for (;;) {
        /* The common bytes first, in a tight loop. */
        while (s->pos < s->n) {
            unsigned char c = s->p[s->pos];
            if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) {
                break;
            }
            s->pos++;
        }
        if (s->pos >= s->n) {
            return 0; /* unterminated */
        }
        unsigned char c = s->p[s->pos];
        if (c == '"') {
            s->pos++;
            return 1;
        }
        if (c < 0x20) {
            return 0; /* raw control character */
        }
        if (c >= 0x80) {
            if (!scan_utf8(s)) {
                return 0;
            }
            continue;
        }
        /* A backslash. */
        *escaped = 1;
        if (s->n - s->pos < 2) {
            return 0;
        }
        switch (s->p[s->pos + 1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            s->pos += 2;
            break;
        case 'u': {
            long unit = read_u_escape(s, s->pos + 2);
            if (unit < 0 || (unit >= 0xDC00 && unit <= 0xDFFF)) {
                return 0; /* bad hex, or a low surrogate with no high one before it */
            }
            s->pos += 6;
            if (unit >= 0xD800 && unit <= 0xDBFF) {
                /* A high surrogate: a low one must follow at once. */
                if (s->n - s->pos < 6 || s->p[s->pos] != '\\' || s->p[s->pos + 1] != 'u') {
                    return 0;
                }
                long low = read_u_escape(s, s->pos + 2);
                if (low < 0xDC00 || low > 0xDFFF) {
                    return 0;
                }
                s->pos += 6;
            }
            break;
        }
        default:
            return 0;
        }
    }
}

/* Scans a number at s->pos, per RFC 8259's grammar, refusing what might not
 * fit: integers over MAX_INT_DIGITS digits, other numbers that are long or
 * not finite as a double. */
static int
scan_number(scanner *s)
{
    const unsigned char *p = s->p;
    size_t n = s->n;
    size_t start = s->pos, pos = s->pos, digits_from;
    int is_integer = 1;
    if (p[pos] == '-') {
        pos++;
    }
    digits_from = pos;
    if (pos >= n) {
        return 0;
    }
    if (p[pos] == '0') {
        pos++;
    }
    else if (p[pos] >= '1' && p[pos] <= '9') {
        while (pos < n && p[pos] >= '0' && p[pos] <= '9') {
            pos++;
        }
    }
    else {
        return 0;
    }
    size_t int_digits = pos - digits_from;
    if (pos < n && p[pos] == '.') {
        is_integer = 0;
        pos++;
        if (pos >= n || p[pos] < '0' || p[pos] > '9') {
            return 0;
        }
        while (pos < n && p[pos] >= '0' && p[pos] <= '9') {
            pos++;
        }
    }
    if (pos < n && (p[pos] == 'e' || p[pos] == 'E')) {
        is_integer = 0;
        pos++;
        if (pos < n && (p[pos] == '+' || p[pos] == '-')) {
            pos++;
        }
        if (pos >= n || p[pos] < '0' || p[pos] > '9') {
            return 0;
        }
        while (pos < n && p[pos] >= '0' && p[pos] <= '9') {
            pos++;
        }
    }
    if (is_integer) {
        if (int_digits > MAX_INT_DIGITS) {
            return 0;
        }
    }
    else {
        size_t len = pos - start;
        char copy[MAX_FLOAT_TOKEN + 1];
        char *end;
        if (len > MAX_FLOAT_TOKEN) {
            return 0;
        }
        /* strtod needs a terminated string, and the text need not be one. */
        memcpy(copy, p + start, len);
        copy[len] = '\0';
        double value = strtod(copy, &end);
        /* strtod follows the C locale's decimal point: when a program set
         * another, it stops early, and the number is left to the slow path. */
        if (end != copy + len || !isfinite(value)) {
            return 0;
        }
    }
    s->pos = pos;
    return 1;
}

static int
scan_literal(scanner *s, const char *word, size_t len)
{
    if (s->n - s->pos < len || memcmp(s->p + s->pos, word, len) != 0) {
        return 0;
    }
    s->pos += len;
    return 1;
}

/* Doubles a full array of `used` items of `size` bytes, which starts in the
 * scanner's inline room (`room`) and moves to the heap the first time:
 * SCAN_YES, or SCAN_NOMEM with the array unchanged. */
static int
grow(void **array, size_t *cap, size_t used, size_t size, const void *room)
{
    size_t new_cap = *cap * 2;
    void *grown;
    if (*array == room) {
        grown = PyMem_RawMalloc(new_cap * size);
        if (grown != NULL) {
            memcpy(grown, *array, used * size);
        }
    }
    else {
        grown = PyMem_RawRealloc(*array, new_cap * size);
    }
    if (grown == NULL) {
        return SCAN_NOMEM;
    }
    *array = grown;
    *cap = new_cap;
    return SCAN_YES;
}

static int
push_frame(scanner *s, int is_object)
{
    if (s->depth == s->frames_cap) {
        void *frames = s->frames;
        if (grow(&frames, &s->frames_cap, s->depth, sizeof(scan_frame), s->inline_frames) != SCAN_YES) {
            return SCAN_NOMEM;
        }
        s->frames = frames;
    }
    scan_frame *f = &s->frames[s->depth++];
    f->is_object = is_object;
    f->first_key = s->nkeys;
    f->table = NULL;
    f->mask = 0;
    return SCAN_YES;
}

static void
pop_frame(scanner *s)
{
    scan_frame *f = &s->frames[--s->depth];
    if (f->is_object) {
        PyMem_RawFree(f->table);
        f->table = NULL;
        s->nkeys = f->first_key;
    }
}

static inline int
same_key(const scanner *s, const scan_key *a, size_t off, size_t len)
{
    return a->len == len && memcmp(s->p + a->off, s->p + off, len) == 0;
}

/* Puts key index `index` (of the shared stack) into the frame's table,
 * which has room. */
static void
table_insert(scanner *s, scan_frame *f, size_t index)
{
    size_t slot = (size_t)s->keys[index].hash & f->mask;
    while (f->table[slot] != 0) {
        slot = (slot + 1) & f->mask;
    }
    f->table[slot] = index + 1;
}

/* Rebuilds the frame's table at twice the size its keys need. */
static int
table_grow(scanner *s, scan_frame *f)
{
    size_t count = s->nkeys - f->first_key;
    size_t size = 16;
    while (size < count * 2 + 2) {
        size *= 2;
    }
    size_t *table = PyMem_RawCalloc(size, sizeof(size_t));
    if (table == NULL) {
        return SCAN_NOMEM;
    }
    PyMem_RawFree(f->table);
    f->table = table;
    f->mask = size - 1;
    for (size_t i = f->first_key; i < s->nkeys; i++) {
        table_insert(s, f, i);
    }
    return SCAN_YES;
}

/* Records the key at text[off..off+len) in the innermost object: SCAN_NO
 * when the object already holds an equal key. */
static int
add_key(scanner *s, size_t off, size_t len)
{
    scan_frame *f = &s->frames[s->depth - 1];
    size_t count = s->nkeys - f->first_key;
    Py_hash_t hash = 0;
    if (f->table == NULL && count < SMALL_OBJECT) {
        for (size_t i = f->first_key; i < s->nkeys; i++) {
            if (same_key(s, &s->keys[i], off, len)) {
                return SCAN_NO;
            }
        }
    }
    else {
        if (f->table == NULL) {
            /* The object outgrew the linear search: hash the keys it has. */
            for (size_t i = f->first_key; i < s->nkeys; i++) {
                s->keys[i].hash = hash_bytes(s->p + s->keys[i].off, s->keys[i].len);
            }
            if (table_grow(s, f) != SCAN_YES) {
                return SCAN_NOMEM;
            }
        }
        hash = hash_bytes(s->p + off, len);
        size_t slot = (size_t)hash & f->mask;
        while (f->table[slot] != 0) {
            const scan_key *k = &s->keys[f->table[slot] - 1];
            if (k->hash == hash && same_key(s, k, off, len)) {
                return SCAN_NO;
            }
            slot = (slot + 1) & f->mask;
        }
    }
    if (s->nkeys == s->keys_cap) {
        void *keys = s->keys;
        if (grow(&keys, &s->keys_cap, s->nkeys, sizeof(scan_key), s->inline_keys) != SCAN_YES) {
            return SCAN_NOMEM;
        }
        s->keys = keys;
    }
    s->keys[s->nkeys].off = off;
    s->keys[s->nkeys].len = len;
    s->keys[s->nkeys].hash = hash;
    s->nkeys++;
    if (f->table != NULL) {
        /* Keep the table at most half full, so probes stay short. */
        if ((s->nkeys - f->first_key) * 2 > f->mask) {
            if (table_grow(s, f) != SCAN_YES) {
                return SCAN_NOMEM;
            }
        }
        else {
            table_insert(s, f, s->nkeys - 1);
        }
    }
    return SCAN_YES;
}

/* Scans an object key (s->pos at its quote), then the colon after it. */
static int
scan_key_and_colon(scanner *s)
{
    int escaped;
    if (s->pos >= s->n || s->p[s->pos] != '"') {
        return SCAN_NO;
    }
    size_t start = s->pos + 1;
    if (!scan_string(s, &escaped)) {
        return SCAN_NO;
    }
    if (escaped) {
        /* "a" and "\u0061" are the same key; rather than decode, let the
         * slow path judge (conservative, and rare in practice). */
        return SCAN_NO;
    }
    int added = add_key(s, start, s->pos - 1 - start);
    if (added != SCAN_YES) {
        return added;
    }
    skip_ws(s);
    if (s->pos >= s->n || s->p[s->pos] != ':') {
        return SCAN_NO;
    }
    s->pos++;
    skip_ws(s);
    return SCAN_YES;
}

/* The scanner's loop: an explicit stack of open containers, no recursion. */
static int
scan_text(scanner *s)
{
    int result;
    skip_ws(s);
    for (;;) {
        /* A value starts at s->pos. */
        if (s->pos >= s->n) {
            return SCAN_NO;
        }
        switch (s->p[s->pos]) {
        case '{':
        case '[': {
            int is_object = s->p[s->pos] == '{';
            if (s->depth >= s->max_depth) {
                return SCAN_NO;
            }
            if ((result = push_frame(s, is_object)) != SCAN_YES) {
                return result;
            }
            s->pos++;
            skip_ws(s);
            if (s->pos < s->n && s->p[s->pos] == (is_object ? '}' : ']')) {
                pop_frame(s);
                s->pos++;
                break; /* an empty container: a whole value */
            }
            if (is_object && (result = scan_key_and_colon(s)) != SCAN_YES) {
                return result;
            }
            continue; /* its first value */
        }
        case '"': {
            int escaped;
            if (!scan_string(s, &escaped)) {
                return SCAN_NO;
            }
            break;
        }
        case 't':
            if (!scan_literal(s, "true", 4)) {
                return SCAN_NO;
            }
            break;
        case 'f':
            if (!scan_literal(s, "false", 5)) {
                return SCAN_NO;
            }
            break;
        case 'n':
            if (!scan_literal(s, "null", 4)) {
                return SCAN_NO;
            }
            break;
        default:
            if (s->p[s->pos] != '-' && (s->p[s->pos] < '0' || s->p[s->pos] > '9')) {
                return SCAN_NO;
            }
            if (!scan_number(s)) {
                return SCAN_NO;
            }
            break;
        }
        /* A value ended: close containers until one goes on with a comma. */
        for (;;) {
            skip_ws(s);
            if (s->depth == 0) {
                return s->pos == s->n ? SCAN_YES : SCAN_NO;
            }
            if (s->pos >= s->n) {
                return SCAN_NO;
            }
            unsigned char c = s->p[s->pos];
            int is_object = s->frames[s->depth - 1].is_object;
            if (c == ',') {
                s->pos++;
                skip_ws(s);
                if (is_object && (result = scan_key_and_colon(s)) != SCAN_YES) {
                    return result;
                }
                break; /* the next value */
            }
            if (c != (is_object ? '}' : ']')) {
                return SCAN_NO;
            }
            pop_frame(s);
            s->pos++;
        }
    }
}

/* Reads scan()'s and decode()'s max_depth argument: 1 to MAX_DEPTH_LIMIT. */
static int
read_max_depth(PyObject *arg, const char *function, size_t *out)
{
    if (!PyLong_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "%s() argument 2 must be int, not %.200s", function,
                     Py_TYPE(arg)->tp_name);
        return -1;
    }
    int overflow;
    long long max_depth = PyLong_AsLongLongAndOverflow(arg, &overflow);
    if (max_depth == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow || max_depth < 1 || max_depth > MAX_DEPTH_LIMIT) {
        PyErr_Format(PyExc_ValueError, "%s() max_depth must be between 1 and %d", function,
                     MAX_DEPTH_LIMIT);
        return -1;
    }
    *out = (size_t)max_depth;
    return 0;
}

/* Scans bytes object `data`: SCAN_YES, SCAN_NO, or SCAN_NOMEM with MemoryError set. */
static int
scan_bytes(PyObject *data, size_t max_depth)
{
    scanner s;
    /* Only the header is cleared: the inline arrays are written before they are read. */
    memset(&s, 0, offsetof(scanner, inline_frames));
    s.p = (const unsigned char *)PyBytes_AS_STRING(data);
    s.n = (size_t)PyBytes_GET_SIZE(data);
    s.max_depth = max_depth;
    s.frames = s.inline_frames;
    s.frames_cap = INLINE_FRAMES;
    s.keys = s.inline_keys;
    s.keys_cap = INLINE_KEYS;
    int result;
    if (s.n > SCAN_NOGIL_FROM) {
        Py_BEGIN_ALLOW_THREADS
        result = scan_text(&s);
        Py_END_ALLOW_THREADS
    }
    else {
        result = scan_text(&s);
    }
    /* An early verdict leaves frames open: free their tables. */
    while (s.depth > 0) {
        pop_frame(&s);
    }
    if (s.frames != s.inline_frames) {
        PyMem_RawFree(s.frames);
    }
    if (s.keys != s.inline_keys) {
        PyMem_RawFree(s.keys);
    }
    if (result == SCAN_NOMEM) {
        PyErr_NoMemory();
    }
    return result;
}

static int
bytes_argument(PyObject *arg, const char *function)
{
    if (!PyBytes_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "%s() argument 1 must be bytes, not %.200s", function,
                     Py_TYPE(arg)->tp_name);
        return -1;
    }
    return 0;
}

static PyObject *
scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    size_t max_depth;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "scan() takes exactly 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (bytes_argument(args[0], "scan") < 0 || read_max_depth(args[1], "scan", &max_depth) < 0) {
        return NULL;
    }
    int result = scan_bytes(args[0], max_depth);
    if (result == SCAN_NOMEM) {
        return NULL;
    }
    return PyBool_FromLong(result == SCAN_YES);
}

/* ------------------------------------------------------------------------ */
/* Dfa                                                                      */
/* ------------------------------------------------------------------------ */

#define MAX_STATES 65536
#define MAX_CODE_POINT 0x10FFFF
/* States with more ranges than this are binary searched. */
#define LINEAR_RANGES 8

typedef struct {
    Py_UCS4 lo;
    Py_UCS4 hi;
    uint32_t target;
} dfa_range;

typedef struct {
    PyObject_HEAD
    uint32_t states;
    unsigned char *accepting; /* per state */
    size_t *first;            /* per state, plus one: its ranges are ranges[first[s]..first[s+1]) */
    dfa_range *ranges;
} DfaObject;

static void
dfa_dealloc(DfaObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyMem_Free(self->accepting);
    PyMem_Free(self->first);
    PyMem_Free(self->ranges);
    type->tp_free((PyObject *)self);
    Py_DECREF(type); /* instances of heap types hold their type */
}

/* Reads an int item of a transition into *out, within [0, limit]. */
static int
read_bound(PyObject *item, long long limit, const char *what, Py_ssize_t state,
           Py_ssize_t index, long long *out)
{
    if (!PyLong_Check(item)) {
        PyErr_Format(PyExc_TypeError, "transitions[%zd][%zd]: %s must be an int, not %.200s",
                     state, index, what, Py_TYPE(item)->tp_name);
        return -1;
    }
    int overflow;
    long long value = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (value == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow || value < 0 || value > limit) {
        PyErr_Format(PyExc_ValueError, "transitions[%zd][%zd]: %s must be between 0 and %lld",
                     state, index, what, limit);
        return -1;
    }
    *out = value;
    return 0;
}

/* Reads the ranges of one state into self->ranges from *count on, growing
 * the array as needed (*cap). */
static int
dfa_read_state(DfaObject *self, PyObject *ranges, Py_ssize_t state, size_t *count, size_t *cap)
{
    /* A copy: reading an item may run code (an __index__) that changes a list. */
    PyObject *seq = PySequence_Tuple(ranges);
    if (seq == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Format(PyExc_TypeError, "transitions[%zd] must be a sequence of (lo, hi, target) tuples",
                         state);
        }
        return -1;
    }
    Py_ssize_t size = PySequence_Fast_GET_SIZE(seq);
    long long previous_hi = -1;
    for (Py_ssize_t i = 0; i < size; i++) {
        PyObject *triple = PySequence_Fast_GET_ITEM(seq, i);
        long long lo, hi, target;
        if (!PyTuple_Check(triple)) {
            PyErr_Format(PyExc_TypeError, "transitions[%zd][%zd] must be a (lo, hi, target) tuple, not %.200s",
                         state, i, Py_TYPE(triple)->tp_name);
            goto error;
        }
        if (PyTuple_GET_SIZE(triple) != 3) {
            PyErr_Format(PyExc_ValueError, "transitions[%zd][%zd] must hold 3 ints (lo, hi, target), not %zd",
                         state, i, PyTuple_GET_SIZE(triple));
            goto error;
        }
        if (read_bound(PyTuple_GET_ITEM(triple, 0), MAX_CODE_POINT, "lo", state, i, &lo) < 0
            || read_bound(PyTuple_GET_ITEM(triple, 1), MAX_CODE_POINT, "hi", state, i, &hi) < 0
            || read_bound(PyTuple_GET_ITEM(triple, 2), (long long)self->states - 1, "target", state, i,
                          &target) < 0) {
            goto error;
        }
        if (lo > hi) {
            PyErr_Format(PyExc_ValueError, "transitions[%zd][%zd]: lo %lld is above hi %lld", state, i, lo, hi);
            goto error;
        }
        if (lo <= previous_hi) {
            PyErr_Format(PyExc_ValueError,
                         "transitions[%zd][%zd]: ranges must be sorted by lo and not overlap "
                         "(lo %lld is not above the previous hi %lld)",
                         state, i, lo, previous_hi);
            goto error;
        }
        previous_hi = hi;
        if (*count == *cap) {
            size_t new_cap = *cap ? *cap * 2 : 16;
            dfa_range *grown = PyMem_Realloc(self->ranges, new_cap * sizeof(dfa_range));
            if (grown == NULL) {
                PyErr_NoMemory();
                goto error;
            }
            self->ranges = grown;
            *cap = new_cap;
        }
        self->ranges[*count].lo = (Py_UCS4)lo;
        self->ranges[*count].hi = (Py_UCS4)hi;
        self->ranges[*count].target = (uint32_t)target;
        (*count)++;
    }
    Py_DECREF(seq);
    return 0;
error:
    Py_DECREF(seq);
    return -1;
}

static PyObject *
dfa_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"accepting", "transitions", NULL};
    PyObject *accepting_arg, *transitions_arg;
    PyObject *accepting = NULL, *transitions = NULL;
    DfaObject *self = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:Dfa", keywords, &accepting_arg, &transitions_arg)) {
        return NULL;
    }
    /* Copies, as tuples: reading the items may run code (an item's __iter__) that
     * changes a list the caller passed, and a copy keeps its size and items. */
    accepting = PySequence_Tuple(accepting_arg);
    if (accepting == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_SetString(PyExc_TypeError, "Dfa() accepting must be a sequence of bools");
        }
        goto error;
    }
    transitions = PySequence_Tuple(transitions_arg);
    if (transitions == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_SetString(PyExc_TypeError, "Dfa() transitions must be a sequence of sequences");
        }
        goto error;
    }
    Py_ssize_t states = PySequence_Fast_GET_SIZE(accepting);
    if (states < 1 || states > MAX_STATES) {
        PyErr_Format(PyExc_ValueError, "Dfa() needs between 1 and %d states, not %zd", MAX_STATES, states);
        goto error;
    }
    if (PySequence_Fast_GET_SIZE(transitions) != states) {
        PyErr_Format(PyExc_ValueError, "Dfa() needs one list of transitions per state: %zd states, %zd lists",
                     states, PySequence_Fast_GET_SIZE(transitions));
        goto error;
    }
    self = (DfaObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        goto error;
    }
    self->states = (uint32_t)states;
    self->accepting = PyMem_Malloc((size_t)states);
    self->first = PyMem_Malloc(((size_t)states + 1) * sizeof(size_t));
    if (self->accepting == NULL || self->first == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    for (Py_ssize_t i = 0; i < states; i++) {
        PyObject *flag = PySequence_Fast_GET_ITEM(accepting, i);
        if (!PyBool_Check(flag)) {
            PyErr_Format(PyExc_TypeError, "Dfa() accepting[%zd] must be a bool, not %.200s", i,
                         Py_TYPE(flag)->tp_name);
            goto error;
        }
        self->accepting[i] = flag == Py_True;
    }
    size_t count = 0, cap = 0;
    for (Py_ssize_t i = 0; i < states; i++) {
        self->first[i] = count;
        if (dfa_read_state(self, PySequence_Fast_GET_ITEM(transitions, i), i, &count, &cap) < 0) {
            goto error;
        }
    }
    self->first[states] = count;
    Py_DECREF(accepting);
    Py_DECREF(transitions);
    return (PyObject *)self;
error:
    Py_XDECREF(accepting);
    Py_XDECREF(transitions);
    Py_XDECREF(self);
    return NULL;
}

/* The state after `state` reads `ch`; -1 when no range covers it. */
static inline long
dfa_step(const DfaObject *dfa, uint32_t state, Py_UCS4 ch)
{
    const dfa_range *r = dfa->ranges + dfa->first[state];
    size_t count = dfa->first[state + 1] - dfa->first[state];
    if (count <= LINEAR_RANGES) {
        for (size_t i = 0; i < count; i++) {
            if (ch < r[i].lo) {
                return -1; /* sorted: no later range covers it */
            }
            if (ch <= r[i].hi) {
                return r[i].target;
            }
        }
        return -1;
    }
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ch < r[mid].lo) {
            hi = mid;
        }
        else if (ch > r[mid].hi) {
            lo = mid + 1;
        }
        else {
            return r[mid].target;
        }
    }
    return -1;
}

/* Runs the DFA over a str; 1 when it ends in an accepting state, 0 when
 * not, -1 with an exception set. */
static int
dfa_run(const DfaObject *dfa, PyObject *text)
{
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) {
        return -1;
    }
#endif
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    uint32_t state = 0;
    for (Py_ssize_t i = 0; i < length; i++) {
        long next = dfa_step(dfa, state, PyUnicode_READ(kind, data, i));
        if (next < 0) {
            return 0;
        }
        state = (uint32_t)next;
    }
    return dfa->accepting[state];
}

static PyObject *
dfa_matches(DfaObject *self, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "Dfa.matches() argument must be str, not %.200s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    int matched = dfa_run(self, text);
    if (matched < 0) {
        return NULL;
    }
    return PyBool_FromLong(matched);
}

static PyObject *
dfa_repr(DfaObject *self)
{
    return PyUnicode_FromFormat("<Dfa with %u states>", (unsigned int)self->states);
}

static PyObject *
dfa_get_states(DfaObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLong(self->states);
}

static PyMethodDef dfa_methods[] = {
    {"matches", (PyCFunction)dfa_matches, METH_O,
     PyDoc_STR("matches(text, /)\n--\n\nWhether the automaton, run over the code points of `text`, "
               "ends in an accepting state.")},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef dfa_getset[] = {
    {"states", (getter)dfa_get_states, NULL, PyDoc_STR("The number of states."), NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot dfa_slots[] = {
    {Py_tp_new, dfa_new},
    {Py_tp_dealloc, dfa_dealloc},
    {Py_tp_repr, dfa_repr},
    {Py_tp_methods, dfa_methods},
    {Py_tp_getset, dfa_getset},
    {Py_tp_doc,
     PyDoc_STR("Dfa(accepting, transitions)\n--\n\n"
               "A deterministic automaton over Unicode code points. State 0 starts; "
               "transitions[s] lists (lo, hi, target) inclusive ranges, sorted by lo, not "
               "overlapping; a code point no range covers rejects. Immutable.")},
    {0, NULL},
};

static PyType_Spec dfa_spec = {
    .name = "plancontracts_fast._native.Dfa",
    .basicsize = sizeof(DfaObject),
    .itemsize = 0,
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = dfa_slots,
};

/* ------------------------------------------------------------------------ */
/* check                                                                    */
/* ------------------------------------------------------------------------ */

enum { NODE_STRING = 0, NODE_ITEMS = 1, NODE_MAPPING = 2, NODE_FIELDS = 3, NODE_ALL = 4 };

static int check_value(module_state *state, PyObject *value, PyObject *node);

/* The node's tuple items after its kind, checked for their number. */
static int
node_size(PyObject *node, Py_ssize_t size, const char *kind)
{
    if (PyTuple_GET_SIZE(node) != size) {
        PyErr_Format(PyExc_ValueError, "%s node is a tuple of %zd items, not %zd", kind, size,
                     PyTuple_GET_SIZE(node));
        return -1;
    }
    return 0;
}

static int
check_string(module_state *state, PyObject *value, PyObject *matcher)
{
    if (Py_IS_TYPE(matcher, state->dfa_type)) {
        return dfa_run((DfaObject *)matcher, value);
    }
    PyObject *found = PyObject_CallMethodOneArg(matcher, state->search_name, value);
    if (found == NULL) {
        return -1;
    }
    int matched = found != Py_None;
    Py_DECREF(found);
    return matched;
}

static int
check_items(module_state *state, PyObject *value, PyObject *item_node)
{
    /* The size is read again at each step and each item held while it is
     * checked: a matcher's Python code could change a list. */
    int is_list = PyList_Check(value);
    for (Py_ssize_t i = 0;; i++) {
        Py_ssize_t size = is_list ? PyList_GET_SIZE(value) : PyTuple_GET_SIZE(value);
        if (i >= size) {
            return 1;
        }
        PyObject *item = is_list ? PyList_GET_ITEM(value, i) : PyTuple_GET_ITEM(value, i);
        Py_INCREF(item);
        int result = check_value(state, item, item_node);
        Py_DECREF(item);
        if (result != 1) {
            return result;
        }
    }
}

static int
check_mapping(module_state *state, PyObject *value, PyObject *key_node, PyObject *value_node)
{
    Py_ssize_t pos = 0;
    PyObject *key, *item;
    while (PyDict_Next(value, &pos, &key, &item)) {
        Py_INCREF(key);
        Py_INCREF(item);
        int result = check_value(state, key, key_node);
        if (result == 1) {
            result = check_value(state, item, value_node);
        }
        Py_DECREF(key);
        Py_DECREF(item);
        if (result != 1) {
            return result;
        }
    }
    return 1;
}

static int
check_fields(module_state *state, PyObject *value, PyObject *fields)
{
    if (!PyDict_Check(fields)) {
        PyErr_Format(PyExc_TypeError, "a fields node holds a dict of types, not %.200s",
                     Py_TYPE(fields)->tp_name);
        return -1;
    }
    PyObject *named = PyDict_GetItemWithError(fields, (PyObject *)Py_TYPE(value));
    if (named == NULL) {
        return PyErr_Occurred() ? -1 : 1; /* a type with nothing to check */
    }
    if (!PyTuple_Check(named)) {
        PyErr_Format(PyExc_TypeError, "a fields node maps a type to a tuple of (name, node) pairs, not %.200s",
                     Py_TYPE(named)->tp_name);
        return -1;
    }
    Py_INCREF(named); /* held: a matcher's Python code could change the dict */
    int result = 1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(named) && result == 1; i++) {
        PyObject *pair = PyTuple_GET_ITEM(named, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(pair, 0))) {
            PyErr_SetString(PyExc_TypeError, "a fields node's fields are (name: str, node) pairs");
            result = -1;
            break;
        }
        PyObject *attribute = PyObject_GetAttr(value, PyTuple_GET_ITEM(pair, 0));
        if (attribute == NULL) {
            result = -1;
            break;
        }
        result = check_value(state, attribute, PyTuple_GET_ITEM(pair, 1));
        Py_DECREF(attribute);
    }
    Py_DECREF(named);
    return result;
}

static int
check_all(module_state *state, PyObject *value, PyObject *nodes)
{
    if (!PyTuple_Check(nodes)) {
        PyErr_Format(PyExc_TypeError, "an all-of node holds a tuple of nodes, not %.200s",
                     Py_TYPE(nodes)->tp_name);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(nodes); i++) {
        int result = check_value(state, value, PyTuple_GET_ITEM(nodes, i));
        if (result != 1) {
            return result;
        }
    }
    return 1;
}

/* 1 when every string `node` points at in `value` matches, 0 at the first
 * that does not, -1 with an exception set (a malformed node, a matcher's
 * error, RecursionError for a value nested too deeply). The node is
 * borrowed: the tuples holding it are held by the caller. */
static int
check_value(module_state *state, PyObject *value, PyObject *node)
{
    if (node == Py_None) {
        return 1;
    }
    if (!PyTuple_Check(node)) {
        PyErr_Format(PyExc_TypeError, "a node is None or a tuple (kind: int, ...), not %.200s",
                     Py_TYPE(node)->tp_name);
        return -1;
    }
    if (PyTuple_GET_SIZE(node) < 1 || !PyLong_Check(PyTuple_GET_ITEM(node, 0))) {
        PyErr_SetString(PyExc_TypeError, "a node's tuple starts with its kind, an int");
        return -1;
    }
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(node, 0));
    if (kind == -1 && PyErr_Occurred()) {
        return -1;
    }
    int result;
    switch (kind) {
    case NODE_STRING:
        if (node_size(node, 2, "a string") < 0) {
            return -1;
        }
        if (!PyUnicode_Check(value)) {
            return 1;
        }
        return check_string(state, value, PyTuple_GET_ITEM(node, 1));
    case NODE_ITEMS:
        if (node_size(node, 2, "an items") < 0) {
            return -1;
        }
        if (!(PyList_Check(value) || PyTuple_Check(value)) || PyTuple_GET_ITEM(node, 1) == Py_None) {
            return 1;
        }
        if (Py_EnterRecursiveCall(" while checking the patterns of a value")) {
            return -1;
        }
        result = check_items(state, value, PyTuple_GET_ITEM(node, 1));
        Py_LeaveRecursiveCall();
        return result;
    case NODE_MAPPING:
        if (node_size(node, 3, "a mapping") < 0) {
            return -1;
        }
        if (!PyDict_Check(value) || (PyTuple_GET_ITEM(node, 1) == Py_None && PyTuple_GET_ITEM(node, 2) == Py_None)) {
            return 1;
        }
        if (Py_EnterRecursiveCall(" while checking the patterns of a value")) {
            return -1;
        }
        result = check_mapping(state, value, PyTuple_GET_ITEM(node, 1), PyTuple_GET_ITEM(node, 2));
        Py_LeaveRecursiveCall();
        return result;
    case NODE_FIELDS:
        if (node_size(node, 2, "a fields") < 0) {
            return -1;
        }
        if (Py_EnterRecursiveCall(" while checking the patterns of a value")) {
            return -1;
        }
        result = check_fields(state, value, PyTuple_GET_ITEM(node, 1));
        Py_LeaveRecursiveCall();
        return result;
    case NODE_ALL:
        if (node_size(node, 2, "an all-of") < 0) {
            return -1;
        }
        if (Py_EnterRecursiveCall(" while checking the patterns of a value")) {
            return -1;
        }
        result = check_all(state, value, PyTuple_GET_ITEM(node, 1));
        Py_LeaveRecursiveCall();
        return result;
    default:
        PyErr_Format(PyExc_ValueError, "unknown node kind %ld (the kinds are 0 to 4)", kind);
        return -1;
    }
}

static PyObject *
check(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "check() takes exactly 2 arguments (%zd given)", nargs);
        return NULL;
    }
    int result = check_value(get_state(module), args[0], args[1]);
    if (result < 0) {
        return NULL;
    }
    return PyBool_FromLong(result);
}

/* decode(): scan, then the typed decoder, then the pattern walk, in one call:
 * a 100-byte event spends less in this one call than in the Python code that
 * would make the three. */
static PyObject *
decode(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    size_t max_depth;
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "decode() takes exactly 6 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *data = args[0], *decoder = args[2], *node = args[3], *unsure_errors = args[4];
    PyObject *unsure = args[5];
    if (bytes_argument(data, "decode") < 0 || read_max_depth(args[1], "decode", &max_depth) < 0) {
        return NULL;
    }
    int scanned = scan_bytes(data, max_depth);
    if (scanned == SCAN_NOMEM) {
        return NULL;
    }
    if (scanned != SCAN_YES) {
        return Py_NewRef(unsure);
    }
    PyObject *typed = PyObject_CallOneArg(decoder, data);
    if (typed == NULL) {
        /* The types refuse it: the slow path says why. Any other error is a bug, raised. */
        if (PyErr_ExceptionMatches(unsure_errors)) {
            PyErr_Clear();
            return Py_NewRef(unsure);
        }
        return NULL;
    }
    int holds = check_value(get_state(module), typed, node);
    if (holds == 1) {
        return typed;
    }
    Py_DECREF(typed);
    if (holds < 0) {
        if (!PyErr_ExceptionMatches(PyExc_RecursionError)) {
            return NULL;
        }
        PyErr_Clear(); /* too deep to walk here: the slow path walks in a loop */
    }
    return Py_NewRef(unsure);
}

/* ------------------------------------------------------------------------ */
/* Module                                                                   */
/* ------------------------------------------------------------------------ */

static PyMethodDef module_methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     PyDoc_STR("scan(data, max_depth, /)\n--\n\n"
               "True when `data` is one strict JSON text that plancontracts' parser accepts as is: "
               "valid UTF-8, no duplicate keys, no lone surrogate escape, integers of at most 18 "
               "digits, finite floats, nesting at most `max_depth` (1 to 10000) levels. False "
               "means not sure: the slow parser decides.")},
    {"check", (PyCFunction)(void (*)(void))check, METH_FASTCALL,
     PyDoc_STR("check(value, node, /)\n--\n\n"
               "Whether every string of `value` that the node tree points at matches its pattern.")},
    {"decode", (PyCFunction)(void (*)(void))decode, METH_FASTCALL,
     PyDoc_STR("decode(data, max_depth, decoder, node, unsure_errors, unsure, /)\n--\n\n"
               "scan(data, max_depth), then decoder(data), then check(value, node): the value "
               "when all three pass; `unsure` when the scan is unsure, the decoder raises one of "
               "`unsure_errors`, a string misses its pattern or the value is too deep to walk. "
               "Other errors propagate.")},
    {NULL, NULL, 0, NULL},
};

static int
module_exec(PyObject *module)
{
    module_state *state = get_state(module);
    state->dfa_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &dfa_spec, NULL);
    if (state->dfa_type == NULL) {
        return -1;
    }
    if (PyModule_AddType(module, state->dfa_type) < 0) {
        return -1;
    }
    state->search_name = PyUnicode_InternFromString("search");
    if (state->search_name == NULL) {
        return -1;
    }
    if (PyModule_AddIntConstant(module, "PROTOCOL", PROTOCOL) < 0) {
        return -1;
    }
    return 0;
}

static int
module_traverse(PyObject *module, visitproc visit, void *arg)
{
    module_state *state = get_state(module);
    Py_VISIT(state->dfa_type);
    return 0;
}

static int
module_clear(PyObject *module)
{
    module_state *state = get_state(module);
    Py_CLEAR(state->dfa_type);
    Py_CLEAR(state->search_name);
    return 0;
}

static void
module_free(void *module)
{
    module_clear((PyObject *)module);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "plancontracts_fast._native",
    .m_doc = PyDoc_STR("The native fast path of plancontracts' decode: scan, Dfa, check."),
    .m_size = sizeof(module_state),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    return PyModuleDef_Init(&native_module);
}
