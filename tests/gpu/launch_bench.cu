// SPDX-License-Identifier: BSD-2-Clause
// The device kit's launch-overhead bench (D9), compiled on the GPU machine by its nvcc:
// N launches of an empty kernel through <<<>>> (__cudaLaunchKernel), three rounds, the best
// round's nanoseconds per launch printed as "ns_per_launch X". Usage: launch_bench N [WAIT_S]
// WAIT_S: seconds to sleep after CUDA init first (a daemon attaches meanwhile).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

__global__ void empty_kernel() {}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	double wait_s = argc > 2 ? atof(argv[2]) : 0;
	double best = 1e300;

	if (n <= 0 || n > 100000000 || wait_s < 0 || wait_s > 600) {
		fprintf(stderr, "usage: launch_bench N [WAIT_S]\n");
		return 2;
	}
	if (cudaFree(0) != cudaSuccess) {
		fprintf(stderr, "launch_bench: no CUDA device\n");
		return 1;
	}
	std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
	for (int r = 0; r < 4; r++) {
		auto t0 = std::chrono::steady_clock::now();
		for (long i = 0; i < n; i++)
			empty_kernel<<<1, 1>>>();
		cudaDeviceSynchronize();
		double ns = std::chrono::duration<double, std::nano>(
				    std::chrono::steady_clock::now() - t0).count() / n;
		if (r > 0 && ns < best) // round 0 warms up
			best = ns;
	}
	if (cudaGetLastError() != cudaSuccess) {
		fprintf(stderr, "launch_bench: %s\n", cudaGetErrorString(cudaGetLastError()));
		return 1;
	}
	printf("ns_per_launch %.1f\n", best);
	return 0;
}
