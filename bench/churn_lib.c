// SPDX-License-Identifier: BSD-2-Clause
/*
 * The shared library that the churn soak corrupts (bench/run.py churn, bench/churn.c "elf"):
 * copies of it with bytes flipped, headers garbled or the tail cut off are mapped executable
 * and churn_lib_spin is called at its offset in the copy, so that samples land in a mapping
 * whose file the daemon cannot trust. The copies are mapped raw, without relocation, so this
 * code must not go through the GOT or the PLT: the inner call is to a static function.
 */

__attribute__((noinline)) static unsigned long churn_lib_inner(unsigned long n)
{
	volatile unsigned long x = n;

	for (volatile unsigned long i = 0; i < n; i++)
		x = x * 6364136223846793005ul + i;
	return x;
}

__attribute__((noinline)) unsigned long churn_lib_spin(unsigned long n)
{
	unsigned long r = churn_lib_inner(n);

	__asm__ volatile("" ::: "memory");
	return r + 1;
}
