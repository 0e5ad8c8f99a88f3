/* fault.h — fault injection: MTC_FAULT makes chosen CUDA driver calls fail,
 * so that tests can drive libmtc's error paths on demand (an emulated or a
 * real driver alike). docs/RELIABILITY.md documents the syntax:
 *
 *     MTC_FAULT=pinned-alloc:3            the 3rd cuMemHostAlloc fails
 *     MTC_FAULT=copy-submit:5+            the 5th copy submission and every later one
 *     MTC_FAULT=device-alloc:2-3,event-query:1=CUDA_ERROR_UNKNOWN
 *
 * Classes: pinned-alloc, device-alloc, copy-submit, event-query. Calls are
 * counted per class and per process, atomically, from 1. */
#ifndef MTC_FAULT_H
#define MTC_FAULT_H

#include <stddef.h>

#include "cuda/driver_api.h"

/* Reads MTC_FAULT once. MTC_OK when it is unset, empty or well formed;
 * otherwise MTC_ERR_INVALID_ARGUMENT with the reason written to message. */
mtc_status mtc_fault_configure(char *message, size_t capacity);

/* After mtc_fault_configure: points the entries of every class MTC_FAULT
 * names at counting wrappers that fail the chosen calls and forward the
 * others to the entries the table held. Leaves the table alone when
 * MTC_FAULT is unset. Once, before the table is published. */
void mtc_fault_install(mtc_cuda_api *table);

#endif
