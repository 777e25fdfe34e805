/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libbpf's usdt.bpf.h includes <linux/errno.h>, which includes the architecture's <asm/errno.h>.
 * A BPF compile (-target bpf) does not search the multiarch include directory where that header
 * lives, and every architecture profd builds for (x86, arm64) uses the generic numbers anyway.
 */
#ifndef PROFD_BPF_ASM_ERRNO_H
#define PROFD_BPF_ASM_ERRNO_H
#include <asm-generic/errno.h>
#endif
