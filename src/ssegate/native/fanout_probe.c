/*
 * fanout_probe: what one send() of an SSE event costs per socket, in a loop of send() calls
 * (what _fanout.c does) and in io_uring batches (IORING_OP_SEND, one io_uring_enter per 4,096
 * sockets). Not part of the package: the measurement behind the choice of send() in
 * _fanout.c (docs/performance.md, "The fan-out write path").
 *
 *   gcc -O2 -o /tmp/fanout_probe src/ssegate/native/fanout_probe.c
 *   /tmp/fanout_probe SOCKETS ROUNDS BYTES        # e.g. 1000 100 120, 9000 20 120
 *
 * It opens SOCKETS loopback TCP connections (twice as many descriptors: keep SOCKETS under
 * half of `ulimit -n`), then per round sends BYTES to every connection, once with each method
 * in turn, and drains the receiving ends between rounds (not timed). It prints the wall time
 * and the process CPU time (user + system, the kernel's TCP work on both ends of loopback
 * included) per send for each method. Raw system calls: no liburing needed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static double cpu(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 + r.ru_stime.tv_sec +
           r.ru_stime.tv_usec / 1e6;
}

struct ring {
    int fd;
    unsigned entries;
    unsigned *sq_tail, *sq_mask, *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
};

static int ring_open(struct ring *r, unsigned entries)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN |
              IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    r->fd = (int)syscall(__NR_io_uring_setup, entries, &p);
    if (r->fd < 0) {
        perror("io_uring_setup");
        return -1;
    }
    size_t size = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_size = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    if (cq_size > size)
        size = cq_size;
    char *ring = mmap(0, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
                      IORING_OFF_SQ_RING);
    r->sq_tail = (unsigned *)(ring + p.sq_off.tail);
    r->sq_mask = (unsigned *)(ring + p.sq_off.ring_mask);
    r->cq_head = (unsigned *)(ring + p.cq_off.head);
    r->cq_tail = (unsigned *)(ring + p.cq_off.tail);
    r->cq_mask = (unsigned *)(ring + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(ring + p.cq_off.cqes);
    r->sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
    unsigned *array = (unsigned *)(ring + p.sq_off.array);
    for (unsigned i = 0; i < p.sq_entries; i++)
        array[i] = i;
    r->entries = p.sq_entries;
    return 0;
}

static void ring_send_all(struct ring *r, const char *buf, size_t len, const int *fds, int n,
                          long *written)
{
    for (int done = 0; done < n;) {
        unsigned k = (unsigned)(n - done) > r->entries ? r->entries : (unsigned)(n - done);
        unsigned tail = *r->sq_tail;
        for (unsigned i = 0; i < k; i++) {
            struct io_uring_sqe *s = &r->sqes[(tail + i) & *r->sq_mask];
            memset(s, 0, sizeof *s);
            s->opcode = IORING_OP_SEND;
            s->fd = fds[done + i];
            s->addr = (unsigned long)buf;
            s->len = (unsigned)len;
            s->msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL;
            s->user_data = (unsigned long)(done + i);
        }
        __atomic_store_n(r->sq_tail, tail + k, __ATOMIC_RELEASE);
        syscall(__NR_io_uring_enter, r->fd, k, k, IORING_ENTER_GETEVENTS, NULL, 0);
        unsigned head = *r->cq_head, end = __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE);
        for (; head != end; head++) {
            struct io_uring_cqe *e = &r->cqes[head & *r->cq_mask];
            written[e->user_data] = e->res;
        }
        __atomic_store_n(r->cq_head, head, __ATOMIC_RELEASE);
        done += (int)k;
    }
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    int rounds = argc > 2 ? atoi(argv[2]) : 50;
    size_t len = argc > 3 ? (size_t)atoi(argv[3]) : 120;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t addr_len = sizeof addr;
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    bind(listener, (struct sockaddr *)&addr, sizeof addr);
    listen(listener, 4096);
    getsockname(listener, (struct sockaddr *)&addr, &addr_len);
    int *client = malloc(n * sizeof(int)), *server = malloc(n * sizeof(int));
    long *written = malloc(n * sizeof(long));
    for (int i = 0; i < n; i++) {
        int one = 1;
        client[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(client[i], (struct sockaddr *)&addr, sizeof addr) < 0) {
            perror("connect");
            return 1;
        }
        server[i] = accept(listener, NULL, NULL);
        fcntl(server[i], F_SETFL, O_NONBLOCK);
        fcntl(client[i], F_SETFL, O_NONBLOCK);
        setsockopt(server[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    char *buf = malloc(len), drain[65536];
    memset(buf, 'x', len);
    struct ring ring = {0};
    int methods = ring_open(&ring, 4096) == 0 ? 2 : 1;
    double wall_s[2] = {0}, cpu_s[2] = {0};
    long short_sends = 0;
    for (int round = 0; round < rounds; round++) {
        for (int m = 0; m < methods; m++) {
            double w = wall(), c = cpu();
            if (m == 0) {
                for (int i = 0; i < n; i++) {
                    ssize_t sent = send(server[i], buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
                    written[i] = sent < 0 ? -errno : sent;
                }
            } else {
                ring_send_all(&ring, buf, len, server, n, written);
            }
            wall_s[m] += wall() - w;
            cpu_s[m] += cpu() - c;
            for (int i = 0; i < n; i++) {
                short_sends += written[i] != (long)len;
                while (recv(client[i], drain, sizeof drain, 0) > 0)
                    ;
            }
        }
    }
    const char *names[2] = {"send()", "io_uring"};
    for (int m = 0; m < methods; m++)
        printf("%-8s %d sockets, %zu bytes: wall %.2f us/send, cpu %.2f us/send\n", names[m], n,
               len, wall_s[m] * 1e6 / ((double)n * rounds), cpu_s[m] * 1e6 / ((double)n * rounds));
    if (short_sends)
        printf("%ld sends did not take everything\n", short_sends);
    return 0;
}
