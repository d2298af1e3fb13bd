/* diag._lines: the fast reader's line classifier and the batch-statistics fold, in C.

   Optional: diag/scan.py and diag/parse/batches.py use it when it was built at install (setup.py
   builds it where a C compiler is; DIAG_NO_NATIVE=1 turns it off) and do the same work with polars
   and Python otherwise. It reads no file and keeps no state: bytes and buffers in, buffers out.

   classify() reads one chunk of a log (whole lines, each ending with '\n') and gives each line the
   class diag/scan.py's polars path gives it, matching the same patterns by hand. Each pattern of
   scan.py used here is deterministic (no alternative of it can take a different length once
   another has failed), so a left-to-right reading is the regex's answer:

     PREFIX   ^\[TS RANKS\][\t\n\f\r ]?      TS = dddd-dd-dd[ T]dd:dd:dd([.,]d+)?
                                              RANKS = ( (DP|PP|ATTN_CP|MOE_DP|TP|EP|CP)d+)*
     BATCH    PREFIX (Decode|Prefill) batch
     HTTP_OK  ^(\[TS RANKS\][\t\n\f\r ]?|INFO:[\t\n\f\r ]) (INFO:[\t\n\f\r ]+)? [0-9.:\[\]a-f]*:?[0-9]* ?
              - "(GET|POST|PUT|DELETE|HEAD|OPTIONS) [^\t\n\f\r ]+ HTTP/[0-9.]+" [23][0-9]{2}
     BLANK    ^[ \t]*$
     EMBEDDED  \[dddd-dd-dd dd:dd:dd           (anywhere: records run together)
     a layout  ^\[TS <the kept rank>\][\t\n\f\r ]? head0 value0, head1 value1, ...$  with each value
              a number [0-9]{1,15}(\.[0-9]{1,15})? where a column takes it, else [^,:]*

   tests/test_native.py checks these readings against the regexes themselves on generated lines. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NCOL 7          /* batch value columns: running, queue, usage, tokens, throughput, mamba_usage, accept_len */
#define NSER 5          /* the timeline's series: running, queue, usage, throughput, mamba_usage */
#define MAXRANKS 250

/* classes (scan.py): 0 for the parser (or the memo of line classes), 1 a kept-rank batch line whose
   row was read, 2 a successful access line, 3 blank, 5 another rank's batch line, 6 a kept-rank batch
   line no layout took */
enum { F_BATCH = 1, F_HTTP = 2, F_SIG = 4, F_LONG = 8, F_DIRTY = 16, F_MINE = 32, F_PREFIX = 64 };

static inline int dig(unsigned char c) { return c >= '0' && c <= '9'; }
static inline int sp(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'; }

static inline int same(const unsigned char *a, const char *b, Py_ssize_t w) {   /* short compares: no call */
    for (Py_ssize_t k = 0; k < w; k++) if (a[k] != (unsigned char)b[k]) return 0;
    return 1;
}

static inline int starts_n(const unsigned char *l, Py_ssize_t n, Py_ssize_t p, const char *s, Py_ssize_t w) {
    return p + w <= n && same(l + p, s, w);
}
#define starts(l, n, p, lit) starts_n((l), (n), (p), (lit), (Py_ssize_t)(sizeof(lit) - 1))

/* TS at p: its end, or -1 */
static Py_ssize_t ts_end(const unsigned char *l, Py_ssize_t n, Py_ssize_t p, int space_only) {
    static const char form[] = "dddd-dd-dd?dd:dd:dd";
    if (p + 19 > n) return -1;
    for (int k = 0; k < 19; k++) {
        unsigned char c = (unsigned char)form[k], x = l[p + k];
        if (c == 'd') { if (!dig(x)) return -1; }
        else if (c == '?') { if (x != ' ' && !(x == 'T' && !space_only)) return -1; }
        else if (x != c) return -1;
    }
    Py_ssize_t e = p + 19;
    if (!space_only && e + 1 < n && (l[e] == '.' || l[e] == ',') && dig(l[e + 1])) {
        e += 2;
        while (e < n && dig(l[e])) e++;
    }
    return e;
}

static const char *RANK_NAMES[] = {"DP", "PP", "ATTN_CP", "MOE_DP", "TP", "EP", "CP"};
static const Py_ssize_t RANK_LEN[] = {2, 2, 7, 6, 2, 2, 2};

typedef struct { Py_ssize_t ts_end, ranks_end, end; } Prefix;   /* ranks: l[ts_end:ranks_end] */

/* PREFIX at the line's start: 1 and its parts, or 0 */
static int prefix(const unsigned char *l, Py_ssize_t n, Prefix *out) {
    if (n < 1 || l[0] != '[') return 0;
    Py_ssize_t t = ts_end(l, n, 1, 0);
    if (t < 0) return 0;
    Py_ssize_t q = t;
    for (;;) {
        if (q < n && l[q] == ' ') {
            int took = 0;
            for (int k = 0; k < 7 && !took; k++) {
                Py_ssize_t w = RANK_LEN[k];
                if (q + 1 + w < n && same(l + q + 1, RANK_NAMES[k], w) && dig(l[q + 1 + w])) {
                    Py_ssize_t e = q + 1 + w;
                    while (e < n && dig(l[e])) e++;
                    q = e;
                    took = 1;
                }
            }
            if (took) continue;
        }
        break;
    }
    if (q >= n || l[q] != ']') return 0;
    out->ts_end = t;
    out->ranks_end = q;
    q++;
    if (q < n && sp(l[q])) q++;
    out->end = q;
    return 1;
}


static int in_host_class(unsigned char c) {
    return dig(c) || c == '.' || c == ':' || c == '[' || c == ']' || (c >= 'a' && c <= 'f');
}

/* the access-line pattern after the prefix (or after 'INFO:' and one space) */
static int access_at(const unsigned char *l, Py_ssize_t n, Py_ssize_t p) {
    if (starts(l, n, p, "INFO:") && p + 5 < n && sp(l[p + 5])) {
        p += 5;
        while (p < n && sp(l[p])) p++;
    }
    while (p < n && in_host_class(l[p])) p++;
    if (p < n && l[p] == ' ') p++;
    if (!starts(l, n, p, "- \"")) return 0;
    p += 3;
    static const char *methods[] = {"GET ", "POST ", "PUT ", "DELETE ", "HEAD ", "OPTIONS "};
    static const Py_ssize_t mlen[] = {4, 5, 4, 7, 5, 8};
    int m = -1;
    for (int k = 0; k < 6; k++) if (starts_n(l, n, p, methods[k], mlen[k])) { m = k; break; }
    if (m < 0) return 0;
    p += mlen[m];
    Py_ssize_t s = p;
    while (p < n && !sp(l[p])) p++;
    if (p == s || !starts(l, n, p, " HTTP/")) return 0;
    p += 6;
    s = p;
    while (p < n && (dig(l[p]) || l[p] == '.')) p++;
    if (p == s || !starts(l, n, p, "\" ")) return 0;
    p += 2;
    return p + 3 <= n && (l[p] == '2' || l[p] == '3') && dig(l[p + 1]) && dig(l[p + 2]);
}

static int http_ok(const unsigned char *l, Py_ssize_t n, const Prefix *pf, int has_prefix) {
    if (has_prefix && access_at(l, n, pf->end)) return 1;
    if (starts(l, n, 0, "INFO:") && n > 5 && sp(l[5])) return access_at(l, n, 6);
    return 0;
}

static int embedded(const unsigned char *l, Py_ssize_t n) {
    const unsigned char *p = l, *end = l + n;
    while ((p = memchr(p, '[', (size_t)(end - p))) != NULL) {
        if (p > l && p[-1] == ' ' && ts_end(l, n, (p - l) + 1, 1) >= 0) return 1;
        p++;
    }
    return 0;
}

/* the double nearest the decimal s[0:w] (digits, at most one '.'), as strtod gives it: an integer of
   at most 15 digits over an exact power of ten is one correctly rounded division; the rest, strtod */
static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
static double decimal(const unsigned char *s, Py_ssize_t w) {
    uint64_t m = 0;
    int digits = 0, frac = -1;
    for (Py_ssize_t k = 0; k < w; k++) {
        unsigned char c = s[k];
        if (c == '.') { frac = 0; continue; }
        if (digits || c != '0') digits++;
        m = m * 10 + (uint64_t)(c - '0');
        if (frac >= 0) frac++;
        if (digits > 15) goto slow;
    }
    if (frac < 0) frac = 0;
    if (frac > 22) goto slow;
    return frac ? (double)m / POW10[frac] : (double)m;
slow:;
    char buf[64];
    if (w >= (Py_ssize_t)sizeof buf) return NAN;
    memcpy(buf, s, (size_t)w);
    buf[w] = 0;
    return strtod(buf, NULL);
}

/* a batch line's layout: heads joined with ", ", each followed by a value (slot >= 0: a number for
   that column; -1: [^,:]*) or by nothing (-2), then the line's end */
typedef struct { const char *s; Py_ssize_t n; int slot; } Head;
typedef struct { Head *heads; int count; int kind; } Layout;

/* the layout's body at p, the numbers into vals (NAN where no column): 1 when the whole line matches */
static int layout_at(const Layout *lay, const unsigned char *l, Py_ssize_t n, Py_ssize_t p, double *vals) {
    for (int c = 0; c < NCOL; c++) vals[c] = NAN;
    for (int j = 0; j < lay->count; j++) {
        const Head *h = &lay->heads[j];
        if (j) {
            if (p + 2 > n || l[p] != ',' || l[p + 1] != ' ') return 0;
            p += 2;
        }
        if (p + h->n > n || !same(l + p, h->s, h->n)) return 0;
        p += h->n;
        if (h->slot == -1) {
            while (p < n && l[p] != ',' && l[p] != ':') p++;
        } else if (h->slot >= 0) {
            Py_ssize_t s = p;
            while (p < n && dig(l[p])) p++;
            if (p == s || p - s > 15) return 0;
            if (p < n && l[p] == '.') {
                Py_ssize_t f = p + 1;
                while (f < n && dig(l[f])) f++;
                if (f == p + 1 || f - p - 1 > 15) return 0;
                p = f;
            }
            vals[h->slot] = decimal(l + s, p - s);
        }
    }
    return p == n;
}

/* days since 1970-01-01 of a proleptic Gregorian date; -1 with *ok = 0 when it is no date */
static int64_t days_of(int y, int m, int d, int *ok) {
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    *ok = m >= 1 && m <= 12 && d >= 1 && d <= mdays[m - 1] + (m == 2 && leap);
    if (!*ok) return -1;
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int num(const unsigned char *s, int w) {
    int v = 0;
    for (int k = 0; k < w; k++) v = v * 10 + (s[k] - '0');
    return v;
}

/* scan.py's _seconds: the day (a date or null), plus hours and minutes, plus the seconds as a float */
static double seconds_of(const unsigned char *ts, Py_ssize_t n) {
    int ok;
    int64_t day = days_of(num(ts, 4), num(ts + 5, 2), num(ts + 8, 2), &ok);
    if (!ok) return NAN;
    int64_t whole = day * 86400 + (int64_t)num(ts + 11, 2) * 3600 + (int64_t)num(ts + 14, 2) * 60;
    char buf[64];
    Py_ssize_t w = n - 17;
    double sec = 0.0;
    if (w == 2) {
        sec = (double)num(ts + 17, 2);
    } else if (w > 3 && w <= 16 && (ts[19] == '.' || ts[19] == ',')) {     /* SS.fff: at most 15 digits over 10^k */
        uint64_t m = (uint64_t)num(ts + 17, 2);
        for (Py_ssize_t k = 20; k < n; k++) m = m * 10 + (uint64_t)(ts[k] - '0');
        sec = (double)m / POW10[w - 3];
    } else if (w > 0 && w < (Py_ssize_t)sizeof buf) {
        memcpy(buf, ts + 17, (size_t)w);
        buf[w] = 0;
        for (Py_ssize_t k = 0; k < w; k++) if (buf[k] == ',') buf[k] = '.';
        char *end;
        sec = strtod(buf, &end);
        if (*end) sec = 0.0;       /* not a number: polars' cast gives null, filled with 0 */
    } else if (w > 0) {
        PyObject *o = PyUnicode_DecodeASCII((const char *)ts + 17, w, "replace");
        PyObject *f = NULL;
        if (o) {
            PyObject *r = PyObject_CallMethod(o, "replace", "ss", ",", ".");
            if (r) { f = PyFloat_FromString(r); Py_DECREF(r); }
            Py_DECREF(o);
        }
        if (f) { sec = PyFloat_AsDouble(f); Py_DECREF(f); } else PyErr_Clear();
    }
    return (double)whole + sec;
}

/* a growable buffer */
typedef struct { char *p; Py_ssize_t n, cap; } Buf;
static int grow_slow(Buf *b, Py_ssize_t more);
static inline int grow(Buf *b, Py_ssize_t more) {
    return b->n + more <= b->cap ? 0 : grow_slow(b, more);
}
static int grow_slow(Buf *b, Py_ssize_t more) {
    if (b->n + more <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + more) cap *= 2;
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (!p) { PyErr_NoMemory(); return -1; }
    b->p = p;
    b->cap = cap;
    return 0;
}
static inline int put(Buf *b, const void *x, Py_ssize_t w) {
    if (grow(b, w)) return -1;
    memcpy(b->p + b->n, x, (size_t)w);
    b->n += w;
    return 0;
}
static PyObject *to_bytes(Buf *b) { return PyBytes_FromStringAndSize(b->p ? b->p : "", b->n); }

static void free_layouts(Layout *lays, int count) {
    if (!lays) return;
    for (int k = 0; k < count; k++) PyMem_Free(lays[k].heads);
    PyMem_Free(lays);
}

/* layouts: a sequence of (heads: tuple of bytes, slots: tuple of int, kind: int) */
static Layout *read_layouts(PyObject *seq, int *count) {
    PyObject *fast = PySequence_Fast(seq, "layouts must be a sequence");
    if (!fast) return NULL;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(fast);
    Layout *lays = PyMem_Calloc((size_t)(k ? k : 1), sizeof(Layout));
    if (!lays) { Py_DECREF(fast); PyErr_NoMemory(); return NULL; }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *heads, *slots;
        int kind;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "O!O!i", &PyTuple_Type, &heads, &PyTuple_Type, &slots, &kind))
            goto fail;
        Py_ssize_t h = PyTuple_GET_SIZE(heads);
        if (PyTuple_GET_SIZE(slots) != h) { PyErr_SetString(PyExc_ValueError, "heads and slots differ in length"); goto fail; }
        lays[i].heads = PyMem_Calloc((size_t)(h ? h : 1), sizeof(Head));
        if (!lays[i].heads) { PyErr_NoMemory(); goto fail; }
        lays[i].count = (int)h;
        lays[i].kind = kind;
        for (Py_ssize_t j = 0; j < h; j++) {
            PyObject *s = PyTuple_GET_ITEM(heads, j);
            if (!PyBytes_Check(s)) { PyErr_SetString(PyExc_TypeError, "a head must be bytes"); goto fail; }
            lays[i].heads[j].s = PyBytes_AS_STRING(s);     /* kept alive by the caller's tuple */
            lays[i].heads[j].n = PyBytes_GET_SIZE(s);
            long slot = PyLong_AsLong(PyTuple_GET_ITEM(slots, j));
            if (slot == -1 && PyErr_Occurred()) goto fail;
            if (slot < -2 || slot >= NCOL) { PyErr_SetString(PyExc_ValueError, "slot out of range"); goto fail; }
            lays[i].heads[j].slot = (int)slot;
        }
    }
    *count = (int)k;
    Py_DECREF(fast);
    return lays;
fail:
    free_layouts(lays, (int)k);
    Py_DECREF(fast);
    return NULL;
}

static int cmp_ssize(const void *a, const void *b) {
    Py_ssize_t x = *(const Py_ssize_t *)a, y = *(const Py_ssize_t *)b;
    return (x > y) - (x < y);
}

PyDoc_STRVAR(classify_doc,
"classify(data, marks, words, rank, layouts, start, max_line)\n\n"
"Classify the lines of `data` (bytes of whole lines, each ending with a newline). `marks`: byte\n"
"offsets whose line carries a failure signature; `words`: bytes the cleaner acts on (a line with\n"
"one is dirty); `rank`: the kept rank as the prefix spells it, stripped (b'TP0', b''); `layouts`:\n"
"(heads, slots, kind) of the batch-line layouts learned; `start`: the first line's number.\n"
"Returns (n, offsets, classes, flags, ts_end, rank_ids, ranks, kind_before, last_kind, rows) where\n"
"offsets are n + 1 int64 line starts, ts_end the int32 end of each line's timestamp (0: no\n"
"prefix), rank_ids index ranks (0: none), kind_before the kind of the kept rank's last batch line\n"
"before each line (2: none in this chunk), and rows (count, line int64, kind int8, ts float64,\n"
"7 value columns float64, untimed, max running, first line, last line) of the class-1 lines.");

static PyObject *classify(PyObject *self, PyObject *args) {
    Py_buffer data, marks;
    PyObject *words, *layouts_obj;
    const char *rank;
    Py_ssize_t rank_n, start, max_line;
    if (!PyArg_ParseTuple(args, "y*y*O!y#Onn", &data, &marks, &PyTuple_Type, &words, &rank, &rank_n, &layouts_obj,
                          &start, &max_line))
        return NULL;
    PyObject *result = NULL;
    int nlay = 0;
    Layout *lays = NULL;
    Buf offs = {0}, cls = {0}, flags = {0}, tse = {0}, rk = {0}, kb = {0};
    Buf r_line = {0}, r_kind = {0}, r_ts = {0}, r_val[NCOL] = {{0}};
    Py_ssize_t *mk = NULL;
    PyObject *ranks = PyList_New(0);
    if (!ranks) goto done;
    lays = read_layouts(layouts_obj, &nlay);
    if (!lays) goto done;
    Py_ssize_t nwords = PyTuple_GET_SIZE(words);
    for (Py_ssize_t w = 0; w < nwords; w++)
        if (!PyBytes_Check(PyTuple_GET_ITEM(words, w)) || PyBytes_GET_SIZE(PyTuple_GET_ITEM(words, w)) == 0) {
            PyErr_SetString(PyExc_TypeError, "words must be non-empty bytes");
            goto done;
        }
    if (marks.len % (Py_ssize_t)sizeof(int64_t)) { PyErr_SetString(PyExc_ValueError, "marks must be int64"); goto done; }
    Py_ssize_t nmk = marks.len / (Py_ssize_t)sizeof(int64_t);
    mk = PyMem_Malloc((size_t)(nmk ? nmk : 1) * sizeof(Py_ssize_t));
    if (!mk) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t k = 0; k < nmk; k++) { int64_t v; memcpy(&v, (char *)marks.buf + k * 8, 8); mk[k] = (Py_ssize_t)v; }
    qsort(mk, (size_t)nmk, sizeof(Py_ssize_t), cmp_ssize);

    const unsigned char *d = data.buf;
    Py_ssize_t len = data.len, pos = 0, n = 0, mi = 0, rows = 0, untimed = 0;
    uint64_t high = 0;            /* the chunk is ASCII (most are): no line needs looking at for it */
    {
        Py_ssize_t k = 0;
        for (; k + 8 <= len; k += 8) { uint64_t x; memcpy(&x, d + k, 8); high |= x; }
        for (; k < len; k++) high |= d[k];
        high &= 0x8080808080808080ULL;
    }
    int last_kind = 2, nranks = 0;
    double top = NAN;
    int64_t first_line = -1, last_line = -1;
    const char *rank_id_s[MAXRANKS];
    Py_ssize_t rank_id_n[MAXRANKS];
    double vals[NCOL];
    while (pos < len) {
        const unsigned char *l = d + pos;
        const unsigned char *nl = memchr(l, '\n', (size_t)(len - pos));
        Py_ssize_t w = nl ? (Py_ssize_t)(nl - l) : len - pos;
        int64_t off = pos;
        if (put(&offs, &off, 8)) goto done;
        unsigned char f = 0, c = 0, kind_b = (unsigned char)last_kind, rid = 0;
        int32_t te = 0;
        while (mi < nmk && mk[mi] < pos) mi++;
        if (mi < nmk && mk[mi] <= pos + w) f |= F_SIG;
        if (w >= max_line) f |= F_LONG | F_DIRTY;
        int ascii = 1;
        if (high)
            for (Py_ssize_t k = 0; k < w; k++) if (l[k] & 0x80) { ascii = 0; break; }
        if (!ascii) f |= F_DIRTY;             /* fed: the parser reads what the decoder makes of it */
        if (!(f & F_DIRTY) && embedded(l, w)) f |= F_DIRTY;
        for (Py_ssize_t k = 0; k < nwords && !(f & F_DIRTY); k++) {
            PyObject *s = PyTuple_GET_ITEM(words, k);
            Py_ssize_t sn = PyBytes_GET_SIZE(s);
            if (sn <= w && memmem(l, (size_t)w, PyBytes_AS_STRING(s), (size_t)sn)) f |= F_DIRTY;
        }
        Prefix pf;
        int has = prefix(l, w, &pf);
        int mine = 0;
        if (has) {
            f |= F_PREFIX;
            te = (int32_t)pf.ts_end;
            const unsigned char *rs = l + pf.ts_end;
            Py_ssize_t rn = pf.ranks_end - pf.ts_end;
            while (rn && *rs == ' ') { rs++; rn--; }
            while (rn && rs[rn - 1] == ' ') rn--;
            if (rn) {
                int k;
                for (k = 0; k < nranks; k++)
                    if (rank_id_n[k] == rn && memcmp(rank_id_s[k], rs, (size_t)rn) == 0) break;
                if (k == nranks) {
                    if (nranks >= MAXRANKS) { Py_DECREF(ranks); ranks = Py_None; Py_INCREF(ranks); break; }
                    PyObject *b = PyBytes_FromStringAndSize((const char *)rs, rn);
                    if (!b || PyList_Append(ranks, b)) { Py_XDECREF(b); goto done; }
                    Py_DECREF(b);
                    rank_id_s[k] = (const char *)rs;
                    rank_id_n[k] = rn;
                    nranks++;
                }
                rid = (unsigned char)(k + 1);
            }
            if (starts(l, w, pf.end, "Decode batch") || starts(l, w, pf.end, "Prefill batch")) {
                f |= F_BATCH;
                mine = rn == rank_n && memcmp(rs, rank, (size_t)rn) == 0;
                if (mine) f |= F_MINE;
            }
        }
        if (!(f & F_BATCH) && http_ok(l, w, &pf, has)) f |= F_HTTP;
        int clean = !(f & (F_DIRTY | F_SIG));
        if (f & F_BATCH) {
            if (!mine) c = clean ? 5 : 0;
            else if (clean) {
                c = 6;
                if (pf.ranks_end - pf.ts_end == (rank_n ? rank_n + 1 : 0))     /* ' TP0' exactly */
                    for (int k = 0; k < nlay; k++)
                        if (layout_at(&lays[k], l, w, pf.end, vals)) {
                            c = 1;
                            int64_t line = start + n;
                            int8_t kind = (int8_t)lays[k].kind;
                            double ts = seconds_of(l + 1, pf.ts_end - 1);
                            if (ts != ts) untimed++;
                            if (put(&r_line, &line, 8) || put(&r_kind, &kind, 1) || put(&r_ts, &ts, 8)) goto done;
                            for (int v = 0; v < NCOL; v++) if (put(&r_val[v], &vals[v], 8)) goto done;
                            if (vals[0] == vals[0] && !(vals[0] <= top)) top = vals[0];
                            if (first_line < 0) first_line = line;
                            last_line = line;
                            rows++;
                            break;
                        }
            }
        } else if (f & F_HTTP) {
            c = clean ? 2 : 0;
        } else if (clean) {
            Py_ssize_t k = 0;
            while (k < w && (l[k] == ' ' || l[k] == '\t')) k++;
            if (k == w) c = 3;
        }
        if (mine) last_kind = starts(l, w, pf.end, "Decode batch") || memmem(l, (size_t)w, "Decode batch", 12) != NULL;
        if (put(&cls, &c, 1) || put(&flags, &f, 1) || put(&tse, &te, 4) || put(&rk, &rid, 1) || put(&kb, &kind_b, 1))
            goto done;
        n++;
        pos += w + 1;
    }
    if (ranks == Py_None) {      /* more ranks than a byte holds: the caller reads this chunk otherwise */
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    {
        int64_t end = pos;
        if (put(&offs, &end, 8)) goto done;
        PyObject *v[NCOL];
        for (int k = 0; k < NCOL; k++) v[k] = to_bytes(&r_val[k]);
        PyObject *vt = Py_BuildValue("(NNNNNNN)", v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
        if (!vt) goto done;
        PyObject *rowt = Py_BuildValue("(nNNNNndLL)", rows, to_bytes(&r_line), to_bytes(&r_kind), to_bytes(&r_ts), vt,
                                       untimed, top, (long long)first_line, (long long)last_line);
        if (!rowt) goto done;
        result = Py_BuildValue("(nNNNNNONiN)", n, to_bytes(&offs), PyByteArray_FromStringAndSize(cls.p ? cls.p : "", cls.n),
                               PyByteArray_FromStringAndSize(flags.p ? flags.p : "", flags.n), to_bytes(&tse),
                               PyByteArray_FromStringAndSize(rk.p ? rk.p : "", rk.n), ranks,
                               PyByteArray_FromStringAndSize(kb.p ? kb.p : "", kb.n), last_kind, rowt);
    }
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&marks);
    free_layouts(lays, nlay);
    PyMem_Free(mk);
    Py_XDECREF(ranks);
    PyMem_Free(offs.p); PyMem_Free(cls.p); PyMem_Free(flags.p); PyMem_Free(tse.p); PyMem_Free(rk.p); PyMem_Free(kb.p);
    PyMem_Free(r_line.p); PyMem_Free(r_kind.p); PyMem_Free(r_ts.p);
    for (int k = 0; k < NCOL; k++) PyMem_Free(r_val[k].p);
    return result;
}

/* ---- the fold of batch rows into fine buckets (batches.py: _cell and _merge, row by row) ---- */

#define CELL (3 + 3 * NSER + 2)

static int get_buffer(PyObject *o, Py_buffer *b, const char *fmt, Py_ssize_t n) {
    if (PyObject_GetBuffer(o, b, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    Py_ssize_t item = fmt[0] == 'b' ? 1 : 8;
    if (b->itemsize != item || (b->format && strcmp(b->format, fmt) != 0 && !(fmt[0] == 'q' && strcmp(b->format, "l") == 0 && sizeof(long) == 8))
        || b->len / item < n) {
        PyBuffer_Release(b);
        PyErr_Format(PyExc_TypeError, "a column must hold %zd items of format '%s'", n, fmt);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(fold_doc,
"fold(kind, line, ts, series, n, by_line, width)\n\n"
"The first n rows (array('b') kinds, array('q') line numbers, array('d') seconds, and the 5 series\n"
"of batches.SERIES as array('d')) folded into cells of `width` on one axis (seconds, or line\n"
"numbers when by_line): a list of (key, cell) in key order, each cell what batches._merge makes of\n"
"the rows' batches._cell in row order. Rows without a position (ts nan) are left out. Given a dict\n"
"`grid` (fold(..., width, grid)), the cells are merged into it as batches._merge does, in key order\n"
"of first sight, and None is returned.");

/* batches._merge of one cell into another */
static void merge_cell(double *have, const double *cell) {
    int later = cell[2] >= have[2];
    have[0] += cell[0];
    have[1] += cell[1];
    for (int k = 3; k < 3 + 3 * NSER; k += 3) {
        if (cell[k] < have[k]) have[k] = cell[k];
        if (cell[k + 1] > have[k + 1]) have[k + 1] = cell[k + 1];
        if (cell[k + 2] == cell[k + 2] && (later || have[k + 2] != have[k + 2])) have[k + 2] = cell[k + 2];
    }
    if (later) have[2] = cell[2];
    have[CELL - 2] += cell[CELL - 2];
    have[CELL - 1] += cell[CELL - 1];
}

/* a cell as batches keeps it: a list of CELL numbers, the count, the line and the throughput count ints */
static PyObject *cell_list(const double *cell) {
    PyObject *c = PyList_New(CELL);
    if (!c) return NULL;
    for (int k = 0; k < CELL; k++) {
        PyObject *v = (k == 0 || k == 2 || k == CELL - 1) ? PyLong_FromLongLong((long long)cell[k]) : PyFloat_FromDouble(cell[k]);
        if (!v) { Py_DECREF(c); return NULL; }
        PyList_SET_ITEM(c, k, v);
    }
    return c;
}

/* the cell into grid[key] (a dict of such lists), as batches._merge does: 0 or -1 */
static int merge_into(PyObject *grid, int64_t key, const double *cell) {
    PyObject *k = PyLong_FromLongLong((long long)key);
    if (!k) return -1;
    PyObject *have = PyDict_GetItemWithError(grid, k);
    if (!have) {
        if (PyErr_Occurred()) { Py_DECREF(k); return -1; }
        PyObject *c = cell_list(cell);
        int r = c ? PyDict_SetItem(grid, k, c) : -1;
        Py_XDECREF(c);
        Py_DECREF(k);
        return r;
    }
    Py_DECREF(k);
    if (!PyList_Check(have) || PyList_GET_SIZE(have) != CELL) { PyErr_SetString(PyExc_TypeError, "a cell must be a list"); return -1; }
    double h[CELL];
    for (int i = 0; i < CELL; i++) {
        h[i] = PyFloat_AsDouble(PyList_GET_ITEM(have, i));
        if (h[i] == -1.0 && PyErr_Occurred()) return -1;
    }
    merge_cell(h, cell);
    for (int i = 0; i < CELL; i++) {
        PyObject *v = (i == 0 || i == 2 || i == CELL - 1) ? PyLong_FromLongLong((long long)h[i]) : PyFloat_FromDouble(h[i]);
        if (!v) return -1;
        if (PyList_SetItem(have, i, v) < 0) return -1;
    }
    return 0;
}

static PyObject *fold(PyObject *self, PyObject *args) {
    PyObject *ko, *lo, *to, *so;
    Py_ssize_t n;
    int by_line;
    double width;
    PyObject *grid = NULL;
    if (!PyArg_ParseTuple(args, "OOOOnpd|O!", &ko, &lo, &to, &so, &n, &by_line, &width, &PyDict_Type, &grid)) return NULL;
    if (!(width > 0)) { PyErr_SetString(PyExc_ValueError, "width must be positive"); return NULL; }
    PyObject *seq = PySequence_Fast(so, "series must be a sequence");
    if (!seq) return NULL;
    if (PySequence_Fast_GET_SIZE(seq) != NSER) { Py_DECREF(seq); PyErr_SetString(PyExc_ValueError, "5 series"); return NULL; }
    Py_buffer kb, lb, tb, sb[NSER];
    int got = 0;
    PyObject *out = NULL;
    double (*cells)[CELL] = NULL;
    int64_t *keys = NULL;
    if (get_buffer(ko, &kb, "b", n)) goto end;
    got = 1;
    if (get_buffer(lo, &lb, "q", n)) goto end;
    got = 2;
    if (get_buffer(to, &tb, "d", n)) goto end;
    got = 3;
    for (int s = 0; s < NSER; s++) {
        if (get_buffer(PySequence_Fast_GET_ITEM(seq, s), &sb[s], "d", n)) goto end;
        got++;
    }
    {
        const int8_t *kind = kb.buf;
        const int64_t *line = lb.buf;
        const double *ts = tb.buf;
        const double *ser[NSER];
        for (int s = 0; s < NSER; s++) ser[s] = sb[s].buf;
        /* keys in order of first sight; cells found through a small open-addressing table */
        Py_ssize_t cap = 64, used = 0;
        Py_ssize_t tsize = 128;
        Py_ssize_t *table = PyMem_Malloc((size_t)tsize * sizeof(Py_ssize_t));
        cells = PyMem_Malloc((size_t)cap * sizeof *cells);
        keys = PyMem_Malloc((size_t)cap * sizeof *keys);
        if (!table || !cells || !keys) { PyMem_Free(table); PyErr_NoMemory(); goto end; }
        for (Py_ssize_t k = 0; k < tsize; k++) table[k] = -1;
        for (Py_ssize_t i = 0; i < n; i++) {
            double x = by_line ? (double)line[i] : ts[i];
            if (x != x) continue;
            double q = floor(x / width);
            int64_t key = (int64_t)q;
            double cell[CELL];
            cell[0] = 1; cell[1] = x; cell[2] = (double)line[i];
            for (int s = 0; s < NSER; s++) {
                double v = ser[s][i];
                if (s == 3 && kind[i] != 1) v = NAN;
                if (v == v) { cell[3 + 3 * s] = v; cell[4 + 3 * s] = v; cell[5 + 3 * s] = v; }
                else { cell[3 + 3 * s] = INFINITY; cell[4 + 3 * s] = -INFINITY; cell[5 + 3 * s] = NAN; }
            }
            double thr = ser[3][i];
            int known = kind[i] == 1 && thr == thr;
            cell[CELL - 2] = known ? thr : 0.0;
            cell[CELL - 1] = known ? 1 : 0;
            uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ULL;
            Py_ssize_t slot = (Py_ssize_t)(h >> 40) & (tsize - 1);
            while (table[slot] >= 0 && keys[table[slot]] != key) slot = (slot + 1) & (tsize - 1);
            if (table[slot] < 0) {
                if (used == cap) {
                    cap *= 2;
                    void *c2 = PyMem_Realloc(cells, (size_t)cap * sizeof *cells);
                    if (!c2) { PyMem_Free(table); PyErr_NoMemory(); goto end; }
                    cells = c2;
                    void *k2 = PyMem_Realloc(keys, (size_t)cap * sizeof *keys);
                    if (!k2) { PyMem_Free(table); PyErr_NoMemory(); goto end; }
                    keys = k2;
                }
                keys[used] = key;
                memcpy(cells[used], cell, sizeof cell);
                table[slot] = used++;
                if (2 * used > tsize) {       /* grow the table */
                    Py_ssize_t ns = tsize * 4;
                    Py_ssize_t *t2 = PyMem_Malloc((size_t)ns * sizeof(Py_ssize_t));
                    if (!t2) { PyMem_Free(table); PyErr_NoMemory(); goto end; }
                    for (Py_ssize_t k = 0; k < ns; k++) t2[k] = -1;
                    for (Py_ssize_t u = 0; u < used; u++) {
                        uint64_t hh = (uint64_t)keys[u] * 0x9E3779B97F4A7C15ULL;
                        Py_ssize_t s2 = (Py_ssize_t)(hh >> 40) & (ns - 1);
                        while (t2[s2] >= 0) s2 = (s2 + 1) & (ns - 1);
                        t2[s2] = u;
                    }
                    PyMem_Free(table);
                    table = t2;
                    tsize = ns;
                }
                continue;
            }
            merge_cell(cells[table[slot]], cell);
        }
        PyMem_Free(table);
        if (grid) {
            for (Py_ssize_t u = 0; u < used; u++)
                if (merge_into(grid, keys[u], cells[u]) < 0) goto end;
            out = Py_None;
            Py_INCREF(out);
            goto end;
        }
        out = PyList_New(used);
        if (!out) goto end;
        for (Py_ssize_t u = 0; u < used; u++) {
            PyObject *c = cell_list(cells[u]);
            if (!c) { Py_CLEAR(out); goto end; }
            PyObject *pair = Py_BuildValue("(LN)", (long long)keys[u], c);
            if (!pair) { Py_CLEAR(out); goto end; }
            PyList_SET_ITEM(out, u, pair);
        }
        if (PyList_Sort(out) < 0) Py_CLEAR(out);
    }
end:
    if (got >= 1) PyBuffer_Release(&kb);
    if (got >= 2) PyBuffer_Release(&lb);
    if (got >= 3) PyBuffer_Release(&tb);
    for (int s = 0; s < got - 3; s++) PyBuffer_Release(&sb[s]);
    PyMem_Free(cells);
    PyMem_Free(keys);
    Py_DECREF(seq);
    return out;
}

static PyObject *span(PyObject *self, PyObject *args) {
    PyObject *xo;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "On", &xo, &n)) return NULL;
    Py_buffer xb;
    if (PyObject_GetBuffer(xo, &xb, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    int ints = xb.format && (strcmp(xb.format, "q") == 0 || (strcmp(xb.format, "l") == 0 && sizeof(long) == 8));
    PyBuffer_Release(&xb);
    if (get_buffer(xo, &xb, ints ? "q" : "d", n)) return NULL;
    double lo = INFINITY, hi = -INFINITY;
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        double v = ints ? (double)((const int64_t *)xb.buf)[i] : ((const double *)xb.buf)[i];
        if (v != v) continue;
        if (v < lo) lo = v;
        if (v > hi) hi = v;
        count++;
    }
    PyBuffer_Release(&xb);
    return Py_BuildValue("(ddn)", lo, hi, count);
}

static PyMethodDef methods[] = {
    {"classify", classify, METH_VARARGS, classify_doc},
    {"fold", fold, METH_VARARGS, fold_doc},
    {"span", span, METH_VARARGS, "span(xs, n): (min, max, count) of the first n non-nan values of xs, an array('d') or array('q')."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_lines", "The fast reader's line classifier (see diag/scan.py).", -1, methods};

PyMODINIT_FUNC PyInit__lines(void) { return PyModule_Create(&module); }
