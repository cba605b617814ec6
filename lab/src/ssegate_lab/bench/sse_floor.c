/*
 * sse_floor: the reference SSE fan-out server the fan-out benchmark measures ssegate against.
 *
 * What it is: one process, one thread, one epoll loop, non-blocking sockets. It reads one
 * upstream SSE stream (HTTP/1.1, chunked, as the bench's example upstream serves it), splits
 * it into events at the blank line, frames each event once as one HTTP/1.1 chunk
 * ("<hex>\r\n" event "\r\n", the bytes ssegate writes for a proxied event) and sends that
 * chunk to every subscriber, plain with send() or over TLS 1.3 with SSL_write. Whatever a
 * socket does not take is kept for that socket and written on EPOLLOUT; a subscriber whose
 * kept bytes would pass --max-buffered is dropped and counted.
 *
 * What it is not: a gateway. It has no config, routes, guards, reconnection, keep-alives,
 * HTTP/2, event ids of its own or replay. The upstream must write events with LF line
 * endings (the example upstream does); a request is answered only by its method, any GET
 * opens a stream. It is the least work a server can do per delivery: the figure it gives is
 * the floor beside which the gateway's CPU per delivery and p99 are read.
 *
 *   sse_floor --upstream-port U --port P [--tls-port T --cert C.pem --key K.pem]
 *             [--max-buffered BYTES]
 *
 * It prints "sse floor: ready" once the listeners are up and the upstream answered 200,
 * and on SIGTERM or SIGINT "sse floor: stopped subscribers=N dropped=N events=N" and exits 0.
 * Any failure prints "sse floor: <reason>" and exits 1.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_REQUEST 8192
#define MAX_EVENT (1 << 20)
#define READ_SIZE 65536

static const char HEAD[] =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    "x-accel-buffering: no\r\ntransfer-encoding: chunked\r\n\r\n";
static const char NOT_ALLOWED[] =
    "HTTP/1.1 405 Method Not Allowed\r\nallow: GET\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
static const char TOO_LARGE[] =
    "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";

enum phase { HANDSHAKE, REQUEST, STREAMING };

struct sub {
    int fd;
    SSL *ssl;
    enum phase phase;
    int index;          /* place in streams[] while STREAMING, else -1 */
    int closing;        /* refused: write the answer, shut writing, close at the client's end */
    char *out;          /* bytes kept for this socket */
    size_t out_len, out_cap;
    char request[MAX_REQUEST];
    size_t request_len;
};

static int epoll_fd, listen_fd = -1, tls_listen_fd = -1, upstream_fd = -1;
static SSL_CTX *tls_ctx;
static struct sub **by_fd;
static size_t by_fd_cap;
static struct sub **streams;
static int stream_count, stream_cap;
static size_t max_buffered = 1 << 20;
static unsigned long long dropped, events;
static volatile sig_atomic_t stopping;

static void fail(const char *format, ...) {
    va_list args;
    va_start(args, format);
    fputs("sse floor: ", stdout);
    vfprintf(stdout, format, args);
    fputc('\n', stdout);
    va_end(args);
    exit(1);
}

static void *grow(void *buffer, size_t size) {
    void *grown = realloc(buffer, size);
    if (grown == NULL) fail("out of memory");
    return grown;
}

static void watch(int fd, int op, unsigned int mask) {
    struct epoll_event event = {.events = mask, .data.fd = fd};
    if (epoll_ctl(epoll_fd, op, fd, &event) < 0) fail("epoll_ctl: %s", strerror(errno));
}

static int listen_on(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, 4096) < 0)
        fail("cannot listen on port %d: %s", port, strerror(errno));
    watch(fd, EPOLL_CTL_ADD, EPOLLIN);
    return fd;
}

static void close_sub(struct sub *s) {
    if (s->index >= 0) { /* move the last stream into this one's place */
        streams[s->index] = streams[--stream_count];
        streams[s->index]->index = s->index;
    }
    if (s->ssl != NULL) SSL_free(s->ssl);
    close(s->fd);
    by_fd[s->fd] = NULL;
    free(s->out);
    free(s);
}

/* Write what the socket takes of buf; bytes written, or -1 when the subscriber is gone. */
static ssize_t write_some(struct sub *s, const char *buf, size_t len) {
    if (s->ssl == NULL) {
        ssize_t sent = send(s->fd, buf, len, MSG_NOSIGNAL);
        if (sent >= 0) return sent;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    }
    int sent = SSL_write(s->ssl, buf, (int)len);
    if (sent > 0) return sent;
    int error = SSL_get_error(s->ssl, sent);
    ERR_clear_error();
    return error == SSL_ERROR_WANT_WRITE || error == SSL_ERROR_WANT_READ ? 0 : -1;
}

static int keep(struct sub *s, const char *buf, size_t len) {
    if (s->out_len + len > max_buffered) return -1;
    if (s->out_len + len > s->out_cap) {
        s->out_cap = s->out_len + len > 2 * s->out_cap ? s->out_len + len : 2 * s->out_cap;
        s->out = grow(s->out, s->out_cap);
    }
    memcpy(s->out + s->out_len, buf, len);
    s->out_len += len;
    return 0;
}

/* Send buf to s, keeping what the socket does not take; 0, or -1 when s was closed. */
static int deliver(struct sub *s, const char *buf, size_t len) {
    size_t had = s->out_len;
    ssize_t sent = had ? 0 : write_some(s, buf, len); /* order: kept bytes go first */
    if (sent < 0 || keep(s, buf + sent, len - (size_t)sent) < 0) {
        if (sent >= 0) dropped++;
        close_sub(s);
        return -1;
    }
    if (had == 0 && s->out_len > 0) watch(s->fd, EPOLL_CTL_MOD, EPOLLIN | EPOLLOUT);
    return 0;
}

/* Write the kept bytes; 0, or -1 when s was closed. */
static int flush(struct sub *s) {
    while (s->out_len > 0) {
        ssize_t sent = write_some(s, s->out, s->out_len);
        if (sent < 0) { close_sub(s); return -1; }
        if (sent == 0) return 0;
        memmove(s->out, s->out + sent, s->out_len - (size_t)sent);
        s->out_len -= (size_t)sent;
    }
    if (s->closing) shutdown(s->fd, SHUT_WR); /* then read to the client's end, and close */
    watch(s->fd, EPOLL_CTL_MOD, EPOLLIN);
    return 0;
}

/* Answer a whole request: a stream for a GET, else a refusal and close; -1 when closed. */
static int answer(struct sub *s) {
    char *end = memmem(s->request, s->request_len, "\r\n\r\n", 4);
    if (end == NULL && s->request_len < sizeof s->request) return 0;
    if (end == NULL || strncmp(s->request, "GET ", 4) != 0) {
        const char *refusal = end ? NOT_ALLOWED : TOO_LARGE;
        s->closing = 1;
        if (deliver(s, refusal, strlen(refusal)) < 0) return -1;
        if (s->out_len == 0) shutdown(s->fd, SHUT_WR); /* unread bytes would reset the answer */
        return 0;
    }
    if (stream_count == stream_cap) {
        stream_cap = stream_cap ? 2 * stream_cap : 1024;
        streams = grow(streams, (size_t)stream_cap * sizeof *streams);
    }
    s->phase = STREAMING;
    s->index = stream_count;
    streams[stream_count++] = s;
    return deliver(s, HEAD, sizeof HEAD - 1);
}

/* Read from a subscriber: its request while it has none, else bytes that are discarded (a
 * refused one is read to its end, then closed). */
static void readable(struct sub *s) {
    char discard[4096];
    for (;;) {
        int keep_request = s->phase != STREAMING && !s->closing;
        char *into = keep_request ? s->request + s->request_len : discard;
        size_t room = keep_request ? sizeof s->request - s->request_len : sizeof discard;
        ssize_t got;
        if (s->ssl != NULL) {
            int n = SSL_read(s->ssl, into, (int)room);
            if (n <= 0) {
                int error = SSL_get_error(s->ssl, n);
                ERR_clear_error();
                if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return;
                close_sub(s);
                return;
            }
            got = n;
        } else {
            got = recv(s->fd, into, room, 0);
            if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
            if (got <= 0) { close_sub(s); return; }
        }
        if (keep_request) {
            s->request_len += (size_t)got;
            if (answer(s) < 0 || s->phase != REQUEST || s->closing) return;
        }
    }
}

static void handshake(struct sub *s) {
    int done = SSL_do_handshake(s->ssl);
    if (done == 1) {
        s->phase = REQUEST;
        watch(s->fd, EPOLL_CTL_MOD, EPOLLIN);
        readable(s);
        return;
    }
    int error = SSL_get_error(s->ssl, done);
    ERR_clear_error();
    if (error == SSL_ERROR_WANT_WRITE) watch(s->fd, EPOLL_CTL_MOD, EPOLLIN | EPOLLOUT);
    else if (error != SSL_ERROR_WANT_READ) close_sub(s);
}

static void accept_all(int from) {
    for (;;) {
        int fd = accept4(from, NULL, NULL, SOCK_NONBLOCK), one = 1;
        if (fd < 0) return; /* EAGAIN, or out of descriptors: the listener stays */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if ((size_t)fd >= by_fd_cap) {
            size_t cap = by_fd_cap ? by_fd_cap : 1024;
            while (cap <= (size_t)fd) cap *= 2;
            by_fd = grow(by_fd, cap * sizeof *by_fd);
            memset(by_fd + by_fd_cap, 0, (cap - by_fd_cap) * sizeof *by_fd);
            by_fd_cap = cap;
        }
        struct sub *s = calloc(1, sizeof *s);
        if (s == NULL) fail("out of memory");
        s->fd = fd;
        s->index = -1;
        s->phase = from == tls_listen_fd ? HANDSHAKE : REQUEST;
        by_fd[fd] = s;
        watch(fd, EPOLL_CTL_ADD, EPOLLIN);
        if (s->phase == HANDSHAKE) {
            s->ssl = SSL_new(tls_ctx);
            SSL_set_fd(s->ssl, fd);
            SSL_set_accept_state(s->ssl);
            handshake(s);
        }
    }
}

/* ---- the upstream: an HTTP/1.1 chunked body holding text/event-stream ---- */

static char up_buf[READ_SIZE + 1];
static size_t up_len;
static int up_in_body;
static size_t chunk_left;         /* data bytes of the current chunk still to come */
static int chunk_crlf;            /* the CRLF after a chunk's data is still to come */
static char *event_buf;           /* "<hex>\r\n" reserved in front, then the event's bytes */
static size_t event_len, event_cap;
#define FRAME_ROOM 16

static void broadcast(void) {
    /* the event is event_buf[FRAME_ROOM .. FRAME_ROOM + event_len); frame it once */
    char size[FRAME_ROOM];
    int digits = snprintf(size, sizeof size, "%zx\r\n", event_len);
    char *frame = event_buf + FRAME_ROOM - digits;
    memcpy(frame, size, (size_t)digits);
    memcpy(event_buf + FRAME_ROOM + event_len, "\r\n", 2);
    size_t frame_len = (size_t)digits + event_len + 2;
    events++;
    for (int i = 0; i < stream_count;) {
        struct sub *s = streams[i];
        if (deliver(s, frame, frame_len) == 0) i++; /* a closed one's place holds another */
    }
}

/* Body bytes of the upstream stream: cut into events at each blank line (LF LF). */
static void body(const char *data, size_t len) {
    for (size_t i = 0; i < len; i++) {
        if (event_len + FRAME_ROOM + 3 > event_cap) {
            if (event_len >= MAX_EVENT) fail("an upstream event passed %d bytes", MAX_EVENT);
            event_cap = event_cap ? 2 * event_cap : 4096;
            event_buf = grow(event_buf, event_cap);
        }
        char c = data[i];
        if (c == '\n' && event_len == 0) continue; /* a blank line between events */
        event_buf[FRAME_ROOM + event_len++] = c;
        if (c == '\n' && event_len >= 2 && event_buf[FRAME_ROOM + event_len - 2] == '\n') {
            broadcast();
            event_len = 0;
        }
    }
}

/* Strip the chunked framing from up_buf[0..up_len); keep an unfinished size line. */
static void dechunk(void) {
    size_t at = 0;
    while (at < up_len) {
        if (chunk_left > 0) {
            size_t take = up_len - at < chunk_left ? up_len - at : chunk_left;
            body(up_buf + at, take);
            at += take;
            chunk_left -= take;
            if (chunk_left == 0) chunk_crlf = 1;
            continue;
        }
        char *line_end = memmem(up_buf + at, up_len - at, "\r\n", 2);
        if (line_end == NULL) break;
        if (chunk_crlf) {
            if (line_end != up_buf + at) fail("upstream chunk not followed by CRLF");
            chunk_crlf = 0;
        } else {
            char *end;
            chunk_left = strtoul(up_buf + at, &end, 16);
            if (end == up_buf + at) fail("upstream chunk size unreadable");
            if (chunk_left == 0) fail("upstream ended its stream");
        }
        at = (size_t)(line_end - up_buf) + 2;
    }
    memmove(up_buf, up_buf + at, up_len - at);
    up_len -= at;
}

static void upstream_readable(void) {
    for (;;) {
        ssize_t got = recv(upstream_fd, up_buf + up_len, READ_SIZE - up_len, 0);
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (got <= 0) fail("upstream closed");
        up_len += (size_t)got;
        if (!up_in_body) {
            up_buf[up_len] = '\0';
            char *end = strstr(up_buf, "\r\n\r\n");
            if (end == NULL) {
                if (up_len == READ_SIZE) fail("upstream response head too large");
                continue;
            }
            if (strncmp(up_buf, "HTTP/1.1 200", 12) != 0) fail("upstream answered %.40s", up_buf);
            if (strcasestr(up_buf, "transfer-encoding: chunked") == NULL)
                fail("upstream response is not chunked");
            size_t head = (size_t)(end - up_buf) + 4;
            memmove(up_buf, up_buf + head, up_len - head);
            up_len -= head;
            up_in_body = 1;
            printf("sse floor: ready\n");
            fflush(stdout);
        }
        dechunk();
    }
}

static void connect_upstream(int port, const char *path) {
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    upstream_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(upstream_fd, (struct sockaddr *)&addr, sizeof addr) < 0)
        fail("cannot connect to the upstream on port %d: %s", port, strerror(errno));
    char request[512];
    int len = snprintf(request, sizeof request,
                       "GET %s HTTP/1.1\r\nhost: 127.0.0.1:%d\r\naccept: text/event-stream\r\n"
                       "cache-control: no-cache\r\n\r\n", path, port);
    if (send(upstream_fd, request, (size_t)len, MSG_NOSIGNAL) != len) fail("upstream send failed");
    int flags = 1;
    setsockopt(upstream_fd, IPPROTO_TCP, TCP_NODELAY, &flags, sizeof flags);
    if (fcntl(upstream_fd, F_SETFL, fcntl(upstream_fd, F_GETFL) | O_NONBLOCK) < 0)
        fail("cannot make the upstream socket non-blocking");
    watch(upstream_fd, EPOLL_CTL_ADD, EPOLLIN);
}

static void on_signal(int signal_number) {
    (void)signal_number;
    stopping = 1;
}

static void raise_open_files(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
    }
}

static void start_tls(const char *cert, const char *key) {
    tls_ctx = SSL_CTX_new(TLS_server_method());
    if (tls_ctx == NULL) fail("SSL_CTX_new failed");
    SSL_CTX_set_min_proto_version(tls_ctx, TLS1_3_VERSION);
    SSL_CTX_set_mode(tls_ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_options(tls_ctx, SSL_OP_NO_RENEGOTIATION);
    if (SSL_CTX_use_certificate_chain_file(tls_ctx, cert) != 1) fail("cannot read %s", cert);
    if (SSL_CTX_use_PrivateKey_file(tls_ctx, key, SSL_FILETYPE_PEM) != 1) fail("cannot read %s", key);
}

int main(int argc, char **argv) {
    int port = 0, tls_port = 0, upstream_port = 0;
    const char *cert = NULL, *key = NULL, *path = "/";
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *name = argv[i], *value = argv[i + 1];
        if (strcmp(name, "--port") == 0) port = atoi(value);
        else if (strcmp(name, "--tls-port") == 0) tls_port = atoi(value);
        else if (strcmp(name, "--upstream-port") == 0) upstream_port = atoi(value);
        else if (strcmp(name, "--upstream-path") == 0) path = value;
        else if (strcmp(name, "--cert") == 0) cert = value;
        else if (strcmp(name, "--key") == 0) key = value;
        else if (strcmp(name, "--max-buffered") == 0) max_buffered = strtoul(value, NULL, 10);
        else fail("unknown option %s", name);
    }
    if (argc % 2 == 0) fail("option %s has no value", argv[argc - 1]);
    if (port <= 0 || upstream_port <= 0) fail("--port and --upstream-port are required");
    if (tls_port > 0 && (cert == NULL || key == NULL)) fail("--tls-port needs --cert and --key");
    if (max_buffered == 0) fail("--max-buffered must be a positive number of bytes");
    raise_open_files();
    struct sigaction action = {.sa_handler = on_signal}; /* no SA_RESTART: epoll_wait returns */
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (tls_port > 0) start_tls(cert, key);
    epoll_fd = epoll_create1(0);
    listen_fd = listen_on(port);
    if (tls_port > 0) tls_listen_fd = listen_on(tls_port);
    connect_upstream(upstream_port, path);
    struct epoll_event ready[256];
    while (!stopping) {
        int count = epoll_wait(epoll_fd, ready, 256, -1);
        if (count < 0 && errno != EINTR) fail("epoll_wait: %s", strerror(errno));
        for (int i = 0; i < count; i++) {
            int fd = ready[i].data.fd;
            unsigned int mask = ready[i].events;
            if (fd == listen_fd || fd == tls_listen_fd) { accept_all(fd); continue; }
            if (fd == upstream_fd) { upstream_readable(); continue; }
            struct sub *s = (size_t)fd < by_fd_cap ? by_fd[fd] : NULL;
            if (s == NULL) continue; /* closed earlier in this round */
            if (s->phase == HANDSHAKE) { handshake(s); continue; }
            if ((mask & EPOLLOUT) && flush(s) < 0) continue;
            if (mask & (EPOLLIN | EPOLLHUP | EPOLLERR)) readable(s);
        }
    }
    printf("sse floor: stopped subscribers=%d dropped=%llu events=%llu\n", stream_count, dropped,
           events);
    return 0;
}
