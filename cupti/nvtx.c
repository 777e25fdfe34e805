// SPDX-License-Identifier: BSD-2-Clause
/*
 * The NVTX entry point. With NVTX_INJECTION64_PATH pointing at this library, the first NVTX
 * call of each module loads it and calls InitializeInjectionNvtx2; CUPTI then turns NVTX
 * calls into MARKER activity records. That may happen before CUDA initialises, so CUPTI is
 * looked up here on its own. Unlike core__init it may load the system's libcupti at once:
 * whoever set NVTX_INJECTION64_PATH to this library asked for CUPTI to handle NVTX.
 */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "core_priv.h"

/* NVTX's NvtxGetExportTableFunc_t. */
typedef const void *(*nvtx_get_export_table_fn)(uint32_t id);
/* Exported by libcupti, not declared in its headers. */
typedef CUptiResult (*cupti_nvtx_init2_fn)(nvtx_get_export_table_fn get_export_table);

/* Returns 1 when CUPTI took over NVTX, 0 (quietly) when it could not: NVTX stays a no-op. */
__attribute__((visibility("default"))) int
InitializeInjectionNvtx2(nvtx_get_export_table_fn get_export_table)
{
	char path[256], why[160];
	cupti_nvtx_init2_fn init;
	void *h;

	h = cupti_find(true, path, sizeof(path), why, sizeof(why));
	if (!h)
		return 0;
	init = (cupti_nvtx_init2_fn)dlsym(h, "cuptiNvtxInitialize2");
	if (!init)
		return 0;
	return init(get_export_table) == CUPTI_SUCCESS;
}
