/* keep_loaded.h — keep libmtc mapped once it has threads of its own. */
#ifndef MTC_KEEP_LOADED_H
#define MTC_KEEP_LOADED_H

/* Marks the loaded libmtc as never to be unloaded (RTLD_NODELETE). Called
 * before the library starts a thread: a runtime that dlclose()s libmtc (Deno
 * does, when the worker that opened it ends) would otherwise unmap code that
 * the background and staging threads are running. Idempotent, thread-safe. */
void mtc_keep_loaded(void);

#endif
