/* SPDX-License-Identifier: Apache-2.0 */
/* The quick path of the HTTP/1.x parser, included by h1.c once for each
 * instruction set it is built for: Q(name) names this copy's functions,
 * Q_TARGET is their target attribute, Q_AVX2 picks 32-byte loads for the
 * field lines. Everything the copies call is defined once in h1.c. */

/* The '\n' of a line longer than 32 bytes, from p + 32 (NULL: a partial
 * line; fail: too long). */
Q_TARGET static inline const uint8_t *Q(long_line)(const uint8_t *p, const uint8_t *e, bool *fail)
{
	const uint8_t *q = p + 32, *nl;
	if (__builtin_expect(e - q >= 16, 1)) {
		unsigned m = lf_mask(_mm_loadu_si128((const __m128i *)(const void *)q));
		if (m)
			return q + low_bit32(m);
		nl = line_end(q + 16, e);
		*fail = nl && nl - p >= FIELD_LINE_MAX;
		return nl;
	}
	/* Near the end: its last 16 bytes, shifted. */
	unsigned m = q == e ? 0 : lf_mask(_mm_loadu_si128((const __m128i *)(const void *)(e - 16))) >> (16 - (e - q));
	return m ? q + low_bit32(m) : NULL;
}

/* Whole field lines, for a call of 32 bytes or more, each found from a load
 * of the 32 bytes at its start (the last 32 bytes of the call near its
 * end). A line is classed by its first byte (tab: name_lens' row for the
 * section). A line whose name cannot be one the parser keeps, its first
 * letter being none of theirs, is only delimited: its '\n', no more. The
 * others get the checks RFC 9112 asks for (a ':' in their first 32 bytes,
 * nothing at or below SP before it) and, when the name has the length of
 * the kept one with that letter, a look at the name and the value. Stops at
 * the first line it does not take (a special first byte, the head's end
 * among them; a partial line), for the general code (fields: lines taken so
 * far); NULL after a fail. */
Q_TARGET static QUICK const uint8_t *Q(quick_fields)(const struct run *r, const uint8_t *p, const uint8_t *e,
						     unsigned *fields, const uint8_t *tab)
{
	/* The constants are read once, from memory (k128 in h1.c says why),
	 * and then made opaque to the compiler, which would otherwise make
	 * them again for every line (the calls of the rare paths clobber the
	 * vector registers): they stay in registers on the usual path. */
#ifdef Q_AVX2
	const uint8_t *klf = k_lf, *kco = k_colon;
	__asm__("" : "+r"(klf), "+r"(kco));
	__m256i NL2 = _mm256_load_si256((const __m256i *)(const void *)klf),
		CO2 = _mm256_load_si256((const __m256i *)(const void *)kco);
	__asm__("" : "+x"(NL2), "+x"(CO2));
#else
	__m128i NL = k128(k_lf), CO = k128(k_colon);
	__asm__("" : "+x"(NL), "+x"(CO));
#endif
	const uint8_t *e32 = e - 32;
	unsigned nf = *fields;
	while (p < e) {
		unsigned want = tab[*p], mn, mc;
		const uint8_t *nl;
		/* Fields of no interest, one after the other: each line's end, no
		 * more. */
		while (__builtin_expect(!want, 1)) {
			if (__builtin_expect(p <= e32, 1)) {
#ifdef Q_AVX2
				mn = (unsigned)_mm256_movemask_epi8(
					_mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(const void *)p), NL2));
#else
				mn = mask32(_mm_loadu_si128((const __m128i *)(const void *)p),
					    _mm_loadu_si128((const __m128i *)(const void *)(p + 16)), NL);
#endif
				if (__builtin_expect(!mn, 0)) {
					bool too_long = false;
					if (!(nl = Q(long_line)(p, e, &too_long)))
						goto out;       /* a partial line */
					if (too_long)
						return fail(r), NULL;
				} else {
					nl = p + low_bit32(mn);
				}
			} else {
				unsigned m = lf_mask(_mm_loadu_si128((const __m128i *)(const void *)(e - 16)));
				if (e - p <= 16 && (m >>= 16 - (e - p)) != 0)
					nl = p + low_bit32(m);
				else if (!(nl = e - p > 16 ? line_end(p, e) : NULL))
					goto out;       /* a partial line */
			}
			nf++;
			p = nl + 1;
			if (__builtin_expect(p == e, 0))
				goto out;
			want = tab[*p];
		}
		if (__builtin_expect(want & L_SPECIAL, 0))
			break;
#ifdef Q_AVX2
		if (__builtin_expect(p <= e32, 1)) {
			/* One load: the '\n' and the ':' of the 32 bytes. */
			__m256i v = _mm256_loadu_si256((const __m256i *)(const void *)p);
			mn = (unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, NL2));
			mc = (unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, CO2));
		} else {
			unsigned sh = (unsigned)(p - e32);
			__m256i v = _mm256_loadu_si256((const __m256i *)(const void *)e32);
			mn = (unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, NL2)) >> sh;
			mc = (unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, CO2)) >> sh;
		}
#else
		if (__builtin_expect(p <= e32, 1)) {
			__m128i v0 = _mm_loadu_si128((const __m128i *)(const void *)p);
			__m128i v1 = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
			mn = mask32(v0, v1, NL);
			mc = mask32(v0, v1, CO);
		} else {
			unsigned sh = (unsigned)(p - e32);
			__m128i v0 = _mm_loadu_si128((const __m128i *)(const void *)e32);
			__m128i v1 = _mm_loadu_si128((const __m128i *)(const void *)(e32 + 16));
			mn = mask32(v0, v1, NL) >> sh;
			mc = mask32(v0, v1, CO) >> sh;
		}
#endif
		/* The first ':' before the first '\n' (mn ^ (mn - 1): the bits up to
		 * it, all of them when there is none). */
		mc &= mn ^ (mn - 1);
		if (__builtin_expect(!mc, 0))
			break;
		size_t ci = low_bit32(mc);
		if (__builtin_expect(!mn, 0)) {
			bool too_long = false;
			if (p > e32 || !(nl = Q(long_line)(p, e, &too_long)))
				break;          /* a partial line */
			if (too_long)
				return fail(r), NULL;
		} else {
			nl = p + low_bit32(mn);
		}
		nf++;
		if (__builtin_expect(ci == want, 0)) {
			if (p[ci - 1] <= ' ' || !quick_value(r, p, (unsigned)ci, nl))
				return fail(r), NULL;
		} else if (__builtin_expect(p[ci - 1] <= ' ', 0)) {
			return fail(r), NULL;   /* whitespace (or a control byte) before ':' */
		}
		p = nl + 1;
	}
out:
	*fields = nf;
	return p;
}

/* A whole message head in the bytes of one call (32 bytes or more from its
 * first byte, in state S_IDLE without a CR pending), in its usual forms, at
 * once: the start line with word compares, the field lines with
 * quick_fields, the end of the head and of a body that the call holds
 * without the states in between. At the first thing it does not take, it
 * leaves the state as the byte-wise path would have it there and hands over.
 * Each event is set up in a struct of its own, cleared first (Q(ev_clear)). */

#ifdef Q_AVX2
/* An event with every field empty, by three 32-byte stores. */
Q_TARGET static inline void Q(ev_clear)(struct nl_h1_event *ev)
{
	_Static_assert(sizeof *ev > 64 && sizeof *ev <= 96, "ev_clear");
	char *b = (char *)ev;
	__m256i z = _mm256_setzero_si256();
	_mm256_storeu_si256((__m256i *)(void *)b, z);
	_mm256_storeu_si256((__m256i *)(void *)(b + 32), z);
	_mm256_storeu_si256((__m256i *)(void *)(b + sizeof *ev - 32), z);
}
#else
#define ev_clear_sse2 ev_clear
#endif

/* The end of a request head at p (CR LF): HEAD, and END when no body
 * follows; a body to come, or Transfer-Encoding, the general way. */
Q_TARGET static QUICK const uint8_t *Q(request_end)(const struct run *r, const uint8_t *p)
{
	struct nl_h1_half *s = r->s;
	if (__builtin_expect(s->flags & F_TE, 0))
		return section_done(r) ? p + 2 : NULL;
	struct nl_h1_event ev;
	Q(ev_clear)(&ev);
	ev.slot = s->slot;
	ev.type = NL_H1_REQ_HEAD;
	if (s->flags & F_HOST) {
		ev.host = r->h->buf + HOST_AT;
		ev.host_len = s->len;
		ev.same_host = s->flags & F_HOST_SAME;
	}
	s->body_size = 0;
	if (s->remaining) {
		s->state = S_BODY;
	} else {
		ev.folded = NL_H1_FOLD_END;
		s->state = S_IDLE;
	}
	emit(r, &ev);
	return p + 2;
}

/* A request from p: returns past what it took, p when *p is no uppercase
 * letter (the start of a request for the byte-wise path), NULL after a fail. */
Q_TARGET static QUICK const uint8_t *Q(request_quick)(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_h1 *h = r->h;
	struct nl_h1_half *s = r->s;
	if ((unsigned)(*p - 'A') >= 26u)
		return p;
	/* request_begin */
	uint8_t tail = atomic_load_explicit(&h->ring_tail, memory_order_relaxed);
	uint8_t head = atomic_load_explicit(&h->ring_head, memory_order_acquire);
	if ((uint8_t)(tail - head) >= NL_H1_PIPELINE)
		return fail(r), NULL;
	unsigned slot = ring_slot(tail);
	message_begin(s);
	s->slot = (uint8_t)slot;
	s->state = S_METHOD;
	/* The method: uppercase letters, then SP at 1..15; GET and POST by a word. */
	__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
	unsigned m;
	uint64_t w = load64(p);
	if ((uint32_t)w == load32("GET ")) {
		m = 3;
	} else if ((w & 0xffffffffffull) == (load64("POST    ") & 0xffffffffffull)) {
		m = 4;
	} else {
		unsigned sp = eq_mask(v, ' ');
		__m128i up = _mm_sub_epi8(v, _mm_set1_epi8('A'));
		unsigned upper =
			(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(up, _mm_set1_epi8(25)), up));
		m = (unsigned)__builtin_ctz(sp | 1u << 16);
		unsigned mbits = (1u << m) - 1;
		if (m == 16 || (upper & mbits) != mbits)
			return method_slow(r, p, e);
	}
	/* The target: up to a control byte, SP in the usual case. */
	const uint8_t *t = p + m + 1, *q;
	__m128i vt = _mm_loadu_si128((const __m128i *)(const void *)t);   /* t + 16 <= p + 32 <= e */
	unsigned ctl = ctl_mask(vt);
	if (ctl) {
		q = t + low_bit32(ctl);
	} else {
		q = find_ctl(r, t + 16, e);
		if (m + (size_t)(q - t) + 2 > START_LINE_MAX)
			return method_slow(r, p, e);
	}
	size_t n = (size_t)(q - t);
	/* SP "HTTP/1.x" CR LF: 11 bytes from q. */
	if (e - q < 11 || *q != ' ' || !n)
		return method_slow(r, p, e);
	int minor = version_word(q + 1);
	uint16_t crlf = load16(q + 9);
	unsigned eol = crlf == load16("\r\n") ? 2 : (uint8_t)crlf == '\n' ? 1 : 0;
	if (minor < 0 || !eol)
		return method_slow(r, p, e);
	bool trunc = n > NL_H1_TARGET_MAX;
	if (trunc)
		n = NL_H1_TARGET_MAX;
	/* The event points into the call, which holds the line whole. When
	 * asked (nl_h1_compare_lines), buf keeps the line's first 32 bytes
	 * (method, SP, target), for the next request to compare with. */
	bool same = false;
	if (s->compare & CMP_LINE) {
		char *buf = h->buf;
		size_t len = (size_t)(q - p);
		__m128i v1 = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));   /* p + 32 <= e */
		uint32_t eq = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_loadu_si128((const __m128i *)(void *)buf))) |
			      (uint32_t)_mm_movemask_epi8(
				      _mm_cmpeq_epi8(v1, _mm_loadu_si128((const __m128i *)(void *)(buf + 16))))
				      << 16;
		same = s->prev == len && (~eq & (uint32_t)((1ull << len) - 1)) == 0;
		s->prev = len <= 32 ? (uint8_t)len : 0;
		_mm_storeu_si128((__m128i *)(void *)buf, v);
		_mm_storeu_si128((__m128i *)(void *)(buf + 16), v1);
	}
	s->flags = (uint16_t)(F_HTTP | (unsigned)minor * F_MINOR1 | (trunc ? F_TRUNC : 0));
	uint8_t kind = K_OTHER;
	if (m == 4 && load32(p) == load32("HEAD"))
		kind = K_HEAD;
	else if (m == 7 && load32(p) == load32("CONN") && load32(p + 3) == load32("NECT"))
		kind = K_CONNECT;
	struct nl_h1_event ev;
	Q(ev_clear)(&ev);
	ev.slot = slot;
	ev.type = NL_H1_REQ_LINE;
	ev.folded = NL_H1_FOLD_BEGIN;
	ev.method = (const char *)p;
	ev.method_len = m;
	ev.target = (const char *)t;
	ev.target_len = n;
	ev.target_truncated = trunc;
	ev.same_line = same;
	ev.version_minor = (unsigned)minor;
	h->ring_kind[slot] = kind;      /* (before the event: nl_h1_tap marks it) */
	emit(r, &ev);
	atomic_store_explicit(&h->ring_tail, (uint8_t)(tail + 1), memory_order_release);
	s->n_headers = 0;
	s->state = S_FIELD;
	/* The field lines, and the end of the head. */
	unsigned fields = 0;
	p = Q(quick_fields)(r, q + 9 + eol, e, &fields, name_lens[0]);
	if (!p)
		return NULL;
	if (fields > FIELDS_MAX)
		return fail(r), NULL;
	s->n_headers = (uint16_t)fields;
	if (e - p >= 2 && p[0] == '\r' && p[1] == '\n')
		return Q(request_end)(r, p);
	return parse_fields(r, p, e);
}

/* The end of a response head at p (CR LF): RESP_HEAD, and when the call
 * holds its Content-Length body, RESP_END; anything else the general way. */
Q_TARGET static QUICK const uint8_t *Q(response_end)(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_h1 *h = r->h;
	struct nl_h1_half *s = r->s;
	unsigned st = s->status;
	uint8_t head = atomic_load_explicit(&h->ring_head, memory_order_relaxed);
	unsigned slot = ring_slot(head);
	/* Final, no upgrade, a body framed by Content-Length alone. */
	if (__builtin_expect((st != 200 && (st < 200 || st == 204 || st == 304)) || h->ring_kind[slot] != K_OTHER ||
				     (s->flags & (F_CL | F_TE)) != F_CL,
			     0))
		return section_done(r) ? p + 2 : NULL;
	struct nl_h1_event ev;
	Q(ev_clear)(&ev);
	ev.slot = slot;
	ev.status = st;
	ev.version_minor = s->flags & F_MINOR1;
	p += 2;
	uint64_t len = s->remaining;
	s->body_size = 0;
	if ((uint64_t)(e - p) < len) {
		ev.type = NL_H1_RESP_HEAD;
		emit(r, &ev);
		s->state = S_BODY;      /* the parse loop takes what is here */
		return p;
	}
	/* Head and body in this call: RESP_HEAD folded into RESP_END. */
	s->remaining = 0;
	s->body_size = len;
	s->state = S_IDLE;
	ev.type = NL_H1_RESP_END;
	ev.folded = NL_H1_FOLD_HEAD;
	ev.body_size = len;
	emit(r, &ev);
	/* After the sink: what it did for the slot happens before the slot's reuse. */
	atomic_store_explicit(&h->ring_head, (uint8_t)(head + 1), memory_order_release);
	return p + len;
}

/* A response from p: returns past what it took, p when *p is no 'H' (for
 * the byte-wise path), NULL after a fail. */
Q_TARGET static QUICK const uint8_t *Q(response_quick)(const struct run *r, const uint8_t *p, const uint8_t *e)
{
	struct nl_h1 *h = r->h;
	struct nl_h1_half *s = r->s;
	if (*p != 'H')
		return p;
	message_begin(s);
	/* "HTTP/1.x 200" and SP, CR or LF. */
	int minor = version_word(p);
	uint8_t after = p[12];
	unsigned status;
	if (load32(p + 8) == load32(" 200")) {
		/* The usual code by a word. */
		status = 200;
	} else {
		unsigned d0 = (unsigned)(p[9] - '0'), d1 = (unsigned)(p[10] - '0'), d2 = (unsigned)(p[11] - '0');
		if (p[8] != ' ' || d0 - 1 >= 9 || d1 >= 10 || d2 >= 10)
			minor = -1;
		status = d0 * 100 + d1 * 10 + d2;
	}
	if (minor < 0 || (after != ' ' && after != '\r' && after != '\n')) {
		s->sub = 1;
		s->state = S_RESP_VERSION;
		return p + 1;
	}
	s->flags |= (uint16_t)((unsigned)minor * F_MINOR1);
	s->status = (uint16_t)status;
	/* The reason phrase, its '\n' in the 16 bytes from the code's end. */
	unsigned mn = lf_mask(_mm_loadu_si128((const __m128i *)(const void *)(p + 12)));
	if (!mn) {
		s->line_len = 12;
		s->state = S_REASON;
		return parse_reason(r, p + 12 + (after == ' '), e);
	}
	const uint8_t *q = p + 13 + low_bit32(mn);
	s->flags |= F_HTTP;
	if (atomic_load_explicit(&h->ring_tail, memory_order_acquire) ==
	    atomic_load_explicit(&h->ring_head, memory_order_relaxed))
		return fail(r), NULL;   /* a response to nothing */
	s->n_headers = 0;
	s->state = S_FIELD;
	unsigned fields = 0;
	p = Q(quick_fields)(r, q, e, &fields, name_lens[1]);
	if (!p)
		return NULL;
	if (fields > FIELDS_MAX)
		return fail(r), NULL;
	s->n_headers = (uint16_t)fields;
	if (e - p >= 2 && p[0] == '\r' && p[1] == '\n')
		return Q(response_end)(r, p, e);
	return parse_fields(r, p, e);
}

/* A call at the start of a message: when it has 32 bytes or more (and no
 * CR is pending, and the connection is followed), its head the quick way,
 * then the rest through the states; anything else feed_start. Both take
 * nl_h1_feed's arguments (dir unused), so that it jumps to them with its
 * registers as they are (ENTRY). */
Q_TARGET ENTRY static bool Q(feed_request)(struct nl_h1 *h, enum nl_h1_dir dir, const void *buf, size_t n,
					      nl_h1_sink sink, void *ctx)
{
	(void)dir;
	if (n < 32 || (h->req.flags & F_CR) || atomic_load_explicit(&h->stopped, memory_order_relaxed))
		return feed_start(h, true, buf, n, sink, ctx);
	const uint8_t *p = buf, *e = p + n;
	struct run r = { h, &h->req, sink, ctx, e, true, true, true };
	p = Q(request_quick)(&r, p, e);
	if (!p || (p != e && !parse(&r, p, e)))
		return false;
	return !atomic_load_explicit(&h->stopped, memory_order_relaxed);
}

Q_TARGET ENTRY static bool Q(feed_response)(struct nl_h1 *h, enum nl_h1_dir dir, const void *buf, size_t n,
					       nl_h1_sink sink, void *ctx)
{
	(void)dir;
	if (n < 32 || (h->resp.flags & F_CR) || atomic_load_explicit(&h->stopped, memory_order_relaxed))
		return feed_start(h, false, buf, n, sink, ctx);
	const uint8_t *p = buf, *e = p + n;
	struct run r = { h, &h->resp, sink, ctx, e, true, true, false };
	p = Q(response_quick)(&r, p, e);
	if (!p || (p != e && !parse(&r, p, e)))
		return false;
	return !atomic_load_explicit(&h->stopped, memory_order_relaxed);
}
