/* spin.h — the brief busy-wait before a thread goes to sleep. Waking a
 * sleeping thread costs 5 to 50 µs (more in virtual machines), as much as
 * submitting a whole small copy, so the background thread and waiters spin
 * for a short while first. MTC_SPIN_US sets how long (default 50 µs on
 * machines with 4 or more cores, 0 below; 0 sleeps at once). */
#ifndef MTC_SPIN_H
#define MTC_SPIN_H

#include <stdint.h>

/* How long to spin before sleeping, in ns (MTC_SPIN_US, read once). */
uint64_t mtc_spin_ns(void);

static inline void mtc_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

#endif
