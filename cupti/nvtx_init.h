/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The NVTX entry point's (nvtx.c) test hook: InitializeInjectionNvtx2 hands NVTX to CUPTI only
 * where the CUDA driver answers, and a test points that check at a library of its own.
 */
#ifndef PROFD_CUPTI_NVTX_INIT_H
#define PROFD_CUPTI_NVTX_INIT_H

/* The CUDA driver, by the name the CUDA runtime and CUPTI load it. */
#define NVTX_DRIVER_NAME "libcuda.so.1"

/* Load name (or a path) as the driver instead; NULL restores NVTX_DRIVER_NAME. */
void nvtx__test_set_driver(const char *name);

#endif
