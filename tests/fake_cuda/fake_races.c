/* fake_races.c — the emulated driver's race check, a test knob that is off
 * unless FAKE_CUDA_CHECK_RACES=1 or fake_cuda_check_races(1).
 *
 * Copies do their memcpy at once, so the bytes never show a race here; the
 * time model can. A copy or kernel that touches pinned host bytes while
 * work on another stream touches them too, in modelled time, one of the two
 * writing, is a race a GPU could lose: nothing orders the two. The later
 * call fails with CUDA_ERROR_ILLEGAL_ADDRESS and a line naming both, and
 * fake_cuda_race_count() counts it. Work on one stream never overlaps in
 * time, and cuStreamWaitEvent moves a stream past the event it waits for,
 * so ordered work is never reported. Without a copy delay nothing stays in
 * flight long enough to overlap: the check needs FAKE_CUDA_COPY_DELAY_US or
 * fake_cuda_set_copy_delay_us on the earlier work. */
#include "fake_cuda.h"

/* One copy's or kernel's use of pinned bytes, in flight until `until`. */
struct pinned_access {
  uintptr_t begin, end; /* host bytes */
  uint64_t from, until; /* modelled ns */
  int write;
  int device;
};

static int g_check_races = -1; /* -1: FAKE_CUDA_CHECK_RACES not read yet */
static unsigned long long g_race_count;
static struct pinned_access *g_accesses;
static size_t g_access_count, g_access_cap;

/* Lock held. */
static int races_on(void) {
  if (g_check_races < 0) {
    const char *s = getenv("FAKE_CUDA_CHECK_RACES");
    g_check_races = s && strcmp(s, "1") == 0;
  }
  return g_check_races;
}

void stream_span(const struct fake_stream *s, uint64_t cost, uint64_t *from, uint64_t *until) {
  *from = max_u64(s->busy_until, now_ns());
  *until = *from + (cost ? cost : 1);
}

/* Lock held. The pinned allocation [p, p + n) lies in, or NULL. */
static const struct fake_alloc *pinned_at(uintptr_t p, size_t n) {
  if (n == 0) return NULL;
  const struct fake_alloc *a = alloc_containing(&g_host_allocs, p);
  return a && n <= a->size - (p - a->addr) ? a : NULL;
}

/* Lock held. Forgets the uses that are over: later work starts at now or
 * after, so they can overlap nothing. */
static void prune(void) {
  uint64_t now = now_ns();
  size_t kept = 0;
  for (size_t i = 0; i < g_access_count; i++) {
    if (g_accesses[i].until > now) g_accesses[kept++] = g_accesses[i];
  }
  g_access_count = kept;
}

CUresult race_check(const char *fn, const char *what, uintptr_t p, size_t n, int write, uint64_t from,
                    uint64_t until) {
  if (!races_on() || !pinned_at(p, n)) return CUDA_SUCCESS;
  prune();
  for (size_t i = 0; i < g_access_count; i++) {
    const struct pinned_access *a = &g_accesses[i];
    if (!(write || a->write) || p >= a->end || a->begin >= p + n || from >= a->until || a->from >= until) continue;
    g_race_count++;
    uint64_t now = now_ns();
    return report(CUDA_ERROR_ILLEGAL_ADDRESS, fn,
                  "%s %p (%zu bytes) is pinned memory that work on device %d's stream %s until %.3f ms from "
                  "now, and no event orders the two (a race: FAKE_CUDA_CHECK_RACES)",
                  what, (void *)p, n, a->device, a->write ? "writes" : "reads", (double)(a->until > now ? a->until - now : 0) / 1e6);
  }
  return CUDA_SUCCESS;
}

void race_note(uintptr_t p, size_t n, int write, int device, uint64_t from, uint64_t until) {
  if (!races_on() || !pinned_at(p, n)) return;
  if (g_access_count > 0) {
    /* A gather's segments come one after the other: one entry for a run. */
    struct pinned_access *last = &g_accesses[g_access_count - 1];
    if (last->end == p && last->write == write && last->device == device && last->from == from &&
        last->until == until) {
      last->end = p + n;
      return;
    }
  }
  if (g_access_count == g_access_cap) {
    size_t cap = g_access_cap ? g_access_cap * 2 : 64;
    struct pinned_access *more = realloc(g_accesses, cap * sizeof *more);
    if (!more) return; /* a use not remembered: at worst a race not seen */
    g_accesses = more;
    g_access_cap = cap;
  }
  g_accesses[g_access_count++] = (struct pinned_access){p, p + n, from, until, write, device};
}

CUresult race_copy(const char *fn, const char *what, const struct fake_stream *s, const void *host, size_t n,
                   int write) {
  if (!races_on()) return CUDA_SUCCESS;
  uint64_t from, until;
  stream_span(s, g_copy_delay_ns, &from, &until);
  CUresult r = race_check(fn, what, (uintptr_t)host, n, write, from, until);
  if (!r) race_note((uintptr_t)host, n, write, s->device, from, until);
  return r;
}

void race_forget(uintptr_t p, size_t n) {
  size_t kept = 0;
  for (size_t i = 0; i < g_access_count; i++) {
    const struct pinned_access *a = &g_accesses[i];
    if (a->begin >= p + n || p >= a->end) g_accesses[kept++] = *a;
  }
  g_access_count = kept;
}

/* ======================================================= test-only exports */

/* 1: turns the race check on (as FAKE_CUDA_CHECK_RACES=1 does); 0: off. */
FAKE_API void fake_cuda_check_races(int on) {
  lock();
  g_check_races = on != 0;
  if (!on) g_access_count = 0;
  unlock();
}

/* Races reported since the process started. */
FAKE_API unsigned long long fake_cuda_race_count(void) {
  lock();
  unsigned long long n = g_race_count;
  unlock();
  return n;
}
