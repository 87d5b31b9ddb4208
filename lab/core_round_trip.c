/* Cross-core round trip of one cache line between CPU 0 and CPU 1 (benchmarks/core_distance.py).
 *
 * Two threads, pinned to the two CPUs, hand a flag back and forth ROUNDS times; the mean time of a
 * hand-over and back is printed in nanoseconds. On a host's two cores of one die it is about 100 ns;
 * when the hypervisor puts a VM's two vCPUs on cores of different dies, about 4x that, and every
 * line that one core writes and the other reads pays it.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

enum { ROUNDS = 200000 };
static _Atomic int flag __attribute__((aligned(64)));

static int pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *answer(void *unused) {
    (void)unused;
    pin(1);
    for (int i = 0; i < ROUNDS; i++) {
        while (atomic_load_explicit(&flag, memory_order_acquire) != 1) {
        }
        atomic_store_explicit(&flag, 0, memory_order_release);
    }
    return NULL;
}

int main(void) {
    pthread_t other;
    struct timespec start, end;
    if (pin(0) != 0) {
        fprintf(stderr, "cannot pin to CPU 0\n");
        return 1;
    }
    if (pthread_create(&other, NULL, answer, NULL) != 0) {
        fprintf(stderr, "cannot start the second thread\n");
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int i = 0; i < ROUNDS; i++) {
        atomic_store_explicit(&flag, 1, memory_order_release);
        while (atomic_load_explicit(&flag, memory_order_acquire) != 0) {
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    pthread_join(other, NULL);
    double ns = ((end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec)) / ROUNDS;
    printf("%.1f\n", ns);
    return 0;
}
