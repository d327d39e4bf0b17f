/* SPDX-License-Identifier: Apache-2.0 */
/* Segments (segment.h) as another process reads them: a copy of this
 * process's arena read back as a snapshot equals the registry's own
 * snapshot; folding adds counters and histograms only; any corruption of
 * the bytes is rejected or read within bounds, never followed outside the
 * data or around in circles; the directory scan claims only what its
 * delivery key may deliver and removes garbage, other boots' and expired
 * leftovers.
 *
 * Criterion runs each test in its own process: each starts with an empty
 * (anonymous) arena.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "foreign.h"
#include "registry.h"
#include "segment.h"
#include "segread.h"

static const double BOUNDS[3] = { 1, 10, 100 };

static struct nl_instrument *counter, *hist, *gauge, *updown;

static void record_some(void)
{
	counter = nl_instrument_get("t.counter", "{x}", "a counter", NL_COUNTER, NULL, 0);
	hist = nl_instrument_get("t.hist", "ms", "a histogram", NL_HISTOGRAM, BOUNDS, 3);
	gauge = nl_instrument_get("t.gauge", "", "a gauge", NL_GAUGE, NULL, 0);
	updown = nl_instrument_get("t.updown", "", "", NL_UPDOWN, NULL, 0);
	cr_assert(counter && hist && gauge && updown);
	struct nl_attr a = NL_ATTR_S("dest", "alpha"), b[2] = { NL_ATTR_S("dest", "beta"), NL_ATTR_I("port", 8080) };
	nl_counter_add(nl_series_get(counter, &a, 1), 3);
	nl_counter_add(nl_series_get(counter, b, 2), 5);
	nl_counter_add(nl_instrument_overflow(counter), 7);
	struct nl_series *h = nl_series_get(hist, &a, 1);
	nl_hist_record(hist, h, 0.5);
	nl_hist_record(hist, h, 50);
	nl_hist_record(hist, h, 500);
	nl_gauge_set(nl_series_get(gauge, NULL, 0), 2.5);
	nl_updown_add(nl_series_get(updown, &a, 1), -2);
}

/* A copy of the arena as a dead process would leave it, with an identity. */
static uint64_t put_resource(void)
{
	struct nl_attr res[2] = { NL_ATTR_S("service.name", "svc"), NL_ATTR_I("process.pid", 4242) };
	uint64_t res_off;
	cr_assert(nl_seg_put_attrs(res, 2, &res_off));
	return res_off;
}

/* A copy of the arena as it is now, its resource at res_off. */
static uint8_t *copy_arena_as_is(size_t *len, uint64_t res_off)
{
	struct nl_seg_header *live = nl_seg_header();
	*len = atomic_load(&live->used);
	uint8_t *data = malloc(*len);
	memcpy(data, nl_seg_base, *len);
	struct nl_seg_header *h = (struct nl_seg_header *)data;
	h->resource = res_off;
	h->n_resource = 2;
	h->start_unix_ns = 1000;
	return data;
}

static uint8_t *copy_arena(size_t *len)
{
	return copy_arena_as_is(len, put_resource());
}

static const struct nl_metric *metric(const struct nl_snapshot *s, const char *name)
{
	for (size_t i = 0; i < s->n_metrics; i++)
		if (strcmp(s->metrics[i].name, name) == 0)
			return &s->metrics[i];
	return NULL;
}

static bool attrs_equal(const struct nl_point *a, const struct nl_point *b)
{
	if (a->n_attrs != b->n_attrs)
		return false;
	for (size_t k = 0; k < a->n_attrs; k++) {
		const struct nl_attr *x = &a->attrs[k], *y = &b->attrs[k];
		if (strcmp(x->key, y->key) != 0 || x->type != y->type)
			return false;
		if (x->type == NL_ATTR_STR ? strcmp(x->v.s, y->v.s) != 0 : memcmp(&x->v, &y->v, sizeof x->v) != 0)
			return false;
	}
	return true;
}

static const struct nl_point *same_point(const struct nl_metric *m, const struct nl_point *p)
{
	for (size_t i = 0; i < m->n_points; i++)
		if (attrs_equal(&m->points[i], p))
			return &m->points[i];
	return NULL;
}

TestSuite(segment);

Test(segment, a_copy_reads_back_as_the_registry_snapshot)
{
	record_some();
	size_t len;
	uint8_t *data = copy_arena(&len);
	struct nl_snapshot *mine = nl_snapshot_take(false, false, 1000, 2000);
	struct nl_snapshot *theirs = nl_snapshot_of_segment(data, len, 2000);
	cr_assert_not_null(theirs);
	cr_assert_eq(theirs->n_resource, 2);
	cr_assert_str_eq(theirs->resource[0].key, "service.name");
	cr_assert_str_eq(theirs->resource[0].v.s, "svc");
	cr_assert_eq(theirs->resource[1].v.i, 4242);
	cr_assert_eq(theirs->n_metrics, mine->n_metrics);
	cr_assert_eq(theirs->n_points, mine->n_points);
	for (size_t i = 0; i < mine->n_metrics; i++) {
		const struct nl_metric *a = &mine->metrics[i], *b = metric(theirs, a->name);
		cr_assert_not_null(b, "%s missing", a->name);
		cr_assert_str_eq(a->unit, b->unit);
		cr_assert_str_eq(a->description, b->description);
		cr_assert_eq(a->kind, b->kind);
		cr_assert_eq(a->n_bounds, b->n_bounds);
		cr_assert_eq(a->n_points, b->n_points);
		for (size_t j = 0; j < a->n_points; j++) {
			const struct nl_point *p = &a->points[j], *q = same_point(b, p);
			cr_assert_not_null(q, "%s: a point is missing", a->name);
			cr_assert_eq(p->ivalue, q->ivalue);
			cr_assert_eq(p->dvalue, q->dvalue);
			cr_assert_eq(p->count, q->count);
			cr_assert_eq(p->sum, q->sum);
			cr_assert_eq(p->min, q->min);
			cr_assert_eq(p->max, q->max);
			cr_assert_eq(p->start_ns, q->start_ns);
			cr_assert_eq(p->overflow, q->overflow);
			cr_assert_null(q->series, "a dead process's points have nothing to commit");
			cr_assert_eq(memcmp(p->buckets, q->buckets, sizeof p->buckets), 0);
		}
	}
	nl_snapshot_commit(theirs);   /* ignored */
	nl_snapshot_free(theirs);
	nl_snapshot_free(mine);
	free(data);
}

/* nemolens-run's memory sampler finds a process's series in its segment
 * and records into them there: a reader of the segment then sees them. */
Test(segment, series_are_found_by_name_and_attribute_and_recorded_into_there)
{
	struct nl_instrument *g = nl_instrument_get("t.mem", "By", "memory", NL_GAUGE_INT, NULL, 0);
	struct nl_attr rss[2] = { NL_ATTR_I("process.pid", 7), NL_ATTR_S("memory.type", "rss") };
	struct nl_attr pss[2] = { NL_ATTR_I("process.pid", 7), NL_ATTR_S("memory.type", "pss") };
	struct nl_series *srss = nl_series_get(g, rss, 2), *spss = nl_series_get(g, pss, 2);
	cr_assert(srss && spss);
	record_some();
	size_t len;
	uint8_t *data = copy_arena(&len);
	uint64_t at_rss = nl_segment_series_at(data, len, "t.mem", "memory.type", "rss");
	uint64_t at_pss = nl_segment_series_at(data, len, "t.mem", "memory.type", "pss");
	cr_assert_eq(at_rss, (uint64_t)((char *)srss - nl_seg_base));
	cr_assert_eq(at_pss, (uint64_t)((char *)spss - nl_seg_base));
	cr_assert_neq(nl_segment_series_at(data, len, "t.mem", NULL, NULL), 0);
	cr_assert_eq(nl_segment_series_at(data, len, "t.mem", "memory.type", "uss"), 0);
	cr_assert_eq(nl_segment_series_at(data, len, "t.nothing", NULL, NULL), 0);
	cr_assert_eq(nl_segment_series_at(data, 100, "t.mem", NULL, NULL), 0, "a cut copy is not followed");

	struct nl_snapshot *before = nl_snapshot_of_segment(data, len, 2000);
	cr_assert_null(metric(before, "t.mem"), "no value yet");
	nl_snapshot_free(before);
	nl_gauge_set_int((struct nl_series *)(data + at_pss), 123);
	int64_t v = 0;
	cr_assert(nl_gauge_get_int((struct nl_series *)(data + at_pss), &v));
	cr_assert_eq(v, 123);
	cr_assert(!nl_gauge_get_int(srss, &v), "this process's own series is another record");
	struct nl_snapshot *after = nl_snapshot_of_segment(data, len, 2000);
	const struct nl_metric *m = metric(after, "t.mem");
	cr_assert_not_null(m);
	cr_assert_eq(m->n_points, 1);
	cr_assert_eq(m->points[0].ivalue, 123);
	cr_assert_eq(m->points[0].n_attrs, 2);
	cr_assert_str_eq(m->points[0].attrs[1].v.s, "pss");
	nl_snapshot_free(after);
	free(data);
}

/* An instrument is a record only as long as its kind needs: one that a
 * process created last, before its first series, ends the used bytes. */
Test(segment, an_instrument_at_the_end_of_the_used_bytes_is_read)
{
	record_some();
	uint64_t res_off = put_resource();
	cr_assert(nl_instrument_get("t.last", "{x}", "created last", NL_COUNTER, NULL, 0));
	size_t len;
	uint8_t *data = copy_arena_as_is(&len, res_off);
	struct nl_snapshot *snap = nl_snapshot_of_segment(data, len, 2000);
	cr_assert_not_null(snap, "the whole segment is readable");
	cr_assert_not_null(metric(snap, "t.counter"));
	cr_assert_null(metric(snap, "t.last"), "no value yet");
	nl_snapshot_free(snap);
	free(data);
}

Test(segment, folding_adds_counters_and_histograms_only)
{
	record_some();
	size_t len;
	uint8_t *data = copy_arena(&len);
	cr_assert_eq(nl_registry_fold_segment(data, len), 4, "3 counter series and 1 histogram series");
	struct nl_snapshot *s = nl_snapshot_take(false, false, 1000, 2000);
	const struct nl_metric *c = metric(s, "t.counter"), *h = metric(s, "t.hist");
	int64_t total = 0;
	for (size_t i = 0; i < c->n_points; i++)
		total += c->points[i].ivalue;
	cr_assert_eq(total, 2 * (3 + 5 + 7));
	cr_assert_eq(h->points[0].count, 6);
	cr_assert_eq(h->points[0].sum, 2 * 550.5);
	cr_assert_eq(h->points[0].min, 0.5);
	cr_assert_eq(h->points[0].max, 500);
	cr_assert_eq(metric(s, "t.gauge")->points[0].dvalue, 2.5, "gauges are not folded");
	cr_assert_eq(metric(s, "t.updown")->points[0].ivalue, -2, "up-down counters are not folded");
	nl_snapshot_free(s);
	free(data);
}

Test(segment, fold_creates_missing_instruments_with_copied_names)
{
	record_some();
	size_t len;
	uint8_t *data = copy_arena(&len);
	/* Rename the counter in the copy: the fold must create "t.counteR". */
	uint8_t *p = memmem(data, len, "t.counter", 10);
	cr_assert_not_null(p);
	p[8] = 'R';
	cr_assert_gt(nl_registry_fold_segment(data, len), 0);
	free(data);   /* the new instrument's names must not point into the copy */
	struct nl_snapshot *s = nl_snapshot_take(false, false, 1000, 2000);
	const struct nl_metric *m = metric(s, "t.counteR");
	cr_assert_not_null(m);
	cr_assert_str_eq(m->unit, "{x}");
	nl_snapshot_free(s);
}

static uint64_t rnd(void)
{
	static uint64_t x = 88172645463325252ull;
	x ^= x << 13, x ^= x >> 7, x ^= x << 17;
	return x;
}

Test(segment, corrupted_bytes_are_rejected_or_read_within_bounds)
{
	record_some();
	size_t len;
	uint8_t *good = copy_arena(&len);
	uint8_t *data = malloc(len);
	for (int round = 0; round < 3000; round++) {
		memcpy(data, good, len);
		int flips = 1 + (int)(rnd() % 8);
		for (int f = 0; f < flips; f++) {
			size_t at = NL_SEG_DATA + rnd() % (len - NL_SEG_DATA);
			if (rnd() % 2) {
				data[at] = (uint8_t)rnd();
			} else if (at + 8 <= len) {
				/* An offset-sized value: near, far, or pointing at itself. */
				uint64_t v = rnd() % 3 == 0 ? rnd() : rnd() % 3 == 1 ? at & ~(uint64_t)15 : rnd() % len;
				memcpy(data + at, &v, 8);
			}
		}
		size_t cut = rnd() % 4 == 0 ? len - rnd() % (len / 2) : len;
		struct nl_snapshot *s = nl_snapshot_of_segment(data, cut, 2000);
		nl_snapshot_free(s);
	}
	/* Truncations of every size, and a header with everything wrong. */
	for (size_t cut = 0; cut < len; cut += 7)
		nl_snapshot_free(nl_snapshot_of_segment(good, cut, 2000));
	memset(data, 0xff, len);
	memcpy(data, good, 8);
	cr_assert_null(nl_snapshot_of_segment(data, len, 2000));
	free(data);
	free(good);
}

Test(segment, a_series_list_in_a_circle_ends)
{
	record_some();
	size_t len;
	uint8_t *data = copy_arena(&len);
	/* Every series of the counter points at the first one. */
	struct nl_snapshot *before = nl_snapshot_of_segment(data, len, 2000);
	cr_assert_not_null(before);
	nl_snapshot_free(before);
	const struct nl_seg_header *h = (const struct nl_seg_header *)data;
	/* The newest instrument is the up-down counter; its one series' next
	 * (the first field of a series record) is set to the series itself. */
	uint64_t inst = h->root, head;
	memcpy(&head, data + inst + 8 * 5 + 8, 8);   /* next, name, unit, description, bounds, kind+n_bounds, head */
	cr_assert_neq(head, 0);
	memcpy(data + head, &head, 8);
	struct nl_snapshot *s = nl_snapshot_of_segment(data, len, 2000);
	nl_snapshot_free(s);   /* whatever it read, it stopped */
	free(data);
}

Test(segment, delivery_key_names_the_destination)
{
	/* Built each on its own: a configuration is never copied by value (config.h). */
	struct nl_header hdr = { .name = "x-tenant", .value = "1" };
	struct nl_config a = { .endpoint = "http://a:4318/v1/metrics" };
	struct nl_config b = { .endpoint = "http://b:4318/v1/metrics" };
	struct nl_config c = { .endpoint = "http://a:4318/v1/metrics", .headers = &hdr, .n_headers = 1 };
	cr_assert_eq(nl_seg_delivery_key(&a), nl_seg_delivery_key(&a));
	cr_assert_neq(nl_seg_delivery_key(&a), nl_seg_delivery_key(&b));
	cr_assert_neq(nl_seg_delivery_key(&a), nl_seg_delivery_key(&c));
}

/* ---- the directory ------------------------------------------------------------ */

static char dir[256], segs[300];

static void write_file(const char *name, const void *data, size_t len)
{
	char path[600];
	snprintf(path, sizeof path, "%s/%s", segs, name);
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
	cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static bool exists(const char *name)
{
	char path[600];
	snprintf(path, sizeof path, "%s/%s", segs, name);
	return access(path, F_OK) == 0;
}

static int dead_pid(void)
{
	int pid = 99999;
	while (kill(pid, 0) == 0 || errno != ESRCH)
		pid--;
	return pid;
}

Test(segment, claim_takes_what_it_may_deliver_and_removes_garbage)
{
	snprintf(dir, sizeof dir, "/dev/shm/nl-test-segment-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(segs, sizeof segs, "%s/nemolens", dir);
	struct nl_config cfg = { .endpoint = "http://127.0.0.1:9/v1/metrics", .runtime_dir = dir };
	cr_assert_eq(nl_seg_configure(&cfg), 0);
	cr_assert_str_eq(nl_seg_dir(), segs);
	struct stat st;
	cr_assert_eq(lstat(segs, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0700);

	record_some();
	size_t len;
	uint8_t *data = copy_arena(&len);
	struct nl_seg_header *h = (struct nl_seg_header *)data;
	uint64_t key = nl_seg_delivery_key(&cfg);
	char boot[64] = { 0 };
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY);
	cr_assert_eq(read(fd, boot, 36), 36);
	close(fd);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;

	int pid = dead_pid();
	char name[5][64];
	h->pid = pid;
	memcpy(h->boot_id, boot, 37);
	atomic_store(&h->state, NL_SEG_LIVE);
	atomic_store(&h->heartbeat_ns, now_ns);
	h->delivery_key = key;
	snprintf(name[0], 64, "%016llx-%d", (unsigned long long)key, pid);
	write_file(name[0], data, len);                      /* deliverable */
	h->delivery_key = key ^ 1;
	snprintf(name[1], 64, "%016llx-%d", (unsigned long long)(key ^ 1), pid);
	write_file(name[1], data, len);                      /* another collector's: left alone */
	h->delivery_key = key;
	memcpy(h->boot_id, "00000000-0000-4000-8000-000000000000", 37);
	snprintf(name[2], 64, "%016llx-%d-x1", (unsigned long long)key, pid);
	write_file(name[2], data, len);                      /* another boot's: removed */
	memcpy(h->boot_id, boot, 37);
	atomic_store(&h->heartbeat_ns, now_ns - 3 * 86400ull * 1000000000u);
	snprintf(name[3], 64, "%016llx-%d-x2", (unsigned long long)key, pid);
	write_file(name[3], data, len);                      /* older than the age limit: removed */
	snprintf(name[4], 64, "not a segment");
	write_file(name[4], "junk", 4);                      /* garbage: removed */

	struct nl_seg_leftover l[8];
	size_t n = nl_seg_claim(key, 86400ull * 1000000000u, false, l, 8);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(l[0].name, name[0]);
	cr_assert_eq(l[0].len, len);
	cr_assert(exists(name[1]), "another collector's leftover stays for it");
	cr_assert_not(exists(name[2]));
	cr_assert_not(exists(name[3]));
	cr_assert_not(exists(name[4]));
	/* A second reader cannot take what the first holds. */
	struct nl_seg_leftover other[8];
	cr_assert_eq(nl_seg_claim(key, 86400ull * 1000000000u, true, other, 8), 0);
	nl_seg_release(&l[0], false);
	cr_assert(exists(name[0]), "not delivered: left for the next try");
	cr_assert_eq(nl_seg_claim(key, 86400ull * 1000000000u, false, l, 8), 1);
	nl_seg_release(&l[0], true);
	cr_assert_not(exists(name[0]), "delivered: removed");
	cr_assert_eq(nl_seg_claim(key ^ 1, 86400ull * 1000000000u, false, l, 8), 1, "its own collector's reader takes it");
	nl_seg_release(&l[0], true);
	cr_assert_eq(rmdir(segs), 0, "nothing left");
	rmdir(dir);
	free(data);
}
